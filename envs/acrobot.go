package envs

import "math"

// Acrobot-v1 constants, as in Gymnasium 1.0's classic_control/acrobot.py
// (Sutton 1996; Sutton and Barto's book).
const (
	acrobotDt    = 0.2 // seconds per step, one RK4 step
	acrobotLimit = 500 // max_episode_steps of Acrobot-v1
)

var (
	// Velocity bounds, computed as Gymnasium computes them (4*pi, 9*pi in
	// float64 operations).
	acrobotMaxVel1 = 4 * f64(math.Pi)
	acrobotMaxVel2 = 9 * f64(math.Pi)
	// acrobotTorques maps the three actions to the torque on the joint
	// between the links.
	acrobotTorques = [3]float64{-1, 0, 1}
)

// Acrobot is Gymnasium's Acrobot-v1: two links joined by an actuated
// joint, hanging from a fixed pivot; the goal is to swing the tip above a
// line one link length above the pivot.
//
//   - State: [theta1, theta2, dtheta1, dtheta2]; theta1 is measured from
//     straight down, theta2 relative to the first link.
//   - Observation: [cos theta1, sin theta1, cos theta2, sin theta2,
//     dtheta1, dtheta2] in Box[-1..1 (x4), -4π..4π, -9π..9π] (bounds
//     rounded to float32, as Gymnasium declares them).
//   - Actions: Discrete(3): torque -1, 0, +1 (no torque noise).
//   - Dynamics: the "book" equations (Sutton and Barto; Gymnasium's
//     default, not the NIPS paper's), link lengths 1, masses 1, centres of
//     mass 0.5, moments of inertia 1, g = 9.8, one RK4 step of dt = 0.2;
//     then both angles wrapped into [-π, π] and the velocities clipped to
//     ±4π and ±9π.
//   - Reward: -1 per step, 0 on the step that terminates.
//   - Terminated when -cos theta1 - cos(theta2 + theta1) > 1 (the tip is
//     above the line); truncated after 500 steps.
//   - Reset: the four state variables uniform in [-0.1, 0.1), drawn in
//     order and rounded to float32, as Gymnasium casts its initial state.
//
// Constants and equations follow Gymnasium 1.0's classic_control source.
// Not safe for concurrent use.
type Acrobot struct {
	episode
	s [4]float64
}

var _ Env = (*Acrobot)(nil)

// NewAcrobot returns Acrobot-v1. It accepts WithMaxSteps.
func NewAcrobot(opts ...Option) (*Acrobot, error) {
	o, err := parseOptions("Acrobot-v1", 0, opts)
	if err != nil {
		return nil, err
	}
	e := &Acrobot{}
	e.init("Acrobot-v1", o.limit(acrobotLimit))
	return e, nil
}

// ObservationSpace implements Env. O(1); allocates a copy.
func (e *Acrobot) ObservationSpace() Box {
	return float32Box(symmetricBox(1, 1, 1, 1, acrobotMaxVel1, acrobotMaxVel2))
}

// ActionSpace implements Env: Discrete(3).
func (e *Acrobot) ActionSpace() Space { return Discrete{N: 3} }

// Reset implements Env. O(1).
func (e *Acrobot) Reset(seed uint64) []float64 {
	e.begin(seed)
	for i := range e.s {
		e.s[i] = float64(float32(e.uniform(-0.1, 0.1)))
	}
	return e.obs()
}

func (e *Acrobot) obs() []float64 {
	s := &e.s
	return []float64{math.Cos(s[0]), math.Sin(s[0]), math.Cos(s[1]), math.Sin(s[1]), s[2], s[3]}
}

// Step implements Env. O(1): four evaluations of the equations of motion.
func (e *Acrobot) Step(a Action) (StepResult, error) {
	if err := e.check(); err != nil {
		return StepResult{}, err
	}
	act, err := e.discreteAction(a, 3)
	if err != nil {
		return StepResult{}, err
	}
	torque := acrobotTorques[act]

	// One classical RK4 step over [0, dt]; the torque is held constant.
	dt := f64(acrobotDt)
	y0 := e.s
	k1 := acrobotDeriv(y0, torque)
	k2 := acrobotDeriv(axpy(y0, dt/2.0, k1), torque)
	k3 := acrobotDeriv(axpy(y0, dt/2.0, k2), torque)
	k4 := acrobotDeriv(axpy(y0, dt, k3), torque)
	var ns [4]float64
	for i := range ns {
		ns[i] = y0[i] + dt/6.0*(k1[i]+2*k2[i]+2*k3[i]+k4[i])
	}

	ns[0] = wrapAngle(ns[0])
	ns[1] = wrapAngle(ns[1])
	ns[2] = min(max(ns[2], -acrobotMaxVel1), acrobotMaxVel1)
	ns[3] = min(max(ns[3], -acrobotMaxVel2), acrobotMaxVel2)
	e.s = ns

	terminated := -math.Cos(ns[0])-math.Cos(ns[1]+ns[0]) > 1.0
	reward := -1.0
	if terminated {
		reward = 0
	}
	return e.end(e.obs(), reward, terminated), nil
}

// axpy returns y + a·x.
func axpy(y [4]float64, a float64, x [4]float64) [4]float64 {
	for i := range y {
		y[i] += a * x[i]
	}
	return y
}

// wrapAngle maps x into [-π, π] by adding or subtracting 2π, as
// Gymnasium's wrap(x, -pi, pi).
func wrapAngle(x float64) float64 {
	const m, M = -math.Pi, math.Pi
	diff := f64(M) - m
	for x > M {
		x -= diff
	}
	for x < m {
		x += diff
	}
	return x
}

// acrobotDeriv is the time derivative of the state under torque a: the
// "book" equations of motion. The physical parameters are float64
// variables, not constants, so every operation rounds as in Gymnasium's
// Python (Go would fold constant sub-expressions exactly).
func acrobotDeriv(s [4]float64, a float64) [4]float64 {
	m1, m2 := f64(1.0), f64(1.0) // link masses
	l1 := f64(1.0)               // length of link 1
	lc1, lc2 := f64(0.5), f64(0.5)
	i1, i2 := f64(1.0), f64(1.0) // moments of inertia
	g := f64(9.8)
	th1, th2, dth1, dth2 := s[0], s[1], s[2], s[3]

	d1 := m1*(lc1*lc1) + m2*(l1*l1+lc2*lc2+2*l1*lc2*math.Cos(th2)) + i1 + i2
	d2 := m2*(lc2*lc2+l1*lc2*math.Cos(th2)) + i2
	phi2 := m2 * lc2 * g * math.Cos(th1+th2-math.Pi/2.0)
	phi1 := -m2*l1*lc2*(dth2*dth2)*math.Sin(th2) -
		2*m2*l1*lc2*dth2*dth1*math.Sin(th2) +
		(m1*lc1+m2*l1)*g*math.Cos(th1-math.Pi/2) +
		phi2
	ddth2 := (a + d2/d1*phi1 - m2*l1*lc2*(dth1*dth1)*math.Sin(th2) - phi2) /
		(m2*(lc2*lc2) + i2 - (d2*d2)/d1)
	ddth1 := -(d2*ddth2 + phi1) / d1
	return [4]float64{dth1, dth2, ddth1, ddth2}
}
