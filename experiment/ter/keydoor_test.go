package ter

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/apexrl/apex/experiment/control"
)

// TestDefaultKeyDoorConfig pins what the issue asks of part (2): TER, PER
// and uniform, at least 5 seeds, the threshold at 0.9·360, a valid config.
func TestDefaultKeyDoorConfig(t *testing.T) {
	cfg := DefaultKeyDoorConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Samplers, []string{"ter", "per", "uniform"}) || len(cfg.Seeds) < 5 {
		t.Errorf("samplers %v, %d seeds", cfg.Samplers, len(cfg.Seeds))
	}
	if cfg.Threshold == nil || *cfg.Threshold != 324 {
		t.Errorf("threshold %v, want 324", cfg.Threshold)
	}
	b := cfg.Base
	if b.Env != "KeyDoor-Tabular" || b.Algo != "dqn" || b.Hidden == nil || len(b.Hidden) != 0 || b.NStep != 1 ||
		b.Option("ter-eta") != 0.5 || b.Option("ter-roots") != 8 || b.Option("ter-preds") != 3 || b.ReplayRatio/float64(b.Batch) != 0.25 {
		t.Errorf("base config %+v", b)
	}
}

// TestKeyDoorSmoke runs a reduced config (2 seeds, 100 learner steps after
// 100 stored transitions) end to end and checks the result's structure,
// not learning: arms in order, one trial per (method, seed), curves of the
// expected length with environment steps increasing, steps to the
// threshold -1 or a point of the curve, and the acceptance check stated.
func TestKeyDoorSmoke(t *testing.T) {
	defer goleak.VerifyNone(t)
	cfg := DefaultKeyDoorConfig()
	cfg.Seeds = []uint64{1, 2}
	cfg.Base.Steps = 100
	cfg.Base.MinSizeToSample = 100
	cfg.Base.EvalEverySteps = 50
	cfg.TailEvals = 2
	var trials int
	res, err := control.Run(context.Background(), cfg, func(control.Trial) { trials++ })
	if err != nil {
		t.Fatal(err)
	}
	if trials != 6 || len(res.Runs) != 6 || len(res.Arms) != 3 {
		t.Fatalf("%d trials reported, %d runs, %d arms; want 6, 6, 3", trials, len(res.Runs), len(res.Arms))
	}
	for i, a := range res.Arms {
		if a.Sampler != cfg.Samplers[i] || len(a.Finals) != 2 || len(a.StepsTo) != 2 {
			t.Errorf("arm %d: %s with %d finals and %d step counts", i, a.Sampler, len(a.Finals), len(a.StepsTo))
		}
	}
	for _, r := range res.Runs {
		// 100/50 periodic evaluations and the final one.
		if len(r.Curve) != 3 {
			t.Fatalf("%s seed %d: %d evaluations, want 3", r.Sampler, r.Seed, len(r.Curve))
		}
		reached := r.StepsTo == -1
		for i, p := range r.Curve {
			// Greedy on the fixed layout: the goal after k steps (361 − k) or
			// the time limit (−360).
			if p.MeanReturn != -360 && !(p.MeanReturn <= 346 && p.MeanReturn > 0) {
				t.Errorf("%s seed %d: return %v", r.Sampler, r.Seed, p.MeanReturn)
			}
			if i > 0 && p.EnvSteps < r.Curve[i-1].EnvSteps {
				t.Errorf("%s seed %d: environment steps go back: %v", r.Sampler, r.Seed, r.Curve)
			}
			if i < len(r.Curve)-1 && p.EnvSteps == r.StepsTo && p.MeanReturn >= KeyDoorThreshold {
				reached = true
			}
		}
		if !reached {
			t.Errorf("%s seed %d: steps to the threshold %d is no periodic evaluation that reached it: %v", r.Sampler, r.Seed, r.StepsTo, r.Curve)
		}
	}
	ch := KeyDoorCheck(res)
	if !strings.Contains(ch.What, "TER needs fewer environment steps to 324") {
		t.Errorf("check %q", ch.What)
	}
}

// TestKeyDoorCheck: TER must be strictly earlier than both other arms, and
// never reaching the threshold is never earlier.
func TestKeyDoorCheck(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		ter, per, uni float64
		ok            bool
	}{
		{7700, 9200, 9700, true},
		{9200, 9200, 9700, false},
		{9800, 9200, 9700, false},
		{7700, inf, inf, true},
		{inf, inf, inf, false},
	} {
		res := &control.Result{Arms: []control.Arm{
			{Sampler: "ter", MedianStepsTo: tc.ter}, {Sampler: "per", MedianStepsTo: tc.per}, {Sampler: "uniform", MedianStepsTo: tc.uni},
		}}
		if got := KeyDoorCheck(res); got.OK != tc.ok {
			t.Errorf("medians %v / %v / %v: %+v, want OK %v", tc.ter, tc.per, tc.uni, got, tc.ok)
		}
	}
	missing := &control.Result{Arms: []control.Arm{{Sampler: "ter", MedianStepsTo: 1}, {Sampler: "uniform", MedianStepsTo: 2}}}
	if got := KeyDoorCheck(missing); got.OK || !strings.Contains(got.What, "needs the arms") {
		t.Errorf("without per: %+v", got)
	}
}
