package envs

import "math"

// MountainCar-v0 and MountainCarContinuous-v0 constants, as in Gymnasium
// 1.0's classic_control/mountain_car.py and continuous_mountain_car.py
// (Moore 1990).
const (
	mcMinPosition = -1.2
	mcMaxPosition = 0.6
	mcMaxSpeed    = 0.07
	mcForce       = 0.001  // MountainCar-v0: (action-1) * force
	mcGravity     = 0.0025 // both: -gravity * cos(3 * position)
	mcGoal        = 0.5    // MountainCar-v0
	mcLimit       = 200    // max_episode_steps of MountainCar-v0

	mccPower   = 0.0015 // MountainCarContinuous-v0: force * power
	mccGoal    = 0.45   // MountainCarContinuous-v0
	mccLimit   = 999    // max_episode_steps of MountainCarContinuous-v0
	mccGoalRew = 100.0
)

// mcObservationSpace is [position, velocity] in
// Box[-1.2..0.6, -0.07..0.07], bounds rounded to float32 as Gymnasium
// declares them (MountainCarContinuous's float32 state needs it: its
// position can be float32(-1.2) < -1.2).
func mcObservationSpace() Box {
	return float32Box(Box{Low: []float64{mcMinPosition, -mcMaxSpeed}, High: []float64{mcMaxPosition, mcMaxSpeed}})
}

// MountainCar is Gymnasium's MountainCar-v0: an under-powered car in a
// valley must build momentum to reach the flag on the right hill.
//
//   - Observation: [position, velocity] in Box[-1.2..0.6, -0.07..0.07]
//     (bounds rounded to float32, as Gymnasium declares them).
//   - Actions: Discrete(3): accelerate left (0), none (1), right (2).
//   - Dynamics: velocity += (action-1)·0.001 - 0.0025·cos(3·position),
//     clipped to ±0.07; position += velocity, clipped to [-1.2, 0.6]; at
//     the left wall a negative velocity becomes 0.
//   - Reward: -1 per step.
//   - Terminated when position >= 0.5 (and velocity >= 0, the default goal
//     velocity); truncated after 200 steps.
//   - Reset: position uniform in [-0.6, -0.4), velocity 0.
//
// Constants and equations follow Gymnasium 1.0's classic_control source.
// Not safe for concurrent use.
type MountainCar struct {
	episode
	pos, vel float64
}

var _ Env = (*MountainCar)(nil)

// NewMountainCar returns MountainCar-v0. It accepts WithMaxSteps.
func NewMountainCar(opts ...Option) (*MountainCar, error) {
	o, err := parseOptions("MountainCar-v0", 0, opts)
	if err != nil {
		return nil, err
	}
	e := &MountainCar{}
	e.init("MountainCar-v0", o.limit(mcLimit))
	return e, nil
}

// ObservationSpace implements Env. O(1); allocates a copy.
func (e *MountainCar) ObservationSpace() Box { return mcObservationSpace() }

// ActionSpace implements Env: Discrete(3).
func (e *MountainCar) ActionSpace() Space { return Discrete{N: 3} }

// Reset implements Env. O(1).
func (e *MountainCar) Reset(seed uint64) []float64 {
	e.begin(seed)
	e.pos, e.vel = e.uniform(-0.6, -0.4), 0
	return []float64{e.pos, e.vel}
}

// Step implements Env. O(1).
func (e *MountainCar) Step(a Action) (StepResult, error) {
	if err := e.check(); err != nil {
		return StepResult{}, err
	}
	act, err := e.discreteAction(a, 3)
	if err != nil {
		return StepResult{}, err
	}
	v := e.vel + (float64(act-1)*mcForce + math.Cos(3*e.pos)*(-mcGravity))
	v = min(max(v, -mcMaxSpeed), mcMaxSpeed)
	p := min(max(e.pos+v, mcMinPosition), mcMaxPosition)
	if p == mcMinPosition && v < 0 {
		v = 0
	}
	e.pos, e.vel = p, v
	terminated := p >= mcGoal && v >= 0
	return e.end([]float64{p, v}, -1, terminated), nil
}

// MountainCarContinuous is Gymnasium's MountainCarContinuous-v0: the
// mountain car with a continuous engine force and an energy penalty.
//
//   - Observation: [position, velocity] in Box[-1.2..0.6, -0.07..0.07]
//     (bounds rounded to float32, as Gymnasium declares them).
//   - Actions: Box[-1, 1] (one value). A finite action outside [-1, 1] is
//     clipped for the dynamics, as Gymnasium clips it; the penalty is
//     charged on the action as given (Gymnasium's behaviour). NaN, ±Inf
//     and vectors of another length are rejected (ErrInvalidAction).
//   - Dynamics: force = clip(a, -1, 1); velocity += 0.0015·force -
//     0.0025·cos(3·position), clipped to ±0.07; position += velocity,
//     clipped to [-1.2, 0.6]; at the left wall a negative velocity becomes
//     0. Gymnasium stores the state as float32 after every step; so does
//     this type (the arithmetic in between is float64, as under numpy 1.x;
//     numpy 2 keeps some intermediates in float32, a difference at float32
//     rounding level).
//   - Reward: -0.1·a² per step, plus 100 on the step that reaches the goal.
//   - Terminated when position >= 0.45 (and velocity >= 0); truncated
//     after 999 steps.
//   - Reset: position uniform in [-0.6, -0.4), velocity 0 (float64, as in
//     Gymnasium, until the first step rounds the state).
//
// Constants and equations follow Gymnasium 1.0's classic_control source.
// Not safe for concurrent use.
type MountainCarContinuous struct {
	episode
	pos, vel float64
}

var _ Env = (*MountainCarContinuous)(nil)

// NewMountainCarContinuous returns MountainCarContinuous-v0. It accepts
// WithMaxSteps.
func NewMountainCarContinuous(opts ...Option) (*MountainCarContinuous, error) {
	o, err := parseOptions("MountainCarContinuous-v0", 0, opts)
	if err != nil {
		return nil, err
	}
	e := &MountainCarContinuous{}
	e.init("MountainCarContinuous-v0", o.limit(mccLimit))
	return e, nil
}

// ObservationSpace implements Env. O(1); allocates a copy.
func (e *MountainCarContinuous) ObservationSpace() Box { return mcObservationSpace() }

// ActionSpace implements Env: Box[-1, 1]. O(1); allocates a copy.
func (e *MountainCarContinuous) ActionSpace() Space { return uniformBox(1, -1, 1) }

// Reset implements Env. O(1).
func (e *MountainCarContinuous) Reset(seed uint64) []float64 {
	e.begin(seed)
	e.pos, e.vel = e.uniform(-0.6, -0.4), 0
	return []float64{e.pos, e.vel}
}

// Step implements Env. O(1).
func (e *MountainCarContinuous) Step(a Action) (StepResult, error) {
	if err := e.check(); err != nil {
		return StepResult{}, err
	}
	u, err := e.scalarAction(a, uniformBox(1, -1, 1))
	if err != nil {
		return StepResult{}, err
	}
	force := min(max(u, -1), 1)
	v := e.vel + (force*mccPower - mcGravity*math.Cos(3*e.pos))
	v = min(max(v, -mcMaxSpeed), mcMaxSpeed)
	p := min(max(e.pos+v, mcMinPosition), mcMaxPosition)
	if p == mcMinPosition && v < 0 {
		v = 0
	}
	terminated := p >= mccGoal && v >= 0
	reward := 0.0
	if terminated {
		reward = mccGoalRew
	}
	reward -= u * u * 0.1
	e.pos, e.vel = float64(float32(p)), float64(float32(v))
	return e.end([]float64{e.pos, e.vel}, reward, terminated), nil
}
