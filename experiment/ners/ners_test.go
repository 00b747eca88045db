package ners

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/apexrl/apex/experiment/control"
	"github.com/apexrl/apex/learner"
)

// TestSummarise: each method's statistics are the means over its runs of
// the per-run mean and sd of |δ| and Q, of the learner's ms per step and of
// the final return.
func TestSummarise(t *testing.T) {
	m := func(vals ...float64) learner.Moments {
		var s learner.Moments
		for _, v := range vals {
			s.N++
			s.SumTD, s.SumTD2, s.SumQ, s.SumQ2 = s.SumTD+v, s.SumTD2+v*v, s.SumQ-v, s.SumQ2+v*v
		}
		return s
	}
	res := &control.Result{Config: control.Config{Samplers: []string{"uniform", "ners"}}, Runs: []control.Trial{
		{Sampler: "uniform", Final: -100, Steps: 1000, LearnerSeconds: 2, Sampled: m(1, 3)},
		{Sampler: "uniform", Final: -200, Steps: 1000, LearnerSeconds: 4, Sampled: m(2, 2)},
		{Sampler: "ners", Final: -50, Steps: 500, LearnerSeconds: 2, SampleShare: 0.1, WriteBackShare: 0.2, Sampled: m(0, 4)},
	}}
	got := Summarise(res)
	if len(got) != 2 {
		t.Fatalf("%d arms", len(got))
	}
	u, n := got[0], got[1]
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	// uniform: runs (mean 2, sd 1) and (mean 2, sd 0).
	if u.Sampler != "uniform" || !near(u.MeanTD, 2) || !near(u.SDTD, 0.5) || !near(u.MeanQ, -2) || !near(u.SDQ, 0.5) ||
		!near(u.MsPerStep, 3) || !near(u.Final, -150) {
		t.Errorf("uniform %+v", u)
	}
	if n.Sampler != "ners" || !near(n.MeanTD, 2) || !near(n.SDTD, 2) || !near(n.MsPerStep, 4) || !near(n.ReplayShare, 0.3) {
		t.Errorf("ners %+v", n)
	}
	var b strings.Builder
	if err := WriteStatsTable(&b, &StatsResult{Control: res, Stats: got}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "1.33x") {
		t.Errorf("table lacks ners' time ratio to uniform (4/3):\n%s", b.String())
	}
}

// TestStatsSmoke: a reduced part 1 trains every method end to end and
// reports statistics from every sampled row.
func TestStatsSmoke(t *testing.T) {
	cfg := DefaultStatsConfig()
	cfg.Base.Steps, cfg.Base.MinSizeToSample, cfg.Base.Hidden, cfg.Base.Batch = 400, 300, []int{16}, 32
	cfg.Base.EvalEverySteps, cfg.Base.EvalEpisodes, cfg.Base.FinalEpisodes = 100, 1, 1
	cfg.Base = cfg.Base.WithOption("ners-interval", 100).WithOption("ners-sample", 16)
	cfg.Seeds = []uint64{1, 2}
	res, err := RunStats(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stats) != 3 {
		t.Fatalf("stats %+v", res.Stats)
	}
	for _, s := range res.Stats {
		if !(s.SDTD > 0 && s.SDQ > 0 && s.MsPerStep > 0) {
			t.Errorf("%s: %+v", s.Sampler, s)
		}
	}
	for _, r := range res.Control.Runs {
		if r.Sampled.N != 400*32 || r.Steps != 400 {
			t.Errorf("%s seed %d: %d sampled rows over %d steps, want %d over 400", r.Sampler, r.Seed, r.Sampled.N, r.Steps, 400*32)
		}
	}
}
