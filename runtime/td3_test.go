package runtime

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/learner"
)

// td3Of is the TD3 learner of a continuous run.
func td3Of(t *Trainer) *learner.TD3 { return t.agent.impl.(*learner.TD3) }

// smallTD3 is a short Pendulum run: small networks and batches.
func smallTD3(sampler string) TrainConfig {
	return TrainConfig{Env: "Pendulum-v1", Sampler: sampler, Actors: 1, Deterministic: true, Steps: 200, Batch: 32,
		Hidden: []int{16}, Capacity: 2000, MinSizeToSample: 150, EvalEverySteps: 100, EvalEpisodes: 1, FinalEpisodes: 2, Seed: 9}
}

// TestTD3Defaults: a continuous environment picks TD3 with its defaults
// (1-step targets, one learner step per environment step, MSE for the
// uniform/PER baselines, the warm-up) and a continuous replay.
func TestTD3Defaults(t *testing.T) {
	tr, err := NewTrainer(TrainConfig{Env: "Pendulum-v1", Sampler: "uniform", Steps: 1, Actors: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := tr.Config()
	if c.Algo != "td3" || c.NStep != 1 || c.Batch != learner.DefaultTD3Batch || c.ReplayRatio != float64(c.Batch) ||
		c.Loss != "mse" || c.RandomSteps != c.MinSizeToSample {
		t.Errorf("td3 defaults: %+v", c)
	}
	if bc := tr.buf.Config(); bc.Action != buffer.Continuous || bc.ActionDim != 1 {
		t.Errorf("replay config %+v, want one continuous action", bc)
	}
	if m := td3Of(tr).Method(); m.Name != "uniform" || m.Loss.Kind.String() != "mse" {
		t.Errorf("method %v", m)
	}
	lap, err := NewTrainer(TrainConfig{Env: "Pendulum-v1", Sampler: "lap", Steps: 1, MethodOptions: map[string]float64{"lap-alpha": 0.6, "lap-k": 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if m := td3Of(lap).Method(); m.Loss.Kind.String() != "huber" || m.Loss.K() != 0.5 || lap.Config().Loss != "" {
		t.Errorf("lap method %v (loss %+v)", m, m.Loss)
	}
}

// TestTD3DeterministicRun: a lockstep TD3 run through each LAP/PAL-family
// method completes, evaluates, and repeats bit for bit with its seed.
func TestTD3DeterministicRun(t *testing.T) {
	for _, s := range []string{"lap", "pal", "per"} {
		run := func() (*TrainResult, []float64) {
			tr, err := NewTrainer(smallTD3(s))
			if err != nil {
				t.Fatal(err)
			}
			res, err := tr.Run(context.Background())
			if err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			st := tr.Stats()
			if st.Learner.Steps != 200 || st.Learner.ActorUpdates != 100 || st.Learner.Timing.Sample <= 0 {
				t.Errorf("%s: learner stats %+v", s, st.Learner)
			}
			if s != "pal" && st.Learner.WriteBacks == 0 {
				t.Errorf("%s: no priorities written back", s)
			}
			return res, td3Of(tr).Actor().Params()
		}
		a, pa := run()
		b, pb := run()
		if !slices.Equal(pa, pb) || a.FinalReturn != b.FinalReturn || len(a.Curve) != 3 {
			t.Errorf("%s: same seed, different runs (final %v vs %v, %d curve points)", s, a.FinalReturn, b.FinalReturn, len(a.Curve))
		}
	}
}

// TestTD3Concurrent runs TD3 with several actors through the concurrent
// pipeline (the race detector watches it) and resumes its checkpoint.
func TestTD3Concurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "td3.ckpt")
	cfg := smallTD3("lap")
	cfg.Deterministic, cfg.Actors, cfg.Steps, cfg.EvalEvery, cfg.Checkpoint = false, 3, 150, time.Hour, path
	tr, err := NewTrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(td3Of(tr).Actor().Params())
	re, err := ResumeTrainer(path, func(c *TrainConfig) { c.Steps = 200 })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(td3Of(re).Actor().Params(), want) || re.Config().Algo != "td3" {
		t.Fatal("the resumed TD3 policy differs from the saved one")
	}
	if _, err := re.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := re.Stats().LearnerSteps; got != 200 {
		t.Errorf("resumed run ended at %d learner steps, want 200", got)
	}
	if _, err := ResumeTrainer(path, func(c *TrainConfig) { c.Algo = "dqn" }); err == nil {
		t.Error("a resume switching the algorithm was accepted")
	}
}
