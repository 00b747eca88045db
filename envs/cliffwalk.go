package envs

import "fmt"

// BlindCliffwalk sizes.
const (
	// BlindCliffwalkDefaultSize is the default number of states n.
	BlindCliffwalkDefaultSize = 10
	// BlindCliffwalkMaxSize is the largest n accepted.
	BlindCliffwalkMaxSize = 1 << 20
)

// BlindCliffwalk is the Blind Cliffwalk of PER (Schaul et al. 2016, arXiv
// 1511.05952, Figure 1 and appendix B.1): a chain of n states s_0 ...
// s_{n-1} and two actions, one "right" and one "wrong" at every state.
//
//   - At s_i the right action moves to s_{i+1}; from s_{n-1} it ends the
//     episode with reward 1. The wrong action ends the episode with reward
//     0. Every other reward is 0.
//   - Which action is right alternates along the chain: action i mod 2 at
//     s_i (as in experiment/cliffwalk; the paper only requires that it not
//     be generalisable).
//   - Episodes start at s_0 and last at most n steps, so there is no time
//     limit unless WithMaxSteps sets one. Deterministic: the seed is not
//     used.
//   - Both ways of ending the episode lead to one terminal state, index n.
//   - Observation: one-hot of the state index, Box[0, 1]^(n+1) (entry n is
//     the terminal state).
//   - StateHash: the state index, 0 ... n.
//
// The experiment in experiment/cliffwalk builds its replay memory of all
// 2^n action sequences itself; this type is the same task behind Env.
// Not safe for concurrent use.
type BlindCliffwalk struct {
	episode
	n, i int // number of states; current state index (n: terminal)
}

var (
	_ Env         = (*BlindCliffwalk)(nil)
	_ StateHasher = (*BlindCliffwalk)(nil)
)

// NewBlindCliffwalk returns the chain. It accepts WithSize (n, 1 <= n <=
// BlindCliffwalkMaxSize; default 10) and WithMaxSteps (default: none).
func NewBlindCliffwalk(opts ...Option) (*BlindCliffwalk, error) {
	o, err := parseOptions("BlindCliffwalk", optSize, opts)
	if err != nil {
		return nil, err
	}
	n := BlindCliffwalkDefaultSize
	if o.set&optSize != 0 {
		n = o.size
	}
	if n < 1 || n > BlindCliffwalkMaxSize {
		return nil, fmt.Errorf("%w: BlindCliffwalk: WithSize(%d): the number of states must be in [1, %d]", ErrBadOption, n, BlindCliffwalkMaxSize)
	}
	e := &BlindCliffwalk{n: n}
	e.init("BlindCliffwalk", o.limit(0))
	return e, nil
}

// N is the number of non-terminal states.
func (e *BlindCliffwalk) N() int { return e.n }

// Right is the right action at state s: s mod 2.
func (e *BlindCliffwalk) Right(s int) int { return s & 1 }

// ObservationSpace implements Env: Box[0, 1]^(n+1). O(n); allocates.
func (e *BlindCliffwalk) ObservationSpace() Box { return uniformBox(e.n+1, 0, 1) }

// ActionSpace implements Env: Discrete(2).
func (e *BlindCliffwalk) ActionSpace() Space { return Discrete{N: 2} }

// Reset implements Env: the episode starts at s_0. O(n).
func (e *BlindCliffwalk) Reset(seed uint64) []float64 {
	e.begin(seed)
	e.i = 0
	return oneHot(e.i, e.n+1)
}

// Step implements Env. O(n) (the one-hot observation).
func (e *BlindCliffwalk) Step(a Action) (StepResult, error) {
	if err := e.check(); err != nil {
		return StepResult{}, err
	}
	act, err := e.discreteAction(a, 2)
	if err != nil {
		return StepResult{}, err
	}
	reward := 0.0
	switch {
	case act != e.Right(e.i):
		e.i = e.n
	case e.i == e.n-1:
		e.i, reward = e.n, 1
	default:
		e.i++
	}
	return e.end(oneHot(e.i, e.n+1), reward, e.i == e.n), nil
}

// StateHash implements StateHasher: the state index (n for the terminal
// state). O(1).
func (e *BlindCliffwalk) StateHash() uint64 { return uint64(e.i) }
