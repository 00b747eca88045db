package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/runtime"
)

func TestMeanCI(t *testing.T) {
	// n = 4, mean 2.5, s = sqrt(5/3); t(0.975, 3) = 3.182446305284263.
	m, ci := meanCI([]float64{1, 2, 3, 4})
	want := 3.182446305284263 * math.Sqrt(5.0/3) / 2
	if m != 2.5 || math.Abs(ci-want) > 1e-9 {
		t.Errorf("meanCI = %v ± %v, want 2.5 ± %v", m, ci, want)
	}
}

func TestChecks(t *testing.T) {
	cfg := Config{Floor: -200, FloorArms: []string{"lap", "pal"}}
	arms := []Arm{
		{Sampler: "uniform", Mean: -150, CI95: 10, Median: -150},
		{Sampler: "lap", Mean: -180, CI95: 25, Median: -190}, // -155 >= -160: within the CIs
		{Sampler: "pal", Mean: -300, CI95: 20, Median: -250}, // below the floor and beyond the CIs
	}
	got := checks(cfg, arms)
	ok := make([]bool, len(got))
	for i, c := range got {
		ok[i] = c.OK
	}
	if want := []bool{true, false, true, false}; !slices.Equal(ok, want) {
		t.Errorf("checks %+v, want OK = %v", got, want)
	}
}

func TestControlValidate(t *testing.T) {
	base := pendulumConfig()
	for name, mut := range map[string]func(*Config){
		"no samplers":     func(c *Config) { c.Samplers = nil },
		"one seed":        func(c *Config) { c.Seeds = []uint64{1} },
		"no workers":      func(c *Config) { c.Workers = 0 },
		"no steps":        func(c *Config) { c.Base.Steps = 0 },
		"no tail":         func(c *Config) { c.TailEvals = 0 },
		"unknown floored": func(c *Config) { c.FloorArms = []string{"ners"} },
	} {
		c := base
		c.Samplers = slices.Clone(base.Samplers)
		mut(&c)
		if _, err := Run(context.Background(), c, nil); err == nil {
			t.Errorf("%s: Run accepted %+v", name, c)
		}
	}
}

// TestControlSmoke runs a reduced Pendulum comparison end to end: two
// methods, two seeds, a few hundred TD3 steps, through the real runtime.
// The runs are deterministic, so running it twice gives the same finals.
func TestControlSmoke(t *testing.T) {
	cfg := pendulumConfig()
	cfg.Base.Steps, cfg.Base.Batch, cfg.Base.Hidden = 300, 32, []int{16}
	cfg.Base.MinSizeToSample, cfg.Base.EvalEverySteps, cfg.Base.EvalEpisodes, cfg.Base.FinalEpisodes = 200, 150, 1, 2
	cfg.Samplers, cfg.Seeds, cfg.FloorArms = []string{"uniform", "pal"}, []uint64{1, 2}, []string{"pal"}
	low := -1e9 // every evaluation reaches it: the first one counts
	cfg.Threshold = &low
	var seen []Trial
	res, err := Run(context.Background(), cfg, func(r Trial) { seen = append(seen, r) })
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 4 || len(res.Runs) != 4 || len(res.Arms) != 2 {
		t.Fatalf("%d callbacks, %d runs, %d arms; want 4, 4, 2", len(seen), len(res.Runs), len(res.Arms))
	}
	for _, a := range res.Arms {
		// Two periodic evaluations and the final one, at the last step.
		if len(a.Finals) != 2 || len(a.Curve) != 3 || a.Curve[2].LearnerSteps != 300 || a.Curve[2].MeanReturn != a.Mean || !(a.Seconds > 0) {
			t.Errorf("arm %+v", a)
		}
		if a.Reached != 2 || a.StepsTo[0] <= 0 || a.MedianStepsTo != float64(a.StepsTo[0]+a.StepsTo[1])/2 {
			t.Errorf("%s: steps to threshold %v (median %v, reached %d), want both runs at their first evaluation", a.Sampler, a.StepsTo, a.MedianStepsTo, a.Reached)
		}
		// The tail averages the two periodic evaluations (TailEvals 5 > 2).
		if want := (a.Curve[0].MeanReturn + a.Curve[1].MeanReturn) / 2; math.Abs(a.TailMean-want) > 1e-9 {
			t.Errorf("%s: tail mean %v, want %v", a.Sampler, a.TailMean, want)
		}
		if a.SampleShare <= 0 || a.WriteBackShare <= 0 || a.ReplayShare >= 1 {
			t.Errorf("%s: replay shares %v + %v", a.Sampler, a.SampleShare, a.WriteBackShare)
		}
		for _, f := range a.Finals {
			if !(f < 0 && f > -2000) { // Pendulum's returns lie in (-1700·20/20, 0]
				t.Errorf("%s: final %v outside Pendulum's range", a.Sampler, f)
			}
		}
	}
	if len(res.Checks) != 2 {
		t.Errorf("checks %+v, want the floor and the CI comparison for pal", res.Checks)
	}
	again, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range res.Arms {
		if !slices.Equal(res.Arms[i].Finals, again.Arms[i].Finals) {
			t.Errorf("%s: finals %v then %v: the runs are not deterministic", res.Arms[i].Sampler, res.Arms[i].Finals, again.Arms[i].Finals)
		}
	}
	var b bytes.Buffer
	if err := WriteTable(&b, res); err != nil || !strings.Contains(b.String(), "pal") || !strings.Contains(b.String(), "replay share") {
		t.Errorf("table %q, %v", b.String(), err)
	}
	if err := SavePlot(res, t.TempDir()+"/c.png"); err != nil {
		t.Error(err)
	}
}

// TestControlCancel: a cancelled context stops the runs and returns its
// error, leaving no goroutine behind (TestMain).
func TestControlCancel(t *testing.T) {
	cfg := pendulumConfig()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, cfg, nil); err == nil {
		t.Fatal("a cancelled Run returned no error")
	}
}

// TestControlCutShort: a run that the context's end cuts short is not
// reported as a finished run (its "final" return would be a partly trained
// network's), and Run's error wraps the context's.
func TestControlCutShort(t *testing.T) {
	cfg := pendulumConfig()
	cfg.Base.Steps, cfg.Base.Batch, cfg.Base.Hidden = 300, 32, []int{16}
	cfg.Base.MinSizeToSample, cfg.Base.EvalEverySteps, cfg.Base.EvalEpisodes, cfg.Base.FinalEpisodes = 200, 150, 1, 1
	cfg.Samplers, cfg.Seeds, cfg.FloorArms, cfg.Workers = []string{"uniform"}, []uint64{1, 2, 3}, nil, 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen []Trial
	// One worker: the next run either never starts or starts with the
	// context already ended and stops at once.
	_, err := Run(ctx, cfg, func(r Trial) { seen = append(seen, r); cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want an error wrapping context.Canceled", err)
	}
	if len(seen) != 1 || seen[0].Seed != 1 || seen[0].Steps != 300 {
		t.Errorf("finished runs %+v, want only seed 1 with its 300 steps", seen)
	}
}

// pendulumConfig is a small TD3 comparison on Pendulum-v1.
func pendulumConfig() Config {
	return Config{
		Name: "pendulum-td3",
		Base: runtime.TrainConfig{Env: "Pendulum-v1", Algo: "td3", Steps: 12_000, Hidden: []int{64, 64},
			Capacity: 100_000, MinSizeToSample: 1000, EvalEverySteps: 1000, EvalEpisodes: 5, FinalEpisodes: 20},
		Samplers: []string{"uniform", "per", "lap", "pal"}, Seeds: []uint64{1, 2, 3, 4, 5}, Workers: 2, TailEvals: 5,
		Floor: -200, FloorArms: []string{"lap", "pal"},
	}
}

// TestArmJSON: an arm whose median is infinite (no threshold, or most runs
// never reached it) still encodes, without the median; a finite one keeps
// it.
func TestArmJSON(t *testing.T) {
	b, err := json.Marshal(Arm{Sampler: "er", MedianStepsTo: math.Inf(1), StepsTo: []int64{-1, -1}})
	if err != nil || strings.Contains(string(b), "median_steps_to_threshold") {
		t.Errorf("infinite median: %s, %v", b, err)
	}
	b, err = json.Marshal(Arm{Sampler: "ter", MedianStepsTo: 7700})
	if err != nil || !strings.Contains(string(b), `"median_steps_to_threshold":7700`) || !strings.Contains(string(b), `"sampler":"ter"`) {
		t.Errorf("finite median: %s, %v", b, err)
	}
}

// TestWriteChecks: one line per check, marked ok or FAIL.
func TestWriteChecks(t *testing.T) {
	var b strings.Builder
	WriteChecks(&b, []Check{{What: "a holds", OK: true}, {What: "b holds", OK: false}})
	if got, want := b.String(), "ok   a holds\nFAIL b holds\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if AllOK([]Check{{OK: true}, {OK: false}}) || !AllOK([]Check{{OK: true}}) || !AllOK(nil) {
		t.Fatal("AllOK wrong")
	}
}
