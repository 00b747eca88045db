package runtime_test

import (
	"context"
	"fmt"

	"github.com/apexrl/apex/runtime"
)

// ExampleTrainer runs a short Ape-X training in the deterministic mode (one
// actor and the learner in lockstep), so the same seed gives the same run.
func ExampleTrainer() {
	tr, err := runtime.NewTrainer(runtime.TrainConfig{
		Env: "CartPole-v1", Sampler: "per", Actors: 1, Deterministic: true, Steps: 200,
		Capacity: 5000, MinSizeToSample: 500, EvalEverySteps: 100, EvalEpisodes: 2, FinalEpisodes: 5, Seed: 1,
	})
	if err != nil {
		panic(err)
	}
	res, err := tr.Run(context.Background())
	if err != nil {
		panic(err)
	}
	st := tr.Stats()
	fmt.Println("learner steps:", res.LearnerSteps)
	fmt.Println("evaluations:", len(res.Curve))
	fmt.Println("replay holds:", st.BufferSize, "of", res.Config.Capacity)
	fmt.Println("final evaluation episodes:", len(res.FinalReturns))

	// The trained policy, the caller's copy: act greedily with it.
	policy, err := tr.Policy()
	if err != nil {
		panic(err)
	}
	q := policy.Forward([]float64{0, 0, 0.05, 0}) // CartPole: pole leaning right
	fmt.Println("actions scored:", len(q))
	// Output:
	// learner steps: 200
	// evaluations: 3
	// replay holds: 3600 of 5000
	// final evaluation episodes: 5
	// actions scored: 2
}
