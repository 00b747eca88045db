package f32

import (
	"fmt"
	"math"
)

// AdamConfig is model.AdamConfig: zero values mean Kingma & Ba's
// defaults (LR 1e-3, β₁ 0.9, β₂ 0.999, ε 1e-8); ClipNorm > 0 clips the
// gradient's global L2 norm first.
type AdamConfig struct {
	LR, Beta1, Beta2, Eps, ClipNorm float64
}

// Adam is model.Adam over float32 parameters: bias-corrected Adam (Kingma
// & Ba 2015, Algorithm 1, ε outside the square root) with optional
// global-norm clipping, the moments in float32 and the per-step constants
// computed in float64. Step is two passes over the gradient: its squared
// norm (SumSq) and one fused update (AdamUpdate) with the clipping factor
// folded in, so the gradient is not rewritten.
//
// An Adam is not safe for concurrent use.
type Adam struct {
	impl Impl
	cfg  AdamConfig
	m, v []float32
	t    uint64
}

// NewAdam returns an Adam for n parameters with zero moments, computing
// with impl (Auto: the best the CPU has). Errors name the bad field.
func NewAdam(n int, cfg AdamConfig, impl Impl) (*Adam, error) {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.LR, 1e-3)
	def(&cfg.Beta1, 0.9)
	def(&cfg.Beta2, 0.999)
	def(&cfg.Eps, 1e-8)
	fin := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !(cfg.LR > 0) || !fin(cfg.LR):
		return nil, fmt.Errorf("f32: AdamConfig.LR = %g (must be > 0)", cfg.LR)
	case !(cfg.Beta1 > 0 && cfg.Beta1 < 1):
		return nil, fmt.Errorf("f32: AdamConfig.Beta1 = %g (must be in (0, 1))", cfg.Beta1)
	case !(cfg.Beta2 > 0 && cfg.Beta2 < 1):
		return nil, fmt.Errorf("f32: AdamConfig.Beta2 = %g (must be in (0, 1))", cfg.Beta2)
	case !(cfg.Eps > 0) || !fin(cfg.Eps):
		return nil, fmt.Errorf("f32: AdamConfig.Eps = %g (must be > 0)", cfg.Eps)
	case !(cfg.ClipNorm >= 0) || !fin(cfg.ClipNorm):
		return nil, fmt.Errorf("f32: AdamConfig.ClipNorm = %g (must be >= 0)", cfg.ClipNorm)
	case n <= 0 || n > maxParams:
		return nil, fmt.Errorf("f32: NewAdam: %d parameters", n)
	case !impl.Available():
		return nil, fmt.Errorf("f32: NewAdam: implementation %v is not available on this CPU or build", impl)
	}
	return &Adam{impl: impl.resolve(), cfg: cfg, m: make([]float32, n), v: make([]float32, n)}, nil
}

// Moments returns the first and second moment vectors (the Adam's own;
// for checkpoints and tests) and the step count t.
func (a *Adam) Moments() (m, v []float32, t uint64) { return a.m, a.v, a.t }

// Step applies one update to params from grads and returns the gradient's
// global L2 norm before clipping. A NaN or infinite gradient entry is an
// error naming its index, and then nothing changes (neither params nor the
// moments nor t). grads is read, not modified. A length other than the
// Adam's is an error.
//
// Cost O(n): two passes, a square root and a division per parameter; no
// allocation.
func (a *Adam) Step(params, grads []float32) (float64, error) {
	if len(params) != len(a.m) || len(grads) != len(a.m) {
		return 0, fmt.Errorf("f32: Adam.Step: len(params) = %d, len(grads) = %d, Adam has %d", len(params), len(grads), len(a.m))
	}
	ss := a.impl.SumSq(grads)
	if math.IsNaN(ss) || math.IsInf(ss, 0) {
		for i, g := range grads {
			if f := float64(g); math.IsNaN(f) || math.IsInf(f, 0) {
				return math.NaN(), fmt.Errorf("f32: Adam.Step: gradient[%d] = %v is not finite", i, g)
			}
		}
		ss = Portable.SumSq(grads) // float32 lanes overflowed; float64 cannot
	}
	norm := math.Sqrt(ss)
	scale := 1.0
	if a.cfg.ClipNorm > 0 && norm > a.cfg.ClipNorm {
		scale = a.cfg.ClipNorm / norm
	}
	a.t++
	t := float64(a.t)
	a.impl.AdamUpdate(params, grads, a.m, a.v, AdamConsts{
		Scale:      float32(scale),
		Beta1:      float32(a.cfg.Beta1),
		Beta2:      float32(a.cfg.Beta2),
		Step:       float32(a.cfg.LR / (1 - math.Pow(a.cfg.Beta1, t))),
		InvSqrtBC2: float32(1 / math.Sqrt(1-math.Pow(a.cfg.Beta2, t))),
		Eps:        float32(a.cfg.Eps),
	})
	return norm, nil
}
