package runtime

import (
	"context"
	"slices"
	"testing"
)

// TestTrainerPolicy: before any publication Policy holds the initial
// parameters; after a run, the last published ones; and the network is
// the caller's copy.
func TestTrainerPolicy(t *testing.T) {
	for _, cfg := range []TrainConfig{
		{Env: "CartPole-v1", Actors: 1, Deterministic: true, Steps: 200, Batch: 32, Hidden: []int{16}, Capacity: 3000, MinSizeToSample: 200,
			EvalEverySteps: 100, EvalEpisodes: 1, FinalEpisodes: 1, Seed: 2},
		{Env: "Pendulum-v1", Actors: 1, Deterministic: true, Steps: 200, Batch: 32, Hidden: []int{16}, Capacity: 3000, MinSizeToSample: 300,
			EvalEverySteps: 100, EvalEpisodes: 1, FinalEpisodes: 1, Seed: 2},
	} {
		tr, err := NewTrainer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		first, err := tr.Policy()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(first.Params(), tr.agent.first().Weights()) {
			t.Fatalf("%s: policy before the run is not the initial network", cfg.Env)
		}
		if _, err := tr.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		after, err := tr.Policy()
		if err != nil {
			t.Fatal(err)
		}
		p := tr.store.Load()
		if p == nil || p.Version() == 0 || !slices.Equal(after.Params(), p.Weights()) {
			t.Fatalf("%s: policy after the run is not the last published snapshot", cfg.Env)
		}
		if slices.Equal(after.Params(), first.Params()) {
			t.Fatalf("%s: the policy did not change in %d learner steps", cfg.Env, cfg.Steps)
		}
		after.Params()[0] += 1
		if after.Params()[0] == p.Weights()[0] {
			t.Fatalf("%s: the returned network shares the published weights", cfg.Env)
		}
	}
}
