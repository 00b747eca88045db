package envs_test

import (
	"fmt"

	"github.com/apexrl/apex/envs"
)

// Make builds an environment by name; an episode is a function of the
// Reset seed and the actions.
func ExampleMake() {
	env, err := envs.Make("CartPole-v1")
	if err != nil {
		panic(err)
	}
	fmt.Println(env.ActionSpace(), env.MaxEpisodeSteps())

	// Always push right: the pole falls over (terminated, not truncated).
	env.Reset(1)
	var ret float64
	for step := 1; ; step++ {
		res, err := env.Step(envs.Action{Index: 1})
		if err != nil {
			panic(err)
		}
		ret += res.Reward
		if res.Done() {
			fmt.Printf("step %d: terminated=%v truncated=%v return=%v\n", step, res.Terminated, res.Truncated, ret)
			break
		}
	}

	// Stepping on without Reset, and an action outside Discrete(2), are errors.
	_, err = env.Step(envs.Action{Index: 0})
	fmt.Println(err)
	env.Reset(2)
	_, err = env.Step(envs.Action{Index: 2})
	fmt.Println(err)

	// An unknown name lists the registered ones.
	_, err = envs.Make("CartPole-v9")
	fmt.Println(err)
	// Output:
	// Discrete(2) 500
	// step 8: terminated=true truncated=false return=8
	// envs: episode over, call Reset: CartPole-v1: Step after the episode ended at step 8
	// envs: invalid action: CartPole-v1: action 2 is outside Discrete(2)
	// envs: unknown environment "CartPole-v9" (registered: Acrobot-v1, BlindCliffwalk, CartPole-v1, KeyDoor, KeyDoor-Random, KeyDoor-Tabular, LQR-v0, MountainCar-v0, MountainCarContinuous-v0, NChain, Pendulum-v1, SparsePendulum-v1)
}

// StateHash gives discrete environments an exact key per state.
func ExampleStateHasher() {
	env, _ := envs.Make("NChain", envs.WithSize(4))
	h := env.(envs.StateHasher)
	env.Reset(0)
	for _, a := range []int{envs.NChainForward, envs.NChainBackward, envs.NChainForward, envs.NChainForward, envs.NChainForward} {
		res, _ := env.Step(envs.Action{Index: a})
		fmt.Println(h.StateHash(), res.Reward, res.Terminated)
	}
	// Output:
	// 1 0 false
	// 0 0 false
	// 1 0 false
	// 2 0 false
	// 3 1 true
}
