package envs

import "math"

// SparsePendulum-v1's reward rule (NERS's Pendulum*, Oh et al. 2021, App.
// B: "1.0 only if the angle is in [−π/3, π/3] at least more than 20
// steps", read as 20 consecutive steps; per-ners.md §6.11).
const (
	// SparsePendulumWindow is the consecutive in-range steps after which
	// each step pays 1.
	SparsePendulumWindow = 20
	// SparsePendulumAngle bounds |theta| (0 is upright) for a step to count
	// as in range.
	SparsePendulumAngle = math.Pi / 3
)

// SparsePendulum is Pendulum-v1 with NERS's sparse reward (the paper's
// Pendulum*): the dynamics, observation, actions, reset and the 200-step
// time limit are Pendulum-v1's; a step's reward is 1 when the angle after
// it, normalised into [−π, π), has stayed within ±SparsePendulumAngle of
// upright for at least SparsePendulumWindow consecutive steps (this one
// included), and 0 otherwise. A greedy return therefore lies in [0, 181].
// Not safe for concurrent use.
type SparsePendulum struct {
	Pendulum
	run int // consecutive in-range steps, this episode
}

var _ Env = (*SparsePendulum)(nil)

// NewSparsePendulum returns SparsePendulum-v1. It accepts WithMaxSteps.
func NewSparsePendulum(opts ...Option) (*SparsePendulum, error) {
	o, err := parseOptions("SparsePendulum-v1", 0, opts)
	if err != nil {
		return nil, err
	}
	e := &SparsePendulum{}
	e.init("SparsePendulum-v1", o.limit(pendulumLimit))
	return e, nil
}

// Reset implements Env. O(1).
func (e *SparsePendulum) Reset(seed uint64) []float64 {
	e.run = 0
	return e.Pendulum.Reset(seed)
}

// Step implements Env: Pendulum-v1's step with the sparse reward. O(1).
func (e *SparsePendulum) Step(a Action) (StepResult, error) {
	r, err := e.Pendulum.Step(a)
	if err != nil {
		return r, err
	}
	if math.Abs(angleNormalize(e.th)) <= SparsePendulumAngle {
		e.run++
	} else {
		e.run = 0
	}
	r.Reward = 0
	if e.run >= SparsePendulumWindow {
		r.Reward = 1
	}
	return r, nil
}
