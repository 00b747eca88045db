package envs

import "math"

// Pendulum-v1 constants, as in Gymnasium 1.0's classic_control/pendulum.py.
const (
	pendulumMaxSpeed  = 8.0
	pendulumMaxTorque = 2.0
	pendulumDt        = 0.05
	pendulumG         = 10.0
	pendulumM         = 1.0
	pendulumL         = 1.0
	pendulumLimit     = 200 // max_episode_steps of Pendulum-v1
)

// Pendulum is Gymnasium's Pendulum-v1: swing a pendulum up and hold it
// upright with a limited torque.
//
//   - State: [theta, theta_dot]; theta = 0 is upright. theta is not
//     wrapped (only the cost normalises it).
//   - Observation: [cos theta, sin theta, theta_dot] in
//     Box[-1..1, -1..1, -8..8].
//   - Actions: Box[-2, 2] (one value, the torque). A finite torque outside
//     [-2, 2] is clipped, as Gymnasium clips it (the cost uses the clipped
//     torque); NaN, ±Inf and vectors of another length are rejected
//     (ErrInvalidAction).
//   - Dynamics (g = 10, m = 1, l = 1, dt = 0.05):
//     theta_dot' = clip(theta_dot + (3g/(2l)·sin theta + 3/(m·l²)·u)·dt, ±8),
//     theta' = theta + theta_dot'·dt (semi-implicit Euler).
//   - Reward: -(norm(theta)² + 0.1·theta_dot² + 0.001·u²), on the state
//     before the step, where norm maps theta into [-π, π).
//   - Never terminates; truncated after 200 steps.
//   - Reset: theta uniform in [-π, π), then theta_dot uniform in [-1, 1).
//
// Constants and equations follow Gymnasium 1.0's classic_control source.
// Not safe for concurrent use.
type Pendulum struct {
	episode
	th, thdot float64
}

var _ Env = (*Pendulum)(nil)

// NewPendulum returns Pendulum-v1. It accepts WithMaxSteps.
func NewPendulum(opts ...Option) (*Pendulum, error) {
	o, err := parseOptions("Pendulum-v1", 0, opts)
	if err != nil {
		return nil, err
	}
	e := &Pendulum{}
	e.init("Pendulum-v1", o.limit(pendulumLimit))
	return e, nil
}

// ObservationSpace implements Env. O(1); allocates a copy.
func (e *Pendulum) ObservationSpace() Box { return symmetricBox(1, 1, pendulumMaxSpeed) }

// ActionSpace implements Env: Box[-2, 2]. O(1); allocates a copy.
func (e *Pendulum) ActionSpace() Space { return uniformBox(1, -pendulumMaxTorque, pendulumMaxTorque) }

// Reset implements Env. O(1).
func (e *Pendulum) Reset(seed uint64) []float64 {
	e.begin(seed)
	e.th = e.uniform(-math.Pi, math.Pi)
	e.thdot = e.uniform(-1, 1)
	return e.obs()
}

func (e *Pendulum) obs() []float64 {
	return []float64{math.Cos(e.th), math.Sin(e.th), e.thdot}
}

// Step implements Env. O(1).
func (e *Pendulum) Step(a Action) (StepResult, error) {
	if err := e.check(); err != nil {
		return StepResult{}, err
	}
	u, err := e.scalarAction(a, uniformBox(1, -pendulumMaxTorque, pendulumMaxTorque))
	if err != nil {
		return StepResult{}, err
	}
	u = min(max(u, -pendulumMaxTorque), pendulumMaxTorque)
	th, thdot := e.th, e.thdot
	an := angleNormalize(th)
	cost := an*an + 0.1*(thdot*thdot) + 0.001*(u*u)

	g, m, l, dt := f64(pendulumG), f64(pendulumM), f64(pendulumL), f64(pendulumDt)
	newThdot := thdot + (3*g/(2*l)*math.Sin(th)+3.0/(m*(l*l))*u)*dt
	newThdot = min(max(newThdot, -pendulumMaxSpeed), pendulumMaxSpeed)
	e.th = th + newThdot*dt
	e.thdot = newThdot
	return e.end(e.obs(), -cost, false), nil
}

// angleNormalize maps x into [-π, π) as ((x + π) mod 2π) - π with a floored
// modulo (Python's and numpy's %, whose result takes the divisor's sign).
func angleNormalize(x float64) float64 {
	const twoPi = 2 * math.Pi // exact: 2·float64(π) rounds to the same value
	r := math.Mod(x+math.Pi, twoPi)
	if r < 0 {
		r += twoPi
	}
	return r - math.Pi
}
