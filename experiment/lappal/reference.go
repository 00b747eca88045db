package lappal

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/apexrl/apex/experiment/control"
)

// Influence is a per-sample gradient ψ(δ) = dρ/dδ of a convex regression
// loss ρ, with what the reference solvers need: ψ is odd and nondecreasing,
// Dpsi is ψ' >= 0 (Newton's curvature) and Phi is the convex potential
// ∫_0^δ ψ (the objective the line search decreases). A fixed point of SGD
// under ψ over a data set is a root of Σ_i ψ(x_iᵀw − y_i)·x_i, the
// minimiser of Σ_i Phi(x_iᵀw − y_i).
type Influence struct {
	Name string
	Psi  func(d float64) float64
	Dpsi func(d float64) float64
	Phi  func(d float64) float64
}

// OLSInfluence is ψ(δ) = δ: the minimiser of Σ δ², ordinary least squares
// (uniform sampling with MSE).
func OLSInfluence() Influence {
	return Influence{
		Name: "OLS",
		Psi:  func(d float64) float64 { return d },
		Dpsi: func(float64) float64 { return 1 },
		Phi:  func(d float64) float64 { return d * d / 2 },
	}
}

// PERInfluence is the expected gradient of PER with MSE, priorities
// (|δ|+eps)^alpha and importance weights (N·P(i))^-beta normalised by a
// constant (the buffer maximum): P(i)·w_i ∝ p_i^(1-beta), so ψ(δ) =
// (|δ|+eps)^c·δ with c = alpha·(1-beta). With eps = 0 it is Eq. 7's
// |δ|^(1+c) sign δ, the gradient of |δ|^(2+c)/(2+c): for alpha 0.6 and
// beta 0.4, the minimiser of Σ|δ|^2.36.
func PERInfluence(alpha, beta, eps float64) Influence {
	c := alpha * (1 - beta)
	// Φ(δ) = ∫_0^|δ| (t+eps)^c t dt = F(|δ|+eps) − F(eps) with
	// F(u) = u^(c+2)/(c+2) − eps·u^(c+1)/(c+1).
	f := func(u float64) float64 { return math.Pow(u, c+2)/(c+2) - eps*math.Pow(u, c+1)/(c+1) }
	return Influence{
		Name: fmt.Sprintf("argmin Σ|δ|^%.4g", 2+c),
		Psi: func(d float64) float64 {
			return math.Pow(math.Abs(d)+eps, c) * d
		},
		Dpsi: func(d float64) float64 {
			a := math.Abs(d)
			u := a + eps
			if u == 0 { // ψ(δ) = |δ|^c·δ at δ = 0
				if c == 0 {
					return 1
				}
				return 0
			}
			return math.Pow(u, c) * (1 + c*a/u)
		},
		Phi: func(d float64) float64 { return f(math.Abs(d)+eps) - f(eps) },
	}
}

// PALInfluence is PAL's gradient (Fujimoto et al. 2020, Eq. 10),
// ψ(δ) = max(|δ|, k)^alpha·clip(δ, −k, k): the expected gradient of LAP
// (priorities max(|δ|, k)^alpha, Huber(k)) up to the positive factor λ, and
// of uniform sampling with the PAL loss. Phi is the continuous potential of
// ψ (PAL's loss as printed jumps at |δ| = k unless alpha = 1; its gradient,
// and so its minimiser, is this one's).
func PALInfluence(alpha, k float64) Influence {
	ka := math.Pow(k, alpha)
	return Influence{
		Name: fmt.Sprintf("argmin Σ PAL(k=%g, α=%g)", k, alpha),
		Psi: func(d float64) float64 {
			a := math.Abs(d)
			if a <= k {
				return ka * d
			}
			return math.Copysign(k*math.Pow(a, alpha), d)
		},
		Dpsi: func(d float64) float64 {
			a := math.Abs(d)
			if a <= k {
				return ka
			}
			return alpha * k * math.Pow(a, alpha-1)
		},
		Phi: func(d float64) float64 {
			a := math.Abs(d)
			if a <= k {
				return ka * d * d / 2
			}
			return ka*k*k/2 + k*(math.Pow(a, 1+alpha)-math.Pow(k, 1+alpha))/(1+alpha)
		},
	}
}

// ErrNoConvergence is returned by the reference solvers when they stop
// before their convergence test holds.
var ErrNoConvergence = errors.New("lappal: reference solver did not converge")

// Design is a regression data set: N rows of D features, row-major in X,
// and N targets Y.
type Design struct {
	X []float64
	Y []float64
	D int
}

// N is the number of rows.
func (s Design) N() int { return len(s.Y) }

func (s Design) row(i int) []float64 { return s.X[i*s.D : (i+1)*s.D] }

// residual is x_iᵀw − y_i (the paper's δ = Q − y).
func (s Design) residual(i int, w []float64) float64 {
	var p float64
	for j, x := range s.row(i) {
		p += x * w[j]
	}
	return p - s.Y[i]
}

func (s Design) objective(w []float64, phi func(float64) float64) float64 {
	var f float64
	for i := range s.Y {
		f += phi(s.residual(i, w))
	}
	return f
}

// Gradient is Σ_i ψ(x_iᵀw − y_i)·x_i, the full-data expected gradient (up
// to a factor N) at w; it is zero at the fixed point.
func (s Design) Gradient(w []float64, psi func(float64) float64) []float64 {
	g := make([]float64, s.D)
	for i := range s.Y {
		r := psi(s.residual(i, w))
		for j, x := range s.row(i) {
			g[j] += r * x
		}
	}
	return g
}

// SolveNewton returns the root of Σ_i ψ(x_iᵀw − y_i)·x_i = 0 for a convex
// influence: damped Newton (Hessian Σ ψ'(δ_i) x_i x_iᵀ plus a 1e-12
// relative ridge; the IRLS matrix where that is singular) from the OLS
// solution, at most 500 iterations, halving each step until Σ Φ
// decreases by an Armijo fraction, until a step moves w by less than 1e-13
// relative (or no step decreases Σ Φ: w is the minimiser to rounding).
// Cost O(N·D² + D³) per iteration; 3 to 5 iterations on the experiment.
func SolveNewton(s Design, inf Influence) ([]float64, error) {
	w0, err := SolveOLS(s)
	if err != nil {
		return nil, err
	}
	return SolveNewtonFrom(s, inf, w0, 500)
}

// SolveOLS returns the least-squares solution from the normal equations
// XᵀX w = Xᵀy. O(N·D² + D³).
func SolveOLS(s Design) ([]float64, error) {
	d := s.D
	a := make([]float64, d*d)
	b := make([]float64, d)
	for i := range s.Y {
		x := s.row(i)
		for p := range d {
			b[p] += x[p] * s.Y[i]
			for q := range d {
				a[p*d+q] += x[p] * x[q]
			}
		}
	}
	w, err := solve(a, b, d)
	if err != nil {
		return nil, fmt.Errorf("lappal: OLS: %w", err)
	}
	return w, nil
}

// SolveNewtonFrom is SolveNewton from w0 with at most maxIter iterations.
func SolveNewtonFrom(s Design, inf Influence, w0 []float64, maxIter int) ([]float64, error) {
	d := s.D
	w := slices.Clone(w0)
	h := make([]float64, d*d)
	trial := make([]float64, d)
	for it := 0; it < maxIter; it++ {
		clear(h)
		g := make([]float64, d)
		for i := range s.Y {
			r := s.residual(i, w)
			p, dp := inf.Psi(r), inf.Dpsi(r)
			x := s.row(i)
			for a := range d {
				g[a] += p * x[a]
				for b := range d {
					h[a*d+b] += dp * x[a] * x[b]
				}
			}
		}
		if !slices.ContainsFunc(g, func(v float64) bool { return v != 0 }) {
			return w, nil // an exact root (every residual 0 when N <= D)
		}
		var tr float64
		for a := range d {
			tr += h[a*d+a]
		}
		for a := range d {
			h[a*d+a] += 1e-12 * tr
		}
		step, err := solve(h, g, d)
		if err != nil {
			// No curvature along some direction (e.g. alpha = 0 and no
			// |δ| within k): take the IRLS step instead, with the matrix
			// Σ (ψ(δ_i)/δ_i)·x_i x_iᵀ, positive definite when every
			// ψ(δ)/δ > 0, so the step is still a descent direction.
			if step, err = solve(s.irlsMatrix(w, inf.Psi, inf.Dpsi), g, d); err != nil {
				return nil, fmt.Errorf("lappal: %s: %w", inf.Name, err)
			}
		}
		f0 := s.objective(w, inf.Phi)
		var slope float64 // gᵀstep >= 0 (step is a descent direction of Σ Φ)
		for a := range d {
			slope += g[a] * step[a]
		}
		t := 1.0
		for ; t > 1e-12; t /= 2 {
			for a := range d {
				trial[a] = w[a] - t*step[a]
			}
			if f := s.objective(trial, inf.Phi); f <= f0-1e-4*t*slope {
				break
			}
		}
		if t <= 1e-12 { // no decrease possible: w is the minimiser to rounding
			return w, nil
		}
		copy(w, trial)
		if t*norm(step) <= 1e-13*(1+norm(w)) {
			return w, nil
		}
	}
	return nil, fmt.Errorf("%w: %s after %d Newton iterations", ErrNoConvergence, inf.Name, maxIter)
}

// irlsMatrix is Σ_i c_i·x_i x_iᵀ with c_i = ψ(δ_i)/δ_i (ψ'(0) at δ_i = 0).
func (s Design) irlsMatrix(w []float64, psi, dpsi func(float64) float64) []float64 {
	d := s.D
	h := make([]float64, d*d)
	for i := range s.Y {
		r := s.residual(i, w)
		c := dpsi(0)
		if r != 0 {
			c = psi(r) / r
		}
		x := s.row(i)
		for a := range d {
			for b := range d {
				h[a*d+b] += c * x[a] * x[b]
			}
		}
	}
	return h
}

// SolveLAD returns the least-absolute-deviations solution, argmin
// Σ_i |x_iᵀw − y_i| (the fixed point of SGD with the L1 loss, Σ sign(δ_i)
// x_i = 0: the median for an intercept-only model). IRLS with weights
// 1/max(|δ_i|, ε) from OLS, ε shrinking to 1e-12 of the median |δ|, then a
// polish: the LAD optimum interpolates D rows, so w is replaced by the
// exact fit of the D rows with the smallest |δ| when that does not raise
// the objective. Cost O(N·D²) per iteration, at most 2000 iterations.
func SolveLAD(s Design) ([]float64, error) {
	d := s.D
	w, err := SolveOLS(s)
	if err != nil {
		return nil, err
	}
	abs := math.Abs
	res := make([]float64, s.N())
	for i := range res {
		res[i] = abs(s.residual(i, w))
	}
	base := control.Median(res)
	if base == 0 {
		base = control.Mean(res)
	}
	if base == 0 {
		return w, nil // an exact fit (N <= D, or collinear data)
	}
	eps, floor := base*1e-3, base*1e-12
	h := make([]float64, d*d)
	rhs := make([]float64, d)
	f := s.objective(w, abs)
	for it := 0; it < 2000; it++ {
		clear(h)
		clear(rhs)
		for i := range s.Y {
			c := 1 / math.Max(abs(s.residual(i, w)), eps)
			x := s.row(i)
			for a := range d {
				rhs[a] += c * x[a] * s.Y[i]
				for b := range d {
					h[a*d+b] += c * x[a] * x[b]
				}
			}
		}
		nw, err := solve(h, rhs, d)
		if err != nil {
			return nil, fmt.Errorf("lappal: LAD: %w", err)
		}
		nf := s.objective(nw, abs)
		moved := 0.0
		for a := range d {
			moved = math.Max(moved, abs(nw[a]-w[a]))
		}
		if nf <= f {
			w, f = nw, nf
		}
		if moved <= 1e-14*(1+norm(w)) {
			if eps <= floor {
				break
			}
			eps = math.Max(eps/10, floor)
		}
	}
	// Polish: the exact interpolant of the D rows nearest the fit.
	idx := make([]int, s.N())
	for i := range idx {
		idx[i] = i
		res[i] = abs(s.residual(i, w))
	}
	slices.SortFunc(idx, func(a, b int) int { return cmpFloat(res[a], res[b]) })
	a := make([]float64, d*d)
	b := make([]float64, d)
	for r := range d {
		copy(a[r*d:(r+1)*d], s.row(idx[r]))
		b[r] = s.Y[idx[r]]
	}
	if v, err := solve(a, b, d); err == nil && s.objective(v, abs) <= f {
		w = v
	}
	return w, nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func norm(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

// solve returns the solution of the d×d system a·x = b (a row-major) by
// Gaussian elimination with partial pivoting; a and b are not modified.
func solve(a, b []float64, d int) ([]float64, error) {
	m := slices.Clone(a)
	x := slices.Clone(b)
	var scale float64
	for _, v := range m {
		scale = math.Max(scale, math.Abs(v))
	}
	for c := range d {
		p := c
		for r := c + 1; r < d; r++ {
			if math.Abs(m[r*d+c]) > math.Abs(m[p*d+c]) {
				p = r
			}
		}
		if !(math.Abs(m[p*d+c]) > 1e-14*scale) {
			return nil, errors.New("singular system")
		}
		if p != c {
			for k := range d {
				m[c*d+k], m[p*d+k] = m[p*d+k], m[c*d+k]
			}
			x[c], x[p] = x[p], x[c]
		}
		for r := c + 1; r < d; r++ {
			f := m[r*d+c] / m[c*d+c]
			for k := c; k < d; k++ {
				m[r*d+k] -= f * m[c*d+k]
			}
			x[r] -= f * x[c]
		}
	}
	for c := d - 1; c >= 0; c-- {
		for k := c + 1; k < d; k++ {
			x[c] -= m[c*d+k] * x[k]
		}
		x[c] /= m[c*d+c]
	}
	return x, nil
}
