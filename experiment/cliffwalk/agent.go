package cliffwalk

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// Task is one learning problem: a chain, its full replay memory and the
// stopping rule. A Task is read-only once built and may be shared by runs.
type Task struct {
	Env    *Env
	Memory []Transition // Env.Memory()
	QStar  Table        // Env.QStar()
	// Eta is the Q-learning step size (1/4 in the paper).
	Eta float64
	// Threshold: a run stops once MSE(Q, Q*) < Threshold (1e-3 in the paper).
	Threshold float64
	// MaxUpdates caps a run; a run that reaches it without meeting the
	// threshold is reported as capped.
	MaxUpdates int64
	// BetaSteps is the horizon of importance-weight annealing: the planned
	// number of learner steps over which beta reaches 1 (PER §3.4). It is
	// kept apart from MaxUpdates so that changing the cap does not change
	// the runs that finish under it. <= 0: beta is at its end value from the
	// start. NewTask sets it to maxUpdates.
	BetaSteps int64
	// RankRefresh is the rank-based agents' re-sort fraction
	// (sampler.RankConfig.RefreshFraction). NewTask sets it to
	// RankRefreshFraction.
	RankRefresh float64
}

// NewTask builds the task for a chain of n states. O(2^n · n).
func NewTask(n int, eta, threshold float64, maxUpdates int64) (*Task, error) {
	env, err := NewEnv(n)
	if err != nil {
		return nil, err
	}
	switch {
	case !(eta > 0 && eta <= 1):
		return nil, fmt.Errorf("cliffwalk: step size eta must be in (0, 1], got %v", eta)
	case !(threshold > 0) || math.IsInf(threshold, 0):
		return nil, fmt.Errorf("cliffwalk: MSE threshold must be positive and finite, got %v", threshold)
	case maxUpdates <= 0:
		return nil, fmt.Errorf("cliffwalk: max updates must be positive, got %d", maxUpdates)
	}
	return &Task{Env: env, Memory: env.Memory(), QStar: env.QStar(), Eta: eta, Threshold: threshold, MaxUpdates: maxUpdates, BetaSteps: maxUpdates,
		RankRefresh: RankRefreshFraction}, nil
}

// Outcome is the result of one run.
type Outcome struct {
	// Updates is the number of Q-learning updates (one replayed transition
	// each) applied before MSE(Q, Q*) fell below the threshold, or
	// MaxUpdates if it never did.
	Updates int64
	// Capped is true when the run stopped at MaxUpdates.
	Capped bool
	// MSE is MSE(Q, Q*) when the run stopped.
	MSE float64
}

// Agent is a way of choosing which stored transition to replay next.
type Agent interface {
	// Name labels the agent in tables, plots and JSON.
	Name() string
	// Learn runs tabular Q-learning on task from the initial table q
	// (updated in place), replaying one transition per update, until
	// MSE(q, task.QStar) < task.Threshold or task.MaxUpdates updates. rng
	// drives every random choice, so equal seeds give equal outcomes.
	Learn(task *Task, q Table, rng *rand.Rand) (Outcome, error)
}

// Replay replays through apex's real replay path: the task's memory is
// inserted into a buffer.Buffer (every item at the buffer's maximum
// priority, as new items are), and each update samples through a
// sampler.Selector, decodes the copied columns of the replayed row, applies
// the Q-learning update scaled by the row's importance weight (when the
// Selector is also a sampler.Weighter; otherwise 1) and writes |delta|, the
// TD error before the update, back with Selector.Update for that row only.
//
// One transition is replayed per update, as in the paper. By default the
// Selector draws a batch of one row. With Draw = k > 1 it draws k rows and
// one of them, chosen uniformly, is replayed. For a stratified batch (one
// row per stratum or segment of mass 1/k) the replayed item's probability is
// then exactly the Prob[row] the stage reports, so importance weights stay
// right. That is how segment-based rank selection (one row per
// equal-mass segment) realises PER's "sample a segment, then sample
// uniformly within it" with one replay per update; a rank stage asked for
// one row has a single segment and samples uniformly.
//
// Cost per update: one Sample of Draw rows and one Update of one row in the
// selection stage (about O(log N) per row for the tree-backed ones) plus
// O(n) for the stopping test; setup is O(N) for the buffer.
type Replay struct {
	// Label is the agent's name.
	Label string
	// Draw is the number of rows sampled per update, of which one is
	// replayed; 0 means 1. It is capped at the memory size.
	Draw int
	// New builds the selection stage over buf, which holds the task's
	// memory. betaSteps (Task.BetaSteps) is the horizon of annealing
	// schedules.
	New func(buf *buffer.Buffer, betaSteps int64) (sampler.Selector, error)
}

// Name implements Agent.
func (r Replay) Name() string { return r.Label }

// Learn implements Agent.
func (r Replay) Learn(task *Task, q Table, rng *rand.Rand) (Outcome, error) {
	buf, err := NewBuffer(task)
	if err != nil {
		return Outcome{}, err
	}
	sel, err := r.New(buf, task.BetaSteps)
	if err != nil {
		return Outcome{}, fmt.Errorf("cliffwalk: %s: %w", r.Label, err)
	}
	weighter, _ := sel.(sampler.Weighter)
	env, eta := task.Env, task.Eta
	k := min(max(r.Draw, 1), len(task.Memory))
	batch, err := buf.NewBatch(k)
	if err != nil {
		return Outcome{}, fmt.Errorf("cliffwalk: %s: %w", r.Label, err)
	}
	absTD := make([]float64, 1)
	var u int64
	for ; ; u++ {
		if mse := MSE(q, task.QStar); mse < task.Threshold || u == task.MaxUpdates {
			return Outcome{Updates: u, Capped: !(mse < task.Threshold), MSE: mse}, nil
		}
		if err := sel.Sample(rng, batch); err != nil {
			return Outcome{}, fmt.Errorf("cliffwalk: %s: update %d: %w", r.Label, u, err)
		}
		j := 0
		if k > 1 {
			j = rng.IntN(k)
		}
		t := decode(&batch.Transitions, j)
		delta := tdStored(env, q, t, float64(batch.Discount[j]))
		w := 1.0
		if weighter != nil {
			if err := weighter.Weights(batch, u); err != nil {
				return Outcome{}, fmt.Errorf("cliffwalk: %s: update %d: %w", r.Label, u, err)
			}
			w = batch.Weight[j]
		}
		q[Index(t.State, t.Action)] += eta * w * delta
		absTD[0] = math.Abs(delta)
		res, err := sel.Update(batch.Refs[j:j+1], absTD)
		if err != nil {
			return Outcome{}, fmt.Errorf("cliffwalk: %s: update %d: %w", r.Label, u, err)
		}
		if res.Stale != 0 {
			return Outcome{}, fmt.Errorf("cliffwalk: %s: update %d: %w", r.Label, u, errStale)
		}
	}
}

var errStale = errors.New("priority write-back dropped as stale, but nothing overwrites the memory")

// NewBuffer returns a buffer.Buffer holding exactly task.Memory: capacity
// MemorySize(n), one float32 observation (the state index), discrete
// actions, every item inserted in one call with no priority (so each gets
// the buffer's initial maximum, 1). The discount column holds gamma, or 0 at
// a terminal transition, which also carries buffer.FlagTerminal. O(N).
func NewBuffer(task *Task) (*buffer.Buffer, error) {
	m := task.Memory
	buf, err := buffer.New(buffer.Config{
		Capacity:   len(m),
		ObsDim:     1,
		Action:     buffer.Discrete,
		NumActions: actions,
		// |delta| <= 1 + gamma·max|Q| stays far below 16 here; a small
		// maximum buys a finer fixed-point resolution.
		MaxPriority: 16,
	})
	if err != nil {
		return nil, err
	}
	n := len(m)
	t := buffer.Transitions{
		Obs:      make([]float32, n),
		NextObs:  make([]float32, n),
		Action:   make([]int32, n),
		Reward:   make([]float32, n),
		Discount: make([]float32, n),
		Flags:    make([]uint32, n),
	}
	for i, tr := range m {
		t.Obs[i] = float32(tr.State)
		t.Action[i] = int32(tr.Action)
		t.Reward[i] = float32(tr.Reward)
		if tr.Terminal() {
			t.Flags[i] = buffer.FlagTerminal
		} else {
			t.NextObs[i] = float32(tr.Next)
			t.Discount[i] = float32(task.Env.Gamma())
		}
	}
	if err := buf.Insert(&t); err != nil {
		return nil, err
	}
	if got := buf.Size(); got != n {
		return nil, fmt.Errorf("cliffwalk: buffer holds %d items after inserting %d", got, n)
	}
	return buf, nil
}

// decode reads row i of a sampled batch back into a Transition.
func decode(t *buffer.Transitions, i int) Transition {
	tr := Transition{
		State:  int(t.Obs[i]),
		Action: int(t.Action[i]),
		Reward: float64(t.Reward[i]),
		Next:   int(t.NextObs[i]),
	}
	if t.Flags[i]&buffer.FlagTerminal != 0 {
		tr.Next = -1
	}
	return tr
}

// tdStored is Env.TD with the discount read back from the buffer (float32):
// the replay path learns from what it stored. The float32 rounding of gamma
// moves the fixed point by less than 1e-7, far below the 1e-3 threshold.
func tdStored(env *Env, q Table, t Transition, discount float64) float64 {
	target := t.Reward
	if !t.Terminal() {
		target += discount * q.Max(t.Next)
	}
	return target - q[Index(t.State, t.Action)]
}

// Oracle is the paper's oracle: at every step it replays the transition
// whose update, in hindsight, most reduces the global loss MSE(Q, Q*) (ties
// go to the lowest memory index). It reads Q* and bypasses the buffer: it is
// a bound on what any selection rule could achieve greedily, not a sampler.
//
// Cost: O(N) per update over the N = 2^(n+1)-2 memory items. An update
// changes only the one entry Q(s, a) it targets, so each candidate's effect
// on the loss is O(1) to evaluate; the brute-force reading (apply each
// candidate, recompute the loss) would be O(N·n). Only the oracle's cost
// grows with N per step, which is why Config.OracleMaxN limits it.
type Oracle struct{}

// Name implements Agent.
func (Oracle) Name() string { return "oracle" }

// Learn implements Agent; rng is unused (the oracle is deterministic given
// the initial table).
func (Oracle) Learn(task *Task, q Table, _ *rand.Rand) (Outcome, error) {
	env, eta, qs := task.Env, task.Eta, task.QStar
	var u int64
	for ; ; u++ {
		if mse := MSE(q, qs); mse < task.Threshold || u == task.MaxUpdates {
			return Outcome{Updates: u, Capped: !(mse < task.Threshold), MSE: mse}, nil
		}
		best, bestGain, bestDelta := -1, math.Inf(1), 0.0
		for i, t := range task.Memory {
			delta := env.TD(q, t)
			k := Index(t.State, t.Action)
			old := q[k] - qs[k]
			nw := old + eta*delta
			if gain := nw*nw - old*old; gain < bestGain {
				best, bestGain, bestDelta = i, gain, delta
			}
		}
		t := task.Memory[best]
		q[Index(t.State, t.Action)] += eta * bestDelta
	}
}
