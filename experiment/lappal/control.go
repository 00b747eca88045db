package lappal

import (
	"github.com/apexrl/apex/experiment/control"
	"github.com/apexrl/apex/runtime"
)

// DefaultPendulumConfig is part (2): TD3 on Pendulum-v1 under uniform, PER,
// LAP and PAL with 5 seeds. The paper's MuJoCo settings are kept where a
// 2-core CPU allows (batch 256, Adam 3e-4, Polyak 0.005, policy delay 2,
// target noise 0.2 clipped to 0.5, exploration σ 0.1, one update per
// environment step, 1-step targets; LAP/PAL alpha 0.4 and k 1; PER alpha
// 0.6 with beta 0.4 → 1 and MSE as in the authors' TD3 code) and scaled
// where it does not: 64-64 networks instead of 256-256, 1000 random
// warm-up steps instead of 25k, and 12k steps (Pendulum's 200-step
// episodes: 60 episodes), evaluated every 1000 steps on 5 episodes and at
// the end on 20.
func DefaultPendulumConfig() control.Config {
	return control.Config{
		Name: "pendulum-td3",
		Base: runtime.TrainConfig{Env: "Pendulum-v1", Algo: "td3", Steps: 12_000, Hidden: []int{64, 64},
			Capacity: 100_000, MinSizeToSample: 1000, EvalEverySteps: 1000, EvalEpisodes: 5, FinalEpisodes: 20},
		Samplers:  []string{"uniform", "per", "lap", "pal"},
		Seeds:     []uint64{1, 2, 3, 4, 5},
		Workers:   2,
		TailEvals: 5,
		Floor:     -200, FloorArms: []string{"lap", "pal"},
	}
}

// DefaultCartPoleConfig is part (3): Double DQN on CartPole-v1 under
// uniform, PER and LAP with 5 seeds, in the design notes' non-Atari setting
// (§6.6): one update of 64 per environment step, Polyak 0.005, Adam 3e-4,
// exploration epsilon 0.1, a 64-64 network, LAP alpha 0.4 and k 1, 1-step
// targets as in the paper's DDQN, 60k steps evaluated every 2500 on 10
// episodes (the tail averages the last 10 evaluations, the last 25k steps)
// and at the end on 20.
func DefaultCartPoleConfig() control.Config {
	return control.Config{
		Name: "cartpole-ddqn",
		Base: runtime.TrainConfig{Env: "CartPole-v1", Algo: "dqn", Steps: 60_000, Hidden: []int{64, 64}, Batch: 64,
			LR: 3e-4, Tau: 0.005, Epsilon: 0.1, NStep: 1, ReplayRatio: 64, Capacity: 100_000, MinSizeToSample: 1000,
			EvalEverySteps: 2500, EvalEpisodes: 10, FinalEpisodes: 20},
		Samplers:  []string{"uniform", "per", "lap"},
		Seeds:     []uint64{1, 2, 3, 4, 5},
		Workers:   2,
		TailEvals: 10,
	}
}
