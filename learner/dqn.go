package learner

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// seedStream is the second word of the learner's PCG seed, so a learner
// and an actor given the same Seed draw different streams.
const seedStream = 0x6170_6578_6c72_6e72 // "apexlrnr"

// DQN is the Ape-X learner: Double DQN (van Hasselt et al. 2016,
// arXiv:1509.06461) on n-step transitions with a target network
// (Horgan et al. 2018, arXiv:1803.00933, Algorithm 2), prioritized
// replay through a sampler.Method, and parameter publishing to the actors.
//
// One Step replays one batch:
//
//	a*_i = argmax_a Q(s'_i, a; θ)                     online network
//	y_i  = R_i + D_i · Q(s'_i, a*_i; θ⁻)               target network
//	δ_i  = Q(s_i, a_i; θ) − y_i
//	w_i  = v_i · c(|δ|)                               v: Weighter, c: Normalizer
//	L    = (1/B) Σ_i w_i · ρ(δ_i)                     ρ = the method's Loss
//	p_i  ← |δ_i|                                      written back through the Selector
//
// where R_i is the stored n-step return Σ_{k<m} γ^k r_k and D_i the stored
// discount (γ^m, or 0 when the episode terminated within the m steps: the
// learner does not multiply by γ again, and a row with D_i = 0 never reads
// the target network), v_i the method's per-item weight (PER's importance
// weight; 1 without a Weighter), c the method's batch scale computed from
// the batch's |δ| and treated as a constant (PAL's 1/λ̂; 1 without a
// Normalizer), and the TD errors come from the same forward pass as the
// loss, before the update.
//
// # Concurrency
//
// Step, Save and Load are called by one goroutine at a time (the runtime's
// learner goroutine, or with the learner stopped); they may run
// concurrently with inserts into the buffer and with actors reading the
// Store. Stats and Config are safe from any goroutine. A DQN must not be
// copied.
//
// # Cost
//
// A Step is a sample of Batch items, three forward passes of Batch rows
// (online and target on s', online on s), one backward pass and one Adam
// update, O(Batch) bookkeeping, a finiteness check of the parameters (about
// 1 ns each), the priority write-back, and every PublishEvery steps one
// snapshot (a copy of the parameters). After the first Step nothing is
// allocated except the published snapshots (two allocations each).
type DQN struct {
	busy   busy // refuses overlapping calls (ErrBusy)
	cfg    DQNConfig
	net    *model.Net
	target *model.Net
	adam   *model.Adam
	buf    *buffer.Buffer
	m      sampler.Method
	store  *model.Store
	pcg    *rand.PCG
	rng    *rand.Rand
	nA     int

	// steps is the number of completed steps; the version of the
	// parameters the online network holds.
	steps uint64

	// Scratch, allocated once by NewDQN (B = Batch, A = actions, In =
	// observation width).
	batch *buffer.Batch
	obs   []float64 // B×In: batch.Obs as float64
	next  []float64 // B×In: batch.NextObs as float64
	astar []int32   // B: argmax_a Q(s', a; θ)
	qnext []float64 // B: Q(s', a*; θ⁻)
	y     []float64 // B: targets
	qsa   []float64 // B: Q(s, a; θ)
	absTD []float64 // B: |y − Q(s, a; θ)|
	wts   []float64 // B: weights scaled by the Normalizer
	dq    []float64 // B×A: dL/dQ

	stats dqnCounters

	// par is the data-parallel step's state (SetWorkers), nil for the
	// serial step.
	par *dqnShards
}

// dqnCounters are the Stats fields, each an atomic word so Stats may read
// them from any goroutine while Step writes them (no allocation per Step).
type dqnCounters struct {
	replayCounters
	loss          atomic.Uint64 // float64 bits
	gradNorm      atomic.Uint64 // float64 bits
	publishes     atomic.Uint64
	version       atomic.Uint64
	targetUpdates atomic.Uint64
}

// DQNStats is a snapshot of a DQN's counters, for progress and metrics.
// Each field is read atomically; the snapshot as a whole may mix two
// consecutive steps.
type DQNStats struct {
	// Steps is the number of completed learner steps.
	Steps uint64 `json:"steps"`
	// Loss is the last step's weighted loss.
	Loss float64 `json:"loss"`
	// MeanAbsTD is the last batch's mean |y − Q(s, a)|.
	MeanAbsTD float64 `json:"mean_abs_td"`
	// MeanQ is the last batch's mean Q(s, a) (before the update).
	MeanQ float64 `json:"mean_q"`
	// GradNorm is the last step's gradient L2 norm before clipping.
	GradNorm float64 `json:"grad_norm"`
	// WriteBacks counts priorities written back and applied.
	WriteBacks uint64 `json:"write_backs"`
	// StaleWriteBacks counts write-backs the buffer dropped because the
	// item's slot had been overwritten since it was sampled.
	StaleWriteBacks uint64 `json:"stale_write_backs"`
	// Publishes counts snapshots published to the Store (the initial one
	// made by NewDQN and the one made by Load included).
	Publishes uint64 `json:"publishes"`
	// Version is the version of the last published snapshot (the step
	// count when it was made).
	Version uint64 `json:"version"`
	// TargetUpdates counts target-network updates (hard copies, or Polyak
	// steps when Tau > 0).
	TargetUpdates uint64 `json:"target_updates"`
	// Timing is the cumulative time in steps and in their replay phases.
	Timing Timing `json:"timing"`
	// Sampled sums |δ| and Q(s, a) over every sampled row.
	Sampled Moments `json:"sampled"`
}

// NewDQN returns a Double DQN learner training net on items that the
// replay method m samples from buf, publishing to store.
//
//   - net is the online network (the caller builds it with model.NewNet so
//     actors can share its Config). The learner owns it from now on: it is
//     updated in place by Step and must not be used by another goroutine.
//     Its outputs are the Q values of buf's discrete actions.
//   - m is the replay method (sampler.NewMethod builds the valid ones): its
//     Selector must be a stage over buf (it samples into buf's batches),
//     its Weighter (nil: every weight 1) gives the per-item weights before
//     the forward pass, its Normalizer (nil: none) a batch scale from the
//     batch's |δ|, and its Loss is ρ. m.Validate must pass.
//   - store receives net's snapshots: version 0 at once, so actors have
//     parameters before the first update, then one every PublishEvery
//     steps. nil publishes nothing.
//
// NewDQN creates the target network (a Clone of net) and the optimizer,
// and allocates the batch and every scratch vector. Errors wrap ErrConfig
// (and, for an invalid method, the sampler's or model's error).
func NewDQN(cfg DQNConfig, net *model.Net, buf *buffer.Buffer, m sampler.Method, store *model.Store) (*DQN, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	if net == nil || buf == nil {
		return nil, errorf(ErrConfig, "NewDQN needs a network and a buffer (got net %v, buf %v)", net != nil, buf != nil)
	}
	if err := m.Validate(); err != nil {
		return nil, errorf(ErrConfig, "%w", err)
	}
	bc := buf.Config()
	switch {
	case bc.Action != buffer.Discrete:
		return nil, errorf(ErrConfig, "the buffer stores %v actions; DQN needs discrete ones", bc.Action)
	case bc.ObsDim != net.In():
		return nil, errorf(ErrConfig, "the buffer's ObsDim is %d, the network's input width %d", bc.ObsDim, net.In())
	case bc.NumActions > net.Out():
		return nil, errorf(ErrConfig, "the buffer accepts %d actions, the network has %d outputs", bc.NumActions, net.Out())
	case cfg.Batch > bc.Capacity:
		return nil, errorf(ErrConfig, "Batch = %d is larger than the buffer's capacity %d", cfg.Batch, bc.Capacity)
	}
	if err := net.CheckFinite(); err != nil {
		return nil, errorf(ErrConfig, "initial network: %w", err)
	}
	adam, err := model.NewAdam(net.NumParams(), adamFor(cfg.adamConfig(), net))
	if err != nil {
		return nil, errorf(ErrConfig, "Adam: %w", err)
	}
	b, nA, in := cfg.Batch, net.Out(), net.In()
	batch, err := buf.NewBatch(b)
	if err != nil {
		return nil, errorf(ErrConfig, "Batch: %w", err)
	}
	pcg := rand.NewPCG(cfg.Seed, seedStream)
	l := &DQN{
		cfg:    cfg,
		net:    net,
		target: net.Clone(),
		adam:   adam,
		buf:    buf,
		m:      m,
		store:  store,
		pcg:    pcg,
		rng:    rand.New(pcg),
		nA:     nA,
		batch:  batch,
		obs:    make([]float64, b*in),
		next:   make([]float64, b*in),
		astar:  make([]int32, b),
		qnext:  make([]float64, b),
		y:      make([]float64, b),
		qsa:    make([]float64, b),
		absTD:  make([]float64, b),
		wts:    make([]float64, b),
		dq:     make([]float64, b*nA),
	}
	l.publish()
	return l, nil
}

// Config returns the learner's configuration with defaults filled in.
func (l *DQN) Config() DQNConfig { return l.cfg }

// Net returns the online network. It belongs to the learner: read it only
// while Step is not running.
func (l *DQN) Net() *model.Net { return l.net }

// Target returns the target network, under the same rule as Net.
func (l *DQN) Target() *model.Net { return l.target }

// Method returns the replay method the learner was built with.
func (l *DQN) Method() sampler.Method { return l.m }

// Steps returns the number of completed steps. Call it from the stepping
// goroutine; other goroutines read Stats().Steps.
func (l *DQN) Steps() uint64 { return l.steps }

// Stats returns a snapshot of the counters. Safe for concurrent use with
// Step; a few atomic loads, no allocation.
func (l *DQN) Stats() DQNStats {
	c := &l.stats
	f := func(a *atomic.Uint64) float64 { return math.Float64frombits(a.Load()) }
	return DQNStats{
		Steps:           c.steps.Load(),
		Loss:            f(&c.loss),
		MeanAbsTD:       f(&c.meanAbsTD),
		MeanQ:           f(&c.meanQ),
		GradNorm:        f(&c.gradNorm),
		WriteBacks:      c.writeBacks.Load(),
		StaleWriteBacks: c.stale.Load(),
		Publishes:       c.publishes.Load(),
		Version:         c.version.Load(),
		TargetUpdates:   c.targetUpdates.Load(),
		Timing:          c.timing.load(),
		Sampled:         c.sampled.load(),
	}
}

// Step performs one learner update (see DQN for the maths): sample a
// batch, weight it, compute the Double-DQN n-step targets, scale the
// weights by the method's Normalizer, regress Q(s, a_taken) toward the
// targets with one Adam step, write |δ| back through the Selector, update
// the target network when due and publish the parameters when due. It
// implements runtime.Stepper.
//
// Errors name the step (1-based: the step that failed) and wrap what went
// wrong: ctx's error if ctx is already done (nothing is done then); a
// sampling error (buffer.ErrEmpty, buffer.ErrBatchSize, ...: nothing
// changed); a Normalizer error (nothing changed); ErrAction for an action
// outside the network's outputs; a *model.NonFiniteError (errors.Is
// model.ErrNonFinite) for a NaN or infinite loss, or TD error under a
// method with a Normalizer (nothing changed), gradient (refused by Adam:
// nothing changed) or parameter after the update (the update has been
// applied: the network is poisoned and the run must stop). A failed step
// does not count: Steps is unchanged.
//
// Step must be called from one goroutine at a time: a call that overlaps
// another is refused with ErrBusy (nothing done), as is a nil ctx
// (ErrConfig). It allocates nothing except, every PublishEvery steps, the
// published snapshot.
func (l *DQN) Step(ctx context.Context) error {
	if err := l.busy.enterStep(ctx); err != nil {
		return err
	}
	defer l.busy.exit()
	step := l.steps + 1
	b := l.batch
	rs, weight, err := startReplay(l.m, l.rng, b, step, l.absTD, l.wts)
	if err != nil {
		return err
	}
	nA := l.nA
	for i, a := range b.Action {
		if a < 0 || int(a) >= nA {
			return fmt.Errorf("learner: step %d: %w: row %d (slot %d) has action %d, the network %d outputs", step, ErrAction, i, b.Refs[i].Slot, a, nA)
		}
	}
	if l.par != nil {
		loss, err := l.stepSharded(&rs, weight)
		if err != nil {
			return err
		}
		return l.finish(step, &rs, loss)
	}
	to64(l.obs, b.Obs)
	to64(l.next, b.NextObs)

	// Double DQN: the online network chooses a*, the target network values
	// it. These forwards come first: the training forward below must be the
	// last one on the online network before Backward.
	qn := l.net.Forward(l.next)
	for i := range l.astar {
		l.astar[i] = int32(model.Argmax(qn[i*nA : (i+1)*nA]))
	}
	model.Gather(l.qnext, l.target.Forward(l.next), l.astar)
	for i := range l.y {
		y := float64(b.Reward[i])
		if d := b.Discount[i]; d != 0 {
			y += float64(d) * l.qnext[i]
		}
		l.y[i] = y
	}

	q := l.net.Forward(l.obs)
	model.Gather(l.qsa, q, b.Action)
	for i, y := range l.y {
		l.absTD[i] = math.Abs(y - l.qsa[i])
	}
	if weight, err = rs.scale(weight); err != nil {
		return err
	}
	loss := l.m.Loss.Selected(l.dq, q, b.Action, l.y, weight)
	if err := model.CheckFiniteValue("loss", loss); err != nil {
		return l.fail(step, err)
	}
	l.net.Backward(l.dq)
	return l.finish(step, &rs, loss)
}

// finish is the end of Step once the loss is computed and the online
// network's Grads hold its gradient (serial and data-parallel alike): the
// Adam step, the checks, the write-back, the target update, the publish
// and the counters.
func (l *DQN) finish(step uint64, rs *replayStep, loss float64) error {
	if err := model.CheckFiniteValue("loss", loss); err != nil {
		return l.fail(step, err)
	}
	norm, err := l.adam.Step(l.net.Params(), l.net.Grads())
	if err != nil {
		return l.fail(step, err)
	}
	if err := l.net.CheckFinite(); err != nil {
		return l.fail(step, err)
	}
	if err := rs.writeBack(l.qsa, l.y); err != nil {
		return err
	}

	l.steps = step
	if l.cfg.Tau > 0 {
		l.target.SoftUpdate(l.net, l.cfg.Tau)
		l.stats.targetUpdates.Add(1)
	} else if step%uint64(l.cfg.TargetEvery) == 0 {
		l.target.CopyFrom(l.net)
		l.stats.targetUpdates.Add(1)
	}
	if step%uint64(l.cfg.PublishEvery) == 0 {
		l.publish()
	}
	c := &l.stats
	c.loss.Store(math.Float64bits(loss))
	c.gradNorm.Store(math.Float64bits(norm))
	rs.commit(&c.replayCounters, l.qsa)
	return nil
}

// fail wraps a non-finite error with the step, filling in where in the
// network a parameter or gradient index lies.
func (l *DQN) fail(step uint64, err error) error { return stepError(step, l.net, err) }

// publish makes the online parameters, versioned by the step count, the
// store's current snapshot.
func (l *DQN) publish() {
	if l.store == nil {
		return
	}
	l.store.Publish(l.net.Snapshot(l.steps))
	l.stats.publishes.Add(1)
	l.stats.version.Store(l.steps)
}

// to64 converts the float32 observations of a batch into dst.
func to64(dst []float64, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = float64(v)
	}
}
