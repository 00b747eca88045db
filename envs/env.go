package envs

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// Env is one environment instance: a Markov decision process with a time
// limit, driven by Reset and Step.
//
// An Env is not safe for concurrent use: give each actor goroutine its own
// (Make is cheap). Environments are created by Make or a New* constructor
// and used through the pointer it returns; they must not be copied. Every
// method costs O(1) unless its doc says otherwise; Reset and Step allocate
// exactly one observation slice, which the caller owns.
//
// Observations are []float64. The dynamics are integrated in float64, as
// Gymnasium integrates them, so the returned slice is the environment's
// exact state (or a fixed function of it) and the golden tests can compare
// to 1e-9. Gymnasium hands out float32 copies of the same values; an actor
// that converts with float32(x) at the replay boundary (the buffer stores
// float32 observations) gets the same float32 values Gymnasium would give,
// and the network (model/, gonum) consumes float64 directly.
type Env interface {
	// ObservationSpace is the Box every observation lies in.
	ObservationSpace() Box
	// ActionSpace is the space Step's action must lie in: a Discrete or a
	// Box (switch on the type).
	ActionSpace() Space
	// MaxEpisodeSteps is the time limit: the step with this number
	// (1-based) is reported as truncated unless it terminated. 0 means the
	// environment has no time limit (its episodes end by themselves).
	MaxEpisodeSteps() int
	// Reset starts a new episode, abandoning any episode in progress, and
	// returns the first observation. The episode is a deterministic
	// function of seed and of the actions taken: the environment's random
	// draws (its initial state, a random layout) come from its own
	// math/rand/v2 PCG generator, reseeded here with state
	// (seed, splitmix64(seed)) so that nearby seeds give unrelated streams,
	// never from a global generator or the clock.
	Reset(seed uint64) []float64
	// Step applies action and returns the next observation, the reward and
	// how the episode stands. An action outside ActionSpace is rejected with
	// an error wrapping ErrInvalidAction and leaves the state unchanged
	// (except where an environment documents that it clips a continuous
	// action, as Gymnasium does). Step before the first Reset, or after a
	// step that ended the episode, fails with an error wrapping
	// ErrNeedsReset.
	Step(action Action) (StepResult, error)
}

// StateHasher is implemented by the environments with a discrete state
// (NChain, BlindCliffwalk, KeyDoor). StateHash returns an exact code of the
// current state (the one the last Reset or Step led to): two states of the
// same environment configuration get equal codes iff they are equal. It is
// an injective packing, not a hash that can collide, so TER-style graphs can
// key vertices by it. O(1).
type StateHasher interface {
	StateHash() uint64
}

// Action is one action. Discrete environments read Index (and require Vec
// to be nil); continuous ones read Vec, whose length must equal the
// dimension of their Box.
type Action struct {
	// Index is a discrete action, 0 <= Index < Discrete.N.
	Index int
	// Vec is a continuous action; its values must be finite.
	Vec []float64
}

// StepResult is what one Step returns.
type StepResult struct {
	// Obs is the observation after the step. The caller owns it.
	Obs []float64
	// Reward is the reward for the step.
	Reward float64
	// Terminated: the step reached a terminal state of the MDP (the pole
	// fell, the goal was reached). Its value is 0: do not bootstrap.
	Terminated bool
	// Truncated: the step hit the time limit (MaxEpisodeSteps) without
	// terminating. The state is not terminal: bootstrap from Obs.
	//
	// Terminated and Truncated are never both true. Gymnasium's TimeLimit
	// wrapper reports both when the limit step is also terminal; here that
	// step is reported as terminated only, which is the reading that
	// matters (no bootstrap).
	Truncated bool
}

// Done reports whether the episode ended with this step (either way).
func (r StepResult) Done() bool { return r.Terminated || r.Truncated }

// Sentinel errors. Errors returned by this package wrap one of them (test
// with errors.Is) and add what was wrong.
var (
	// ErrInvalidAction: the action is not in the action space (index out of
	// range, wrong vector length, a NaN or infinite value, or the wrong kind
	// of action).
	ErrInvalidAction = errors.New("envs: invalid action")
	// ErrNeedsReset: Step was called before the first Reset or after the
	// episode ended.
	ErrNeedsReset = errors.New("envs: episode over, call Reset")
	// ErrUnknownEnv: Make was given a name that is not registered.
	ErrUnknownEnv = errors.New("envs: unknown environment")
	// ErrBadOption: an option is out of range or does not apply to the
	// environment.
	ErrBadOption = errors.New("envs: bad option")
)

// splitmix64 is Steele, Lea and Flood's SplitMix64 finaliser.
func splitmix64(x uint64) uint64 {
	z := x + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// episode is the bookkeeping every environment shares: its name (for error
// messages), the time limit, the step count, whether an episode is running,
// and the per-instance generator.
type episode struct {
	name  string
	limit int // 0: no time limit
	steps int
	live  bool // Reset called and the episode has not ended
	src   rand.PCG
	rng   *rand.Rand
}

func (e *episode) init(name string, limit int) {
	e.name, e.limit = name, limit
	e.rng = rand.New(&e.src)
}

// MaxEpisodeSteps implements Env.
func (e *episode) MaxEpisodeSteps() int { return e.limit }

// begin reseeds the generator and starts an episode.
func (e *episode) begin(seed uint64) {
	e.src.Seed(seed, splitmix64(seed))
	e.steps, e.live = 0, true
}

// check returns ErrNeedsReset unless an episode is running.
func (e *episode) check() error {
	if !e.live {
		if e.steps == 0 {
			return fmt.Errorf("%w: %s: Step before Reset", ErrNeedsReset, e.name)
		}
		return fmt.Errorf("%w: %s: Step after the episode ended at step %d", ErrNeedsReset, e.name, e.steps)
	}
	return nil
}

// end counts one step and derives the flags from terminated and the limit.
func (e *episode) end(obs []float64, reward float64, terminated bool) StepResult {
	e.steps++
	r := StepResult{Obs: obs, Reward: reward, Terminated: terminated}
	if !terminated && e.limit > 0 && e.steps >= e.limit {
		r.Truncated = true
	}
	if r.Done() {
		e.live = false
	}
	return r
}

// uniform draws from [lo, hi) as lo + (hi-lo)·u with u = Rand.Float64(),
// the form numpy's Generator.uniform uses.
func (e *episode) uniform(lo, hi float64) float64 { return lo + (hi-lo)*e.rng.Float64() }

// discreteAction validates a discrete action against n actions.
func (e *episode) discreteAction(a Action, n int) (int, error) {
	if a.Vec != nil {
		return 0, fmt.Errorf("%w: %s takes a discrete action (Action.Index in [0, %d)), got a vector of %d values", ErrInvalidAction, e.name, n, len(a.Vec))
	}
	if a.Index < 0 || a.Index >= n {
		return 0, fmt.Errorf("%w: %s: action %d is outside Discrete(%d)", ErrInvalidAction, e.name, a.Index, n)
	}
	return a.Index, nil
}

// scalarAction validates a one-dimensional continuous action: exactly one
// finite value. Range checks are the caller's (the continuous classic
// control tasks clip, as Gymnasium does).
func (e *episode) scalarAction(a Action, box Box) (float64, error) {
	if len(a.Vec) != 1 {
		return 0, fmt.Errorf("%w: %s takes a continuous action (Action.Vec of length 1 in %v), got %d values", ErrInvalidAction, e.name, box, len(a.Vec))
	}
	v := a.Vec[0]
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%w: %s: action %v is not finite", ErrInvalidAction, e.name, v)
	}
	return v, nil
}

// oneHot returns a vector of n zeros with a one at i.
func oneHot(i, n int) []float64 {
	v := make([]float64, n)
	v[i] = 1
	return v
}

// f64 returns x. Passing a constant through it makes the expression around
// it a sequence of rounded float64 operations, as in Gymnasium's Python,
// instead of a constant expression that Go evaluates exactly.
func f64(x float64) float64 { return x }
