package ter

import (
	"math"

	"github.com/apexrl/apex/envs"
)

// Table is a tabular Q function over the chain: entry 2k+a is Q(s_{k+1},
// a) for the 0-based state index k and action a (envs.NChainForward = 0,
// envs.NChainBackward = 1).
type Table []float64

// Greedy is the greedy action at state k, ties to forward (action 0), as
// numpy's argmax in TER's script breaks them.
func (q Table) Greedy(k int) int {
	if q[2*k+envs.NChainBackward] > q[2*k+envs.NChainForward] {
		return envs.NChainBackward
	}
	return envs.NChainForward
}

// Max is max_a Q(k, a).
func (q Table) Max(k int) float64 { return max(q[2*k], q[2*k+1]) }

// QStar is the optimal Q of the chain of length n under discount gamma
// (see the package doc), computed by the Bellman recursion in float64,
// Q*(n-2, fwd) = 1, Q*(k, fwd) = gamma·Q*(k+1, fwd), Q*(k, back) =
// gamma·Q*(max(k-1, 0), fwd), which is exactly what a one-step update with
// learning rate 1 from Q = 0 computes; it equals the closed form
// gamma^(n-2-k) up to rounding. The terminal state's row (k = n-1) is 0.
func QStar(n int, gamma float64) Table {
	q := make(Table, 2*n)
	fwd := 1.0
	for k := n - 2; k >= 0; k-- {
		q[2*k+envs.NChainForward] = fwd
		fwd *= gamma
	}
	for k := 0; k <= n-2; k++ {
		q[2*k+envs.NChainBackward] = gamma * q[2*max(k-1, 0)+envs.NChainForward]
	}
	return q
}

// QError is the mean |Q - Q*| over the 2(n-1) pairs of the non-terminal
// states (the terminal state's values are never used: nothing bootstraps
// from it).
func QError(q, qstar Table) float64 {
	n := len(q) / 2
	s := 0.0
	for i := range 2 * (n - 1) {
		s += math.Abs(q[i] - qstar[i])
	}
	return s / float64(2*(n-1))
}

// greedyEpisode runs the greedy policy of q in env from s_1 and returns
// the episode's length and whether it reached s_N. A deterministic policy
// in a deterministic chain that revisits a state loops until the time
// limit, so the episode is cut at the first revisit and reported as not
// terminated (the time limit would have ended it: 2N² > N). O(N).
func greedyEpisode(env *envs.NChain, q Table, seen []bool) (steps int, terminated bool, err error) {
	clear(seen)
	env.Reset(0)
	k := 0
	for {
		seen[k] = true
		r, err := env.Step(envs.Action{Index: q.Greedy(k)})
		if err != nil {
			return 0, false, err
		}
		steps++
		if r.Done() {
			return steps, r.Terminated, nil
		}
		if k = int(env.StateHash()); seen[k] {
			return env.MaxEpisodeSteps(), false, nil
		}
	}
}
