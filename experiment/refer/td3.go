package refer

import (
	"context"
	"fmt"
	"math"

	"github.com/apexrl/apex/experiment/control"
	"github.com/apexrl/apex/runtime"
)

// DefaultTD3Config is part 3: ReF-ER around a deterministic-policy
// learner (the paper's DDPG arm, Alg. 4, here TD3) on Pendulum-v1, 3
// seeds, 2 runs at once. Its arms:
//
//   - "uniform": plain TD3 as in experiment/lappal (exploration σ 0.1,
//     1000 uniform warm-up steps, uniform replay of single steps);
//   - "er": TD3 replaying whole episodes through the REFER stage with
//     neither rule, exploring with the fixed Gaussian σ 0.2 the ReF-ER arm
//     records (no uniform warm-up: every stored step must come from the
//     recorded behaviour);
//   - "refer": the same with full ReF-ER: the critics' gradient zeroed on
//     far-policy steps, the actor's loss beta·DPG on near steps plus
//     (1 − beta)·KL(μ||π), the step sizes annealed by Eq. 13.
//
// The settings are lappal's TD3 ones (64-64 networks, batch 256, Adam
// 3e-4, Polyak 0.005, policy delay 2, target noise 0.2 clipped to 0.5,
// one update per environment step) with ReF-ER's C = 4, D = 0.1 and the
// paper's A = 5e-7 (the runtime's default for td3: within 3e4 steps c_max
// and the step sizes barely move; annealing them by 5/Steps stops TD3
// learning at this length); 30k learner steps (150 episodes), evaluated
// every 1000 steps on 5 episodes and at the end on 20.
func DefaultTD3Config() control.Config {
	return control.Config{
		Name: "pendulum-td3-refer",
		Base: runtime.TrainConfig{Env: "Pendulum-v1", Algo: "td3", Steps: 30_000, Hidden: []int{64, 64},
			Capacity: 1 << 15, MinSizeToSample: 1000, MethodOptions: map[string]float64{"refer-c": 4, "refer-d": 0.1},
			EvalEverySteps: 1000, EvalEpisodes: 5, FinalEpisodes: 20},
		Samplers:  []string{"uniform", "er", "refer"},
		Seeds:     []uint64{1, 2, 3},
		Workers:   2,
		TailEvals: 5,
	}
}

// RunTD3 trains cfg's runs through control.Run (onRun as there) and
// summarises them as RunPendulum does, with TD3Checks in place of
// PendulumChecks.
func RunTD3(ctx context.Context, cfg control.Config, onRun func(control.Trial)) (*PendulumResult, error) {
	res, err := control.Run(ctx, cfg, onRun)
	if err != nil {
		return nil, err
	}
	warmUp := int64(WarmUpShare * float64(cfg.Base.Steps))
	out := &PendulumResult{Control: res, WarmUp: warmUp, Arms: summariseArms(res, warmUp)}
	out.Checks = TD3Checks(out.Arms, warmUp)
	return out, nil
}

// TD3Checks states what part 3 shows, on the arm named "refer" (none
// without it): TD3 under full ReF-ER learns Pendulum, a median final
// return of at least ReturnFloor, and its controller holds the far-policy
// fraction after warmUp steps within FarTarget ± FarTolerance, as it does
// for V-RACER.
func TD3Checks(arms []PendulumArm, warmUp int64) []control.Check {
	for _, a := range arms {
		if a.Sampler != "refer" {
			continue
		}
		return []control.Check{
			{What: fmt.Sprintf("td3+refer: median final return %.1f >= %g (seeds %s)", a.MedianFinal, ReturnFloor, floats(a.Finals, "%.1f")),
				OK: a.MedianFinal >= ReturnFloor},
			{What: fmt.Sprintf("td3+refer: far-policy fraction after warm-up %.3f in %g ± %g (mean over seeds of each run's mean after %d learner steps; seeds %s; largest single value %.3f)",
				a.FarMean, FarTarget, FarTolerance, warmUp, floats(a.Far, "%.3f"), a.FarMax),
				OK: math.Abs(a.FarMean-FarTarget) <= FarTolerance},
		}
	}
	return nil
}
