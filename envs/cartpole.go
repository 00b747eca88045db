package envs

import "math"

// CartPole-v1 constants, as in Gymnasium 1.0's classic_control/cartpole.py
// (Barto, Sutton and Anderson 1983; the equations of Florian 2007).
const (
	cartPoleGravity    = 9.8
	cartPoleMassCart   = 1.0
	cartPoleMassPole   = 0.1
	cartPoleLength     = 0.5 // half the pole's length
	cartPoleForceMag   = 10.0
	cartPoleTau        = 0.02 // seconds per step
	cartPoleXThreshold = 2.4
	cartPoleLimit      = 500 // max_episode_steps of CartPole-v1
)

// Derived constants, computed in float64 operations in Gymnasium's order
// (Go would fold constant expressions exactly and could round differently).
var (
	cartPoleTotalMass      = f64(cartPoleMassPole) + cartPoleMassCart
	cartPolePoleMassLength = f64(cartPoleMassPole) * cartPoleLength
	// 12 degrees in radians, as 12 * 2 * pi / 360.
	cartPoleThetaThreshold = 12 * 2 * f64(math.Pi) / 360
)

// CartPole is Gymnasium's CartPole-v1: a pole on a cart that moves along a
// frictionless track.
//
//   - Observation: [x, x_dot, theta, theta_dot], in
//     Box[-4.8..4.8, -f32max..f32max, -0.419..0.419, -f32max..f32max]
//     (twice the failure thresholds; f32max is float32's largest value;
//     bounds rounded to float32, as Gymnasium declares them).
//   - Actions: Discrete(2): 0 pushes the cart left (force -10), 1 right.
//   - Dynamics: explicit Euler with tau = 0.02 s, gravity 9.8, cart mass 1,
//     pole mass 0.1, half-length 0.5.
//   - Reward: +1 for every step, the terminating one included.
//   - Terminated when |x| > 2.4 or |theta| > 12°; truncated after 500 steps.
//   - Reset: every state variable uniform in [-0.05, 0.05), drawn in order
//     x, x_dot, theta, theta_dot.
//
// Constants and equations follow Gymnasium 1.0's classic_control source.
// Not safe for concurrent use.
type CartPole struct {
	episode
	s [4]float64
}

var _ Env = (*CartPole)(nil)

// NewCartPole returns CartPole-v1. It accepts WithMaxSteps.
func NewCartPole(opts ...Option) (*CartPole, error) {
	o, err := parseOptions("CartPole-v1", 0, opts)
	if err != nil {
		return nil, err
	}
	e := &CartPole{}
	e.init("CartPole-v1", o.limit(cartPoleLimit))
	return e, nil
}

// ObservationSpace implements Env. O(1); allocates a copy.
func (e *CartPole) ObservationSpace() Box {
	const f32max = math.MaxFloat32
	return float32Box(symmetricBox(cartPoleXThreshold*2, f32max, cartPoleThetaThreshold*2, f32max))
}

// ActionSpace implements Env: Discrete(2).
func (e *CartPole) ActionSpace() Space { return Discrete{N: 2} }

// Reset implements Env. O(1).
func (e *CartPole) Reset(seed uint64) []float64 {
	e.begin(seed)
	for i := range e.s {
		e.s[i] = e.uniform(-0.05, 0.05)
	}
	return append([]float64(nil), e.s[:]...)
}

// Step implements Env. O(1).
func (e *CartPole) Step(a Action) (StepResult, error) {
	if err := e.check(); err != nil {
		return StepResult{}, err
	}
	act, err := e.discreteAction(a, 2)
	if err != nil {
		return StepResult{}, err
	}
	x, xDot, theta, thetaDot := e.s[0], e.s[1], e.s[2], e.s[3]
	force := -cartPoleForceMag
	if act == 1 {
		force = cartPoleForceMag
	}
	cos, sin := math.Cos(theta), math.Sin(theta)
	temp := (force + cartPolePoleMassLength*(thetaDot*thetaDot)*sin) / cartPoleTotalMass
	thetaAcc := (cartPoleGravity*sin - cos*temp) /
		(cartPoleLength * (4.0/3.0 - cartPoleMassPole*(cos*cos)/cartPoleTotalMass))
	xAcc := temp - cartPolePoleMassLength*thetaAcc*cos/cartPoleTotalMass

	x += cartPoleTau * xDot
	xDot += cartPoleTau * xAcc
	theta += cartPoleTau * thetaDot
	thetaDot += cartPoleTau * thetaAcc
	e.s = [4]float64{x, xDot, theta, thetaDot}

	terminated := x < -cartPoleXThreshold || x > cartPoleXThreshold ||
		theta < -cartPoleThetaThreshold || theta > cartPoleThetaThreshold
	return e.end(append([]float64(nil), e.s[:]...), 1, terminated), nil
}
