package learner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// Streams of the TD3 learner's PCGs (the second word of each seed): one
// for sampling and the smoothing noise, one for the second critic's
// initialisation, so neither shifts the other and neither equals the DQN
// learner's or an actor's stream for the same Seed.
const (
	td3Stream  = 0x7464_335f_6c72_6e72 // "td3_lrnr"
	twinStream = 0x7464_335f_7477_696e // "td3_twin"
)

// TD3 is Twin Delayed Deep Deterministic policy gradient (Fujimoto, van
// Hoof & Meger 2018, arXiv:1802.09477, Algorithm 1) for continuous
// actions, with replay through a sampler.Method (TD3 itself: "uniform"
// with the MSE loss; TD3+LAP: "lap"; TD3+PAL: "pal", Fujimoto et al.
// 2020) and publishing of the actor's parameters to the actors.
//
// The actor μ maps an observation to u ∈ [−1, 1]^A (a Tanh output layer);
// the learner, like the actors, takes a = MaxAction·u as the action. Each
// critic maps [s, a] to a value. One Step replays one batch (m =
// MaxAction):
//
//	ε_i  = clip(σ̃·m·N(0, I), −c·m, c·m)              target policy smoothing
//	a'_i = clip(m·μ'(s'_i) + ε_i, −m, m)             target actor
//	y_i  = R_i + D_i · min(Q'_1, Q'_2)(s'_i, a'_i)    clipped double Q
//	δ_ki = Q_k(s_i, a_i) − y_i                       k = 1, 2
//	|δ_i| = max(|δ_1i|, |δ_2i|)                       written back, and the Normalizer's input
//	w_i  = v_i · c(|δ|)                              v: Weighter, c: Normalizer
//	L_Q  = (1/B) Σ_i w_i ρ(δ_1i) + (1/B) Σ_i w_i ρ(δ_2i)   one Adam step per critic
//
// and every PolicyDelay steps
//
//	L_μ  = −(1/B) Σ_i Q_1(s_i, m·μ(s_i))             one Adam step on the actor
//	θ'   ← τ·θ + (1−τ)·θ'                            all three target networks
//
// R_i is the stored n-step return and D_i the stored discount (γ^m, 0 at a
// termination: no further γ is applied), ρ the method's Loss (MSE for TD3:
// d², whose gradient is 2d, as PyTorch's mse_loss), v_i the method's weight
// (1 without a Weighter) and c its batch scale computed from |δ| and
// treated as a constant (PAL's 1/λ̂; 1 without a Normalizer). Taking the
// larger of the two critics' errors for the priority and for λ̂ is the
// paper's choice for LAP and PER (Fujimoto et al. 2020, §6); for PAL it is
// the "exact twin" of LAP (the authors' code weights each critic by its own
// error). The actor's gradient reaches it through the first critic's input
// (Net.BackwardInput): dL_μ/du = m · ∂L_μ/∂a, the action columns of
// ∂L_μ/∂[s, a]. The critics are updated first and the actor then uses the
// updated first critic, as in the authors' code.
//
// # Concurrency
//
// Step, Save and Load are called by one goroutine at a time (the runtime's
// learner goroutine, or with the learner stopped); they may run
// concurrently with inserts into the buffer and with actors reading the
// Store. Stats, Config and Method are safe from any goroutine. A TD3 must
// not be copied.
//
// # Cost
//
// A Step is a sample of Batch items, five forward passes of Batch rows
// (the target actor, the two target critics, the two critics), two critic
// backward passes and two Adam updates, O(Batch·A) noise draws and
// bookkeeping, a finiteness check of the critics' gradients and
// parameters, and the priority write-back. Every PolicyDelay steps it adds
// an actor forward, a first-critic forward and backward to its input, an
// actor backward, an Adam update, a finiteness check of the actor and
// three Polyak updates; every PublishEvery steps one snapshot of the actor.
// After the first Step nothing is allocated except the published
// snapshots (two allocations each).
type TD3 struct {
	busy       busy // refuses overlapping calls (ErrBusy)
	cfg        TD3Config
	actor      *model.Net
	actorTarg  *model.Net
	critic     [2]*model.Net
	criticTarg [2]*model.Net
	actorAdam  *model.Adam
	criticAdam [2]*model.Adam
	buf        *buffer.Buffer
	m          sampler.Method
	store      *model.Store
	pcg        *rand.PCG
	rng        *rand.Rand

	nS, nA int // observation and action widths

	// steps is the number of completed steps; actorUpdates the number of
	// actor (and target) updates, steps/PolicyDelay.
	steps        uint64
	actorUpdates uint64

	// Scratch, allocated once by NewTD3 (B = Batch, S = observation width,
	// A = action width, X = S+A, the critics' input width).
	batch *buffer.Batch
	obs   []float64 // B×S: s, the actor's input
	next  []float64 // B×S: s', the target actor's input
	xa    []float64 // B×X: [s, a] with the stored action
	xn    []float64 // B×X: [s', a'] with the smoothed target action
	xp    []float64 // B×X: [s, m·μ(s)] for the actor's loss
	noise []float64 // B×A: the clipped smoothing noise of the last step
	y     []float64 // B: targets
	q     [2][]float64
	grad  [2][]float64 // B: dL_Q/dQ_k
	absTD []float64    // B: max_k |δ_k|
	wts   []float64    // B: weights scaled by the Normalizer
	dqa   []float64    // B: dL_μ/dQ_1 = −1/B
	du    []float64    // B×A: dL_μ/du

	stats td3Counters

	// refer is the ReF-ER state when m is a ReF-ER method (m.Episodes set;
	// see td3Refer), nil otherwise.
	refer *td3Refer

	// par is the data-parallel step's state (SetWorkers), nil for the
	// serial step.
	par *td3Shards
}

// td3Counters are the Stats fields, each an atomic word so Stats may read
// them from any goroutine while Step writes them (no allocation per Step).
type td3Counters struct {
	replayCounters
	criticLoss     atomic.Uint64 // float64 bits
	actorLoss      atomic.Uint64 // float64 bits
	criticGradNorm atomic.Uint64 // float64 bits
	actorGradNorm  atomic.Uint64 // float64 bits
	publishes      atomic.Uint64
	version        atomic.Uint64
	actorUpdates   atomic.Uint64
	targetUpdates  atomic.Uint64
}

// TD3Stats is a snapshot of a TD3's counters, for progress and metrics.
// Each field is read atomically; the snapshot as a whole may mix two
// consecutive steps.
type TD3Stats struct {
	// Steps is the number of completed learner steps (critic updates).
	Steps uint64 `json:"steps"`
	// CriticLoss is the last step's weighted loss, summed over the two
	// critics.
	CriticLoss float64 `json:"critic_loss"`
	// ActorLoss is the last actor update's −mean Q_1(s, m·μ(s)).
	ActorLoss float64 `json:"actor_loss"`
	// MeanAbsTD is the last batch's mean max(|δ_1|, |δ_2|).
	MeanAbsTD float64 `json:"mean_abs_td"`
	// MeanQ is the last batch's mean Q_1(s, a) (before the update).
	MeanQ float64 `json:"mean_q"`
	// CriticGradNorm is the last step's larger critic gradient L2 norm,
	// before clipping.
	CriticGradNorm float64 `json:"critic_grad_norm"`
	// ActorGradNorm is the last actor update's gradient L2 norm, before
	// clipping.
	ActorGradNorm float64 `json:"actor_grad_norm"`
	// WriteBacks counts priorities written back and applied.
	WriteBacks uint64 `json:"write_backs"`
	// StaleWriteBacks counts write-backs the buffer dropped because the
	// item's slot had been overwritten since it was sampled.
	StaleWriteBacks uint64 `json:"stale_write_backs"`
	// Publishes counts actor snapshots published to the Store (the initial
	// one made by NewTD3 and the one made by Load included).
	Publishes uint64 `json:"publishes"`
	// Version is the version of the last published snapshot (the step
	// count when it was made).
	Version uint64 `json:"version"`
	// ActorUpdates counts actor updates (Steps/PolicyDelay).
	ActorUpdates uint64 `json:"actor_updates"`
	// TargetUpdates counts Polyak updates of the target networks (one per
	// actor update, all three networks together).
	TargetUpdates uint64 `json:"target_updates"`
	// Timing is the cumulative time in steps and in their replay phases.
	Timing Timing `json:"timing"`
	// Sampled sums |δ| (the larger of the twin critics') and Q_1(s, a)
	// over every sampled row.
	Sampled Moments `json:"sampled"`
}

// NewTD3 returns a TD3 learner training actorNet and two critics on items
// that the replay method m samples from buf, publishing the actor to
// store.
//
//   - actorNet is the online actor μ: In = the buffer's ObsDim, Out = its
//     ActionDim, a bounded output activation (model.Config{OutAct:
//     model.Tanh}; Softsign is accepted too) so that μ(s) ∈ [−1, 1]^A; the
//     learner scales it by cfg.MaxAction. Actors share its Config and
//     scale its output the same way.
//   - critic is the first critic Q_1: In = ObsDim + ActionDim (the
//     observation, then the action in the environment's units), Out = 1,
//     no dueling head. The second critic Q_2 is a new network of the same
//     Config, initialised independently by model.NewNet from a PCG seeded
//     with cfg.Seed (so the twins never start identical).
//   - buf must store continuous actions (buffer.Config.Action ==
//     buffer.Continuous) of ActionDim = actorNet.Out(), as the actors sent
//     them to the environment (in [−MaxAction, MaxAction]).
//   - m is the replay method (sampler.NewMethod); m.Validate must pass and
//     m.Selector must be a stage over buf. TD3's own is "uniform" with
//     model.Loss{Kind: model.MSE}.
//   - store receives the actor's snapshots: version 0 at once, then one
//     every PublishEvery steps. nil publishes nothing.
//
// The learner owns actorNet and critic from now on (Step updates them in
// place). NewTD3 makes the second critic, the three target networks
// (copies), the three optimizers and every scratch buffer. Cost:
// O(parameters + Batch·(ObsDim+ActionDim)). Errors wrap ErrConfig and say
// what does not fit (and, for an invalid method, wrap the sampler's or
// model's error).
func NewTD3(cfg TD3Config, actorNet *model.Net, critic *model.Net, buf *buffer.Buffer, m sampler.Method, store *model.Store) (*TD3, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	if actorNet == nil || critic == nil || buf == nil {
		return nil, errorf(ErrConfig, "NewTD3 needs an actor, a critic and a buffer (got actor %v, critic %v, buf %v)", actorNet != nil, critic != nil, buf != nil)
	}
	if actorNet == critic {
		return nil, errorf(ErrConfig, "the actor and the critic are the same network")
	}
	if err := m.Validate(); err != nil {
		return nil, errorf(ErrConfig, "%w", err)
	}
	bc, ac, cc := buf.Config(), actorNet.Config(), critic.Config()
	nS, nA := bc.ObsDim, bc.ActionDim
	switch {
	case bc.Action != buffer.Continuous:
		return nil, errorf(ErrConfig, "the buffer stores %v actions; TD3 needs continuous ones", bc.Action)
	case actorNet.In() != nS:
		return nil, errorf(ErrConfig, "the buffer's ObsDim is %d, the actor's input width %d", nS, actorNet.In())
	case actorNet.Out() != nA:
		return nil, errorf(ErrConfig, "the buffer's ActionDim is %d, the actor's output width %d", nA, actorNet.Out())
	case ac.OutAct != model.Tanh && ac.OutAct != model.Softsign:
		return nil, errorf(ErrConfig, "the actor's output activation is %v; it must be bounded to [-1, 1] (tanh or softsign): the learner scales it by MaxAction", ac.OutAct)
	case critic.In() != nS+nA:
		return nil, errorf(ErrConfig, "the critic's input width is %d, want ObsDim + ActionDim = %d + %d", critic.In(), nS, nA)
	case critic.Out() != 1:
		return nil, errorf(ErrConfig, "the critic has %d outputs, want 1 (Q(s, a))", critic.Out())
	case cc.Dueling:
		return nil, errorf(ErrConfig, "the critic has a dueling head (that is for discrete-action Q networks)")
	case cfg.Batch > bc.Capacity:
		return nil, errorf(ErrConfig, "Batch = %d is larger than the buffer's capacity %d", cfg.Batch, bc.Capacity)
	}
	if err := actorNet.CheckFinite(); err != nil {
		return nil, errorf(ErrConfig, "initial actor: %w", err)
	}
	if err := critic.CheckFinite(); err != nil {
		return nil, errorf(ErrConfig, "initial critic: %w", err)
	}
	twin, err := model.NewNet(cc, rand.New(rand.NewPCG(cfg.Seed, twinStream)))
	if err != nil {
		return nil, errorf(ErrConfig, "second critic: %w", err)
	}
	actorAdam, err := model.NewAdam(actorNet.NumParams(), adamFor(cfg.adamConfig(cfg.ActorLR), actorNet))
	if err != nil {
		return nil, errorf(ErrConfig, "actor Adam: %w", err)
	}
	var criticAdam [2]*model.Adam
	for k := range criticAdam {
		if criticAdam[k], err = model.NewAdam(critic.NumParams(), adamFor(cfg.adamConfig(cfg.CriticLR), critic)); err != nil {
			return nil, errorf(ErrConfig, "critic Adam: %w", err)
		}
	}
	b, x := cfg.Batch, nS+nA
	batch, err := buf.NewBatch(b)
	if err != nil {
		return nil, errorf(ErrConfig, "Batch: %w", err)
	}
	pcg := rand.NewPCG(cfg.Seed, td3Stream)
	l := &TD3{
		cfg:        cfg,
		actor:      actorNet,
		actorTarg:  actorNet.Clone(),
		critic:     [2]*model.Net{critic, twin},
		criticTarg: [2]*model.Net{critic.Clone(), twin.Clone()},
		actorAdam:  actorAdam,
		criticAdam: criticAdam,
		buf:        buf,
		m:          m,
		store:      store,
		pcg:        pcg,
		rng:        rand.New(pcg),
		nS:         nS,
		nA:         nA,
		batch:      batch,
		obs:        make([]float64, b*nS),
		next:       make([]float64, b*nS),
		xa:         make([]float64, b*x),
		xn:         make([]float64, b*x),
		xp:         make([]float64, b*x),
		noise:      make([]float64, b*nA),
		y:          make([]float64, b),
		q:          [2][]float64{make([]float64, b), make([]float64, b)},
		grad:       [2][]float64{make([]float64, b), make([]float64, b)},
		absTD:      make([]float64, b),
		wts:        make([]float64, b),
		dqa:        make([]float64, b),
		du:         make([]float64, b*nA),
	}
	for i := range l.dqa {
		l.dqa[i] = -1 / float64(b)
	}
	if m.Episodes != nil {
		if l.refer, err = newTD3Refer(m.Episodes, bc, b, nA); err != nil {
			return nil, err
		}
	}
	l.publish()
	return l, nil
}

// Config returns the learner's configuration with defaults filled in.
func (l *TD3) Config() TD3Config { return l.cfg }

// REFER returns the learner's ReF-ER controller when its method is a
// ReF-ER one, nil otherwise (its Stats are safe from any goroutine;
// everything else belongs to the stepping goroutine).
func (l *TD3) REFER() *REFERController {
	if l.refer == nil {
		return nil
	}
	return l.refer.ctl
}

// Method returns the replay method the learner was built with.
func (l *TD3) Method() sampler.Method { return l.m }

// Actor returns the online actor network. It belongs to the learner: read
// it only while Step is not running.
func (l *TD3) Actor() *model.Net { return l.actor }

// Critics returns the two online critics (the first is the one NewTD3 was
// given), under the same rule as Actor.
func (l *TD3) Critics() [2]*model.Net { return l.critic }

// Targets returns the target actor and the two target critics, under the
// same rule as Actor.
func (l *TD3) Targets() (actor *model.Net, critics [2]*model.Net) { return l.actorTarg, l.criticTarg }

// Steps returns the number of completed steps. Call it from the stepping
// goroutine; other goroutines read Stats().Steps.
func (l *TD3) Steps() uint64 { return l.steps }

// Stats returns a snapshot of the counters. Safe for concurrent use with
// Step; a few atomic loads, no allocation.
func (l *TD3) Stats() TD3Stats {
	c := &l.stats
	f := func(a *atomic.Uint64) float64 { return math.Float64frombits(a.Load()) }
	return TD3Stats{
		Steps:           c.steps.Load(),
		CriticLoss:      f(&c.criticLoss),
		ActorLoss:       f(&c.actorLoss),
		MeanAbsTD:       f(&c.meanAbsTD),
		MeanQ:           f(&c.meanQ),
		CriticGradNorm:  f(&c.criticGradNorm),
		ActorGradNorm:   f(&c.actorGradNorm),
		WriteBacks:      c.writeBacks.Load(),
		StaleWriteBacks: c.stale.Load(),
		Publishes:       c.publishes.Load(),
		Version:         c.version.Load(),
		ActorUpdates:    c.actorUpdates.Load(),
		TargetUpdates:   c.targetUpdates.Load(),
		Timing:          c.timing.load(),
		Sampled:         c.sampled.load(),
	}
}

// Step performs one TD3 update (see TD3 for the maths): sample a batch,
// weight it, compute the smoothed clipped-double-Q targets, regress both
// critics toward them with one Adam step each, write max(|δ_1|, |δ_2|)
// back through the Selector, and when due update the actor through the
// first critic, Polyak-update the target networks and publish the actor.
// It implements runtime.Stepper.
//
// Errors name the step (1-based) and wrap what went wrong: ctx's error if
// ctx is already done (nothing is done then); a sampling or Weighter error
// (nothing changed); under ReF-ER, the controller's RowWeights error
// (buffer.ErrShape, nothing changed); a Normalizer error (nothing changed); a
// *model.NonFiniteError (errors.Is model.ErrNonFinite) for a NaN or
// infinite critic loss (or TD error, under a method with a Normalizer) or
// critic gradient (nothing changed: both critics'
// gradients are checked before either Adam step) or critic parameter after
// the update (the update has been applied: the learner is poisoned and the
// run must stop). A write-back error comes after the critics' update. On a
// delayed step the actor phase comes after the critics' update and
// write-back: a non-finite actor loss, actor gradient
// (refused by Adam) or actor parameter there leaves the critics updated,
// and like a poisoned parameter the run must stop. A failed step does not
// count: Steps is unchanged.
//
// Step must be called from one goroutine at a time: a call that overlaps
// another is refused with ErrBusy (nothing done), as is a nil ctx
// (ErrConfig). It allocates nothing except, every PublishEvery steps, the
// published snapshot.
func (l *TD3) Step(ctx context.Context) error {
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
	if l.refer != nil {
		// ReF-ER anneals the step size with its controller (Eq. 13).
		sc := l.refer.ctl.LRScale()
		l.actorAdam.SetLR(l.cfg.ActorLR * sc)
		for _, a := range l.criticAdam {
			a.SetLR(l.cfg.CriticLR * sc)
		}
	}
	if l.par != nil { // SetWorkers refuses ReF-ER: no ratios here
		loss, err := l.criticsSharded(&rs, weight)
		if err != nil {
			return err
		}
		if err := model.CheckFiniteValue("critic loss", loss); err != nil {
			return l.fail(step, nil, err)
		}
		return l.finish(step, &rs, loss)
	}
	to64(l.obs, b.Obs)
	to64(l.next, b.NextObs)
	l.joinRows(l.xa, l.obs, nil, b.ActionVec)
	if l.refer != nil { // ReF-ER: rho and KL with the actor before this step's updates
		if weight, err = l.refer.ratios(b, l.actor.Forward(l.obs), l.cfg.MaxAction, weight); err != nil {
			return fmt.Errorf("learner: step %d: %w", step, err)
		}
		l.clipActions(l.xa)
	}

	// Targets: y = R + D·min_k Q'_k(s', clip(m·μ'(s') + ε, −m, m)).
	l.targetActions()
	qt := l.criticTarg[0].Forward(l.xn)
	copy(l.y, qt)
	qt = l.criticTarg[1].Forward(l.xn)
	for i := range l.y {
		y := float64(b.Reward[i])
		if d := b.Discount[i]; d != 0 {
			y += float64(d) * min(l.y[i], qt[i])
		}
		l.y[i] = y
	}

	// Critics: forward both on [s, a], TD errors, weights, losses.
	for k, c := range l.critic {
		copy(l.q[k], c.Forward(l.xa))
	}
	for i, y := range l.y {
		l.absTD[i] = max(math.Abs(l.q[0][i]-y), math.Abs(l.q[1][i]-y))
	}
	if weight, err = rs.scale(weight); err != nil {
		return err
	}
	var loss float64
	for k := range l.critic {
		loss += l.m.Loss.Value(l.grad[k], l.q[k], l.y, weight)
	}
	if err := model.CheckFiniteValue("critic loss", loss); err != nil {
		return l.fail(step, nil, err)
	}
	for k, c := range l.critic {
		c.Backward(l.grad[k])
	}
	return l.finish(step, &rs, loss)
}

// finish is the end of Step once the critic loss is computed and the
// critics' Grads hold their gradients (serial and data-parallel alike):
// the checks, the critics' Adam steps, the write-back, the delayed actor
// update and target updates, the publish and the counters.
func (l *TD3) finish(step uint64, rs *replayStep, loss float64) error {
	for _, c := range l.critic { // before either update, so a refusal changes nothing
		if err := c.CheckGrads(); err != nil {
			return l.fail(step, c, err)
		}
	}
	var norm float64
	for k, c := range l.critic {
		n, err := l.criticAdam[k].Step(c.Params(), c.Grads())
		if err != nil {
			return l.fail(step, c, err)
		}
		norm = max(norm, n)
	}
	for _, c := range l.critic {
		if err := c.CheckFinite(); err != nil {
			return l.fail(step, c, err)
		}
	}
	if err := rs.writeBack(l.q[0], l.y); err != nil {
		return err
	}
	if l.refer != nil {
		if err := l.refer.ctl.Refresh(l.refer.rho, l.q[0], l.refer.kl); err != nil {
			return fmt.Errorf("learner: step %d: refer refresh: %w", step, err)
		}
		rs.wrote()
	}

	// Delayed: the actor through the updated first critic, then the
	// targets.
	st := &l.stats
	if step%uint64(l.cfg.PolicyDelay) == 0 {
		var aloss float64
		if l.par != nil {
			aloss = l.actorGradSharded()
		} else {
			aloss = l.actorGrad()
		}
		if err := model.CheckFiniteValue("actor loss", aloss); err != nil {
			return l.fail(step, nil, err)
		}
		anorm, err := l.actorAdam.Step(l.actor.Params(), l.actor.Grads())
		if err != nil {
			return l.fail(step, l.actor, err)
		}
		if err := l.actor.CheckFinite(); err != nil {
			return l.fail(step, l.actor, err)
		}
		l.actorTarg.SoftUpdate(l.actor, l.cfg.Tau)
		for k, t := range l.criticTarg {
			t.SoftUpdate(l.critic[k], l.cfg.Tau)
		}
		l.actorUpdates++
		st.actorLoss.Store(math.Float64bits(aloss))
		st.actorGradNorm.Store(math.Float64bits(anorm))
		st.actorUpdates.Store(l.actorUpdates)
		st.targetUpdates.Add(1)
	}

	if l.refer != nil {
		l.refer.ctl.AfterStep(step)
	}
	l.steps = step
	if step%uint64(l.cfg.PublishEvery) == 0 {
		l.publish()
	}
	st.criticLoss.Store(math.Float64bits(loss))
	st.criticGradNorm.Store(math.Float64bits(norm))
	rs.commit(&st.replayCounters, l.q[0])
	return nil
}

// targetActions fills xn with [s', a'], a' = clip(m·μ'(s') + ε, −m, m),
// ε = clip(σ̃·m·N(0, I), −c·m, c·m) drawn from the learner's stream (one
// normal per row and action dimension, also for terminal rows, so the
// stream's use does not depend on the data) and kept in noise.
func (l *TD3) targetActions() {
	mx := l.cfg.MaxAction
	sigma, lim := l.cfg.PolicyNoise*mx, l.cfg.NoiseClip*mx
	u := l.actorTarg.Forward(l.next)
	for i := range l.noise {
		e := 0.0
		if sigma > 0 {
			e = max(-lim, min(lim, sigma*l.rng.NormFloat64()))
		}
		l.noise[i] = e
	}
	l.joinRows(l.xn, l.next, u, nil)
	x := l.nS + l.nA
	for i := range len(l.y) {
		for j := range l.nA {
			p := &l.xn[i*x+l.nS+j]
			*p = max(-mx, min(mx, *p+l.noise[i*l.nA+j]))
		}
	}
}

// actorGrad computes the actor's loss −(1/B) Σ_i Q_1(s_i, m·μ(s_i)) on the
// batch's observations (l.obs) and leaves its gradient in the actor's
// Grads, through the first critic's input. It returns the loss. The first
// critic's Grads are overwritten (they have been used).
func (l *TD3) actorGrad() float64 {
	u := l.actor.Forward(l.obs)
	l.joinRows(l.xp, l.obs, u, nil)
	q := l.critic[0].Forward(l.xp)
	var sum float64
	for i, v := range q {
		if l.refer != nil { // per-row weights of the DPG term: −algW_i/B
			w := l.refer.algW[i]
			l.dqa[i] = -w / float64(len(l.dqa))
			v *= w
		}
		sum += v
	}
	dx := l.critic[0].BackwardInput(l.dqa)
	x, mx := l.nS+l.nA, l.cfg.MaxAction
	for i := range len(l.dqa) {
		for j := range l.nA {
			l.du[i*l.nA+j] = mx * dx[i*x+l.nS+j]
		}
	}
	loss := -sum / float64(len(q))
	if l.refer != nil {
		loss += l.refer.klGrad(l.batch, l.du, u, mx)
	}
	l.actor.Backward(l.du)
	return loss
}

// clipActions clips the action columns of dst (B×(S+A)) to [−MaxAction,
// MaxAction]: under ReF-ER the stored action is the unclipped sample and
// the environment played it clipped.
func (l *TD3) clipActions(dst []float64) {
	x, mx := l.nS+l.nA, l.cfg.MaxAction
	for i := range len(dst) / x {
		for j := range l.nA {
			p := &dst[i*x+l.nS+j]
			*p = max(-mx, min(mx, *p))
		}
	}
}

// joinRows writes each row of dst (B×(S+A)) as [s, a]: s from obs, a from
// u scaled by MaxAction when u is not nil, else from the float32 actions.
func (l *TD3) joinRows(dst, obs, u []float64, a32 []float32) {
	nS, nA, mx := l.nS, l.nA, l.cfg.MaxAction
	x := nS + nA
	for i := range len(obs) / nS {
		row := dst[i*x : (i+1)*x]
		copy(row[:nS], obs[i*nS:(i+1)*nS])
		if u != nil {
			for j, v := range u[i*nA : (i+1)*nA] {
				row[nS+j] = mx * v
			}
		} else {
			for j, v := range a32[i*nA : (i+1)*nA] {
				row[nS+j] = float64(v)
			}
		}
	}
}

// fail wraps a non-finite error with the step and, for an error in net's
// parameters or gradient, names the network and the place in it.
func (l *TD3) fail(step uint64, net *model.Net, err error) error {
	err = stepError(step, net, err)
	var nf *model.NonFiniteError
	if net != nil && errors.As(err, &nf) {
		nf.Where = strings.TrimSpace(l.netName(net) + " " + nf.Where)
	}
	return err
}

// netName names one of the learner's online networks for error messages.
func (l *TD3) netName(n *model.Net) string {
	switch n {
	case l.actor:
		return "actor"
	case l.critic[0]:
		return "critic 1"
	case l.critic[1]:
		return "critic 2"
	}
	return "network"
}

// publish makes the actor's parameters, versioned by the step count, the
// store's current snapshot.
func (l *TD3) publish() {
	if l.store == nil {
		return
	}
	l.store.Publish(l.actor.Snapshot(l.steps))
	l.stats.publishes.Add(1)
	l.stats.version.Store(l.steps)
}
