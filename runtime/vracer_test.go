package runtime

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apexrl/apex/learner"
)

// vracerOf is the V-RACER learner of a ReF-ER run.
func vracerOf(t *Trainer) *learner.VRACER { return t.agent.impl.(*learner.VRACER) }

// TestVRACERRuns: a ReF-ER method on a continuous environment picks
// V-RACER; a lockstep run repeats bit for bit, learning starts only once
// finished episodes are stored, and the stage's far fraction and beta are
// reported; three concurrent actors run it under the race detector.
func TestVRACERRuns(t *testing.T) {
	cfg := TrainConfig{Env: "Pendulum-v1", Sampler: "refer", Actors: 1, Deterministic: true, Steps: 300, Batch: 32,
		Hidden: []int{16}, Capacity: 4000, EvalEverySteps: 150, EvalEpisodes: 1, FinalEpisodes: 1, Seed: 6}
	run := func() (*Trainer, []float64) {
		tr, err := NewTrainer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return tr, vracerOf(tr).Net().Params()
	}
	tr, pa := run()
	_, pb := run()
	if !slices.Equal(pa, pb) {
		t.Fatal("same seed, different V-RACER runs")
	}
	c := tr.Config()
	if c.Algo != "vracer" || c.MinSizeToSample < 200+32 || len(tr.buf.Config().Floats) == 0 {
		t.Errorf("config %+v (floats %v): want vracer, learning after a finished episode, behaviour columns", c, tr.buf.Config().Floats)
	}
	if st := tr.Stats().Learner; st.Steps != 300 || st.Timing.Sample <= 0 || st.Beta < 0 || st.Beta > 1 {
		t.Errorf("learner stats %+v", st)
	}
	conc, err := NewTrainer(TrainConfig{Env: "Pendulum-v1", Sampler: "refer-2", Actors: 3, Steps: 100, Batch: 32, Hidden: []int{16},
		Capacity: 6000, EvalEvery: time.Hour, EvalEpisodes: 1, FinalEpisodes: 1, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conc.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}
