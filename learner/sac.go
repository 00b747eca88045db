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

// Streams of the SAC learner's PCGs (the second word of each seed): one
// for sampling and the policy's noise, one for the second critic's
// initialisation, distinct from TD3's and DQN's.
const (
	sacStream     = 0x7361_635f_6c72_6e72 // "sac_lrnr"
	sacTwinStream = 0x7361_635f_7477_696e // "sac_twin"
)

// halfLog2Pi is ½·log(2π), the Gaussian density's constant per dimension.
var halfLog2Pi = 0.5 * math.Log(2*math.Pi)

// maxLogAlpha bounds |log α| in a checkpoint: beyond it α or 1/α is not a
// finite float64.
const maxLogAlpha = 700

// SAC is Soft Actor-Critic with automatic entropy tuning (Haarnoja et al.
// 2018, "Soft Actor-Critic Algorithms and Applications", arXiv:1812.05905,
// Algorithm 1, Eqs. 5–7, 17–18) for continuous actions, with replay
// through a sampler.Method (SAC itself: "uniform" with the MSE loss) and
// publishing of the policy's parameters to the actors.
//
// The policy network maps s to 2A outputs, the means μ(s) and raw log
// standard deviations of a diagonal Gaussian (model.SquashedLogStd clamps
// them to [−20, 2]); an action is u = μ + σ·ε, ε ~ N(0, I), squashed to
// tanh(u) ∈ (−1, 1)^A and scaled by m = MaxAction. Its log-density, in
// policy units (tanh(u), before the scaling; a constant A·log m apart
// from the density in the environment's units), is the change of
// variables
//
//	log π(a|s) = Σ_j log N(u_j; μ_j, σ_j) − log(1 − tanh(u_j)²)
//
// with model.TanhLogDet's stable form of the second term. Each critic maps
// [s, a] to a value. One Step replays one batch (α = e^{log α}, fresh ε
// for every row and dimension of each term):
//
//	a'_i  ~ π(·|s'_i)                                               the current policy at s'
//	y_i   = R_i + D_i·(min(Q'_1, Q'_2)(s'_i, a'_i) − α·log π(a'_i|s'_i))
//	δ_ki  = Q_k(s_i, a_i) − y_i                                      k = 1, 2
//	|δ_i| = max(|δ_1i|, |δ_2i|)                                      written back, and the Normalizer's input
//	L_Q   = (1/B) Σ_i w_i ρ(δ_1i) + (1/B) Σ_i w_i ρ(δ_2i)            one Adam step per critic
//	ã_i   = m·tanh(μ(s_i) + σ(s_i)·ε_i)                              reparameterised
//	L_π   = (1/B) Σ_i α·log π(ã_i|s_i) − min(Q_1, Q_2)(s_i, ã_i)     one Adam step on the policy (Eq. 7)
//	J(α)  = −α·(1/B) Σ_i (log π(ã_i|s_i) + H̄)                        one Adam step on log α (Eq. 18)
//	θ'_k  ← τ·θ_k + (1−τ)·θ'_k                                       both target critics, every step
//
// R_i, D_i, ρ, w_i are as for TD3 (the stored n-step return and discount,
// the method's loss, the Weighter's weight times the Normalizer's batch
// scale); the policy and temperature losses are not weighted, as TD3's
// actor loss is not. H̄ is SACConfig.TargetEntropy (−A by default). The
// critics are updated first and the policy then uses the updated critics
// (as TD3 here, SpinningUp and CleanRL do; softlearning computes all three
// gradients before applying any); the temperature's gradient uses the
// log-probabilities of the policy's forward pass, before its update
// (softlearning's order). J is the paper's Eq. 18 differentiated through
// log α, dJ/d log α = −α·mean(log π + H̄); softlearning writes log α in
// place of α in front of the bracket, which only rescales the gradient
// Adam normalises.
//
// The policy's gradient with ε held fixed: with t = tanh(u), g_u = ∂L_π/∂u
// = α·2t/B − m·(1 − t²)·∂min Q/∂a/B (through the input of whichever critic
// is the smaller on the row, Net.BackwardInput), ∂L_π/∂μ = g_u and
// ∂L_π/∂log σ = g_u·σ·ε − α/B (0 where the clamp is active).
//
// # Concurrency
//
// Step, Save and Load are called by one goroutine at a time (the runtime's
// learner goroutine, or with the learner stopped); they may run
// concurrently with inserts into the buffer and with actors reading the
// Store. Stats, Config and Method are safe from any goroutine. A SAC must
// not be copied.
//
// # Cost
//
// A Step is a sample of Batch items, eight forward passes of Batch rows
// (the policy at s' and s, the two target critics, the two critics on the
// stored actions, the two critics again on the policy's actions), two
// critic backward passes, two critic
// backward passes to their inputs, a policy backward pass, four Adam
// updates (one of a single parameter), 2·Batch·A normal draws and as many
// tanh and exp evaluations, finiteness checks of every gradient and
// parameter updated, two Polyak updates and the priority write-back;
// every PublishEvery steps one snapshot of the policy. After the first
// Step nothing is allocated except the published snapshots.
type SAC struct {
	busy       busy // refuses overlapping calls (ErrBusy)
	cfg        SACConfig
	policy     *model.Net
	critic     [2]*model.Net
	criticTarg [2]*model.Net
	policyAdam *model.Adam
	criticAdam [2]*model.Adam
	alphaAdam  *model.Adam
	buf        *buffer.Buffer
	m          sampler.Method
	store      *model.Store
	pcg        *rand.PCG
	rng        *rand.Rand

	nS, nA int     // observation and action widths
	hbar   float64 // the target entropy H̄

	// logAlpha[0] is log α, the temperature's one parameter (a slice for
	// Adam); alphaGrad[0] its last gradient.
	logAlpha  []float64
	alphaGrad []float64

	// steps is the number of completed steps.
	steps uint64

	// Scratch, allocated once by NewSAC (B = Batch, S = observation width,
	// A = action width, X = S+A, the critics' input width).
	batch *buffer.Batch
	obs   []float64    // B×S: s, the policy's input
	next  []float64    // B×S: s'
	xa    []float64    // B×X: [s, a] with the stored action
	xn    []float64    // B×X: [s', a'] with the target action
	xp    []float64    // B×X: [s, ã] with the policy's reparameterised action
	epsN  []float64    // B×A: the target actions' noise
	epsP  []float64    // B×A: the policy loss's noise
	u     []float64    // B×A: the policy loss's pre-squash actions
	logp  []float64    // B: log π of the target actions, then of the policy's
	y     []float64    // B: targets
	q     [2][]float64 // B: Q_k(s, a)
	qp    [2][]float64 // B: Q_k(s, ã)
	grad  [2][]float64 // B: dL_Q/dQ_k, then dL_π/dQ_k
	absTD []float64    // B: max_k |δ_k|
	wts   []float64    // B: weights scaled by the Normalizer
	da    []float64    // B×A: ∂L_π/∂a through the critics
	dout  []float64    // B×2A: ∂L_π/∂(policy outputs)
	pout  []float64    // the policy's outputs of policyLoss's pass (its own buffer)
	ls    []float64    // A: one row's clamped log stds

	stats sacCounters

	// par is the data-parallel step's state (SetWorkers), nil for the
	// serial step.
	par *sacShards
}

// sacCounters are the Stats fields, each an atomic word so Stats may read
// them from any goroutine while Step writes them.
type sacCounters struct {
	replayCounters
	criticLoss     atomic.Uint64 // float64 bits
	policyLoss     atomic.Uint64 // float64 bits
	alphaLoss      atomic.Uint64 // float64 bits
	alpha          atomic.Uint64 // float64 bits
	entropy        atomic.Uint64 // float64 bits
	criticGradNorm atomic.Uint64 // float64 bits
	policyGradNorm atomic.Uint64 // float64 bits
	publishes      atomic.Uint64
	version        atomic.Uint64
	targetUpdates  atomic.Uint64
}

// SACStats is a snapshot of a SAC's counters, for progress and metrics.
// Each field is read atomically; the snapshot as a whole may mix two
// consecutive steps.
type SACStats struct {
	// Steps is the number of completed learner steps (each updates the
	// critics, the policy, the temperature and the targets).
	Steps uint64 `json:"steps"`
	// CriticLoss is the last step's weighted loss, summed over the two
	// critics.
	CriticLoss float64 `json:"critic_loss"`
	// PolicyLoss is the last step's L_π, mean α·log π(ã|s) − min Q(s, ã).
	PolicyLoss float64 `json:"policy_loss"`
	// AlphaLoss is the last step's J(α) = −α·mean(log π(ã|s) + H̄).
	AlphaLoss float64 `json:"alpha_loss"`
	// Alpha is the temperature α now (the initial one before any step).
	Alpha float64 `json:"alpha"`
	// Entropy is the last batch's −mean log π(ã|s), a one-sample estimate
	// of the policy's entropy in policy units (nats; compare with
	// SACConfig.TargetEntropy).
	Entropy float64 `json:"entropy"`
	// MeanAbsTD is the last batch's mean max(|δ_1|, |δ_2|).
	MeanAbsTD float64 `json:"mean_abs_td"`
	// MeanQ is the last batch's mean Q_1(s, a) (before the update).
	MeanQ float64 `json:"mean_q"`
	// CriticGradNorm is the last step's larger critic gradient L2 norm,
	// before clipping.
	CriticGradNorm float64 `json:"critic_grad_norm"`
	// PolicyGradNorm is the last step's policy gradient L2 norm, before
	// clipping.
	PolicyGradNorm float64 `json:"policy_grad_norm"`
	// WriteBacks counts priorities written back and applied.
	WriteBacks uint64 `json:"write_backs"`
	// StaleWriteBacks counts write-backs the buffer dropped because the
	// item's slot had been overwritten since it was sampled.
	StaleWriteBacks uint64 `json:"stale_write_backs"`
	// Publishes counts policy snapshots published to the Store (the
	// initial one made by NewSAC and the one made by Load included).
	Publishes uint64 `json:"publishes"`
	// Version is the version of the last published snapshot (the step
	// count when it was made).
	Version uint64 `json:"version"`
	// TargetUpdates counts Polyak updates of the target critics (one per
	// step, both critics together).
	TargetUpdates uint64 `json:"target_updates"`
	// Timing is the cumulative time in steps and in their replay phases.
	Timing Timing `json:"timing"`
	// Sampled sums |δ| (the larger of the twin critics') and Q_1(s, a)
	// over every sampled row.
	Sampled Moments `json:"sampled"`
}

// SACPolicyConfig is the policy network SAC and its actors use for nS
// observations, nA action dimensions and the hidden widths hidden: ReLU
// hidden layers and a linear output of 2·nA values (the means, then the
// raw log standard deviations).
func SACPolicyConfig(nS, nA int, hidden []int) model.Config {
	return model.Config{In: nS, Hidden: hidden, Out: 2 * nA}
}

// NewSAC returns a SAC learner training policy and two critics on items
// that the replay method m samples from buf, publishing the policy to
// store.
//
//   - policy maps an observation (In = the buffer's ObsDim) to 2·A
//     outputs (A = its ActionDim) with an Identity output activation:
//     SACPolicyConfig. Actors share its Config (actor.NewSquashed).
//   - critic is the first critic Q_1: In = ObsDim + ActionDim (the
//     observation, then the action in the environment's units), Out = 1,
//     no dueling head. The second critic is a new network of the same
//     Config, initialised by model.NewNet from a PCG seeded with cfg.Seed
//     on its own stream.
//   - buf must store continuous actions of ActionDim = A, as the actors
//     sent them to the environment (in [−MaxAction, MaxAction]).
//   - m is the replay method (sampler.NewMethod); m.Validate must pass and
//     m.Selector must be a stage over buf. The ReF-ER stages are refused:
//     their ratios need the behaviour's density, which SAC's actors do not
//     record. SAC's own method is "uniform" with model.Loss{Kind:
//     model.MSE}.
//   - store receives the policy's snapshots: version 0 at once, then one
//     every PublishEvery steps. nil publishes nothing.
//
// The learner owns policy and critic from now on. NewSAC makes the second
// critic, the two target critics (copies), the four optimizers and every
// scratch buffer. Cost: O(parameters + Batch·(ObsDim+ActionDim)). Errors
// wrap ErrConfig and say what does not fit.
func NewSAC(cfg SACConfig, policy *model.Net, critic *model.Net, buf *buffer.Buffer, m sampler.Method, store *model.Store) (*SAC, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	if policy == nil || critic == nil || buf == nil {
		return nil, errorf(ErrConfig, "NewSAC needs a policy, a critic and a buffer (got policy %v, critic %v, buf %v)", policy != nil, critic != nil, buf != nil)
	}
	if policy == critic {
		return nil, errorf(ErrConfig, "the policy and the critic are the same network")
	}
	if err := m.Validate(); err != nil {
		return nil, errorf(ErrConfig, "%w", err)
	}
	if m.Episodes != nil {
		return nil, errorf(ErrConfig, "SAC with the ReF-ER method %q: ReF-ER's importance ratios need each step's behaviour density, which SAC's actors do not store (use td3 or vracer with ReF-ER)", m.Name)
	}
	bc, pc, cc := buf.Config(), policy.Config(), critic.Config()
	nS, nA := bc.ObsDim, bc.ActionDim
	switch {
	case bc.Action != buffer.Continuous:
		return nil, errorf(ErrConfig, "the buffer stores %v actions; SAC needs continuous ones", bc.Action)
	case policy.In() != nS:
		return nil, errorf(ErrConfig, "the buffer's ObsDim is %d, the policy's input width %d", nS, policy.In())
	case policy.Out() != 2*nA:
		return nil, errorf(ErrConfig, "the policy has %d outputs, want 2·ActionDim = %d (means, then log stds)", policy.Out(), 2*nA)
	case pc.OutAct != model.Identity || pc.Dueling:
		return nil, errorf(ErrConfig, "the policy's output must be linear without a dueling head (got %v, dueling %v): SACPolicyConfig", pc.OutAct, pc.Dueling)
	case critic.In() != nS+nA:
		return nil, errorf(ErrConfig, "the critic's input width is %d, want ObsDim + ActionDim = %d + %d", critic.In(), nS, nA)
	case critic.Out() != 1:
		return nil, errorf(ErrConfig, "the critic has %d outputs, want 1 (Q(s, a))", critic.Out())
	case cc.Dueling:
		return nil, errorf(ErrConfig, "the critic has a dueling head (that is for discrete-action Q networks)")
	case cfg.Batch > bc.Capacity:
		return nil, errorf(ErrConfig, "Batch = %d is larger than the buffer's capacity %d", cfg.Batch, bc.Capacity)
	}
	if err := policy.CheckFinite(); err != nil {
		return nil, errorf(ErrConfig, "initial policy: %w", err)
	}
	if err := critic.CheckFinite(); err != nil {
		return nil, errorf(ErrConfig, "initial critic: %w", err)
	}
	twin, err := model.NewNet(cc, rand.New(rand.NewPCG(cfg.Seed, sacTwinStream)))
	if err != nil {
		return nil, errorf(ErrConfig, "second critic: %w", err)
	}
	policyAdam, err := model.NewAdam(policy.NumParams(), adamFor(cfg.adamConfig(cfg.PolicyLR), policy))
	if err != nil {
		return nil, errorf(ErrConfig, "policy Adam: %w", err)
	}
	var criticAdam [2]*model.Adam
	for k := range criticAdam {
		if criticAdam[k], err = model.NewAdam(critic.NumParams(), adamFor(cfg.adamConfig(cfg.CriticLR), critic)); err != nil {
			return nil, errorf(ErrConfig, "critic Adam: %w", err)
		}
	}
	ac := cfg.adamConfig(cfg.AlphaLR)
	ac.ClipNorm = 0
	alphaAdam, err := model.NewAdam(1, ac)
	if err != nil {
		return nil, errorf(ErrConfig, "temperature Adam: %w", err)
	}
	b, x := cfg.Batch, nS+nA
	batch, err := buf.NewBatch(b)
	if err != nil {
		return nil, errorf(ErrConfig, "Batch: %w", err)
	}
	pcg := rand.NewPCG(cfg.Seed, sacStream)
	hbar := cfg.TargetEntropy
	if hbar == 0 {
		hbar = -float64(nA)
	}
	l := &SAC{
		cfg:        cfg,
		policy:     policy,
		critic:     [2]*model.Net{critic, twin},
		criticTarg: [2]*model.Net{critic.Clone(), twin.Clone()},
		policyAdam: policyAdam,
		criticAdam: criticAdam,
		alphaAdam:  alphaAdam,
		buf:        buf,
		m:          m,
		store:      store,
		pcg:        pcg,
		rng:        rand.New(pcg),
		nS:         nS,
		nA:         nA,
		hbar:       hbar,
		logAlpha:   []float64{math.Log(cfg.Alpha)},
		alphaGrad:  make([]float64, 1),
		batch:      batch,
		obs:        make([]float64, b*nS),
		next:       make([]float64, b*nS),
		xa:         make([]float64, b*x),
		xn:         make([]float64, b*x),
		xp:         make([]float64, b*x),
		epsN:       make([]float64, b*nA),
		epsP:       make([]float64, b*nA),
		u:          make([]float64, b*nA),
		logp:       make([]float64, b),
		y:          make([]float64, b),
		q:          [2][]float64{make([]float64, b), make([]float64, b)},
		qp:         [2][]float64{make([]float64, b), make([]float64, b)},
		grad:       [2][]float64{make([]float64, b), make([]float64, b)},
		absTD:      make([]float64, b),
		wts:        make([]float64, b),
		da:         make([]float64, b*nA),
		dout:       make([]float64, b*2*nA),
		ls:         make([]float64, nA),
	}
	l.stats.alpha.Store(math.Float64bits(l.alpha()))
	l.publish()
	return l, nil
}

// Config returns the learner's configuration with defaults filled in.
func (l *SAC) Config() SACConfig { return l.cfg }

// Method returns the replay method the learner was built with.
func (l *SAC) Method() sampler.Method { return l.m }

// Policy returns the online policy network. It belongs to the learner:
// read it only while Step is not running.
func (l *SAC) Policy() *model.Net { return l.policy }

// Critics returns the two online critics (the first is the one NewSAC was
// given), under the same rule as Policy.
func (l *SAC) Critics() [2]*model.Net { return l.critic }

// Targets returns the two target critics, under the same rule as Policy.
func (l *SAC) Targets() [2]*model.Net { return l.criticTarg }

// Alpha returns the temperature α. Call it from the stepping goroutine;
// other goroutines read Stats().Alpha.
func (l *SAC) Alpha() float64 { return l.alpha() }

// TargetEntropy returns H̄, the entropy the temperature steers toward
// (SACConfig.TargetEntropy, or −A).
func (l *SAC) TargetEntropy() float64 { return l.hbar }

// Steps returns the number of completed steps. Call it from the stepping
// goroutine; other goroutines read Stats().Steps.
func (l *SAC) Steps() uint64 { return l.steps }

func (l *SAC) alpha() float64 { return math.Exp(l.logAlpha[0]) }

// Stats returns a snapshot of the counters. Safe for concurrent use with
// Step; a few atomic loads, no allocation.
func (l *SAC) Stats() SACStats {
	c := &l.stats
	f := func(a *atomic.Uint64) float64 { return math.Float64frombits(a.Load()) }
	return SACStats{
		Steps:           c.steps.Load(),
		CriticLoss:      f(&c.criticLoss),
		PolicyLoss:      f(&c.policyLoss),
		AlphaLoss:       f(&c.alphaLoss),
		Alpha:           f(&c.alpha),
		Entropy:         f(&c.entropy),
		MeanAbsTD:       f(&c.meanAbsTD),
		MeanQ:           f(&c.meanQ),
		CriticGradNorm:  f(&c.criticGradNorm),
		PolicyGradNorm:  f(&c.policyGradNorm),
		WriteBacks:      c.writeBacks.Load(),
		StaleWriteBacks: c.stale.Load(),
		Publishes:       c.publishes.Load(),
		Version:         c.version.Load(),
		TargetUpdates:   c.targetUpdates.Load(),
		Timing:          c.timing.load(),
		Sampled:         c.sampled.load(),
	}
}

// Step performs one SAC update (see SAC for the maths): sample a batch,
// weight it, compute the soft clipped-double-Q targets with actions drawn
// from the current policy, regress both critics toward them with one Adam
// step each, write max(|δ_1|, |δ_2|) back through the Selector (or Q_1 and
// y to a FeatureUpdater), update the policy through the smaller of the
// updated critics, the temperature toward the target entropy, and the
// target critics, and publish the policy when due. It implements
// runtime.Stepper.
//
// Errors name the step (1-based) and wrap what went wrong: ctx's error if
// ctx is already done (nothing is done then); a sampling or Weighter error
// (nothing changed); a Normalizer error (nothing changed); a
// *model.NonFiniteError (errors.Is model.ErrNonFinite) for a NaN or
// infinite target, critic loss or critic gradient (nothing changed: both
// critics' gradients are checked before either Adam step) or critic
// parameter after the update (the update has been applied: the learner is
// poisoned and the run must stop). A write-back error comes after the
// critics' update. The policy and temperature phase comes after it: a
// non-finite policy loss or gradient, policy parameter or temperature
// there leaves the critics updated, and the run must stop. A failed step
// does not count: Steps is unchanged.
//
// Step must be called from one goroutine at a time: a call that overlaps
// another is refused with ErrBusy (nothing done), as is a nil ctx
// (ErrConfig). It allocates nothing except, every PublishEvery steps, the
// published snapshot.
func (l *SAC) Step(ctx context.Context) error {
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
	alpha := l.alpha()
	var loss float64
	if l.par != nil {
		if loss, err = l.criticsSharded(&rs, weight, alpha, step); err != nil {
			return err
		}
	} else {
		to64(l.obs, b.Obs)
		to64(l.next, b.NextObs)
		l.joinStored()

		// Targets: y = R + D·(min_k Q'_k(s', a') − α·log π(a'|s')), a' ~ π(·|s').
		for i := range l.epsN {
			l.epsN[i] = l.rng.NormFloat64()
		}
		l.targets(alpha)
		if err := model.CheckFinite("critic target", l.y); err != nil {
			return l.fail(step, nil, err)
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
		loss = l.criticGrad(weight)
	}
	if err := model.CheckFiniteValue("critic loss", loss); err != nil {
		return l.fail(step, nil, err)
	}
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
	st := &l.stats

	// Policy, through the updated critics, then the temperature.
	for i := range l.epsP {
		l.epsP[i] = l.rng.NormFloat64()
	}
	var ploss float64
	if l.par != nil {
		ploss = l.policyGradSharded(alpha)
	} else {
		ploss = l.policyGrad(alpha)
	}
	if err := model.CheckFiniteValue("policy loss", ploss); err != nil {
		return l.fail(step, nil, err)
	}
	pnorm, err := l.policyAdam.Step(l.policy.Params(), l.policy.Grads())
	if err != nil {
		return l.fail(step, l.policy, err)
	}
	if err := l.policy.CheckFinite(); err != nil {
		return l.fail(step, l.policy, err)
	}
	var sumLogp float64
	for _, v := range l.logp {
		sumLogp += v
	}
	meanLogp := sumLogp / float64(len(l.logp))
	aloss, agrad := sacAlphaLoss(l.logAlpha[0], meanLogp, l.hbar)
	l.alphaGrad[0] = agrad
	if _, err := l.alphaAdam.Step(l.logAlpha, l.alphaGrad); err != nil {
		return l.fail(step, nil, fmt.Errorf("temperature: %w", err))
	}
	if la := l.logAlpha[0]; !(math.Abs(la) <= maxLogAlpha) {
		return l.fail(step, nil, fmt.Errorf("%w: log temperature %g is beyond ±%d", model.ErrNonFinite, la, maxLogAlpha))
	}
	for k, t := range l.criticTarg {
		t.SoftUpdate(l.critic[k], l.cfg.Tau)
	}

	l.steps = step
	if step%uint64(l.cfg.PublishEvery) == 0 {
		l.publish()
	}
	st.criticLoss.Store(math.Float64bits(loss))
	st.policyLoss.Store(math.Float64bits(ploss))
	st.alphaLoss.Store(math.Float64bits(aloss))
	st.alpha.Store(math.Float64bits(l.alpha()))
	st.entropy.Store(math.Float64bits(-meanLogp))
	st.criticGradNorm.Store(math.Float64bits(norm))
	st.policyGradNorm.Store(math.Float64bits(pnorm))
	st.targetUpdates.Add(1)
	rs.commit(&st.replayCounters, l.q[0])
	return nil
}

// targets fills l.y with the soft targets R + D·(min_k Q'_k(s', a') −
// α·log π(a'|s')) for the batch's rows (s' in l.next), a' drawn with the
// noise in l.epsN; l.xn holds [s', a'] and l.logp log π(a'|s') after it.
func (l *SAC) targets(alpha float64) {
	b := l.batch
	l.sample(l.xn, l.next, l.epsN, l.u, l.logp)
	qt := l.criticTarg[0].Forward(l.xn)
	copy(l.y, qt)
	qt = l.criticTarg[1].Forward(l.xn)
	for i := range l.y {
		y := float64(b.Reward[i])
		if d := b.Discount[i]; d != 0 {
			y += float64(d) * (min(l.y[i], qt[i]) - alpha*l.logp[i])
		}
		l.y[i] = y
	}
}

// criticGrad returns the critics' loss Σ_k (1/B) Σ_i w_i ρ(Q_k(s_i, a_i) −
// y_i) for the critics' last forward pass (on l.xa, outputs in l.q) and
// the targets l.y, weight nil meaning 1, and leaves each critic's
// gradient in its Grads.
func (l *SAC) criticGrad(weight []float64) float64 {
	var loss float64
	for k, c := range l.critic {
		loss += l.m.Loss.Value(l.grad[k], l.q[k], l.y, weight)
		c.Backward(l.grad[k])
	}
	return loss
}

// sacAlphaLoss returns the temperature loss J = −α·(meanLogp + hbar), α =
// e^logAlpha (Eq. 18 with the batch mean of log π), and its derivative
// with respect to log α, which equals J itself.
func sacAlphaLoss(logAlpha, meanLogp, hbar float64) (loss, grad float64) {
	j := -math.Exp(logAlpha) * (meanLogp + hbar)
	return j, j
}

// sacLogProb returns log π(tanh(u)|s) for one row of A dimensions of a
// squashed Gaussian with means mu, clamped log stds ls, noise eps (u =
// mu + e^ls·eps), in policy units:
// Σ_j −eps_j²/2 − ls_j − ½log 2π − model.TanhLogDet(u_j). O(A).
func sacLogProb(u, ls, eps []float64) float64 {
	var lp float64
	for j, e := range eps {
		lp += -0.5*e*e - ls[j] - halfLog2Pi - model.TanhLogDet(u[j])
	}
	return lp
}

// sample draws the policy's squashed actions for the observations obs
// (B×S) with the noise eps (B×A): it fills the action columns of dst
// (B×X, the observation columns from obs) with m·tanh(u), u (B×A) with
// the pre-squash actions and logp (B) with log π. One policy forward,
// whose outputs it returns.
func (l *SAC) sample(dst, obs, eps, u, logp []float64) []float64 {
	out := l.policy.Forward(obs)
	nS, nA, mx := l.nS, l.nA, l.cfg.MaxAction
	x := nS + nA
	lsr := l.ls
	for i := range len(logp) {
		row := out[i*2*nA : (i+1)*2*nA]
		d := dst[i*x : (i+1)*x]
		copy(d[:nS], obs[i*nS:(i+1)*nS])
		for j := range nA {
			lsr[j] = model.SquashedLogStd(row[nA+j])
			v := row[j] + math.Exp(lsr[j])*eps[i*nA+j]
			u[i*nA+j] = v
			d[nS+j] = mx * math.Tanh(v)
		}
		logp[i] = sacLogProb(u[i*nA:(i+1)*nA], lsr, eps[i*nA:(i+1)*nA])
	}
	return out
}

// policyGrad computes the policy's loss L_π = (1/B) Σ_i α·log π(ã_i|s_i) −
// min_k Q_k(s_i, ã_i) on the batch's observations (l.obs) with the noise
// in l.epsP, leaves its gradient in the policy's Grads and log π of each
// row in l.logp, and returns the loss. The critics' Grads are overwritten
// (they have been used).
func (l *SAC) policyGrad(alpha float64) float64 {
	loss := l.policyLoss(alpha)
	b := len(l.logp)
	inv := 1 / float64(b)
	for k := range l.critic {
		clear(l.grad[k])
	}
	for i := range b {
		k := 0
		if l.qp[1][i] < l.qp[0][i] {
			k = 1
		}
		l.grad[k][i] = -inv
	}
	clear(l.da)
	x, nS, nA, mx := l.nS+l.nA, l.nS, l.nA, l.cfg.MaxAction
	for k, c := range l.critic {
		dx := c.BackwardInput(l.grad[k])
		for i := range b {
			for j := range nA {
				l.da[i*nA+j] += dx[i*x+nS+j]
			}
		}
	}
	out := l.pout // the policy's last Forward, whose activations Backward uses
	for i := range b {
		row := out[i*2*nA : (i+1)*2*nA]
		d := l.dout[i*2*nA : (i+1)*2*nA]
		for j := range nA {
			raw := row[nA+j]
			ls := model.SquashedLogStd(raw)
			sigma, e := math.Exp(ls), l.epsP[i*nA+j]
			t := math.Tanh(l.u[i*nA+j])
			gu := alpha*2*t*inv + l.da[i*nA+j]*mx*(1-t*t)
			d[j] = gu
			if raw > model.SquashedLogStdMin && raw < model.SquashedLogStdMax {
				d[nA+j] = gu*sigma*e - alpha*inv
			} else {
				d[nA+j] = 0
			}
		}
	}
	l.policy.Backward(l.dout)
	return loss
}

// policyLoss computes L_π on l.obs with the noise in l.epsP (forward only):
// it leaves the actions in l.xp and l.u, log π in l.logp and Q_k(s, ã) in
// l.qp[k], and returns the loss.
func (l *SAC) policyLoss(alpha float64) float64 {
	l.pout = l.sample(l.xp, l.obs, l.epsP, l.u, l.logp)
	for k, c := range l.critic {
		copy(l.qp[k], c.Forward(l.xp))
	}
	var sum float64
	for i, lp := range l.logp {
		sum += alpha*lp - min(l.qp[0][i], l.qp[1][i])
	}
	return sum / float64(len(l.logp))
}

// joinStored writes each row of xa as [s, a] with the stored action.
func (l *SAC) joinStored() {
	nS, nA := l.nS, l.nA
	x := nS + nA
	a32 := l.batch.ActionVec
	for i := range len(l.obs) / nS {
		row := l.xa[i*x : (i+1)*x]
		copy(row[:nS], l.obs[i*nS:(i+1)*nS])
		for j, v := range a32[i*nA : (i+1)*nA] {
			row[nS+j] = float64(v)
		}
	}
}

// fail wraps a non-finite error with the step and, for an error in net's
// parameters or gradient, names the network and the place in it.
func (l *SAC) fail(step uint64, net *model.Net, err error) error {
	err = stepError(step, net, err)
	var nf *model.NonFiniteError
	if net != nil && errors.As(err, &nf) {
		nf.Where = strings.TrimSpace(l.netName(net) + " " + nf.Where)
	}
	return err
}

// netName names one of the learner's online networks for error messages.
func (l *SAC) netName(n *model.Net) string {
	switch n {
	case l.policy:
		return "policy"
	case l.critic[0]:
		return "critic 1"
	case l.critic[1]:
		return "critic 2"
	}
	return "network"
}

// publish makes the policy's parameters, versioned by the step count, the
// store's current snapshot.
func (l *SAC) publish() {
	if l.store == nil {
		return
	}
	l.store.Publish(l.policy.Snapshot(l.steps))
	l.stats.publishes.Add(1)
	l.stats.version.Store(l.steps)
}
