package runtime

import (
	"context"
	"slices"
	"testing"

	"github.com/apexrl/apex/learner"
)

// TestTD3ReferRuns: algo td3 with the refer method runs TD3 with ReF-ER:
// the buffer gets the behaviour columns, learning starts once finished
// episodes are stored, there is no uniform warm-up, a lockstep run
// repeats bit for bit and completes with the stage's far fraction, KL
// and beta reported and the stage's step following the learner's.
func TestTD3ReferRuns(t *testing.T) {
	cfg := TrainConfig{Env: "Pendulum-v1", Algo: "td3", Sampler: "refer", Actors: 1, Deterministic: true, Steps: 300, Batch: 32,
		Hidden: []int{16}, Capacity: 4000, EvalEverySteps: 150, EvalEpisodes: 1, FinalEpisodes: 1, Seed: 6}
	run := func() (*Trainer, []float64) {
		tr, err := NewTrainer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return tr, tr.agent.impl.(*learner.TD3).Actor().Params()
	}
	tr, pa := run()
	_, pb := run()
	if !slices.Equal(pa, pb) {
		t.Fatal("same seed, different TD3+ReF-ER runs")
	}
	c := tr.Config()
	if c.Algo != "td3" || c.MinSizeToSample < 200+32 || c.RandomSteps != 0 || c.Sigma != 0.2 || len(tr.buf.Config().Floats) == 0 {
		t.Errorf("config %+v (floats %v): want td3, learning after a finished episode, no warm-up, sigma 0.2, behaviour columns", c, tr.buf.Config().Floats)
	}
	st := tr.Stats().Learner
	if st.Steps != 300 || st.ActorUpdates != 150 || st.Beta <= 0 || st.Beta > 1 || st.MeanKL <= 0 || st.FarFraction < 0 || st.FarFraction > 1 {
		t.Errorf("learner stats %+v", st)
	}
	stage := tr.agent.impl.(*learner.TD3).REFER()
	if !stage.Config().NoRetrace {
		t.Error("the TD3 arm's stage sweeps Retrace targets TD3 does not use")
	}
	if stage.Step() != 300 {
		t.Errorf("the stage's step is %d, want 300", stage.Step())
	}
	t.Logf("far fraction %.3f, mean KL %.3g, beta %.3g, c_max %.3f", st.FarFraction, st.MeanKL, st.Beta, stage.CMax())
}
