package runtime

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/learner"
	"github.com/apexrl/apex/sampler"
)

// sacOf is the SAC learner of a sac run.
func sacOf(t *Trainer) *learner.SAC { return t.agent.impl.(*learner.SAC) }

// smallSAC is a short lockstep Pendulum run of sac: small networks and
// batches.
func smallSAC(sampler string) TrainConfig {
	c := smallTD3(sampler)
	c.Algo, c.Steps = "sac", 300
	return c
}

// TestSACDefaults: -algo=sac takes SAC's defaults (batch 256, 1-step
// targets, one learner step per environment step, MSE, the warm-up) and
// a continuous replay; lap keeps its own loss.
func TestSACDefaults(t *testing.T) {
	tr, err := NewTrainer(TrainConfig{Env: "Pendulum-v1", Algo: "sac", Sampler: "uniform", Steps: 1, Actors: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := tr.Config()
	if c.Algo != "sac" || c.NStep != 1 || c.Batch != learner.DefaultSACBatch || c.ReplayRatio != float64(c.Batch) ||
		c.Loss != "mse" || c.RandomSteps != c.MinSizeToSample || c.LR != learner.DefaultSACLR {
		t.Errorf("sac defaults: %+v", c)
	}
	if bc := tr.buf.Config(); bc.Action != buffer.Continuous || bc.ActionDim != 1 || len(bc.Floats) != 0 {
		t.Errorf("replay config %+v, want one continuous action and no float columns", bc)
	}
	l := sacOf(tr)
	if m := l.Method(); m.Name != "uniform" || m.Loss.Kind.String() != "mse" {
		t.Errorf("method %v", m)
	}
	if lc := l.Config(); lc.MaxAction != 2 || lc.Tau != learner.DefaultTau || l.TargetEntropy() != -1 {
		t.Errorf("learner config %+v, target entropy %v", lc, l.TargetEntropy())
	}
	lap, err := NewTrainer(TrainConfig{Env: "Pendulum-v1", Algo: "sac", Sampler: "lap", Steps: 1})
	if err != nil {
		t.Fatal(err)
	}
	if m := sacOf(lap).Method(); m.Loss.Kind.String() != "huber" || lap.Config().Loss != "" {
		t.Errorf("lap method %v (loss %+v)", m, m.Loss)
	}
}

// TestSACRefusals: sac with a ReF-ER method, on discrete actions, or
// with a td3-only setting is refused with an error naming the
// combination.
func TestSACRefusals(t *testing.T) {
	for _, tc := range []struct {
		cfg  TrainConfig
		want []string
	}{
		{TrainConfig{Env: "Pendulum-v1", Algo: "sac", Sampler: "refer", Steps: 1}, []string{"sac", "refer"}},
		{TrainConfig{Env: "Pendulum-v1", Algo: "sac", Sampler: "er", Steps: 1}, []string{"sac", "er"}},
		{TrainConfig{Env: "CartPole-v1", Algo: "sac", Steps: 1}, []string{"discrete", "sac"}},
		{TrainConfig{Env: "Pendulum-v1", Algo: "sac", Sigma: 0.3, Steps: 1}, []string{"Sigma", "sac"}},
		{TrainConfig{Env: "Pendulum-v1", Algo: "sac", Epsilon: 0.3, Steps: 1}, []string{"Epsilon", "sac"}},
	} {
		_, err := NewTrainer(tc.cfg)
		if err == nil {
			t.Errorf("%+v: accepted", tc.cfg)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %v (want it to name %q)", tc.cfg, err, w)
			}
		}
	}
}

// TestSACDeterministicRun: a lockstep sac run trains its 300 steps,
// evaluates, reports SAC's counters, and repeats bit for bit with its
// seed; a run of 200 steps resumed from its checkpoint to 300 ends with
// the same policy as the uninterrupted run.
func TestSACDeterministicRun(t *testing.T) {
	run := func(cfg TrainConfig) (*Trainer, *TrainResult) {
		t.Helper()
		tr, err := NewTrainer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		res, err := tr.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tr, res
	}
	a, ra := run(smallSAC("per"))
	st := a.Stats().Learner
	if st.Steps != 300 || st.ActorUpdates != 300 || st.TargetUpdates != 300 || st.WriteBacks == 0 || st.Alpha <= 0 || st.Entropy == 0 ||
		st.Timing.Sample <= 0 || st.Sampled.N != 300*32 {
		t.Errorf("learner stats %+v", st)
	}
	if len(ra.Curve) != 4 {
		t.Errorf("%d curve points, want 4", len(ra.Curve))
	}
	b, rb := run(smallSAC("per"))
	if !slices.Equal(sacOf(a).Policy().Params(), sacOf(b).Policy().Params()) || ra.FinalReturn != rb.FinalReturn {
		t.Errorf("same seed, different runs (final %v vs %v)", ra.FinalReturn, rb.FinalReturn)
	}

	path := filepath.Join(t.TempDir(), "sac.ckpt")
	cfg := smallSAC("per")
	cfg.Steps, cfg.Checkpoint = 200, path
	run(cfg)
	re, err := ResumeTrainer(path, func(c *TrainConfig) { c.Steps = 300 })
	if err != nil {
		t.Fatal(err)
	}
	if re.Config().Algo != "sac" || sacOf(re).Steps() != 200 {
		t.Fatalf("resumed %q at %d steps", re.Config().Algo, sacOf(re).Steps())
	}
	res, err := re.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.LearnerSteps != 300 {
		t.Errorf("the resumed run ended at %d learner steps, want 300", res.LearnerSteps)
	}
	if _, err := ResumeTrainer(path, func(c *TrainConfig) { c.Algo = "td3" }); err == nil {
		t.Error("a resume switching sac to td3 was accepted")
	}
}

// TestSACConcurrent runs sac with several actors through the concurrent
// pipeline (the race detector watches it) and resumes its checkpoint with
// the saved policy.
func TestSACConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sac.ckpt")
	cfg := smallSAC("lap")
	cfg.Deterministic, cfg.Actors, cfg.Steps, cfg.EvalEvery, cfg.Checkpoint = false, 3, 150, time.Hour, path
	tr, err := NewTrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(sacOf(tr).Policy().Params())
	re, err := ResumeTrainer(path, func(c *TrainConfig) { c.Steps = 200 })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sacOf(re).Policy().Params(), want) || sacOf(re).Alpha() != sacOf(tr).Alpha() {
		t.Fatal("the resumed SAC policy or temperature differs from the saved one")
	}
	if _, err := re.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := re.Stats().LearnerSteps; got != 200 {
		t.Errorf("resumed run ended at %d learner steps, want 200", got)
	}
}

// TestSACMethods: sac trains through every replay method it takes (all
// but the ReF-ER ones), writing priorities back where the method keeps
// them.
func TestSACMethods(t *testing.T) {
	for _, s := range sampler.Methods() {
		if spec, _ := sampler.Lookup(s); !spec.PairsWith("sac") {
			continue
		}
		t.Run(s, func(t *testing.T) {
			cfg := smallSAC(s)
			cfg.Steps, cfg.EvalEverySteps = 60, 60
			tr, err := NewTrainer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := tr.Stats().Learner
			if st.Steps != 60 || (s != "uniform" && s != "pal" && st.WriteBacks == 0) {
				t.Errorf("learner stats %+v", st)
			}
		})
	}
}
