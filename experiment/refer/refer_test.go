package refer

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/experiment/control"
	"github.com/apexrl/apex/runtime"
)

// TestFitSlope: the fit recovers a line exactly, and of a line plus a
// symmetric bend it keeps the slope and reports the misfit.
func TestFitSlope(t *testing.T) {
	var x, y, z []float64
	for i := range 21 {
		v := -2 + 0.2*float64(i)
		x = append(x, v)
		y = append(y, 0.3-0.615251*v)
		z = append(z, 0.3-0.615251*v+0.1*v*v)
	}
	s, c, r := FitSlope(x, y)
	if math.Abs(s+0.615251) > 1e-12 || math.Abs(c-0.3) > 1e-12 || r > 1e-12 {
		t.Errorf("line: slope %v, intercept %v, misfit %v; want -0.615251, 0.3, 0", s, c, r)
	}
	// An even bend on a symmetric grid leaves the slope alone and moves
	// the intercept by its mean, 0.1·mean(x²) = 0.1·(0.04·770/21).
	s, c, r = FitSlope(x, z)
	if want := 0.3 + 0.1*0.04*770/21; math.Abs(s+0.615251) > 1e-12 || math.Abs(c-want) > 1e-12 || !(r > 0.05) {
		t.Errorf("bent line: slope %v, intercept %v, misfit %v; want -0.615251, %v, > 0.05", s, c, r, want)
	}
}

func TestKLPeakEnd(t *testing.T) {
	for _, c := range []struct {
		kl        []float64
		w         int
		peak, end float64
	}{
		{nil, 3, 0, 0},
		{[]float64{2}, 3, 2, 2},
		{[]float64{1, 3, 5, 1, 0, 2}, 2, 4, 1},     // averages 1, 2, 4, 3, 0.5, 1
		{[]float64{1, 3, 5, 1, 0, 2}, 3, 3, 1},     // 1, 2, 3, 3, 2, 1
		{[]float64{4, 0, 0, 0, 0, 0}, 5, 4, 0},     // the first value alone is the peak
		{[]float64{1, 1, 1, 1, 9, 9}, 5, 4.2, 4.2}, // still rising at the end
	} {
		peak, end := klPeakEnd(c.kl, c.w)
		if math.Abs(peak-c.peak) > 1e-12 || math.Abs(end-c.end) > 1e-12 {
			t.Errorf("klPeakEnd(%v, %d) = %v, %v; want %v, %v", c.kl, c.w, peak, end, c.peak, c.end)
		}
	}
}

// TestPendulumChecks states the acceptance logic on hand-built arms.
func TestPendulumChecks(t *testing.T) {
	good := func() []PendulumArm {
		return []PendulumArm{
			{Sampler: "refer", Finals: []float64{-150, -200, -240}, MedianFinal: -200, Far: []float64{0.09, 0.1, 0.11}, FarMean: 0.1,
				KLEnd: []float64{0.05}, KLPeak: []float64{0.2}, MedianKLEnd: 0.05, MedianKLPeak: 0.2, MedianKLRatio: 0.25},
			{Sampler: "refer-2", MedianFinal: -600},
			{Sampler: "refer-1", MedianFinal: -1300, MedianKLEnd: 0.1}, // worse by return only
			{Sampler: "er", MedianFinal: -300, MedianKLEnd: 0.6},       // worse by KL only
		}
	}
	oks := func(arms []PendulumArm) []bool {
		var out []bool
		for _, c := range PendulumChecks(arms, 20_000, 20) {
			out = append(out, c.OK)
		}
		return out
	}
	if got := oks(good()); !slices.Equal(got, []bool{true, true, true, true, true}) {
		t.Fatalf("good arms: %v, want five passing checks (return, far, KL, er, refer-1)", got)
	}
	for name, c := range map[string]struct {
		mut  func([]PendulumArm)
		want []bool
	}{
		"return below the floor": {func(a []PendulumArm) { a[0].MedianFinal = -250.5 }, []bool{false, true, true, true, true}},
		"return at the floor":    {func(a []PendulumArm) { a[0].MedianFinal = -250 }, []bool{true, true, true, true, true}},
		"far too low":            {func(a []PendulumArm) { a[0].FarMean = 0.049 }, []bool{true, false, true, true, true}},
		"far too high":           {func(a []PendulumArm) { a[0].FarMean = 0.151 }, []bool{true, false, true, true, true}},
		"KL not halved":          {func(a []PendulumArm) { a[0].MedianKLRatio = 0.5 }, []bool{true, true, false, true, true}},
		// er: 300 below -200 is -500 (not below it), KL 0.5 = 10×0.05 (not above).
		"er close":      {func(a []PendulumArm) { a[3].MedianFinal, a[3].MedianKLEnd = -500, 0.5 }, []bool{true, true, true, false, true}},
		"refer-1 close": {func(a []PendulumArm) { a[2].MedianFinal = -450 }, []bool{true, true, true, true, false}},
		// A better full method raises the bar for the others.
		"full better": {func(a []PendulumArm) { a[0].MedianFinal, a[0].MedianKLEnd = -100, 0.07 }, []bool{true, true, true, false, true}},
	} {
		arms := good()
		c.mut(arms)
		if got := oks(arms); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
	// Missing arms leave their checks out; without the full method there
	// is nothing to check.
	if got := oks(good()[:2]); len(got) != 3 {
		t.Errorf("without er and refer-1: %d checks, want 3", len(got))
	}
	if got := oks(good()[1:]); len(got) != 0 {
		t.Errorf("without refer: %d checks, want none", len(got))
	}
}

// TestSummarise reduces hand-built runs: far fractions after the warm-up,
// KL peaks and ends, the curves.
func TestSummarise(t *testing.T) {
	curve := func(far, kl []float64) []runtime.EvalPoint {
		var c []runtime.EvalPoint
		for i := range far {
			c = append(c, runtime.EvalPoint{LearnerSteps: int64(1000 * (i + 1)), MeanReturn: -float64(i), FarFraction: far[i], MeanKL: kl[i]})
		}
		last := c[len(c)-1]
		last.MeanReturn = -7 // the final evaluation repeats the last step
		return append(c, last)
	}
	res := &control.Result{
		Config: control.Config{Samplers: []string{"refer"}, Base: runtime.TrainConfig{FinalEpisodes: 20}},
		Runs: []control.Trial{
			{Sampler: "refer", Seed: 1, Final: -100, Curve: curve([]float64{0.5, 0.1, 0.2}, []float64{1, 3, 1})},
			{Sampler: "refer", Seed: 2, Final: -300, Curve: curve([]float64{0.3, 0.3, 0.0}, []float64{2, 2, 2})},
		},
	}
	r := Summarise(res, 1000)
	a := r.Arms[0]
	want := PendulumArm{Sampler: "refer", Finals: []float64{-100, -300}, MedianFinal: -200,
		Far: []float64{0.15, 0.15}, FarMean: 0.15, FarMax: 0.3,
		// Windows of 5 reach back to the start: 1, 2, 5/3 and 2, 2, 2.
		KLPeak: []float64{2, 2}, KLEnd: []float64{5.0 / 3, 2}, KLRatio: []float64{5.0 / 6, 1},
		MedianKLPeak: 2, MedianKLEnd: 11.0 / 6, MedianKLRatio: 11.0 / 12,
		Steps: []int64{1000, 2000, 3000}, FarCurve: []float64{0.4, 0.2, 0.1}, KLCurve: []float64{1.5, 2.5, 1.5}}
	if !armsClose(a, want) {
		t.Errorf("arm\n%+v\nwant\n%+v", a, want)
	}
	if len(r.Checks) != 3 || r.WarmUp != 1000 {
		t.Errorf("checks %+v, warm-up %d", r.Checks, r.WarmUp)
	}
}

func armsClose(a, b PendulumArm) bool {
	eq := func(x, y []float64) bool {
		return slices.EqualFunc(x, y, func(u, v float64) bool { return math.Abs(u-v) < 1e-12 })
	}
	return a.Sampler == b.Sampler && eq(a.Finals, b.Finals) && eq(a.Far, b.Far) && eq(a.KLPeak, b.KLPeak) && eq(a.KLEnd, b.KLEnd) &&
		eq(a.KLRatio, b.KLRatio) && eq(a.FarCurve, b.FarCurve) && eq(a.KLCurve, b.KLCurve) && slices.Equal(a.Steps, b.Steps) &&
		eq([]float64{a.MedianFinal, a.FarMean, a.FarMax, a.MedianKLPeak, a.MedianKLEnd, a.MedianKLRatio},
			[]float64{b.MedianFinal, b.FarMean, b.FarMax, b.MedianKLPeak, b.MedianKLEnd, b.MedianKLRatio})
}

// TestPendulumSmoke runs a tiny comparison end to end through the real
// runtime (structure, not learning): two methods, two seeds, 300 steps.
func TestPendulumSmoke(t *testing.T) {
	cfg := DefaultPendulumConfig()
	cfg.Base.Steps, cfg.Base.Batch, cfg.Base.Hidden, cfg.Base.Capacity = 300, 32, []int{16}, 4000
	cfg.Base.MinSizeToSample, cfg.Base.EvalEverySteps, cfg.Base.EvalEpisodes, cfg.Base.FinalEpisodes = 300, 100, 1, 1
	cfg.Samplers, cfg.Seeds = []string{"refer", "er"}, []uint64{1, 2}
	res, err := RunPendulum(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.WarmUp != 60 || len(res.Arms) != 2 || len(res.Control.Runs) != 4 {
		t.Fatalf("warm-up %d, %d arms, %d runs", res.WarmUp, len(res.Arms), len(res.Control.Runs))
	}
	for _, a := range res.Arms {
		if len(a.Finals) != 2 || len(a.Far) != 2 || len(a.KLEnd) != 2 || !slices.Equal(a.Steps, []int64{100, 200, 300}) ||
			len(a.FarCurve) != 3 || len(a.KLCurve) != 3 {
			t.Errorf("arm %+v", a)
		}
		if a.MedianKLPeak <= 0 || a.FarMean < 0 || a.FarMean > 1 {
			t.Errorf("%s: KL peak %v, far %v", a.Sampler, a.MedianKLPeak, a.FarMean)
		}
	}
	if len(res.Checks) != 4 {
		t.Errorf("checks %+v, want return, far, KL and er", res.Checks)
	}
	var b bytes.Buffer
	if err := WritePendulumTable(&b, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"refer ", "er ", "far after 60", "end/peak", "median final return"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	dir := t.TempDir()
	for name, save := range map[string]func(*PendulumResult, string) error{"far.png": SaveFarPlot, "kl.png": SaveKLPlot} {
		if err := save(res, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		isPNG(t, filepath.Join(dir, name))
	}
}

// TestLQRSmoke trains two tiny LQR runs (structure, not learning) and
// repeats one: a seed gives the same run.
func TestLQRSmoke(t *testing.T) {
	cfg := tinyLQR()
	res, err := RunLQR(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(res.K-0.588403) > 1e-6 || len(res.Runs) != 2 || len(res.Checks) != 1 || !(res.OptimalReturn < 0) {
		t.Fatalf("K %v, %d runs, checks %+v, optimal %v", res.K, len(res.Runs), res.Checks, res.OptimalReturn)
	}
	for i, r := range res.Runs {
		if r.Seed != cfg.Seeds[i] || len(r.X) != 5 || r.X[0] != -1 || r.X[4] != 1 || len(r.Curve) != 3 || r.Curve[2].LearnerSteps != 200 ||
			r.Curve[2].MeanReturn != r.Final || r.EnvSteps != 500 || !(r.Std > 0) {
			t.Errorf("run %+v", r)
		}
		if s, _, _ := FitSlope(r.X, r.U); s != r.Slope || r.RelErr != math.Abs(r.Slope+res.K)/res.K {
			t.Errorf("seed %d: slope %v, error %v", r.Seed, r.Slope, r.RelErr)
		}
	}
	cfg.Seeds, cfg.Workers = cfg.Seeds[1:], 1
	again, err := RunLQR(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := again.Runs[0], res.Runs[1]; a.Slope != b.Slope || !slices.Equal(a.U, b.U) || a.Final != b.Final {
		t.Errorf("seed %d twice: slope %v then %v", a.Seed, b.Slope, a.Slope)
	}
	var buf bytes.Buffer
	if err := WriteLQRTable(&buf, res); err != nil || !strings.Contains(buf.String(), "K* = 0.588403") || !strings.Contains(buf.String(), "median") {
		t.Errorf("table %v:\n%s", err, buf.String())
	}
	path := filepath.Join(t.TempDir(), "lqr.png")
	if err := SaveLQRPlot(res, path); err != nil {
		t.Fatal(err)
	}
	isPNG(t, path)
}

func TestLQRConfigErrors(t *testing.T) {
	for name, mut := range map[string]func(*LQRConfig){
		"no steps":     func(c *LQRConfig) { c.Steps = 0 },
		"no seeds":     func(c *LQRConfig) { c.Seeds = nil },
		"no workers":   func(c *LQRConfig) { c.Workers = 0 },
		"one point":    func(c *LQRConfig) { c.GridPoints = 1 },
		"small start":  func(c *LQRConfig) { c.NStart = c.Batch - 1 },
		"full start":   func(c *LQRConfig) { c.NStart = c.Capacity },
		"bad gamma":    func(c *LQRConfig) { c.Gamma = 1.5 },
		"bad params":   func(c *LQRConfig) { c.Params.R = -1 },
		"no eval eps":  func(c *LQRConfig) { c.EvalEpisodes = -1 },
		"bad interval": func(c *LQRConfig) { c.EvalEverySteps = -1 },
	} {
		c := tinyLQR()
		mut(&c)
		if _, err := RunLQR(context.Background(), c, nil); err == nil {
			t.Errorf("%s: RunLQR accepted %+v", name, c)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunLQR(ctx, tinyLQR(), nil); err == nil {
		t.Error("a cancelled RunLQR returned no error")
	}
}

// tinyLQR is a smoke-sized LQR configuration: 300 stored steps, then 200
// learner steps, evaluated at 100 and 200.
func tinyLQR() LQRConfig {
	c := DefaultLQRConfig()
	c.Steps, c.Seeds, c.Workers, c.Batch, c.Hidden = 200, []uint64{1, 2}, 2, 32, []int{8}
	c.Capacity, c.NStart, c.EvalEverySteps, c.EvalEpisodes, c.FinalEpisodes, c.GridPoints = 2048, 300, 100, 1, 1, 5
	return c
}

func isPNG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("%s: %v (%d bytes), not a PNG", path, err, len(b))
	}
}

// TestKLPlotWithoutKL: arms with no positive KL (plain TD3, or runs too
// short for an evaluation) give an empty plot instead of a log axis with
// nothing on it.
func TestKLPlotWithoutKL(t *testing.T) {
	r := &PendulumResult{Control: &control.Result{Config: control.Config{Base: runtime.TrainConfig{Env: "Pendulum-v1", Algo: "td3"}, Seeds: []uint64{1, 2}}},
		Arms: []PendulumArm{{Sampler: "uniform", Steps: []int64{1000, 2000}, KLCurve: []float64{0, 0}}, {Sampler: "refer"}}}
	path := filepath.Join(t.TempDir(), "kl.png")
	if err := SaveKLPlot(r, path); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("kl.png: %v", err)
	}
}

// TestTD3Checks: the TD3 part checks full ReF-ER's median final return and
// its far fraction, and states nothing without a refer arm.
func TestTD3Checks(t *testing.T) {
	arms := []PendulumArm{{Sampler: "uniform", MedianFinal: -130}, {Sampler: "refer", MedianFinal: -240, Finals: []float64{-240}, FarMean: 0.17}}
	c := TD3Checks(arms, 6000)
	if len(c) != 2 || !c[0].OK || c[1].OK {
		t.Errorf("checks %+v: want the return to pass (-240 >= -250) and the far fraction to fail (0.17)", c)
	}
	if c := TD3Checks(arms[:1], 6000); c != nil {
		t.Errorf("no refer arm: %+v", c)
	}
}
