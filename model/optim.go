package model

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
)

// Optimizer applies one update to a flat parameter vector from its
// gradient. Adam and SGD implement it.
//
// Step returns the global L2 norm of grads as given (before any clipping),
// for metrics. A NaN or infinite gradient is refused: Step then returns a
// *NonFiniteError (What "gradient", with the index; fill in Where with
// Net.Where) and changes neither params nor its own state, so a bad batch
// never poisons the network. grads may be scaled in place by clipping.
type Optimizer interface {
	Step(params, grads []float64) (gradNorm float64, err error)
}

var (
	_ Optimizer = (*Adam)(nil)
	_ Optimizer = SGD{}
)

// GradNorm returns the global L2 norm sqrt(Σ g_i²) of g, or a
// *NonFiniteError naming the first NaN or infinite entry. A norm that
// overflows although every entry is finite is computed again with scaling
// (gonum's floats.Norm). Cost O(len(g)), no allocation.
func GradNorm(g []float64) (float64, error) {
	ss := blas64.Implementation().Ddot(len(g), g, 1, g, 1)
	if !math.IsNaN(ss) && !math.IsInf(ss, 0) {
		return math.Sqrt(ss), nil
	}
	if err := CheckFinite("gradient", g); err != nil {
		return math.NaN(), err
	}
	return floats.Norm(g, 2), nil
}

// ClipGradNorm scales g in place so its global L2 norm is at most maxNorm
// (Pascanu et al. 2013): when the norm exceeds maxNorm every entry is
// multiplied by maxNorm/norm. maxNorm <= 0 disables clipping. It returns the
// norm before clipping, or a *NonFiniteError (g unchanged); a NaN maxNorm
// is an ErrConfig error. Cost O(len(g)).
func ClipGradNorm(g []float64, maxNorm float64) (float64, error) {
	if math.IsNaN(maxNorm) {
		return math.NaN(), errorf(ErrConfig, "ClipGradNorm: maxNorm = NaN")
	}
	norm, err := GradNorm(g)
	if err != nil {
		return norm, err
	}
	if maxNorm > 0 && norm > maxNorm {
		floats.Scale(maxNorm/norm, g)
	}
	return norm, nil
}

// AdamConfig holds Adam's hyper-parameters. Zero values mean the defaults
// of Kingma & Ba (2015, arXiv:1412.6980, Algorithm 1).
type AdamConfig struct {
	// LR is the step size α (> 0). Default 1e-3.
	LR float64 `json:"lr"`
	// Beta1 is the first-moment decay β₁ in (0, 1). Default 0.9.
	Beta1 float64 `json:"beta1"`
	// Beta2 is the second-moment decay β₂ in (0, 1). Default 0.999.
	Beta2 float64 `json:"beta2"`
	// Eps is ε (> 0), added to sqrt(v̂). Default 1e-8.
	Eps float64 `json:"eps"`
	// ClipNorm, when > 0, clips the gradient's global L2 norm to it before
	// the update (ClipGradNorm). 0 disables clipping.
	ClipNorm float64 `json:"clip_norm"`
	// Float32 runs Step on the float32 SIMD kernels of model/internal/f32
	// (the norm and one fused update pass) with float32 moments: params
	// and grads are rounded to float32 on the way in (2n conversions) and
	// params written back (n), so the parameters stay float32 values held
	// in float64. Clipping is folded into the update and grads is then not
	// scaled in place. Save writes the moments as float64 (the format is
	// unchanged) and LoadAdam restores them exactly. Default false: the
	// float64 update, bit for bit as before the option existed.
	Float32 bool `json:"float32,omitempty"`
}

// Validate returns c with defaults filled in, or an error wrapping
// ErrConfig naming the bad field.
func (c AdamConfig) Validate() (AdamConfig, error) {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.LR, 1e-3)
	def(&c.Beta1, 0.9)
	def(&c.Beta2, 0.999)
	def(&c.Eps, 1e-8)
	fin := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !(c.LR > 0) || !fin(c.LR):
		return c, errorf(ErrConfig, "AdamConfig.LR = %g (must be > 0)", c.LR)
	case !(c.Beta1 > 0 && c.Beta1 < 1):
		return c, errorf(ErrConfig, "AdamConfig.Beta1 = %g (must be in (0, 1))", c.Beta1)
	case !(c.Beta2 > 0 && c.Beta2 < 1):
		return c, errorf(ErrConfig, "AdamConfig.Beta2 = %g (must be in (0, 1))", c.Beta2)
	case !(c.Eps > 0) || !fin(c.Eps):
		return c, errorf(ErrConfig, "AdamConfig.Eps = %g (must be > 0)", c.Eps)
	case !(c.ClipNorm >= 0) || !fin(c.ClipNorm):
		return c, errorf(ErrConfig, "AdamConfig.ClipNorm = %g (must be >= 0; 0 disables clipping)", c.ClipNorm)
	}
	return c, nil
}

// Adam is the Adam optimizer (Kingma & Ba 2015, Algorithm 1) with bias
// correction and optional global-norm gradient clipping. For step t = 1,
// 2, … and each parameter:
//
//	m ← β₁·m + (1−β₁)·g
//	v ← β₂·v + (1−β₂)·g²
//	θ ← θ − α · m̂ / (sqrt(v̂) + ε),  m̂ = m/(1−β₁ᵗ), v̂ = v/(1−β₂ᵗ)
//
// (ε outside the square root, as in the paper and PyTorch). It holds m, v
// and t for one parameter vector of fixed length; Save and LoadAdam
// checkpoint them.
//
// An Adam is not safe for concurrent use.
type Adam struct {
	cfg  AdamConfig
	m, v []float64 // the moments; with Float32 their float64 copy, refreshed by Save
	t    uint64
	f32  *adam32 // Float32's state, nil without it
}

// NewAdam returns an Adam for n parameters with zero moments. Errors wrap
// ErrConfig. Cost: O(n) memory (two vectors; with Float32 four float32
// vectors more).
func NewAdam(n int, cfg AdamConfig) (*Adam, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	if n <= 0 || n > maxParams {
		return nil, errorf(ErrConfig, "NewAdam: %d parameters", n)
	}
	a := &Adam{cfg: cfg, m: make([]float64, n), v: make([]float64, n)}
	if cfg.Float32 {
		a.SetFloat32(true)
	}
	return a, nil
}

// Config returns the configuration with defaults filled in.
func (a *Adam) Config() AdamConfig { return a.cfg }

// Len returns the number of parameters Adam was built for.
func (a *Adam) Len() int { return len(a.m) }

// Steps returns the number of updates applied (t).
func (a *Adam) Steps() uint64 { return a.t }

// SetLR changes the step size (a learning-rate schedule). It panics unless
// lr > 0.
func (a *Adam) SetLR(lr float64) {
	if !(lr > 0) || math.IsInf(lr, 0) {
		panic(fmt.Sprintf("model: Adam.SetLR(%g)", lr))
	}
	a.cfg.LR = lr
}

// Reset zeroes the moments and the step count.
func (a *Adam) Reset() {
	clear(a.m)
	clear(a.v)
	if a.f32 != nil {
		clear(a.f32.m)
		clear(a.f32.v)
	}
	a.t = 0
}

// Step applies one Adam update to params from grads (see Optimizer: the
// returned norm is the one before clipping; a non-finite gradient is
// refused and leaves everything unchanged). With ClipNorm set, grads is
// scaled in place. A slice whose length differs from Len is an ErrShape
// error (nothing changes).
//
// Cost O(n): one pass for the norm, one for the update (a square root and a
// division per parameter); no allocation.
func (a *Adam) Step(params, grads []float64) (float64, error) {
	if len(params) != len(a.m) || len(grads) != len(a.m) {
		return 0, errorf(ErrShape, "Adam.Step: len(params) = %d, len(grads) = %d, Adam has %d", len(params), len(grads), len(a.m))
	}
	if a.f32 != nil {
		return a.step32(params, grads)
	}
	norm, err := ClipGradNorm(grads, a.cfg.ClipNorm)
	if err != nil {
		return norm, err
	}
	a.t++
	b1, b2 := a.cfg.Beta1, a.cfg.Beta2
	t := float64(a.t)
	step := a.cfg.LR / (1 - math.Pow(b1, t))
	invSqrtBC2 := 1 / math.Sqrt(1-math.Pow(b2, t))
	eps := a.cfg.Eps
	m, v := a.m[:len(grads)], a.v[:len(grads)]
	params = params[:len(grads)]
	for i, g := range grads {
		mi := b1*m[i] + (1-b1)*g
		vi := b2*v[i] + (1-b2)*g*g
		m[i], v[i] = mi, vi
		params[i] -= step * mi / (math.Sqrt(vi)*invSqrtBC2 + eps)
	}
	return norm, nil
}

// SGD is plain stochastic gradient descent, θ ← θ − LR·g, with optional
// global-norm clipping. It has no state; a zero LR is refused by Step.
type SGD struct {
	LR       float64 `json:"lr"`
	ClipNorm float64 `json:"clip_norm"`
}

// Step applies θ ← θ − LR·g (see Optimizer). Mismatched lengths
// (ErrShape), an LR that is not finite and > 0 or a ClipNorm that is not
// finite and >= 0 (ErrConfig) are errors and change nothing. Cost O(n), no
// allocation.
func (s SGD) Step(params, grads []float64) (float64, error) {
	if len(params) != len(grads) {
		return 0, errorf(ErrShape, "SGD.Step: len(params) = %d, len(grads) = %d", len(params), len(grads))
	}
	if !(s.LR > 0) || math.IsInf(s.LR, 1) {
		return 0, errorf(ErrConfig, "SGD.LR = %g (must be finite and > 0)", s.LR)
	}
	if !(s.ClipNorm >= 0) || math.IsInf(s.ClipNorm, 1) {
		return 0, errorf(ErrConfig, "SGD.ClipNorm = %g (must be finite and >= 0; 0 disables clipping)", s.ClipNorm)
	}
	norm, err := ClipGradNorm(grads, s.ClipNorm)
	if err != nil {
		return norm, err
	}
	floats.AddScaled(params, -s.LR, grads)
	return norm, nil
}
