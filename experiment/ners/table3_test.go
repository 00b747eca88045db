package ners

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/apexrl/apex/learner"
	"github.com/apexrl/apex/sampler"
)

// TestMeanCI95: 1..5 have mean 3, sample sd √2.5 and t(0.975, 4) =
// 2.7764, so the half-width is 2.7764·1.5811/√5 = 1.9632.
func TestMeanCI95(t *testing.T) {
	got := MeanCI95([]float64{1, 2, 3, 4, 5})
	if math.Abs(got[0]-3) > 1e-12 || math.Abs(got[1]-1.9632431614775607) > 1e-9 {
		t.Errorf("MeanCI95(1..5) = %v, want [3 1.96324]", got)
	}
	if got := MeanCI95([]float64{7}); got[0] != 7 || !math.IsNaN(got[1]) {
		t.Errorf("one value: %v, want [7 NaN]", got)
	}
}

// TestDefaultTable3Config: the Table 3 setting follows Table B.1 and App.
// B: batch 128, 1000 random actions first, one evaluation rollout per
// episode length (200 on Pendulum), a scorer update after each, and a
// statistics window that starts at an evaluation.
func TestDefaultTable3Config(t *testing.T) {
	for _, algo := range []string{"td3", "sac"} {
		c := DefaultTable3Config(algo, "SparsePendulum-v1")
		b := c.Base
		if b.Algo != algo || b.Steps != 10_000 || b.Batch != 128 || b.MinSizeToSample != 1000 || b.EvalEverySteps != 200 ||
			b.EvalEpisodes != 1 || int64(b.Option("ners-interval")) != b.EvalEverySteps || c.WindowFrom%b.EvalEverySteps != 0 || len(c.Seeds) < 5 {
			t.Errorf("%s: %+v (window from %d, %d seeds)", algo, b, c.WindowFrom, len(c.Seeds))
		}
	}
}

// TestSummariseTable3: per arm the mean over seeds of each run's window
// statistics, and the paired difference to uniform's run of the same seed.
func TestSummariseTable3(t *testing.T) {
	m := func(vals ...float64) learner.Moments {
		var s learner.Moments
		for _, v := range vals {
			s.N++
			s.SumTD, s.SumTD2, s.SumQ, s.SumQ2 = s.SumTD+v, s.SumTD2+v*v, s.SumQ+2*v, s.SumQ2+4*v*v
		}
		return s
	}
	cfg := DefaultTable3Config("td3", "SparsePendulum-v1")
	cfg.Arms, cfg.Seeds = Table3Arms()[:3:3], []uint64{1, 2}
	cfg.Arms = []Arm{cfg.Arms[0], cfg.Arms[2]}
	res := &Table3Result{Config: cfg, Runs: []Table3Run{
		// sd of |δ| over the window: 1 (values 1, 3) and 0 (2, 2); Q = 2·v.
		{Arm: "uniform", Seed: 1, Window: m(1, 3), All: m(1, 3), Final: 1},
		{Arm: "uniform", Seed: 2, Window: m(2, 2), All: m(2, 2), Final: 3},
		{Arm: "ners", Seed: 1, Window: m(0, 4), All: m(0, 4), Final: 2, NERS: &sampler.NERSStats{Updates: 3},
			Returns: []float64{0, 0, 1, 1, 5}}, // r_re 0, 1, 0 (the last return is applied by no step)
		{Arm: "ners", Seed: 2, Window: m(1, 3), All: m(1, 3), Final: 2},
	}}
	rows := SummariseTable3(res)
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	u, n := rows[0], rows[1]
	if u.SDTD[0] != 0.5 || u.SDQ[0] != 1 || u.Final[0] != 2 || u.DSDTD[0] != 0 {
		t.Errorf("uniform %+v", u)
	}
	// ners: sd 2 and 1, mean 1.5; paired differences 2−1 = 1 and 1−0 = 1.
	if n.SDTD[0] != 1.5 || n.DSDTD[0] != 1 || n.DSDTD[1] != 0 || n.DSDQ[0] != 2 || n.ZeroRewards != 2 || n.Rewards != 3 {
		t.Errorf("ners %+v", n)
	}
	var b strings.Builder
	if err := WriteTable3(&b, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "1 ± 0") {
		t.Errorf("table lacks ners' paired difference 1 ± 0:\n%s", b.String())
	}
}

// TestTable3Smoke: a reduced run trains every arm end to end; the window
// holds exactly the rows sampled after WindowFrom, and the frozen arm's
// scorer is never updated.
func TestTable3Smoke(t *testing.T) {
	cfg := DefaultTable3Config("td3", "SparsePendulum-v1")
	cfg.Base.Steps, cfg.Base.MinSizeToSample, cfg.Base.Hidden, cfg.Base.Batch = 400, 300, []int{16}, 32
	cfg.Base.EvalEverySteps, cfg.Base.FinalEpisodes = 100, 1
	cfg.Base = cfg.Base.WithOption("ners-interval", 100).WithOption("ners-sample", 16)
	cfg.Seeds, cfg.WindowFrom = []uint64{1, 2}, 300
	res, err := RunTable3(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != len(cfg.Arms)*2 {
		t.Fatalf("%d runs", len(res.Runs))
	}
	for _, r := range res.Runs {
		if r.All.N != 400*32 || r.Window.N != 100*32 || r.WindowStart != 300 {
			t.Errorf("%s seed %d: %d rows, window %d rows from %d; want 12800, 3200 from 300", r.Arm, r.Seed, r.All.N, r.Window.N, r.WindowStart)
		}
		switch r.Arm {
		case "ners":
			// Evaluations at 100..400: the first is the baseline.
			if _, n := r.ZeroRewards(); r.NERS == nil || r.NERS.Updates != 2 || n != 2 {
				t.Errorf("ners seed %d: %+v, %d replay rewards; want 2 scorer updates and 2 rewards", r.Seed, r.NERS, n)
			}
		case "ners-frozen":
			if r.NERS == nil || r.NERS.Updates != 0 {
				t.Errorf("ners-frozen seed %d: %+v, want no scorer update", r.Seed, r.NERS)
			}
		}
	}
}

// TestTable3CutShort: a run the context's end cuts short is not reported
// as finished (its final would be a partly trained network's), and
// RunTable3's error wraps the context's.
func TestTable3CutShort(t *testing.T) {
	cfg := DefaultTable3Config("td3", "SparsePendulum-v1")
	cfg.Base.Steps, cfg.Base.MinSizeToSample, cfg.Base.Hidden, cfg.Base.Batch = 250, 200, []int{16}, 32
	cfg.Base.EvalEverySteps, cfg.Base.FinalEpisodes = 100, 1
	cfg.Base = cfg.Base.WithOption("ners-interval", 100).WithOption("ners-sample", 16)
	cfg.Arms, cfg.Seeds, cfg.WindowFrom, cfg.Workers = cfg.Arms[:1], []uint64{1, 2, 3}, 200, 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen []Table3Run
	// One worker: the next run never starts or starts with ctx ended.
	_, err := RunTable3(ctx, cfg, func(r Table3Run) { seen = append(seen, r); cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunTable3: %v, want an error wrapping context.Canceled", err)
	}
	if len(seen) != 1 || seen[0].Seed != 1 || seen[0].Steps != 250 {
		t.Errorf("finished runs %+v, want only seed 1 with its 250 steps", seen)
	}
}
