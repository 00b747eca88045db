package envs

import (
	"fmt"
	"math"
)

// lqrLimit is LQR-v0's time limit.
const lqrLimit = 200

// LQRParams configures LQR-v0 (WithLQR). DefaultLQRParams gives the
// registered values; Validate states the ranges.
type LQRParams struct {
	// A and B are the dynamics x' = A·x + B·u. Finite. Default 1 and 1
	// (a marginally stable integrator, the classic example).
	A, B float64
	// Q and R weigh the cost Q·x² + R·u². Finite and > 0. Default 1 and 1.
	Q, R float64
	// UMax bounds the action: u in [-UMax, UMax], clipped. Finite and > 0.
	// Default 2.
	UMax float64
	// XMax bounds the state: x' is clipped to [-XMax, XMax] (a wall), and
	// the observation space is Box[-XMax, XMax]. Finite and > 0. Default 3.
	XMax float64
	// X0: Reset draws x_0 uniformly in [-X0, X0). In [0, XMax]. Default 2.
	X0 float64
	// NoiseStd is σ_w, the standard deviation of the Gaussian process noise
	// added to x'. Finite and >= 0. Default 0 (deterministic dynamics).
	NoiseStd float64
}

// DefaultLQRParams returns LQR-v0's defaults: A = B = Q = R = 1, UMax = 2,
// XMax = 3, X0 = 2, NoiseStd = 0. See LQR for why.
func DefaultLQRParams() LQRParams {
	return LQRParams{A: 1, B: 1, Q: 1, R: 1, UMax: 2, XMax: 3, X0: 2}
}

// Validate reports the first parameter out of range, as an error wrapping
// ErrBadOption.
func (p LQRParams) Validate() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	var msg string
	switch {
	case !finite(p.A) || !finite(p.B):
		msg = fmt.Sprintf("A = %v, B = %v: the dynamics must be finite", p.A, p.B)
	case !finite(p.Q) || !finite(p.R) || !(p.Q > 0) || !(p.R > 0):
		msg = fmt.Sprintf("Q = %v, R = %v: the cost weights must be finite and > 0", p.Q, p.R)
	case !finite(p.UMax) || !(p.UMax > 0):
		msg = fmt.Sprintf("UMax = %v: the action bound must be finite and > 0", p.UMax)
	case !finite(p.XMax) || !(p.XMax > 0):
		msg = fmt.Sprintf("XMax = %v: the state bound must be finite and > 0", p.XMax)
	case !(p.X0 >= 0 && p.X0 <= p.XMax):
		msg = fmt.Sprintf("X0 = %v: the initial range must lie in [0, XMax = %v]", p.X0, p.XMax)
	case !finite(p.NoiseStd) || !(p.NoiseStd >= 0):
		msg = fmt.Sprintf("NoiseStd = %v: the noise must be finite and >= 0", p.NoiseStd)
	default:
		return nil
	}
	return fmt.Errorf("%w: LQR-v0: %s", ErrBadOption, msg)
}

// Gain is LQRGain(p.A, p.B, p.Q, p.R, gamma): the optimal gain K and value
// coefficient P of the unconstrained, noise-free problem with discount
// gamma.
func (p LQRParams) Gain(gamma float64) (K, P float64, err error) {
	return LQRGain(p.A, p.B, p.Q, p.R, gamma)
}

// LQR is "LQR-v0", a one-dimensional discounted linear-quadratic regulator:
// drive x to 0 with a bounded linear control. Its optimal policy is known
// in closed form (LQRGain), so a learner's policy can be checked against
// it: the optimal policy mean is the line u = -K*·x.
//
//   - State and observation: [x], in Box[-XMax, XMax] (Box[-3, 3]).
//   - Actions: Box[-UMax, UMax] (Box[-2, 2]; one value, u). A finite u
//     outside is clipped, and the cost uses the clipped u (as Pendulum-v1
//     does); NaN, ±Inf and vectors of another length are rejected
//     (ErrInvalidAction).
//   - Dynamics: x_{t+1} = clip(A·x_t + B·u_t + NoiseStd·ξ_t, -XMax, XMax),
//     ξ_t standard normal from the episode's generator (one NormFloat64
//     per step, drawn only when NoiseStd > 0).
//   - Reward: r_t = -(Q·x_t² + R·u_t²), on the state before the step and
//     the step's clipped action.
//   - Never terminates (leaving the region is impossible: the state is
//     clipped); truncated after 200 steps.
//   - Reset: x_0 uniform in [-X0, X0) (one Float64 draw).
//
// # The optimal policy
//
// Without noise, the return G = Σ_{t>=0} γ^t·r_t (the reward of step t,
// which pays for x_t and u_t, discounted by γ^t) is maximised by
// u_t = -K·x_t and is then G = -P·x_0², where (K, P) =
// LQRGain(A, B, Q, R, γ): Gain(γ) on Params. This holds for the clipped
// environment, exactly, for every x_0 with |x_0| <= min(XMax, UMax/|K|)
// provided |A| <= 1 and |A - B·K| <= 1: the linear policy then needs no
// clipping and shrinks |x|, so it achieves the unconstrained optimum
// -P·x_0², which the bounds cannot beat (with |A| <= 1 the wall only
// clips moves that a smaller action in range would reach as cheaply). A
// 200-step episode scales G by 1 - (γ·(A - B·K)²)^200, 1 to double
// precision for the defaults (about 1 - 1e-167), and an agent bootstraps
// at the truncation anyway. With NoiseStd = σ_w > 0 the gain is the same
// (certainty equivalence) and the value is -P·x² - γ·σ_w²·P/(1 - γ)
// before the wall and the action clip are considered.
//
// # Defaults
//
// A = B = Q = R = 1, UMax = 2, XMax = 3, X0 = 2, NoiseStd = 0. For the
// discount γ = 0.99, K* = 0.615251 and P = 1.615251 (for γ = 1, K* =
// 0.618034 = φ - 1 and P = φ, the golden ratio). K*·XMax = 1.85 < UMax:
// the action bound never binds for the optimal policy anywhere in the
// observation box, so the optimum is the line -K*·x on all of it (for
// every γ in [0.9, 1]); the closed-loop factor A - B·K* = 0.385 brings
// x to 1% of x_0 in 5 steps. Rewards lie in [-13, 0] (Pendulum-v1's in
// [-16.3, 0]); the optimal return is -P·x_0², -2.15 on average over x_0
// (discounted or not), and a uniformly random policy scores about -1080
// per episode (the state drifts to the walls). States and actions are
// O(1), as 2×64 networks like them. Near the optimum, a learner exploring
// with Gaussian action noise of std σ holds x at a standard deviation of
// about 1.08·σ after the first few steps of an episode: the states it
// learns from are the decays from x_0 in [-2, 2) and that cloud;
// NoiseStd widens the cloud. Any bias u(0) ≠ 0 of the learned policy
// leaves x at u(0)/K (A = 1 is an integrator), which costs return on
// every step but leaves the slope alone.
//
// Not safe for concurrent use.
type LQR struct {
	episode
	p LQRParams
	x float64
}

var _ Env = (*LQR)(nil)

// NewLQR returns LQR-v0. It accepts WithMaxSteps and WithLQR (default
// DefaultLQRParams); parameters out of range are an error wrapping
// ErrBadOption.
func NewLQR(opts ...Option) (*LQR, error) {
	o, err := parseOptions("LQR-v0", optLQR, opts)
	if err != nil {
		return nil, err
	}
	p := DefaultLQRParams()
	if o.set&optLQR != 0 {
		p = o.lqr
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	e := &LQR{p: p}
	e.init("LQR-v0", o.limit(lqrLimit))
	return e, nil
}

// Params returns the environment's parameters, for computing its optimal
// gain (Params().Gain(gamma)). O(1).
func (e *LQR) Params() LQRParams { return e.p }

// ObservationSpace implements Env: Box[-XMax, XMax]. O(1); allocates a
// copy.
func (e *LQR) ObservationSpace() Box { return symmetricBox(e.p.XMax) }

// ActionSpace implements Env: Box[-UMax, UMax]. O(1); allocates a copy.
func (e *LQR) ActionSpace() Space { return symmetricBox(e.p.UMax) }

// Reset implements Env. O(1).
func (e *LQR) Reset(seed uint64) []float64 {
	e.begin(seed)
	e.x = e.uniform(-e.p.X0, e.p.X0)
	return []float64{e.x}
}

// Step implements Env. O(1).
func (e *LQR) Step(a Action) (StepResult, error) {
	if err := e.check(); err != nil {
		return StepResult{}, err
	}
	u, err := e.scalarAction(a, symmetricBox(e.p.UMax))
	if err != nil {
		return StepResult{}, err
	}
	u = min(max(u, -e.p.UMax), e.p.UMax)
	x := e.x
	reward := -(e.p.Q*(x*x) + e.p.R*(u*u))
	next := e.p.A*x + e.p.B*u
	if e.p.NoiseStd > 0 {
		next += e.p.NoiseStd * e.rng.NormFloat64()
	}
	e.x = min(max(next, -e.p.XMax), e.p.XMax)
	return e.end([]float64{e.x}, reward, false), nil
}

// LQRGain solves the discounted scalar Riccati equation of the problem
// "maximise Σ_{t>=0} γ^t·r_t with r_t = -(q·x_t² + r·u_t²) and
// x_{t+1} = a·x_t + b·u_t" (no bounds, no noise):
//
//	P = q + γ·a²·P - (γ·a·b·P)² / (r + γ·b²·P)
//	K = γ·a·b·P / (r + γ·b²·P)
//
// The optimal policy is u = -K·x and its value is -P·x². Clearing the
// fraction gives γb²·P² + (r(1 - γa²) - γqb²)·P - qr = 0, whose roots
// have the product -qr/(γb²) < 0; P is the positive one, computed in
// closed form without cancellation (agreeing with value iteration from
// P = 0 to 1e-13). The optimal closed loop satisfies γ·(a - b·K)² < 1
// (|a - b·K| < 1 when γ = 1). With b = 0 the control is useless: K = 0
// and P = q/(1 - γa²), which needs γa² < 1.
//
// It needs finite arguments, q > 0, r > 0 and 0 < γ <= 1; otherwise (and
// for b = 0 with γa² >= 1, an infinite cost) it returns an error wrapping
// ErrBadOption. O(1).
func LQRGain(a, b, q, r, gamma float64) (K, P float64, err error) {
	for _, v := range []float64{a, b, q, r, gamma} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, 0, fmt.Errorf("%w: LQRGain(%v, %v, %v, %v, %v): arguments must be finite", ErrBadOption, a, b, q, r, gamma)
		}
	}
	if !(q > 0) || !(r > 0) || !(gamma > 0 && gamma <= 1) {
		return 0, 0, fmt.Errorf("%w: LQRGain(%v, %v, %v, %v, %v): needs q > 0, r > 0 and 0 < gamma <= 1", ErrBadOption, a, b, q, r, gamma)
	}
	if b == 0 {
		d := 1 - gamma*a*a
		if !(d > 0) {
			return 0, 0, fmt.Errorf("%w: LQRGain(%v, %v, %v, %v, %v): b = 0 and gamma·a² >= 1: the cost is infinite", ErrBadOption, a, b, q, r, gamma)
		}
		return 0, q / d, nil
	}
	// c2·P² + c1·P - q·r = 0 with c2 = γb² > 0. The square root of the
	// discriminant c1² + 4·c2·q·r is a hypotenuse (no overflow); the root
	// is taken in the form that adds terms of one sign.
	c2 := gamma * b * b
	c1 := r*(1-gamma*a*a) - gamma*q*b*b
	s := math.Hypot(c1, 2*math.Sqrt(c2*q*r))
	if c1 >= 0 {
		P = 2 * q * r / (c1 + s)
	} else {
		P = (s - c1) / (2 * c2)
	}
	K = gamma * a * b * P / (r + c2*P)
	return K, P, nil
}
