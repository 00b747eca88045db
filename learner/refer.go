package learner

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/slotset"
	"github.com/apexrl/apex/sampler"
)

// referRewardEps is added to the reward RMS before dividing (App. B).
const referRewardEps = 1e-7

// REFERController is the learner-side half of Remember and Forget
// Experience Replay (Novati & Koumoutsakos, ICML 2019, arXiv 1807.05827),
// for the learners with parametric Gaussian policies that replay through a
// ReF-ER method (V-RACER; TD3 under ReF-ER): it keeps each stored step's
// latest importance ratio rho = π(a|s)/μ(a|s), V and KL, counts the
// far-policy steps (rho outside (1/c_max, c_max)), steers the penalty
// coefficient beta so that a fraction D of the stored steps is far-policy
// (Eq. 12), anneals c_max and the learning rate (Eq. 13), and keeps
// V-RACER's Retrace targets Qret (Eq. 6–8) up to date.
//
// The episodes themselves are the stage's (sampler.REFER: which steps form
// one, when it is sampleable, when it is evicted, which rows a Sample
// drew). The controller follows them as the stage's observer, through the
// method's sampler.EpisodeSource capability (Method.Episodes): it hears of
// every finished and dropped episode and of every Sample's rows, and keeps
// its per-step state by buffer slot.
//
// # State
//
// Per step, indexed by slot: rho (1 until refreshed), V, Qret, the KL of
// its last refresh, the reward and the discount. Per episode: its steps'
// slots in order, the largest step refreshed since its last sweep, and
// V(s_T) (the actor's until the learner refreshes it). Globals: N (the
// stored steps), n_far, the KL sums, the reward scale, and beta, c_max and
// the step k.
//
// # One learner step (refer.md §1)
//
//  1. The stage's Sample(rng, dst) draws the rows (and reports the
//     episodes finished and evicted since the last one); Targets() holds
//     each row's Qret as stored.
//  2. The learner computes, per row, rho, V(s_t) and KL(μ||π) with its
//     current network (rho clipped at RhoClip), and RowWeights(rho, algW,
//     klW) gives the loss weights: algW = beta·1[near] and klW = 1 − beta
//     (per Variant). It takes its gradient step, scaling its learning
//     rate by LRScale().
//  3. Refresh(rho, V, kl) writes the new values back (n_far changes by the
//     difference of the old and new far status, both with the current
//     c_max) and notes each row's episode; RefreshBootstrap refreshes
//     V(s_T) of a truncated episode's last step.
//  4. AfterStep(k): the Retrace sweep of every touched episode, from its
//     latest sampled step back to its start (Eq. 8); c_max(k) and the
//     learning-rate scale (Eq. 13); beta from n_far/N (Eq. 12); every
//     RecountEvery steps, n_far recounted, the reward scale and every Qret
//     recomputed.
//
// # Concurrency
//
// Every method but Stats is called by the goroutine that samples the
// stage (the learner's), which receives the stage's events too. Stats may
// be called from any goroutine. A REFERController must not be copied.
type REFERController struct {
	src      sampler.EpisodeSource
	cfg      sampler.REFERConfig
	maxSteps int

	// Per slot (see State). own[s] is the serial of the stored episode
	// holding slot s, 0 if none.
	own        []uint64
	ep, t      []int32
	rew, disc  []float64
	rho, v     []float64
	qret, kl   []float64
	klSet      []bool
	eps        []referCtlEp // by the stage's episode handle
	live       slotset.Set  // the stored steps' slots, N = live.Len(), in the stage's order
	serial     uint64
	nEpisodes  int
	nFar, klN  int
	klSum      float64
	rscale     float64 // 1/(sigma_r + 1e-7), or 1
	sigmaR     float64
	scaled     bool // rscale computed at least once
	beta, cmax float64
	lrScale    float64
	k          uint64
	batch      int // rows of the last Sample
	rowSlot    []uint32
	rowOwn     []uint64
	rowQret    []float64
	touched    []referCtlRef
	stale      uint64
	recounts   uint64
	sampledKL  float64
	sampledFar float64
	farDiff    float64
	st         referCtlCounters
}

// referCtlEp is the controller's record of one stored episode.
type referCtlEp struct {
	// serial numbers the controller's episodes in finishing order (0:
	// none); the touched list carries it, so a handle reused by a later
	// episode is never mistaken for the one it named.
	serial uint64
	// slots[t] is step t's slot (the controller's copy).
	slots []uint32
	// maxSampled is the largest t refreshed since the last Retrace sweep,
	// -1 if none.
	maxSampled int32
	// truncated: the episode was cut by a time limit, so Retrace
	// bootstraps from vboot = V(s_T); otherwise V_T = 0.
	truncated bool
	vboot     float64
}

// referCtlRef names a stored episode: its handle and serial.
type referCtlRef struct {
	h      int32
	serial uint64
}

// referCtlCounters are the Stats fields, atomics so that Stats may run on
// any goroutine (float64 values as bits).
type referCtlCounters struct {
	farFraction, beta, cmax, lrScale, sampledKL, sampledFar, storedKL, sigmaR, farDrift atomic.Uint64
	nFar, steps                                                                         atomic.Int64
	k, stale, recounts                                                                  atomic.Uint64
}

var _ sampler.EpisodeObserver = (*REFERController)(nil)

// NewREFERController returns the controller of the ReF-ER method whose
// stage is src (the method's Episodes), configured by src.Config(), and
// makes it src's observer (replacing any other): the episodes src already
// stores are reported to it at once (a stage built over a loaded buffer).
// beta starts at Beta0 for the variants that adapt it, 1 for the others;
// k at 0. O(src.Slots()) memory, about 70 bytes per slot. A nil src is an
// ErrConfig error.
func NewREFERController(src sampler.EpisodeSource) (*REFERController, error) {
	if src == nil || src.Buffer() == nil {
		return nil, errorf(ErrConfig, "a ReF-ER controller needs the method's episode source (sampler.Method.Episodes of a ReF-ER method)")
	}
	cfg := src.Config()
	if err := cfg.Validate(); err != nil {
		return nil, errorf(ErrConfig, "%w", err)
	}
	n := src.Slots()
	if n < 1 {
		return nil, errorf(ErrConfig, "a ReF-ER controller over a stage of %d slots", n)
	}
	c := &REFERController{
		src: src, cfg: cfg, maxSteps: max(1, cfg.MaxSteps),
		own: make([]uint64, n), ep: make([]int32, n), t: make([]int32, n), live: slotset.Make(n),
		rew: make([]float64, n), disc: make([]float64, n), rho: make([]float64, n), v: make([]float64, n),
		qret: make([]float64, n), kl: make([]float64, n), klSet: make([]bool, n),
		rscale: 1, sigmaR: 1, beta: 1,
	}
	if cfg.Variant.AdaptsBeta() {
		c.beta = cfg.Beta0
	}
	c.setK(0)
	src.Observe(c)
	c.publish()
	return c, nil
}

// Config returns the method's ReF-ER configuration the controller runs
// with (defaults filled in by the stage).
func (c *REFERController) Config() sampler.REFERConfig { return c.cfg }

// EpisodeFinished implements sampler.EpisodeObserver: episode e's steps
// join the stored steps with rho = 1, V = 0 and no KL, and their Qret is
// initialised by a Retrace sweep (rho = 1: the discounted return,
// bootstrapped on truncation by the actor's V(s_T)). O(len(e.Slots)).
func (c *REFERController) EpisodeFinished(e sampler.Episode) {
	h := int(e.Handle)
	for len(c.eps) <= h {
		c.eps = append(c.eps, referCtlEp{maxSampled: -1})
	}
	c.serial++
	r := &c.eps[h]
	*r = referCtlEp{serial: c.serial, slots: append(r.slots[:0], e.Slots...), maxSampled: -1,
		truncated: e.Truncated, vboot: e.VBoot}
	for t, s := range e.Slots {
		c.own[s], c.ep[s], c.t[s] = c.serial, e.Handle, int32(t)
		c.rew[s], c.disc[s] = e.Reward[t], e.Discount[t]
		c.live.Add(s)
		c.rho[s], c.v[s], c.kl[s], c.klSet[s] = 1, 0, 0, false
	}
	c.nEpisodes++
	c.sweep(e.Handle, len(e.Slots)-1)
}

// EpisodeDropped implements sampler.EpisodeObserver: the episode's steps
// leave the stored steps, the far counter and the KL sums. O(its length).
func (c *REFERController) EpisodeDropped(h int32) {
	if int(h) >= len(c.eps) || c.eps[h].serial == 0 {
		return
	}
	e := &c.eps[h]
	for _, s := range e.slots {
		c.live.Remove(s)
		if c.isFar(c.rho[s]) {
			c.nFar--
		}
		if c.klSet[s] {
			c.klSum -= c.kl[s]
			c.klN--
		}
		c.own[s] = 0
	}
	c.nEpisodes--
	e.serial, e.slots = 0, e.slots[:0]
}

// Indexed implements sampler.EpisodeObserver: the first Sample that finds
// stored steps computes the reward scale (and the Qret of everything
// stored with it). O(N) once, O(1) after.
func (c *REFERController) Indexed() {
	if !c.scaled && c.live.Len() > 0 {
		c.rescale()
	}
}

// Sampled implements sampler.EpisodeObserver: it notes the rows of the
// Sample and their stored Qret (Targets). O(rows).
func (c *REFERController) Sampled(rows []uint32) {
	c.rowSlot = append(c.rowSlot[:0], rows...)
	c.rowOwn, c.rowQret = c.rowOwn[:0], c.rowQret[:0]
	for _, s := range rows {
		c.rowOwn = append(c.rowOwn, c.own[s])
		c.rowQret = append(c.rowQret, c.qret[s])
	}
	if len(rows) > 0 {
		c.batch = len(rows)
	}
	c.publish()
}

// Targets returns each row's Qret as stored when the last Sample drew it
// (in reward-scaled units): the off-policy return V-RACER's advantage
// Qret − V(s) uses (the stored value is used as it is, even if stale,
// App. C remark 1). The slice is the controller's, valid until the next
// Sample; do not modify it. O(1).
func (c *REFERController) Targets() []float64 { return c.rowQret }

// RhoClip is the largest rho a learner should use with this method: 1e3
// for ReF-ER-2 (the paper's clip, §5.3), +Inf otherwise (unless
// configured). Learners apply it (after clamping log rho to [−7, 7])
// before RowWeights and Refresh. O(1).
func (c *REFERController) RhoClip() float64 { return c.cfg.RhoClip }

// Beta is the current penalty coefficient beta (1 for ReF-ER-1 and plain
// ER). O(1).
func (c *REFERController) Beta() float64 { return c.beta }

// CMax is the current near-policy bound c_max(k) = 1 + C/(1 + A·k). O(1).
func (c *REFERController) CMax() float64 { return c.cmax }

// LRScale is the learning-rate factor 1/(1 + A·k) of Eq. 13: learners
// multiply their initial learning rate by it. O(1).
func (c *REFERController) LRScale() float64 { return c.lrScale }

// Step is k, the learner step of the last AfterStep (0 before any). O(1).
func (c *REFERController) Step() uint64 { return c.k }

// Near reports whether rho is near-policy: 1/c_max < rho < c_max with
// the current c_max. O(1).
func (c *REFERController) Near(rho float64) bool { return !c.isFar(rho) }

func (c *REFERController) isFar(rho float64) bool { return !(rho > 1/c.cmax && rho < c.cmax) }

// RowWeights fills the loss weights of the rows whose importance ratios
// are rho (the learner's fresh values for the last Sample's rows, after
// RhoClip), with the current beta and c_max (Eq. 10):
//
//	variant   algW               klW
//	refer     beta·1[near]       1 − beta
//	refer-1   1[near]            0
//	refer-2   beta               1 − beta
//	er        1                  0
//
// A learner scales its algorithm's per-sample gradient (policy and value)
// by algW and adds klW times the gradient of KL(μ||π). Three slices of
// different lengths are a buffer.ErrShape error (nothing is written).
// O(len(rho)).
func (c *REFERController) RowWeights(rho, algW, klW []float64) error {
	if len(algW) != len(rho) || len(klW) != len(rho) {
		return fmt.Errorf("%w: refer: RowWeights of %d rows into %d and %d weights", buffer.ErrShape, len(rho), len(algW), len(klW))
	}
	for i, x := range rho {
		near := 0.0
		if !c.isFar(x) {
			near = 1
		}
		switch c.cfg.Variant {
		case sampler.REFERFull:
			algW[i], klW[i] = c.beta*near, 1-c.beta
		case sampler.REFERSkipOnly:
			algW[i], klW[i] = near, 0
		case sampler.REFERPenaltyOnly:
			algW[i], klW[i] = c.beta, 1-c.beta
		default:
			algW[i], klW[i] = 1, 0
		}
	}
	return nil
}

// Refresh writes the learner's fresh values for the rows of the last
// Sample back (refer.md §1 step 4): rho (after RhoClip), V(s_t) and
// KL(μ||π) of each row. n_far changes by isFar(new) − isFar(old), both
// with the current c_max; each row's episode is noted for AfterStep's
// Retrace sweep. Rows whose episode was dropped since they were drawn
// (the buffer overwrote it) are skipped and counted in Stats.Stale. The
// slices must have one value per row (buffer.ErrShape); a NaN or infinite
// value, or a rho <= 0, rejects the whole call (buffer.ErrPriority;
// nothing is written). O(rows).
func (c *REFERController) Refresh(rho, v, kl []float64) error {
	n := len(c.rowSlot)
	if len(rho) != n || len(v) != n || len(kl) != n {
		return fmt.Errorf("%w: refer: Refresh of %d rho, %d V and %d KL values for %d sampled rows", buffer.ErrShape, len(rho), len(v), len(kl), n)
	}
	for i := range n {
		if !(rho[i] > 0) || math.IsInf(rho[i], 1) || math.IsNaN(v[i]) || math.IsInf(v[i], 0) || !(kl[i] >= -1e-9) || math.IsInf(kl[i], 1) {
			return fmt.Errorf("%w: refer: Refresh row %d: rho %v, V %v, KL %v (must be finite, rho > 0, KL >= 0)", buffer.ErrPriority, i, rho[i], v[i], kl[i])
		}
	}
	var klSum float64
	far := 0
	for i, s := range c.rowSlot {
		klSum += kl[i]
		if c.isFar(rho[i]) {
			far++
		}
		if c.rowOwn[i] == 0 || c.own[s] != c.rowOwn[i] {
			c.stale++
			continue
		}
		if c.isFar(rho[i]) != c.isFar(c.rho[s]) {
			if c.isFar(rho[i]) {
				c.nFar++
			} else {
				c.nFar--
			}
		}
		c.rho[s], c.v[s] = rho[i], v[i]
		if c.klSet[s] {
			c.klSum -= c.kl[s]
		} else {
			c.klSet[s] = true
			c.klN++
		}
		c.kl[s] = kl[i]
		c.klSum += kl[i]
		c.touch(c.ep[s], c.t[s])
	}
	if n > 0 {
		c.sampledKL = klSum / float64(n)
		c.sampledFar = float64(far) / float64(n)
	}
	return nil
}

// touch notes that step t of episode h was refreshed.
func (c *REFERController) touch(h, t int32) {
	e := &c.eps[h]
	if e.maxSampled < 0 {
		c.touched = append(c.touched, referCtlRef{h: h, serial: e.serial})
	}
	e.maxSampled = max(e.maxSampled, t)
}

// RefreshBootstrap refreshes V(s_T) of the episode whose last step is row
// of the last Sample, if that episode was cut by a time limit (refer.md
// §2: "if t+1 = T and the episode was truncated, V(s_T) is refreshed");
// vT is the learner's V of the row's NextObs. It reports whether it
// applied: false for a row that is not such a last step, or whose episode
// was dropped since the Sample. A row outside the last Sample
// (buffer.ErrShape) or a NaN or infinite vT (buffer.ErrPriority) is an
// error. O(1).
func (c *REFERController) RefreshBootstrap(row int, vT float64) (bool, error) {
	if row < 0 || row >= len(c.rowSlot) {
		return false, fmt.Errorf("%w: refer: RefreshBootstrap of row %d, the last Sample has %d rows", buffer.ErrShape, row, len(c.rowSlot))
	}
	if math.IsNaN(vT) || math.IsInf(vT, 0) {
		return false, fmt.Errorf("%w: refer: RefreshBootstrap of row %d with V(s_T) = %v (must be finite)", buffer.ErrPriority, row, vT)
	}
	s := c.rowSlot[row]
	if c.rowOwn[row] == 0 || c.own[s] != c.rowOwn[row] {
		return false, nil
	}
	h := c.ep[s]
	e := &c.eps[h]
	if !e.truncated || int(c.t[s]) != len(e.slots)-1 {
		return false, nil
	}
	e.vboot = vT
	c.touch(h, c.t[s])
	return true, nil
}

// AfterStep ends learner step k (1, 2, ...; refer.md §1 steps 6–8): the
// Retrace sweep of every episode refreshed since the last call, from its
// latest refreshed step back to its first (Eq. 8); then c_max(k) and the
// learning-rate scale (Eq. 13); then beta from n_far/N (Eq. 12, for the
// variants that adapt it: beta ← (1−eta_b)·beta, plus eta_b if n_far/N ≤
// D); and every RecountEvery steps a recount of n_far (with the new
// c_max), the reward scale and every Qret.
//
// Cost: O(sum of the touched episodes' latest sampled steps) for the
// sweeps (about B·T/2), O(1) for the controller, O(N) every RecountEvery
// steps.
func (c *REFERController) AfterStep(k uint64) {
	for _, tr := range c.touched {
		if e := &c.eps[tr.h]; e.serial == tr.serial && e.maxSampled >= 0 {
			if !c.cfg.NoRetrace {
				c.sweep(tr.h, int(e.maxSampled))
			}
			e.maxSampled = -1
		}
	}
	c.touched = c.touched[:0]
	c.setK(k)
	if c.cfg.Variant.AdaptsBeta() && c.live.Len() > 0 {
		eb := c.cfg.BetaRate
		if eb == 0 {
			eb = min(1, 0.1*float64(max(c.batch, 1))/float64(c.maxSteps))
		}
		c.beta *= 1 - eb
		if c.farFraction() <= c.cfg.D {
			c.beta += eb
		}
		c.beta = min(1, max(0, c.beta))
	}
	if k%uint64(c.cfg.RecountEvery) == 0 {
		c.recount()
		c.rescale()
	}
	if referInvariants && len(c.own) <= 1<<14 {
		if err := c.check(); err != nil {
			panic("learner: refer controller: broken invariant: " + err.Error())
		}
	}
	c.publish()
}

// SetController restores the controller's step k and beta (a learner
// resuming from a checkpoint): c_max, the learning-rate scale and beta are
// those after AfterStep(k). beta is ignored by the variants that fix it
// at 1. A beta outside [0, 1] (or NaN) is a buffer.ErrConfig error and
// changes nothing.
func (c *REFERController) SetController(k uint64, beta float64) error {
	if !(beta >= 0 && beta <= 1) {
		return fmt.Errorf("%w: refer: SetController with beta %v (must be in [0, 1])", buffer.ErrConfig, beta)
	}
	c.setK(k)
	if c.cfg.Variant.AdaptsBeta() {
		c.beta = beta
	}
	c.publish()
	return nil
}

// setK sets k and the Eq. 13 schedules.
func (c *REFERController) setK(k uint64) {
	c.k = k
	x := 1 + c.cfg.A*float64(k)
	c.cmax = 1 + c.cfg.C/x
	c.lrScale = 1 / x
}

// farFraction is n_far/N, clamped to [0, 1] (the counter drifts between
// recounts).
func (c *REFERController) farFraction() float64 {
	if c.live.Len() == 0 {
		return 0
	}
	return min(1, max(0, float64(c.nFar)/float64(c.live.Len())))
}

// recount sets n_far to the number of stored steps that are far with the
// current c_max, and the KL sums from the stored values. O(N).
func (c *REFERController) recount() {
	far, kls, kln := 0, 0.0, 0
	for _, s := range c.live.Slots() {
		if c.isFar(c.rho[s]) {
			far++
		}
		if c.klSet[s] {
			kls += c.kl[s]
			kln++
		}
	}
	c.farDiff = float64(c.nFar - far)
	c.nFar, c.klSum, c.klN = far, kls, kln
	c.recounts++
}

// rescale recomputes the reward scale 1/(sigma_r + 1e-7), sigma_r =
// sqrt(mean r²) over the stored steps (App. B, Eq. 16), and every Qret
// with it. O(N).
func (c *REFERController) rescale() {
	if c.live.Len() == 0 || c.cfg.NoRetrace {
		return
	}
	c.scaled = true
	if !c.cfg.NoRewardScale {
		var ss float64
		for _, s := range c.live.Slots() {
			ss += c.rew[s] * c.rew[s]
		}
		c.sigmaR = math.Sqrt(ss / float64(c.live.Len()))
		c.rscale = 1 / (c.sigmaR + referRewardEps)
	}
	for h := range c.eps {
		if e := &c.eps[h]; e.serial != 0 {
			c.sweep(int32(h), len(e.slots)-1)
		}
	}
}

// REFERStats is a snapshot of a REFERController, as of the end of its last
// Sample, AfterStep or SetController.
type REFERStats struct {
	// FarFraction is n_far/N, the counter's estimate of the stored steps'
	// far-policy share (what beta steers toward D).
	FarFraction float64 `json:"far_fraction"`
	// NFar is the far counter n_far.
	NFar int `json:"n_far"`
	// Beta, CMax and LRScale are the controller's state (Eq. 12–13), K
	// the learner step of the last AfterStep.
	Beta    float64 `json:"beta"`
	CMax    float64 `json:"c_max"`
	LRScale float64 `json:"lr_scale"`
	K       uint64  `json:"k"`
	// SampledKL is the mean KL(μ||π) over the rows of the last Refresh,
	// SampledFar the share of those rows that were far-policy.
	SampledKL  float64 `json:"sampled_kl"`
	SampledFar float64 `json:"sampled_far"`
	// StoredKL is the mean of the latest KL over stored steps that have
	// been refreshed at least once (0 if none).
	StoredKL float64 `json:"stored_kl"`
	// Steps is N, the stored steps of finished episodes.
	Steps int `json:"steps"`
	// RewardRMS is sigma_r, the reward scale's RMS (1 before the first
	// computation, and with NoRewardScale).
	RewardRMS float64 `json:"reward_rms"`
	// Stale counts refreshed rows whose episode had been dropped since
	// the Sample.
	Stale uint64 `json:"stale"`
	// Recounts counts recounts of n_far; FarDrift is the counter minus the
	// true count found by the last one (the staleness the recount fixed).
	Recounts uint64  `json:"recounts"`
	FarDrift float64 `json:"far_drift"`
}

// Stats returns a snapshot. O(1); safe for concurrent use.
func (c *REFERController) Stats() REFERStats {
	a := &c.st
	f := func(x *atomic.Uint64) float64 { return math.Float64frombits(x.Load()) }
	return REFERStats{
		FarFraction: f(&a.farFraction), NFar: int(a.nFar.Load()),
		Beta: f(&a.beta), CMax: f(&a.cmax), LRScale: f(&a.lrScale), K: a.k.Load(),
		SampledKL: f(&a.sampledKL), SampledFar: f(&a.sampledFar), StoredKL: f(&a.storedKL),
		Steps: int(a.steps.Load()), RewardRMS: f(&a.sigmaR),
		Stale: a.stale.Load(), Recounts: a.recounts.Load(), FarDrift: f(&a.farDrift),
	}
}

// publish stores the owner's state for Stats.
func (c *REFERController) publish() {
	a := &c.st
	b := func(x *atomic.Uint64, v float64) { x.Store(math.Float64bits(v)) }
	b(&a.farFraction, c.farFraction())
	b(&a.beta, c.beta)
	b(&a.cmax, c.cmax)
	b(&a.lrScale, c.lrScale)
	b(&a.sampledKL, c.sampledKL)
	b(&a.sampledFar, c.sampledFar)
	storedKL := 0.0
	if c.klN > 0 {
		storedKL = c.klSum / float64(c.klN)
	}
	b(&a.storedKL, storedKL)
	b(&a.sigmaR, c.sigmaR)
	b(&a.farDrift, c.farDiff)
	a.nFar.Store(int64(c.nFar))
	a.steps.Store(int64(c.live.Len()))
	a.k.Store(c.k)
	a.stale.Store(c.stale)
	a.recounts.Store(c.recounts)
}
