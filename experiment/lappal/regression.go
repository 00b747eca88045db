package lappal

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"

	"github.com/apexrl/apex/experiment/control"
)

// RegressionConfig describes the regression experiment. Start from
// DefaultRegressionConfig; RunRegression validates it and applies no
// defaults of its own.
type RegressionConfig struct {
	// N is the number of data points, stored once each in the buffer.
	N int
	// W is the generating weight vector; W[0] multiplies a constant 1 (the
	// bias feature) and W[1:] independent standard normal features, so
	// x ∈ R^len(W). At least 1 entry.
	W []float64
	// OutlierFrac and OutlierShift define the skewed setting's noise,
	// (1−OutlierFrac)·N(0, 1) + OutlierFrac·N(OutlierShift, 1); the
	// symmetric setting's noise is N(0, 1).
	OutlierFrac, OutlierShift float64
	// Steps is the number of SGD steps per run, Batch the rows sampled per
	// step.
	Steps, Batch int
	// LR0, LRTau and LRDecay set the Robbins–Monro step size
	// η_t = LR0·(1 + t/LRTau)^−LRDecay, LRDecay in (0.5, 1].
	LR0, LRTau, LRDecay float64
	// AverageFrom is the fraction of Steps after which iterates are
	// averaged (Polyak–Ruppert tail averaging); the learned w is that
	// average. In [0, 1).
	AverageFrom float64
	// PER is the "per" method's stage: alpha, a fixed beta, eps and the
	// normalisation of its importance weights. It must normalise by a
	// constant per step (NormalizeBuffer or NormalizeNone), not by the
	// batch's largest weight, for Eq. 7's fixed point to hold.
	PER sampler.PERConfig
	// LAP is the "lap" and "pal" methods' alpha and k.
	LAP sampler.LAPConfig
	// Tolerance is the largest relative error ‖w − w_ref‖/‖w_ref‖ counted
	// as landing on the fixed point (the 2%).
	Tolerance float64
	// Seed seeds the data (per setting) and each run's sampling stream.
	Seed uint64
}

// DefaultRegressionConfig is the full-size experiment: N = 2000 points,
// w = (0.5, 2, −1) with a bias feature, 10% outliers shifted by +8 in the
// skewed setting, 200k SGD steps of 32 rows, η_t = 0.05·(1 + t/1000)^−0.6
// averaged over the second half, PER alpha 0.6 with beta fixed at 0.4
// (eps 1e-6, buffer-wide normalisation), LAP/PAL alpha 0.4 and k 1, 2%
// tolerance, seed 1.
func DefaultRegressionConfig() RegressionConfig {
	return RegressionConfig{
		N:            2000,
		W:            []float64{0.5, 2, -1},
		OutlierFrac:  0.1,
		OutlierShift: 8,
		Steps:        200_000,
		Batch:        32,
		LR0:          0.05,
		LRTau:        1000,
		LRDecay:      0.6,
		AverageFrom:  0.5,
		PER: sampler.PERConfig{
			Alpha:     sampler.DefaultPERAlpha,
			Beta:      sampler.Linear{Start: sampler.DefaultPERBeta0, End: sampler.DefaultPERBeta0},
			Eps:       sampler.DefaultEps,
			Normalize: buffer.NormalizeBuffer,
		},
		LAP:       sampler.DefaultLAPConfig(),
		Tolerance: 0.02,
		Seed:      1,
	}
}

// Validate reports the first field out of range.
func (c *RegressionConfig) Validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case len(c.W) < 1:
		return fmt.Errorf("lappal: W needs at least the bias weight")
	case c.N < 2*len(c.W)+1:
		return fmt.Errorf("lappal: N must be at least %d (2·len(W)+1), got %d", 2*len(c.W)+1, c.N)
	case !(c.OutlierFrac >= 0 && c.OutlierFrac < 1) || !finite(c.OutlierShift):
		return fmt.Errorf("lappal: outlier fraction must be in [0, 1) and the shift finite, got %v, %v", c.OutlierFrac, c.OutlierShift)
	case c.Steps < 1 || c.Batch < 1 || c.Batch > c.N:
		return fmt.Errorf("lappal: need steps >= 1 and 1 <= batch <= N, got %d, %d", c.Steps, c.Batch)
	case !(c.LR0 > 0) || !finite(c.LR0) || !(c.LRTau > 0) || !finite(c.LRTau) || !(c.LRDecay > 0.5 && c.LRDecay <= 1):
		return fmt.Errorf("lappal: need LR0 > 0, LRTau > 0 and LRDecay in (0.5, 1], got %v, %v, %v", c.LR0, c.LRTau, c.LRDecay)
	case !(c.AverageFrom >= 0 && c.AverageFrom < 1):
		return fmt.Errorf("lappal: average-from must be in [0, 1), got %v", c.AverageFrom)
	case c.PER.Beta.Start != c.PER.Beta.End:
		return fmt.Errorf("lappal: PER beta must be fixed (Eq. 7 holds for one beta), got %v → %v", c.PER.Beta.Start, c.PER.Beta.End)
	case c.PER.Normalize == buffer.NormalizeBatch:
		return fmt.Errorf("lappal: PER weights normalised by the batch maximum have no fixed point of Eq. 7's form; use the buffer or no normalisation")
	case !(c.Tolerance > 0) || !finite(c.Tolerance):
		return fmt.Errorf("lappal: tolerance must be positive, got %v", c.Tolerance)
	}
	for _, w := range c.W {
		if !finite(w) {
			return fmt.Errorf("lappal: W must be finite, got %v", c.W)
		}
	}
	if err := c.PER.Validate(); err != nil {
		return err
	}
	return c.LAP.Validate()
}

// Noise settings, in the order RunRegression reports them.
const (
	Gaussian = "gaussian"
	Skewed   = "skewed"
)

// RegressionMethods are the methods compared, in column order:
// sampler.NewMethod's "uniform" with MSE, "per" with MSE and importance
// weights, "lap", "pal", and "uniform" with L1.
var RegressionMethods = []string{"uniform+mse", "per+mse", "lap", "pal", "uniform+l1"}

// RegressionResult is a finished experiment.
type RegressionResult struct {
	Config   RegressionConfig
	Settings []NoiseResult
}

// NoiseResult is one noise setting.
type NoiseResult struct {
	// Noise is Gaussian or Skewed.
	Noise string
	// NoiseMean and NoiseMedian are the sample mean and median of the
	// noise actually drawn (the intercept offsets of OLS and LAD, roughly).
	NoiseMean, NoiseMedian float64
	// Methods has one entry per RegressionMethods name, in order.
	Methods []MethodFit
}

// MethodFit is one method in one noise setting.
type MethodFit struct {
	// Method is the RegressionMethods name; Stage names the built
	// sampler.Method's stage and loss.
	Method, Stage string
	// Reference names the predicted fixed point.
	Reference string
	// W is the learned weights (tail-averaged SGD iterates), WRef the
	// predicted fixed point, computed on the same stored data.
	W, WRef []float64
	// RelErr is ‖W − WRef‖/‖WRef‖; Within is RelErr <= Config.Tolerance.
	RelErr float64
	Within bool
	// Warnings are the method's pairing warnings (sampler.Method.Warnings).
	Warnings []string `json:",omitempty"`
}

// AllWithin reports whether every method landed within tolerance of its
// predicted fixed point in every setting.
func (r *RegressionResult) AllWithin() bool {
	for _, s := range r.Settings {
		for _, m := range s.Methods {
			if !m.Within {
				return false
			}
		}
	}
	return true
}

// RunRegression runs every method of RegressionMethods in both noise
// settings and computes each one's predicted fixed point. It is sequential
// and deterministic: equal configs give equal results. Cost: 10 runs of
// Steps·Batch sampled rows through the real buffer and stages, plus the
// references (O(N) per Newton or IRLS iteration).
func RunRegression(cfg RegressionConfig) (*RegressionResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	res := &RegressionResult{Config: cfg}
	for si, noise := range []string{Gaussian, Skewed} {
		data, eps := GenerateData(&cfg, noise, mix(cfg.Seed, uint64(si)))
		nr := NoiseResult{Noise: noise, NoiseMean: control.Mean(eps), NoiseMedian: control.Median(eps)}
		for mi, name := range RegressionMethods {
			ref, refName, err := Reference(&cfg, name, data)
			if err != nil {
				return nil, fmt.Errorf("lappal: %s, %s: %w", noise, name, err)
			}
			fit, err := Train(&cfg, name, data, mix(cfg.Seed, uint64(si), uint64(mi)+1))
			if err != nil {
				return nil, fmt.Errorf("lappal: %s: %w", noise, err)
			}
			fit.WRef, fit.Reference = ref, refName
			fit.RelErr = relErr(fit.W, ref)
			fit.Within = fit.RelErr <= cfg.Tolerance
			nr.Methods = append(nr.Methods, fit)
		}
		res.Settings = append(res.Settings, nr)
	}
	return res, nil
}

// GenerateData draws cfg.N points of the given noise setting from seed:
// x = (1, z_1, …) with z ~ N(0, 1), y = W·x + ε. Features and targets are
// rounded to float32 (what the buffer stores), so the returned Design is
// exactly the data the methods learn from. eps is the noise drawn.
func GenerateData(cfg *RegressionConfig, noise string, seed uint64) (data Design, eps []float64) {
	rng := rand.New(rand.NewPCG(seed, mix(seed, 0x1a9)))
	d := len(cfg.W)
	data = Design{X: make([]float64, cfg.N*d), Y: make([]float64, cfg.N), D: d}
	eps = make([]float64, cfg.N)
	for i := range cfg.N {
		x := data.X[i*d : (i+1)*d]
		x[0] = 1
		y := cfg.W[0]
		for j := 1; j < d; j++ {
			x[j] = float64(float32(rng.NormFloat64()))
			y += cfg.W[j] * x[j]
		}
		e := rng.NormFloat64()
		if noise == Skewed && rng.Float64() < cfg.OutlierFrac {
			e += cfg.OutlierShift
		}
		eps[i] = e
		data.Y[i] = float64(float32(y + e))
	}
	return data, eps
}

// Reference returns method's predicted fixed point on data and its name
// (see the package doc): OLS; the Newton root of PER's expected gradient
// (Eq. 7's argmin Σ|δ|^(2+a−ab), with cfg.PER's eps kept in); the Newton
// root of PAL's gradient (for LAP and PAL); or the LAD solution.
func Reference(cfg *RegressionConfig, method string, data Design) (w []float64, name string, err error) {
	var inf Influence
	switch method {
	case "uniform+mse":
		w, err = SolveOLS(data)
		return w, "OLS: argmin Σδ²", err
	case "per+mse":
		inf = PERInfluence(cfg.PER.Alpha, cfg.PER.Beta.End, cfg.PER.Eps)
		name = fmt.Sprintf("Eq. 7: %s (a=%g, b=%g, eps=%g)", inf.Name, cfg.PER.Alpha, cfg.PER.Beta.End, cfg.PER.Eps)
	case "lap", "pal":
		inf = PALInfluence(cfg.LAP.Alpha, cfg.LAP.K)
		name = inf.Name
		if method == "lap" {
			name += " (LAP's expected gradient is λ times PAL's)"
		}
	case "uniform+l1":
		w, err = SolveLAD(data)
		return w, "LAD: argmin Σ|δ| (the median's regression analogue)", err
	default:
		return nil, "", fmt.Errorf("lappal: unknown method %q", method)
	}
	w, err = SolveNewton(data, inf)
	return w, name, err
}

// newMethod builds method (a RegressionMethods name) over buf with
// sampler.NewMethod, as a learner would.
func newMethod(cfg *RegressionConfig, method string, buf *buffer.Buffer) (sampler.Method, error) {
	lap := cfg.LAP
	switch method {
	case "uniform+mse":
		return sampler.NewMethod("uniform", buf, sampler.MethodConfig{Loss: model.Loss{Kind: model.MSE}})
	case "per+mse":
		per := cfg.PER
		return sampler.NewMethod("per", buf, sampler.MethodConfig{Loss: model.Loss{Kind: model.MSE}, PER: &per})
	case "lap":
		return sampler.NewMethod("lap", buf, sampler.MethodConfig{LAP: &lap})
	case "pal":
		return sampler.NewMethod("pal", buf, sampler.MethodConfig{LAP: &lap})
	case "uniform+l1":
		return sampler.NewMethod("uniform", buf, sampler.MethodConfig{Loss: model.Loss{Kind: model.L1}})
	}
	return sampler.Method{}, fmt.Errorf("lappal: unknown method %q", method)
}

// newDataBuffer returns a buffer holding data once: capacity N, the
// default 16 stripes, obs = x (float32), reward = y, one discrete action,
// discount 0, every item at the buffer's initial priority 1 (new items
// get the maximum seen, as in PER and LAP). MaxPriority is 64, above any
// priority the methods write here, for a fine fixed-point resolution.
func newDataBuffer(data Design) (*buffer.Buffer, error) {
	n, d := data.N(), data.D
	buf, err := buffer.New(buffer.Config{Capacity: n, ObsDim: d, Action: buffer.Discrete, NumActions: 1, MaxPriority: 64})
	if err != nil {
		return nil, err
	}
	t := buffer.Transitions{
		Obs:      make([]float32, n*d),
		NextObs:  make([]float32, n*d),
		Action:   make([]int32, n),
		Reward:   make([]float32, n),
		Discount: make([]float32, n),
	}
	for i, x := range data.X {
		t.Obs[i] = float32(x)
	}
	for i, y := range data.Y {
		t.Reward[i] = float32(y)
	}
	if err := buf.Insert(&t); err != nil {
		return nil, err
	}
	if buf.Size() != n {
		return nil, fmt.Errorf("lappal: buffer holds %d items after inserting %d", buf.Size(), n)
	}
	return buf, nil
}

// Train runs SGD on a linear model for method over a fresh buffer holding
// data, sampling with seed, and returns the fit (Method, Stage, Warnings
// and W; the reference and the error are left to the caller). Each step does what a learner does: the stage
// samples cfg.Batch rows, the Weighter (if any) sets their weights, the
// forward pass gives δ_j = x_jᵀw − y_j, the Normalizer (if any) scales the
// batch by 1/λ̂ of its |δ|, the gradient is the batch mean of weight ×
// scale × Loss.Derivative(δ_j)·x_j, and |δ_j| (before the step) goes back
// through Selector.Update. Cost: Steps samples and write-backs of Batch
// rows; no allocation per step.
func Train(cfg *RegressionConfig, method string, data Design, seed uint64) (MethodFit, error) {
	buf, err := newDataBuffer(data)
	if err != nil {
		return MethodFit{}, err
	}
	m, err := newMethod(cfg, method, buf)
	if err != nil {
		return MethodFit{}, fmt.Errorf("%s: %w", method, err)
	}
	fit := MethodFit{Method: method, Stage: strings.TrimPrefix(m.String(), m.Name+": "), Warnings: m.Warnings}
	rng := rand.New(rand.NewPCG(seed, mix(seed, 0xb0)))
	d, bs := data.D, cfg.Batch
	batch, err := buf.NewBatch(bs)
	if err != nil {
		return MethodFit{}, fmt.Errorf("%s: %w", method, err)
	}
	absTD := make([]float64, bs)
	delta := make([]float64, bs)
	w := make([]float64, d)
	grad := make([]float64, d)
	avg := make([]float64, d)
	avgFrom := int(cfg.AverageFrom * float64(cfg.Steps))
	for step := range cfg.Steps {
		if err := m.Selector.Sample(rng, batch); err != nil {
			return MethodFit{}, fmt.Errorf("%s: step %d: %w", method, step, err)
		}
		if m.Weighter != nil {
			if err := m.Weighter.Weights(batch, int64(step)); err != nil {
				return MethodFit{}, fmt.Errorf("%s: step %d: %w", method, step, err)
			}
		}
		for j := range bs {
			x := batch.Obs[j*d : (j+1)*d]
			var p float64
			for a, xa := range x {
				p += float64(xa) * w[a]
			}
			delta[j] = p - float64(batch.Reward[j])
			absTD[j] = math.Abs(delta[j])
		}
		scale := 1.0
		if m.Normalizer != nil {
			if scale, err = m.Normalizer.Scale(absTD); err != nil {
				return MethodFit{}, fmt.Errorf("%s: step %d: %w", method, step, err)
			}
		}
		clear(grad)
		for j := range bs {
			g := scale * m.Loss.Derivative(delta[j])
			if m.Weighter != nil {
				g *= batch.Weight[j]
			}
			for a, xa := range batch.Obs[j*d : (j+1)*d] {
				grad[a] += g * float64(xa)
			}
		}
		lr := cfg.LR0 * math.Pow(1+float64(step)/cfg.LRTau, -cfg.LRDecay) / float64(bs)
		for a := range w {
			w[a] -= lr * grad[a]
		}
		res, err := m.Selector.Update(batch.Refs, absTD)
		if err != nil {
			return MethodFit{}, fmt.Errorf("%s: step %d: %w", method, step, err)
		}
		if res.Stale != 0 {
			return MethodFit{}, fmt.Errorf("%s: step %d: %d priority write-backs dropped as stale, but nothing overwrites the data", method, step, res.Stale)
		}
		if step >= avgFrom {
			k := float64(step - avgFrom + 1)
			for a := range avg {
				avg[a] += (w[a] - avg[a]) / k
			}
		}
	}
	fit.W = avg
	return fit, nil
}

func relErr(w, ref []float64) float64 {
	var num, den float64
	for i := range w {
		num += (w[i] - ref[i]) * (w[i] - ref[i])
		den += ref[i] * ref[i]
	}
	return math.Sqrt(num / den)
}

// mix derives a 64-bit seed from its inputs (SplitMix64 finalizer chain).
func mix(xs ...uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, x := range xs {
		h ^= x + 0x9e3779b97f4a7c15 + h<<6 + h>>2
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}
