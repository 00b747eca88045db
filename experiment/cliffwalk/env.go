package cliffwalk

import (
	"fmt"
	"math"
)

// MaxN is the largest chain length accepted: the memory holds 2^(n+1)-2
// transitions, so n = 20 is already two million items.
const MaxN = 20

// actions is the number of actions per state. Which of the two is "right"
// alternates along the chain (Env.Right), so a learner that could generalise
// over action ids would gain nothing: the domain is "blind".
const actions = 2

// Transition is one stored transition of the Blind Cliffwalk.
type Transition struct {
	State  int // s_i, 0 <= i < n
	Action int // action id, 0 or 1
	// Reward is 1 for the final "right" action and 0 otherwise.
	Reward float64
	// Next is the next state, or -1 when the transition ends the episode
	// (a "wrong" action, or the final "right" one).
	Next int
}

// Terminal reports whether t ends its episode (no bootstrap).
func (t Transition) Terminal() bool { return t.Next < 0 }

// Env is the Blind Cliffwalk of Schaul et al. 2016 (PER, arXiv 1511.05952,
// Figure 1 and Appendix B.1): a chain of n states s_0..s_{n-1} with two
// actions. At s_i the "right" action moves to s_{i+1} (from s_{n-1} it ends
// the episode with reward 1); the "wrong" action ends the episode with
// reward 0. The discount is gamma = 1 - 1/n, so
//
//	Q*(s_i, right) = gamma^(n-1-i),  Q*(s_i, wrong) = 0.
//
// An Env is immutable and safe for concurrent use.
type Env struct {
	n     int
	gamma float64
}

// NewEnv returns the chain of n states, 1 <= n <= MaxN.
func NewEnv(n int) (*Env, error) {
	if n < 1 || n > MaxN {
		return nil, fmt.Errorf("cliffwalk: chain length n must be in [1, %d], got %d", MaxN, n)
	}
	return &Env{n: n, gamma: 1 - 1/float64(n)}, nil
}

// N is the number of states.
func (e *Env) N() int { return e.n }

// Gamma is the discount, 1 - 1/n.
func (e *Env) Gamma() float64 { return e.gamma }

// Right is the id of the "right" action at state s: 0 at even states, 1 at
// odd ones (the paper only says which action is right is not
// generalisable; any fixed per-state choice gives the same tabular problem).
func (e *Env) Right(s int) int { return s & 1 }

// Pairs is the number of state-action pairs, 2n: the length of a Table.
func (e *Env) Pairs() int { return actions * e.n }

// Step applies action a in state s.
func (e *Env) Step(s, a int) Transition {
	t := Transition{State: s, Action: a, Next: -1}
	if a == e.Right(s) {
		if s == e.n-1 {
			t.Reward = 1
		} else {
			t.Next = s + 1
		}
	}
	return t
}

// QStar returns the optimal action values as a Table: gamma^(n-1-i) for the
// right action at s_i, 0 for the wrong one. O(n).
func (e *Env) QStar() Table {
	q := make(Table, e.Pairs())
	for s := range e.n {
		q[Index(s, e.Right(s))] = math.Pow(e.gamma, float64(e.n-1-s))
	}
	return q
}

// MemorySize is the number of transitions Env.Memory holds for a chain of n
// states: 2^(n+1) - 2.
func MemorySize(n int) int { return 1<<(n+1) - 2 }

// Memory builds the replay memory of the experiment: the transitions of all
// 2^n action sequences of length n, each executed from s_0 until its first
// wrong action or the end of the chain, duplicates kept, in sequence order
// (sequence k's j-th action is bit j of k, read as "right" when set). The
// result has MemorySize(n) = 2^(n+1)-2 entries: a sequence whose first
// wrong action is at step j contributes j+1 transitions. Only 2n of them are
// distinct; (s_i, right) and (s_i, wrong) each occur 2^(n-1-i) times, so the
// one rewarding transition is 1 in 2^(n+1)-2 and uniform replay rarely
// sees it. O(2^n · n) time and O(2^(n+1)) memory.
func (e *Env) Memory() []Transition {
	m := make([]Transition, 0, MemorySize(e.n))
	for k := range 1 << e.n {
		s := 0
		for j := range e.n {
			a := e.Right(s)
			if k>>j&1 == 0 {
				a ^= 1
			}
			t := e.Step(s, a)
			m = append(m, t)
			if t.Terminal() {
				break
			}
			s = t.Next
		}
	}
	return m
}

// Table is a tabular action-value function: entry Index(s, a) is Q(s, a).
type Table []float64

// Index is the position of (s, a) in a Table.
func Index(s, a int) int { return actions*s + a }

// Max is max_a Q(s, a). O(1).
func (q Table) Max(s int) float64 { return max(q[Index(s, 0)], q[Index(s, 1)]) }

// TD is the Q-learning error of transition t under q:
// r + gamma·max_a Q(s', a) - Q(s, a), with no bootstrap at a terminal
// transition. O(1).
func (e *Env) TD(q Table, t Transition) float64 {
	target := t.Reward
	if !t.Terminal() {
		target += e.gamma * q.Max(t.Next)
	}
	return target - q[Index(t.State, t.Action)]
}

// MSE is the mean squared error between q and ref over all entries (all
// state-action pairs). O(len(q)); q and ref must have equal lengths.
func MSE(q, ref Table) float64 {
	var s float64
	for i, v := range q {
		d := v - ref[i]
		s += d * d
	}
	return s / float64(len(q))
}
