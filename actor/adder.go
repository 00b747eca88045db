package actor

import (
	"errors"
	"fmt"
	"math"

	"github.com/apexrl/apex/buffer"
)

// NStep turns an episode's steps into n-step transitions (Acme's Adder:
// AddFirst, Add, Reset), the Ape-X learner's input:
//
//	(s_t, a_t, R_t = sum_{k<m} gamma^k r_{t+k}, discount gamma^m, s_{t+m})
//
// with m = N while the episode goes on. When the episode ends at step T:
//   - terminated (a terminal state): every pending step gets the rewards up
//     to T, discount 0 (nothing to bootstrap from) and FlagTerminal;
//   - truncated (a time limit cut it): every pending step gets the rewards
//     up to T and discount gamma^m for its m = T-t+1 rewards, and
//     bootstraps from the last observation (FlagTruncated): a time limit is
//     not a property of the state.
//
// An adder made by NewNStep takes discrete actions (Add, stored in Out's
// Action column); one made by NewNStepContinuous takes continuous ones
// (AddVec, stored in Out's ActionVec column, actionDim values per item).
// Everything else is the same for both.
//
// Transitions are appended to a buffer.Transitions batch the caller owns
// (Out); the caller sends it when full and calls ResetOut. Cost: O(N + obs
// size + action size) per Add. An NStep is not safe for concurrent use (one
// per actor).
type NStep struct {
	n      int
	gamma  float64
	obsDim int
	actDim int // 0: discrete actions (act); else the width of vec's rows

	// Pending steps of the current episode, a ring of n: obs[i] is s_t,
	// act[i] (or vec[i]) a_t, rew[i] r_t, for t = head .. head+len-1.
	obs     [][]float32
	act     []int32
	vec     [][]float32
	rew     []float64
	head    int
	pending int
	last    []float32 // the most recent observation, s_{t+1}
	started bool

	// Episode bookkeeping stored with each transition.
	episode  uint64
	stepInEp int32

	// Out receives the emitted transitions (Obs, NextObs, Action or
	// ActionVec, Reward, Discount, Flags, EpisodeID, EpisodeStep).
	Out buffer.Transitions
}

// maxAdderValues bounds an adder's window (n observations or actions).
const maxAdderValues = 1 << 28

// NewNStep returns an adder of n-step returns with discount gamma for
// observations of obsDim values. n in [1, MaxCount], gamma in [0, 1],
// obsDim in [1, buffer.MaxWidth], and n·obsDim at most 2^28 values;
// anything else is an error wrapping ErrConfig.
func NewNStep(n int, gamma float64, obsDim int) (*NStep, error) {
	switch {
	case n < 1 || n > MaxCount:
		return nil, fmt.Errorf("%w: n-step length must be in [1, %d], got %d", ErrConfig, MaxCount, n)
	case !(gamma >= 0 && gamma <= 1):
		return nil, fmt.Errorf("%w: discount gamma must be in [0, 1], got %v", ErrConfig, gamma)
	case obsDim < 1 || obsDim > buffer.MaxWidth:
		return nil, fmt.Errorf("%w: observation size must be in [1, %d], got %d", ErrConfig, buffer.MaxWidth, obsDim)
	case n*obsDim > maxAdderValues:
		return nil, fmt.Errorf("%w: n-step length %d × observation size %d exceeds %d values", ErrConfig, n, obsDim, maxAdderValues)
	}
	a := &NStep{n: n, gamma: gamma, obsDim: obsDim,
		obs: make([][]float32, n), act: make([]int32, n), rew: make([]float64, n),
		last: make([]float32, obsDim)}
	for i := range a.obs {
		a.obs[i] = make([]float32, obsDim)
	}
	return a, nil
}

// NewNStepContinuous is NewNStep for continuous actions of actionDim >= 1
// values each (AddVec), actionDim at most buffer.MaxWidth and n·actionDim
// at most 2^28 values.
func NewNStepContinuous(n int, gamma float64, obsDim, actionDim int) (*NStep, error) {
	if actionDim < 1 || actionDim > buffer.MaxWidth {
		return nil, fmt.Errorf("%w: action size must be in [1, %d], got %d", ErrConfig, buffer.MaxWidth, actionDim)
	}
	if n >= 1 && n <= MaxCount && n*actionDim > maxAdderValues {
		return nil, fmt.Errorf("%w: n-step length %d × action size %d exceeds %d values", ErrConfig, n, actionDim, maxAdderValues)
	}
	a, err := NewNStep(n, gamma, obsDim)
	if err != nil {
		return nil, err
	}
	a.actDim, a.act = actionDim, nil
	a.vec = make([][]float32, n)
	for i := range a.vec {
		a.vec[i] = make([]float32, actionDim)
	}
	return a, nil
}

// ErrNoEpisode is returned by Add and AddVec before AddFirst (or after an episode
// ended without a new AddFirst).
var ErrNoEpisode = errors.New("actor: Add before AddFirst")

// AddFirst starts an episode (numbered episode) at observation obs. Steps
// still pending from an episode that was never ended are dropped: call Add
// with terminated or truncated to flush an episode.
func (a *NStep) AddFirst(episode uint64, obs []float32) error {
	if len(obs) != a.obsDim {
		return fmt.Errorf("actor: observation has %d values, want %d", len(obs), a.obsDim)
	}
	copy(a.last, obs)
	a.head, a.pending, a.started = 0, 0, true
	a.episode, a.stepInEp = episode, 0
	return nil
}

// Add records action taken at the current observation, the reward it
// earned and the next observation, and appends every transition that
// became complete to Out. terminated and truncated end the episode (both
// true counts as terminated); a new AddFirst must follow. It fails on an
// adder of continuous actions (use AddVec).
func (a *NStep) Add(action int32, reward float64, next []float32, terminated, truncated bool) error {
	if a.actDim != 0 {
		return fmt.Errorf("actor: Add (a discrete action) on an adder of %d-value continuous actions: use AddVec", a.actDim)
	}
	if err := a.check(reward, next); err != nil {
		return err
	}
	i := (a.head + a.pending) % a.n
	a.act[i] = action
	a.push(i, reward, next, terminated, truncated)
	return nil
}

// AddVec is Add for an adder of continuous actions (NewNStepContinuous):
// action holds the action's actionDim values, which must be finite; it is
// copied. It fails on an adder of discrete actions.
func (a *NStep) AddVec(action []float32, reward float64, next []float32, terminated, truncated bool) error {
	if a.actDim == 0 {
		return fmt.Errorf("actor: AddVec (a continuous action) on an adder of discrete actions: use Add")
	}
	if err := a.check(reward, next); err != nil {
		return err
	}
	if len(action) != a.actDim {
		return fmt.Errorf("actor: action has %d values, want %d", len(action), a.actDim)
	}
	for _, v := range action {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("actor: action %v at episode %d step %d is not finite", action, a.episode, a.stepInEp)
		}
	}
	i := (a.head + a.pending) % a.n
	copy(a.vec[i], action)
	a.push(i, reward, next, terminated, truncated)
	return nil
}

// check validates the parts of a step both kinds of action share.
func (a *NStep) check(reward float64, next []float32) error {
	if !a.started {
		return ErrNoEpisode
	}
	if len(next) != a.obsDim {
		return fmt.Errorf("actor: observation has %d values, want %d", len(next), a.obsDim)
	}
	if math.IsNaN(reward) || math.IsInf(reward, 0) {
		return fmt.Errorf("actor: reward %v at episode %d step %d", reward, a.episode, a.stepInEp)
	}
	return nil
}

// push records the step whose action is already in ring slot i and emits
// what became complete.
func (a *NStep) push(i int, reward float64, next []float32, terminated, truncated bool) {
	copy(a.obs[i], a.last)
	a.rew[i] = reward
	a.pending++
	copy(a.last, next)

	switch {
	case terminated:
		for a.pending > 0 {
			a.emit(0, buffer.FlagTerminal)
		}
		a.started = false
	case truncated:
		for a.pending > 0 {
			a.emit(math.Pow(a.gamma, float64(a.pending)), buffer.FlagTruncated)
		}
		a.started = false
	case a.pending == a.n:
		a.emit(math.Pow(a.gamma, float64(a.n)), 0)
	}
}

// emit appends the oldest pending step's transition, bootstrapping from the
// last observation with the given discount, and drops it.
func (a *NStep) emit(discount float64, flags uint32) {
	var ret, g float64 = 0, 1
	for k := range a.pending {
		ret += g * a.rew[(a.head+k)%a.n]
		g *= a.gamma
	}
	t := &a.Out
	t.Obs = append(t.Obs, a.obs[a.head]...)
	t.NextObs = append(t.NextObs, a.last...)
	if a.actDim > 0 {
		t.ActionVec = append(t.ActionVec, a.vec[a.head]...)
	} else {
		t.Action = append(t.Action, a.act[a.head])
	}
	t.Reward = append(t.Reward, float32(ret))
	t.Discount = append(t.Discount, float32(discount))
	t.Flags = append(t.Flags, flags)
	t.EpisodeID = append(t.EpisodeID, a.episode)
	t.EpisodeStep = append(t.EpisodeStep, a.stepInEp)
	a.stepInEp++
	a.head = (a.head + 1) % a.n
	a.pending--
}

// ResetOut empties Out, keeping its storage (call it after handing a copy
// of Out's contents on).
func (a *NStep) ResetOut() { a.Out.Reset() }
