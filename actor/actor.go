package actor

import (
	"context"
	"fmt"
	"math"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
)

// Actor is the Ape-X actor (Horgan et al. 2018, arXiv 1803.00933,
// Algorithm 1): it steps its own environment with an epsilon-greedy policy
// over its own copy of the Q network, turns the steps into n-step
// transitions (NStep), and hands them over LocalBatch at a time with
// initial priorities computed by that same copy. It implements the
// runtime's Source (Fill).
//
// # Policy
//
// With probability eps (Config: eps_i = 0.4^(1 + 7·i/(N−1))) the action is
// uniform, otherwise argmax_a Q(s, a) of the actor's network (the first
// action on ties). Observations are converted to float32 once, as they are
// stored in the replay buffer, and the network acts on those values, so the
// actor and the learner see the same inputs.
//
// # Parameters
//
// The actor reads the Store at New and then every RefreshEvery environment
// steps; it copies the snapshot into its network only when the version
// changed (a read is one atomic load). Until the Store has a snapshot the
// actor acts uniformly at random (eps = 1) and hands its batches over with
// unknown priorities (see Fill). A nil Store means a fixed policy: the
// network is used with the parameters it has.
//
// # Episodes
//
// Each episode is reset with a seed drawn from the actor's generator, a
// math/rand/v2 PCG seeded from (Config.Seed, Config.ID); nothing reads a
// clock or a global generator, so the same seed and the same snapshots
// (published at the same steps) give the same transitions. An episode in
// progress carries over from one Fill to the next.
//
// Concurrency: Fill, SelectAction and Update are called from one goroutine
// (the actor's); Stats may be called from any goroutine at any time. An
// Actor must not be copied after first use.
type Actor struct {
	runner // episodes, adder, Store refresh, hand-over, statistics

	eps     float64
	sel     Prioritizer
	actions int

	// Priority scratch, reused by every hand-over.
	qsa, maxNext, absTD []float64
	far                 []int     // items whose bootstrap state needs its own forward
	farObs              []float32 // their NextObs rows
}

// episodeStats is an immutable snapshot of the episode statistics,
// replaced at the end of every episode.
type episodeStats struct {
	episodes   int64
	last, mean float64
	lastLen    int
}

// Stats is a snapshot of an actor's counters. Each field is read
// atomically; fields may come from moments a few steps apart.
type Stats struct {
	// ID is the actor's index. Epsilon is a discrete actor's exploration
	// rate (0 for a continuous one); Sigma is a continuous actor's
	// exploration noise, in units of the action box's half-range (0 for a
	// discrete one).
	ID             int
	Epsilon, Sigma float64
	// Steps counts environment steps; Episodes completed episodes.
	Steps, Episodes int64
	// LastReturn and LastLength describe the last completed episode
	// (undiscounted return); MeanReturn averages the returns of the last
	// min(Episodes, StatsWindow) episodes. All 0 before the first episode
	// ends.
	LastReturn, MeanReturn float64
	LastLength             int
	// Transitions and Batches count what Fill handed over (partial batches
	// at cancellation included).
	Transitions, Batches int64
	// ParamsLoaded is false while the actor waits for the first snapshot
	// (acting at random); ParamsVersion is the version its network holds.
	ParamsLoaded  bool
	ParamsVersion uint64
	// ParamReads counts reads of the Store, ParamLoads the reads that copied
	// a new version into the network.
	ParamReads, ParamLoads int64
}

// Prioritizer maps an actor's local absolute TD error to the priority
// stored with a new item (Ape-X's initial priority). The replay stages of
// package sampler implement it (sampler.Selector.Priority): a negative
// absTD means unknown. Priority is called from the actor's goroutine while
// the learner samples, so it must be safe for concurrent use; it should
// cost O(1).
type Prioritizer interface {
	Priority(absTD float64) float64
}

// New returns an actor for cfg that steps env with its own network net,
// refreshed from store (nil: keep net's parameters), and turns its local
// TD errors into priorities with sel (nil: hand batches over without
// priorities, so the buffer gives them its maximum). The actor owns env and
// net from now on. env must have a Discrete action space of net.Out()
// actions and observations of net.In() values; errors wrap ErrConfig.
func New(cfg Config, env envs.Env, net *model.Net, store *model.Store, sel Prioritizer) (*Actor, error) {
	cfg, err := cfg.validated()
	if err != nil {
		return nil, err
	}
	if env == nil || net == nil {
		return nil, fmt.Errorf("%w: New needs an environment and a network", ErrConfig)
	}
	obsDim, actions, err := shapes(env, net)
	if err != nil {
		return nil, err
	}
	a := &Actor{eps: cfg.epsilon(), sel: sel, actions: actions}
	if err := a.init(cfg, env, net, store, obsDim, 0); err != nil {
		return nil, err
	}
	if _, err := a.Update(); err != nil {
		return nil, err
	}
	return a, nil
}

// shapes checks that env and net fit together and returns the observation
// width and the number of actions.
func shapes(env envs.Env, net *model.Net) (obsDim, actions int, err error) {
	d, ok := env.ActionSpace().(envs.Discrete)
	if !ok || d.N < 1 {
		return 0, 0, fmt.Errorf("%w: the actor needs a discrete action space, got %v (NewContinuous takes a Box)", ErrConfig, env.ActionSpace())
	}
	obsDim = env.ObservationSpace().Dim()
	if net.In() != obsDim || net.Out() != d.N {
		return 0, 0, fmt.Errorf("%w: network %d→%d does not fit the environment (%d observations, %d actions)", ErrConfig, net.In(), net.Out(), obsDim, d.N)
	}
	return obsDim, d.N, nil
}

// Config returns the actor's configuration with the defaults filled in.
func (a *Actor) Config() Config { return a.cfg }

// Epsilon returns the actor's exploration rate now (once it has
// parameters): its final rate, or the annealed one during
// Config.EpsilonDecaySteps.
func (a *Actor) Epsilon() float64 { return a.epsAt(a.steps) }

// epsAt is the exploration rate after steps environment steps.
func (a *Actor) epsAt(steps int64) float64 {
	d := a.cfg.EpsilonDecaySteps
	if d <= 0 || steps >= d {
		return a.eps
	}
	return 1 + (a.eps-1)*float64(steps)/float64(d)
}

// Stats returns a snapshot of the actor's counters. Safe for concurrent
// use; O(1).
func (a *Actor) Stats() Stats {
	s := a.stats()
	s.Epsilon = a.epsAt(s.Steps)
	return s
}

// Update reads the Store and, if it holds a snapshot whose version differs
// from the network's (or the network has none yet), copies it into the
// network; it reports whether it did. Fill calls it every RefreshEvery
// environment steps; call it to refresh now. Without a Store it does
// nothing. An error means a snapshot of the wrong length (model.ErrShape). A
// call that overlaps a Fill or Update of the same actor is refused with
// ErrBusy. Cost: one atomic load, plus O(parameters) when it copies.
func (a *Actor) Update() (bool, error) {
	return a.lockedUpdate()
}

// SelectAction returns the epsilon-greedy action for observation obs
// (float32, as stored): uniform with probability Epsilon (always, before
// the first snapshot), otherwise the argmax of the network's Q values.
// Exploring costs two draws from the actor's generator and no forward pass.
// It panics if len(obs) is not the observation width.
func (a *Actor) SelectAction(obs []float32) int {
	if len(obs) != a.obsDim {
		panic(fmt.Sprintf("actor: SelectAction: %d values, want %d", len(obs), a.obsDim))
	}
	if eps := a.epsAt(a.steps); !a.loaded || (eps > 0 && a.rng.Float64() < eps) {
		return a.rng.IntN(a.actions)
	}
	return model.Argmax(a.net.Forward32(obs))
}

// Fill implements the runtime's Source: it steps the environment until
// LocalBatch n-step transitions are ready and appends exactly LocalBatch of
// them to t (transitions completed beyond that, when an episode's end
// flushes several at once, wait for the next Fill), then returns nil.
//
// Columns appended: Obs, NextObs, Action, Reward (the n-step return),
// Discount (gamma^m, 0 after a termination), Flags (FlagTerminal,
// FlagTruncated), Priority, and the optional ones Config.Columns selects:
// EpisodeID and EpisodeStep, GlobalStep, ActorID, StateHash and
// NextStateHash. t should be empty (as the pipeline hands it) or hold
// earlier batches of this actor.
//
// Priority is Ape-X's initial priority sel.Priority(|δ|), with
// δ = R + Discount·max_a Q(s', a) − Q(s, a) from the actor's own network
// (no target network) over the whole batch in one batched forward pass
// (bootstrap states that are also a later item's first state reuse that
// item's row; the others get a second, smaller pass). Before the first
// snapshot, or without a Prioritizer, priorities are unknown and Priority is
// left nil (the buffer gives such items its maximum priority); when t
// already holds prioritised items, unknown ones get sel.Priority(-1).
//
// A nil ctx or t is an ErrConfig error (nothing stepped), and a Fill that
// overlaps another Fill or Update of the same actor an ErrBusy one. When ctx
// ends, Fill returns nil at once (within one environment step) after
// appending the transitions completed so far (a partial batch, with unknown
// priorities), which the pipeline discards and counts. Errors: an
// environment that fails a step or returns an observation of the wrong
// width, a non-finite reward, a non-finite TD error (a diverged network,
// wrapping model.ErrNonFinite).
func (a *Actor) Fill(ctx context.Context, t *buffer.Transitions) error {
	if err := checkFill(ctx, t); err != nil {
		return err
	}
	if err := a.enter("Fill"); err != nil {
		return err
	}
	defer a.exit()
	done := ctx.Done()
	for a.adder.Out.Len() < a.cfg.LocalBatch {
		select {
		case <-done:
			return a.handOver(t, a.adder.Out.Len(), false)
		default:
		}
		if err := a.step(); err != nil {
			return err
		}
	}
	return a.handOver(t, a.cfg.LocalBatch, true)
}

// step takes one environment step (starting an episode first if none is
// running), feeds the adder and refreshes the parameters when due.
func (a *Actor) step() error {
	if err := a.ensureEpisode(); err != nil {
		return err
	}
	act := a.SelectAction(a.obs)
	res, err := a.env.Step(envs.Action{Index: act})
	if err != nil {
		return fmt.Errorf("actor %d: step %d: %w", a.cfg.ID, a.steps, err)
	}
	if err := a.convert(a.next, res.Obs); err != nil {
		return err
	}
	before := a.adder.Out.Len()
	if err := a.adder.Add(int32(act), res.Reward, a.next, res.Terminated, res.Truncated); err != nil {
		return fmt.Errorf("actor %d: %w", a.cfg.ID, err)
	}
	return a.advance(res, before)
}

// handOver appends the first k pending transitions to t (with priorities
// when prio is set and known) and drops them from the adder's output.
func (a *Actor) handOver(t *buffer.Transitions, k int, prio bool) error {
	n0 := t.Len()
	known := prio && a.loaded && a.sel != nil && k > 0
	if known {
		if err := a.tdErrors(k); err != nil {
			return err
		}
	}
	a.appendOut(t, k)
	switch {
	case known && len(t.Priority) == n0:
		for _, x := range a.absTD[:k] {
			t.Priority = append(t.Priority, a.sel.Priority(x))
		}
	case known: // t held items without priorities: keep the column empty
	case a.sel != nil && n0 > 0 && len(t.Priority) == n0:
		for range k {
			t.Priority = append(t.Priority, a.sel.Priority(-1))
		}
	}
	return nil
}

// tdErrors sets absTD[:k] to |R + Discount·max_a Q(s', a) − Q(s, a)| for
// the first k pending transitions, with the actor's network.
//
// One forward pass over the k first states gives Q(s, a) and, for a
// transition that bootstraps from s_{t+n} of an episode whose step t+n is
// also a pending item (item i+n: the adder emits an episode's steps in
// order, contiguously), max_a Q(s', a) from that item's row: the same
// float32 observation. The remaining bootstrap states (those of the last n
// items, and of time-limit truncations) go through a second pass; a
// transition with discount 0 needs none.
func (a *Actor) tdErrors(k int) error {
	out := &a.adder.Out
	d, A, n := a.obsDim, a.actions, a.cfg.NStep
	a.qsa, a.maxNext, a.absTD = grow(a.qsa, k), grow(a.maxNext, k), grow(a.absTD, k)
	a.far = a.far[:0]
	q := a.net.Forward32(out.Obs[:k*d])
	for i := range k {
		a.qsa[i] = q[i*A+int(out.Action[i])]
		j := i + n
		switch {
		case out.Discount[i] == 0:
			a.maxNext[i] = 0
		case out.Flags[i] == 0 && j < k && out.EpisodeID[j] == out.EpisodeID[i] && out.EpisodeStep[j] == out.EpisodeStep[i]+int32(n):
			a.maxNext[i] = rowMax(q[j*A : (j+1)*A])
		default:
			a.far = append(a.far, i)
		}
	}
	if len(a.far) > 0 {
		a.farObs = a.farObs[:0]
		for _, i := range a.far {
			a.farObs = append(a.farObs, out.NextObs[i*d:(i+1)*d]...)
		}
		q2 := a.net.Forward32(a.farObs)
		for r, i := range a.far {
			a.maxNext[i] = rowMax(q2[r*A : (r+1)*A])
		}
	}
	for i := range k {
		target := float64(out.Reward[i])
		if disc := float64(out.Discount[i]); disc != 0 {
			target += disc * a.maxNext[i]
		}
		a.absTD[i] = math.Abs(target - a.qsa[i])
	}
	if err := model.CheckFinite("actor TD error", a.absTD[:k]); err != nil {
		return fmt.Errorf("actor %d (parameters version %d): %w", a.cfg.ID, a.version, err)
	}
	return nil
}

// rowMax returns the largest value of a Q row (NaN if any is NaN, so a
// diverged network is reported rather than hidden).
func rowMax(q []float64) float64 {
	m := q[0]
	for _, v := range q[1:] {
		if v > m || math.IsNaN(v) {
			m = v
		}
	}
	return m
}

// grow returns s resliced to n, reallocated only when too small.
func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}
