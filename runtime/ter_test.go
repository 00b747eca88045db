package runtime

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apexrl/apex/sampler"
)

// TestTERRuns: -sampler=ter trains DDQN end to end. On KeyDoor (exact state
// codes) a lockstep run repeats bit for bit and its sweeps find the goal's
// terminals; on CartPole (no exact codes: the actors' projection) three
// actors insert concurrently while the learner sweeps (the race detector
// watches it).
func TestTERRuns(t *testing.T) {
	cfg := TrainConfig{Env: "KeyDoor", Sampler: "ter", Actors: 1, Deterministic: true, Steps: 300, Batch: 32,
		Hidden: []int{32}, Capacity: 5000, MinSizeToSample: 2000, EvalEverySteps: 150, EvalEpisodes: 1, FinalEpisodes: 1,
		Seed: 4, MethodOptions: map[string]float64{"ter-eta": 0.25, "ter-preds": 1}}
	run := func() (*Trainer, []float64) {
		tr, err := NewTrainer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return tr, dqnOf(tr).Net().Params()
	}
	tr, pa := run()
	_, pb := run()
	if !slices.Equal(pa, pb) {
		t.Fatal("same seed, different TER runs")
	}
	ter, ok := sampler.Unwrapped(dqnOf(tr).Method().Selector).(*sampler.TER)
	if !ok || ter.Config().Eta != 0.25 || ter.Config().Preds != 1 || ter.Config().Roots != sampler.DefaultTERRoots {
		t.Fatalf("selector %v", dqnOf(tr).Method().Selector)
	}
	if st := ter.Stats(); st.Ingested == 0 || st.Vertices == 0 || st.Sweeps == 0 || st.Queued == 0 {
		t.Errorf("TER stats %+v: nothing ingested or swept", st)
	}
	if !tr.buf.Config().StateHash {
		t.Error("a TER run's replay has no state codes")
	}

	cp, err := NewTrainer(TrainConfig{Env: "CartPole-v1", Sampler: "ter", Actors: 3, Steps: 200, Capacity: 4000,
		MinSizeToSample: 500, EvalEvery: time.Hour, EvalEpisodes: 1, FinalEpisodes: 1, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := sampler.Unwrapped(dqnOf(cp).Method().Selector).(*sampler.TER).Stats(); st.Terminals == 0 || st.Queued == 0 {
		t.Errorf("CartPole TER stats %+v: its pole falls (terminals) and sweeps queue transitions", st)
	}
}
