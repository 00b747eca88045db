package envs

import "fmt"

// NChain defaults, from TER's released code (the paper leaves them open).
const (
	// NChainDefaultSize is the default chain length N.
	NChainDefaultSize = 20
	// NChainMaxSize is the largest N accepted.
	NChainMaxSize = 1 << 20
)

// NChain actions.
const (
	NChainForward  = 0
	NChainBackward = 1
)

// NChain is the chain of TER (Hong et al., ICLR 2022, arXiv 2203.15845,
// appendix D.1 and Figure 2a): states s_1 ... s_N and two actions.
//
//   - Forward (action 0) moves s_i to s_{i+1}; backward (action 1) moves
//     s_i to s_{i-1} and does nothing at s_1.
//   - Reward +1 on the transition s_{N-1} -> s_N, 0 otherwise.
//   - Terminated on reaching s_N. Episodes start at s_1.
//   - Time limit 2·N² steps (800 for the default N = 20), as in TER's code;
//     the paper gives no horizon. Deterministic: the seed is not used.
//   - Observation: one-hot of the state index, Box[0, 1]^N (s_i sets entry
//     i-1).
//   - StateHash: the 0-based state index i-1.
//
// Not safe for concurrent use.
type NChain struct {
	episode
	n, i int // chain length; current state index (0-based)
}

var (
	_ Env         = (*NChain)(nil)
	_ StateHasher = (*NChain)(nil)
)

// NewNChain returns the chain. It accepts WithSize (N, 2 <= N <=
// NChainMaxSize; default 20) and WithMaxSteps (default 2·N²).
func NewNChain(opts ...Option) (*NChain, error) {
	o, err := parseOptions("NChain", optSize, opts)
	if err != nil {
		return nil, err
	}
	n := NChainDefaultSize
	if o.set&optSize != 0 {
		n = o.size
	}
	if n < 2 || n > NChainMaxSize {
		return nil, fmt.Errorf("%w: NChain: WithSize(%d): the chain length must be in [2, %d]", ErrBadOption, n, NChainMaxSize)
	}
	e := &NChain{n: n}
	e.init("NChain", o.limit(2*n*n))
	return e, nil
}

// N is the chain length.
func (e *NChain) N() int { return e.n }

// ObservationSpace implements Env: Box[0, 1]^N. O(N); allocates.
func (e *NChain) ObservationSpace() Box { return uniformBox(e.n, 0, 1) }

// ActionSpace implements Env: Discrete(2).
func (e *NChain) ActionSpace() Space { return Discrete{N: 2} }

// Reset implements Env: the episode starts at s_1. O(N).
func (e *NChain) Reset(seed uint64) []float64 {
	e.begin(seed)
	e.i = 0
	return oneHot(e.i, e.n)
}

// Step implements Env. O(N) (the one-hot observation).
func (e *NChain) Step(a Action) (StepResult, error) {
	if err := e.check(); err != nil {
		return StepResult{}, err
	}
	act, err := e.discreteAction(a, 2)
	if err != nil {
		return StepResult{}, err
	}
	if act == NChainForward {
		e.i++
	} else if e.i > 0 {
		e.i--
	}
	terminated := e.i == e.n-1
	reward := 0.0
	if terminated {
		reward = 1
	}
	return e.end(oneHot(e.i, e.n), reward, terminated), nil
}

// StateHash implements StateHasher: the 0-based state index. O(1).
func (e *NChain) StateHash() uint64 { return uint64(e.i) }
