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

// vracerStream is the second word of the V-RACER learner's PCG seed
// ("vracer_l"), so its stream differs from the other learners' and the
// actors' for the same Seed.
const vracerStream = 0x7672_6163_6572_5f6c

// VRACER is V-RACER (Novati & Koumoutsakos, ICML 2019, arXiv 1807.05827,
// §2 and App. A–C) with Remember and Forget Experience Replay: an
// off-policy actor-critic whose one network gives a state's value V(s)
// and a Gaussian policy's mean m(s), with a learned std shared by all
// states (model.GaussianHead: the std parameters' output weights are
// held at 0, so only their biases learn, through a softplus). It replays
// single steps of stored episodes through a ReF-ER method's stage
// (sampler.REFER) and trains from the Retrace targets its ReF-ER
// controller (REFERController, built over the method's Episodes) keeps.
//
// One Step (refer.md §1–2; k the step, B the batch):
//
//  1. The stage draws B distinct steps of finished episodes; the
//     controller's Targets() holds each one's stored Qret.
//
//  2. Forward the network on the rows' states (and, first, on the
//     bootstrap states of rows that end a time-limited episode, for
//     V(s_T)). Per row, with the stored unclipped action a and behaviour
//     μ = (m_μ, s_μ):
//
//     log rho = clamp(log π(a|s) − log μ(a|s), −7, 7),  rho = min(e^(log rho), RhoClip)
//     KL      = KL(μ||π)   (KL(π||μ) with KLReverse)
//     A       = Qret − V(s),   c̄ = min(1, rho)
//
//  3. The controller's RowWeights give (algW, klW): beta·1[near] and
//     1 − beta for full ReF-ER (see REFERController for the ablations). The loss,
//     averaged over the batch, is
//
//     L = (1/B) Σ_i algW_i·(−rho_i·A_i + ½(V_i − V̂tbc_i)²) + klW_i·KL_i
//
//     with A_i and V̂tbc_i = V_i + c̄_i·A_i held constant (stop-gradient):
//     the off-policy policy gradient −rho·A·∇log π (Eq. 5; rho's own
//     clamp is not differentiated), the value gradient −c̄·A·∇V (Eq. 9),
//     and the penalty's ∇KL (Eq. 10–11). Far-policy rows get no policy or
//     value gradient under full ReF-ER and ReF-ER-1 (Rule 1).
//
//  4. One Adam step with step size LR·LRScale() (Eq. 13).
//
//  5. Write back: the controller's Refresh(rho, V, KL) (n_far by deltas),
//     RefreshBootstrap of V(s_T), and AfterStep(k): the Retrace sweeps of
//     the sampled episodes, c_max, the learning-rate scale and beta.
//
//  6. Every PublishEvery steps the network goes to the Store.
//
// Rewards enter Qret scaled by the controller's reward RMS (App. B), so V is
// in scaled units. The actors (actor.Gaussian) sample a = m + std·z, z a
// normal truncated at |z| ≤ 3, and store a unclipped with μ = (m, std);
// the learner's rho and KL use the untruncated densities.
//
// # Concurrency
//
// Step, Save and Load are called by one goroutine at a time (the
// runtime's learner goroutine), which then owns the stage and the
// controller too; they may
// run concurrently with inserts into the buffer and with actors reading
// the Store. Stats, Config and Method are safe from any goroutine. A
// VRACER must not be copied.
//
// # Cost
//
// A Step is a sample of Batch steps, one forward pass of Batch rows (plus
// one of the few rows that end a truncated episode), one backward pass,
// O(Batch·dA) Gaussian maths, one Adam update, the controller's write-back and
// its Retrace sweeps (O(Batch·T/2) for episodes of T steps), and every
// PublishEvery steps a snapshot. On Pendulum (3→64→64→3, Batch 128, 2^15
// stored steps) a step took about 0.6 ms on the 2-core development
// machine, 1e5 steps with their environment steps about 63 s. After the
// first Step the learner allocates nothing but the snapshots; the stage
// and the controller allocate only as the episode index grows (amortised,
// per new episode).
type VRACER struct {
	busy  busy // refuses overlapping calls (ErrBusy)
	cfg   VRACERConfig
	net   *model.Net
	adam  *model.Adam
	buf   *buffer.Buffer
	m     sampler.Method
	ctl   *REFERController
	store *model.Store
	pcg   *rand.PCG
	rng   *rand.Rand
	head  model.GaussianHead

	nS, nA          int
	meanCol, stdCol int   // the buffer's float columns of μ
	stdW            []int // flat indices of the std parameters' weights (kept 0)

	// steps is the number of completed steps.
	steps uint64

	// Scratch, allocated once (B = Batch, S = ObsDim, A = dA, W = 1+2A).
	batch    *buffer.Batch
	obs      []float64 // B×S
	bootObs  []float64 // B×S: bootstrap states of truncated last steps
	bootRows []int
	vT       []float64 // V(s_T) of those rows
	rho      []float64 // B
	v        []float64 // B
	kl       []float64 // B
	algW     []float64 // B
	klW      []float64 // B
	dOut     []float64 // B×W
	a, mb    []float64 // A: one row's action and behaviour mean
	sb, s    []float64 // A: behaviour and current std
	gm, gs   []float64 // A: ∇log π
	km, ks   []float64 // A: ∇KL

	stats vracerCounters
}

// vracerCounters are the Stats fields, atomic words (float64 bits) so that
// Stats may read them from any goroutine while Step writes them.
type vracerCounters struct {
	timing                                            phaseTimer
	steps, publishes, version                         atomic.Uint64
	loss, policyLoss, valueLoss, klLoss               atomic.Uint64
	meanV, meanAbsAdv, meanRho, nearFrac, meanKL, std atomic.Uint64
	lr, gradNorm, beta, cmax, farFrac                 atomic.Uint64
}

// VRACERStats is a snapshot of a V-RACER learner's counters. Each field
// is read atomically; the snapshot may mix two consecutive steps.
type VRACERStats struct {
	// Steps is the number of completed learner steps.
	Steps uint64 `json:"steps"`
	// Loss is the last step's surrogate loss L (see VRACER), and its
	// three parts: the weighted policy term (1/B)Σ algW·(−rho·A), the
	// weighted value term (1/B)Σ algW·½(c̄·A)² and the penalty
	// (1/B)Σ klW·KL.
	Loss       float64 `json:"loss"`
	PolicyLoss float64 `json:"policy_loss"`
	ValueLoss  float64 `json:"value_loss"`
	KLLoss     float64 `json:"kl_loss"`
	// MeanV is the last batch's mean V(s) (scaled units), MeanAbsAdv its
	// mean |Qret − V|, MeanRho its mean rho, NearFraction the share of
	// its rows that were near-policy, MeanKL its mean KL(μ||π).
	MeanV        float64 `json:"mean_v"`
	MeanAbsAdv   float64 `json:"mean_abs_adv"`
	MeanRho      float64 `json:"mean_rho"`
	NearFraction float64 `json:"near_fraction"`
	MeanKL       float64 `json:"mean_kl"`
	// Std is the policy's std averaged over the action dimensions.
	Std float64 `json:"std"`
	// LR is the last step's Adam step size, LR·LRScale.
	LR float64 `json:"lr"`
	// GradNorm is the last step's gradient L2 norm before clipping.
	GradNorm float64 `json:"grad_norm"`
	// Beta, CMax and FarFraction are the ReF-ER controller's after the last step.
	Beta        float64 `json:"beta"`
	CMax        float64 `json:"c_max"`
	FarFraction float64 `json:"far_fraction"`
	// Publishes counts snapshots published (NewVRACER's and Load's
	// included); Version is the last one's version (the step count).
	Publishes uint64 `json:"publishes"`
	Version   uint64 `json:"version"`
	// Timing is the cumulative time in steps; Sample is the stage's
	// Sample, WriteBack its Refresh and AfterStep (the Retrace sweeps).
	Timing Timing `json:"timing"`
}

// NewVRACER returns a V-RACER learner training net on the steps that the
// replay method m samples from buf, publishing net to store.
//
//   - net is V-RACER's network (NewVRACERNet): In = the buffer's ObsDim,
//     Out = 1 + 2·ActionDim, no dueling head, a linear output, and the
//     std parameters' output weights 0.
//   - buf stores continuous actions (the unclipped samples, in the
//     policy's units), the episode columns and sampler.REFERColumns.
//   - m is a ReF-ER method (sampler.NewMethod "refer", "refer-1",
//     "refer-2" or "er"): m.Episodes must be set, its stage sampling buf,
//     and its Loss zero: V-RACER's loss is its own. The learner builds its
//     REFERController over m.Episodes (which becomes the stage's
//     observer).
//   - store receives the network's snapshots: version 0 at once, then
//     one every PublishEvery steps. nil publishes nothing.
//
// The learner owns net, the stage and the controller from now on. Errors
// wrap ErrConfig.
func NewVRACER(cfg VRACERConfig, net *model.Net, buf *buffer.Buffer, m sampler.Method, store *model.Store) (*VRACER, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	if net == nil || buf == nil {
		return nil, errorf(ErrConfig, "NewVRACER needs a network and a buffer (got net %v, buf %v)", net != nil, buf != nil)
	}
	if err := m.Validate(); err != nil {
		return nil, errorf(ErrConfig, "%w", err)
	}
	if m.Episodes == nil {
		return nil, errorf(ErrConfig, "method %q: V-RACER replays through a ReF-ER method's episodes (methods refer, refer-1, refer-2, er; Method.Episodes), got stage %v", m.Name, m.Selector)
	}
	if m.Loss != (model.Loss{}) {
		return nil, errorf(ErrConfig, "method %q: V-RACER's loss is its own (policy gradient, Retrace value regression, KL penalty); the method's Loss must be zero, got %v", m.Name, m.Loss.Kind)
	}
	if m.Episodes.Buffer() != buf {
		return nil, errorf(ErrConfig, "the method's REFER stage samples another buffer")
	}
	bc, nc := buf.Config(), net.Config()
	meanCol, stdCol, _, err := sampler.REFERColumnIndex(bc)
	if err != nil {
		return nil, errorf(ErrConfig, "%w", err)
	}
	nS, nA := bc.ObsDim, bc.ActionDim
	head := model.GaussianHead{Dim: nA}
	switch {
	case net.In() != nS:
		return nil, errorf(ErrConfig, "the buffer's ObsDim is %d, the network's input width %d", nS, net.In())
	case net.Out() != head.Width():
		return nil, errorf(ErrConfig, "the network has %d outputs, want 1 + 2·ActionDim = %d (V, mean, std parameters: NewVRACERNet)", net.Out(), head.Width())
	case nc.Dueling || nc.OutAct != model.Identity:
		return nil, errorf(ErrConfig, "the network's output must be linear and not dueling (NewVRACERNet), got OutAct %v, Dueling %v", nc.OutAct, nc.Dueling)
	case cfg.Batch > bc.Capacity:
		return nil, errorf(ErrConfig, "Batch = %d is larger than the buffer's capacity %d", cfg.Batch, bc.Capacity)
	}
	if err := net.CheckFinite(); err != nil {
		return nil, errorf(ErrConfig, "initial network: %w", err)
	}
	stdW := stdWeights(net, nA)
	for _, k := range stdW {
		if net.Params()[k] != 0 {
			return nil, errorf(ErrConfig, "the network's std parameters have non-zero weights (%s = %g): the std must not depend on the state (build the network with NewVRACERNet)", net.Where(k), net.Params()[k])
		}
	}
	adam, err := model.NewAdam(net.NumParams(), adamFor(cfg.adamConfig(), net))
	if err != nil {
		return nil, errorf(ErrConfig, "Adam: %w", err)
	}
	b := cfg.Batch
	batch, err := buf.NewBatch(b)
	if err != nil {
		return nil, errorf(ErrConfig, "Batch: %w", err)
	}
	ctl, err := NewREFERController(m.Episodes)
	if err != nil {
		return nil, err
	}
	pcg := rand.NewPCG(cfg.Seed, vracerStream)
	l := &VRACER{
		cfg: cfg, net: net, adam: adam, buf: buf, m: m, ctl: ctl, store: store,
		pcg: pcg, rng: rand.New(pcg), head: head,
		nS: nS, nA: nA, meanCol: meanCol, stdCol: stdCol, stdW: stdW,
		batch:    batch,
		obs:      make([]float64, b*nS),
		bootObs:  make([]float64, b*nS),
		bootRows: make([]int, b),
		vT:       make([]float64, b),
		rho:      make([]float64, b),
		v:        make([]float64, b),
		kl:       make([]float64, b),
		algW:     make([]float64, b),
		klW:      make([]float64, b),
		dOut:     make([]float64, b*head.Width()),
		a:        make([]float64, nA), mb: make([]float64, nA),
		sb: make([]float64, nA), s: make([]float64, nA),
		gm: make([]float64, nA), gs: make([]float64, nA),
		km: make([]float64, nA), ks: make([]float64, nA),
	}
	l.publish()
	return l, nil
}

// Config returns the learner's configuration with defaults filled in.
func (l *VRACER) Config() VRACERConfig { return l.cfg }

// Method returns the replay method the learner was built with.
func (l *VRACER) Method() sampler.Method { return l.m }

// REFER returns the learner's ReF-ER controller (its Stats are safe from
// any goroutine; everything else belongs to the stepping goroutine).
func (l *VRACER) REFER() *REFERController { return l.ctl }

// Net returns the network. It belongs to the learner: read it only while
// Step is not running.
func (l *VRACER) Net() *model.Net { return l.net }

// Steps returns the number of completed steps (the stepping goroutine's
// view; others read Stats().Steps).
func (l *VRACER) Steps() uint64 { return l.steps }

// Stats returns a snapshot of the counters. Safe for concurrent use with
// Step; a few atomic loads, no allocation.
func (l *VRACER) Stats() VRACERStats {
	c := &l.stats
	f := func(a *atomic.Uint64) float64 { return math.Float64frombits(a.Load()) }
	return VRACERStats{
		Steps: c.steps.Load(), Loss: f(&c.loss), PolicyLoss: f(&c.policyLoss), ValueLoss: f(&c.valueLoss), KLLoss: f(&c.klLoss),
		MeanV: f(&c.meanV), MeanAbsAdv: f(&c.meanAbsAdv), MeanRho: f(&c.meanRho), NearFraction: f(&c.nearFrac),
		MeanKL: f(&c.meanKL), Std: f(&c.std), LR: f(&c.lr), GradNorm: f(&c.gradNorm),
		Beta: f(&c.beta), CMax: f(&c.cmax), FarFraction: f(&c.farFrac),
		Publishes: c.publishes.Load(), Version: c.version.Load(), Timing: c.timing.load(),
	}
}

// vracerParts are one step's loss terms and batch statistics.
type vracerParts struct {
	policy, value, kl                        float64
	sumV, sumAbsA, sumRho, sumKL, near, stdM float64
}

// Step performs one V-RACER update with ReF-ER (see VRACER). It
// implements runtime.Stepper.
//
// Errors name the step (1-based) and wrap what went wrong: ctx's error if
// ctx is already done (nothing is done then); a sampling error (nothing
// changed: buffer.ErrEmpty until an episode has finished,
// buffer.ErrBatchSize while fewer than Batch steps are stored); a
// *model.NonFiniteError (errors.Is model.ErrNonFinite) for a NaN or
// infinite network output, loss or gradient (nothing changed) or
// parameter after the update (the update has been applied: the learner
// is poisoned and the run must stop); the controller's error
// (buffer.ErrShape) if its RowWeights refuse the learner's slices (nothing
// changed). The controller's write-back (Refresh, RefreshBootstrap) comes
// after the update, so
// its errors (buffer.ErrShape, buffer.ErrPriority: values the learner
// checked already, so only a defect) leave the update applied. A failed
// step does not count: Steps is unchanged.
//
// Step must be called from one goroutine at a time: a call that overlaps
// another is refused with ErrBusy (nothing done), as is a nil ctx
// (ErrConfig). It allocates nothing except, every PublishEvery steps, the
// published snapshot (and the stage's amortised growth of its episode
// index).
func (l *VRACER) Step(ctx context.Context) error {
	if err := l.busy.enterStep(ctx); err != nil {
		return err
	}
	defer l.busy.exit()
	step := l.steps + 1
	b := l.batch
	rs, _, err := startReplay(l.m, l.rng, b, step, nil, nil)
	if err != nil {
		return err
	}
	nb, err := l.bootstrap()
	if err != nil {
		return l.fail(step, err)
	}
	to64(l.obs, b.Obs)
	out := l.net.Forward(l.obs)
	if err := model.CheckFinite("network output", out); err != nil {
		return l.fail(step, err)
	}
	l.ratios(out)
	if err := l.ctl.RowWeights(l.rho, l.algW, l.klW); err != nil {
		return fmt.Errorf("learner: step %d: %w", step, err)
	}
	p := l.gradient(out, l.ctl.Targets())
	inv := 1 / float64(len(l.rho))
	loss := (p.policy + p.value + p.kl) * inv
	if err := model.CheckFiniteValue("loss", loss); err != nil {
		return l.fail(step, err)
	}
	l.backward()
	if err := l.net.CheckGrads(); err != nil {
		return l.fail(step, err)
	}
	lr := l.cfg.LR * l.ctl.LRScale()
	l.adam.SetLR(lr)
	norm, err := l.adam.Step(l.net.Params(), l.net.Grads())
	if err != nil {
		return l.fail(step, err)
	}
	if err := l.net.CheckFinite(); err != nil {
		return l.fail(step, err)
	}
	rs.writing()
	if err := l.ctl.Refresh(l.rho, l.v, l.kl); err != nil {
		return fmt.Errorf("learner: step %d: refresh: %w", step, err)
	}
	for j := range nb {
		if _, err := l.ctl.RefreshBootstrap(l.bootRows[j], l.vT[j]); err != nil {
			return fmt.Errorf("learner: step %d: refresh: %w", step, err)
		}
	}
	l.ctl.AfterStep(step)
	rs.wrote()

	l.steps = step
	if step%uint64(l.cfg.PublishEvery) == 0 {
		l.publish()
	}
	st := &l.stats
	put := func(a *atomic.Uint64, x float64) { a.Store(math.Float64bits(x)) }
	put(&st.loss, loss)
	put(&st.policyLoss, p.policy*inv)
	put(&st.valueLoss, p.value*inv)
	put(&st.klLoss, p.kl*inv)
	put(&st.meanV, p.sumV*inv)
	put(&st.meanAbsAdv, p.sumAbsA*inv)
	put(&st.meanRho, p.sumRho*inv)
	put(&st.nearFrac, p.near*inv)
	put(&st.meanKL, p.sumKL*inv)
	put(&st.std, p.stdM)
	put(&st.lr, lr)
	put(&st.gradNorm, norm)
	put(&st.beta, l.ctl.Beta())
	put(&st.cmax, l.ctl.CMax())
	put(&st.farFrac, l.ctl.Stats().FarFraction)
	rs.count(&st.timing, &st.steps)
	return nil
}

// bootstrap forwards the bootstrap states of the rows that end an episode
// cut by a time limit (FlagTruncated without FlagTerminal: the only rows
// whose NextObs is s_T) and keeps their V(s_T) in vT, rows in bootRows.
// It runs before the training forward, which Backward needs last.
func (l *VRACER) bootstrap() (int, error) {
	b, nS := l.batch, l.nS
	nb := 0
	for i, f := range b.Flags {
		if f&buffer.FlagTruncated == 0 || f&buffer.FlagTerminal != 0 {
			continue
		}
		to64(l.bootObs[nb*nS:(nb+1)*nS], b.NextObs[i*nS:(i+1)*nS])
		l.bootRows[nb] = i
		nb++
	}
	if nb == 0 {
		return 0, nil
	}
	out := l.net.Forward(l.bootObs[:nb*nS])
	w := l.head.Width()
	for j := range nb {
		l.vT[j] = out[j*w]
	}
	return nb, model.CheckFinite("bootstrap value", l.vT[:nb])
}

// row loads row i's action and behaviour (mean, std) into a, mb, sb.
func (l *VRACER) row(i int) {
	b, nA := l.batch, l.nA
	for j := range nA {
		l.a[j] = float64(b.ActionVec[i*nA+j])
		l.mb[j] = float64(b.Floats[l.meanCol][i*nA+j])
		l.sb[j] = float64(b.Floats[l.stdCol][i*nA+j])
	}
}

// ratios computes rho, V and the KL of every row from the network's
// output out (B×W).
func (l *VRACER) ratios(out []float64) {
	w, clip := l.head.Width(), l.ctl.RhoClip()
	for i := range l.rho {
		o := out[i*w : (i+1)*w]
		l.row(i)
		m := l.head.Mean(o)
		l.head.Std(l.s, o)
		lr := model.GaussLogRatio(l.a, m, l.s, l.mb, l.sb)
		lr = max(-vracerLogRhoClip, min(vracerLogRhoClip, lr))
		l.rho[i] = min(math.Exp(lr), clip)
		l.v[i] = l.head.Value(o)
		if l.cfg.KLReverse {
			l.kl[i] = model.GaussKLReverse(l.mb, l.sb, m, l.s)
		} else {
			l.kl[i] = model.GaussKL(l.mb, l.sb, m, l.s)
		}
	}
}

// gradient fills dOut with dL/dOutput for the batch (see VRACER; the
// weights algW and klW and targets qret per row) and returns the loss
// terms summed over the rows (not yet divided by B).
func (l *VRACER) gradient(out, qret []float64) vracerParts {
	w, nA := l.head.Width(), l.nA
	inv := 1 / float64(len(l.rho))
	var p vracerParts
	for i := range l.rho {
		o := out[i*w : (i+1)*w]
		g := l.dOut[i*w : (i+1)*w]
		l.row(i)
		m, u := l.head.Mean(o), l.head.StdParams(o)
		l.head.Std(l.s, o)
		v, rho := l.v[i], l.rho[i]
		adv := qret[i] - v
		c := min(1, rho)
		wa, wk := l.algW[i], l.klW[i]
		pg := -wa * rho * adv // the policy term's factor of ∇log π
		g[0] = -wa * c * adv * inv
		model.GaussLogPiGrad(l.gm, l.gs, l.a, m, l.s)
		if l.cfg.KLReverse {
			model.GaussKLReverseGrad(l.km, l.ks, l.mb, l.sb, m, l.s)
		} else {
			model.GaussKLGrad(l.km, l.ks, l.mb, l.sb, m, l.s)
		}
		for j := range nA {
			g[1+j] = (pg*l.gm[j] + wk*l.km[j]) * inv
			g[1+nA+j] = (pg*l.gs[j] + wk*l.ks[j]) * model.Sigmoid(u[j]) * inv
		}
		p.policy += pg
		p.value += wa * 0.5 * c * c * adv * adv
		p.kl += wk * l.kl[i]
		p.sumV += v
		p.sumAbsA += math.Abs(adv)
		p.sumRho += rho
		p.sumKL += l.kl[i]
		if l.ctl.Near(rho) {
			p.near++
		}
	}
	for j := range nA {
		p.stdM += l.s[j] / float64(nA)
	}
	return p
}

// backward backpropagates dOut and zeroes the gradients of the std
// parameters' weights (the std is state-independent).
func (l *VRACER) backward() {
	l.net.Backward(l.dOut)
	g := l.net.Grads()
	for _, k := range l.stdW {
		g[k] = 0
	}
}

// fail wraps err with the step and, for a non-finite parameter or
// gradient, names its place in the network.
func (l *VRACER) fail(step uint64, err error) error { return stepError(step, l.net, err) }

// publish makes the network's parameters, versioned by the step count, the
// store's current snapshot.
func (l *VRACER) publish() {
	if l.store == nil {
		return
	}
	l.store.Publish(l.net.Snapshot(l.steps))
	l.stats.publishes.Add(1)
	l.stats.version.Store(l.steps)
}
