package sampler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"

	"github.com/apexrl/apex/buffer"
)

// ReF-ER defaults (Novati & Koumoutsakos 2019, arXiv 1807.05827, §3 and
// App. A; refer.md §6–7 for the CPU-scale settings).
const (
	// DefaultREFERC is C of c_max(k) = 1 + C/(1 + A·k) (Eq. 13): the paper's 4.
	DefaultREFERC = 4.0
	// DefaultREFERD is D, the far-policy fraction beta steers toward: 0.1.
	DefaultREFERD = 0.1
	// DefaultREFERA is the paper's annealing rate A = 5e-7 per gradient
	// step, used when neither A nor TotalSteps is given. Over a short run
	// it barely anneals; refer.md §7.12 uses A = 5/T_total instead, which
	// REFERConfig.TotalSteps selects.
	DefaultREFERA = 5e-7
	// DefaultREFERRecountEvery is how often (learner steps) the far
	// counter is recounted, the reward scale recomputed and every Qret
	// recomputed: every 1000 steps, as the paper's code does.
	DefaultREFERRecountEvery = 1000
	// DefaultREFERRhoClip is ReF-ER-2's clip of rho (the paper's 1e3, §5.3):
	// without Rule 1, rho of tail actions overflows.
	DefaultREFERRhoClip = 1e3
	// referRewardEps is added to the reward RMS before dividing (App. B).
	referRewardEps = 1e-7
)

// REFERVariant selects which of ReF-ER's rules apply (the paper's
// ablations, §5).
type REFERVariant uint8

const (
	// REFERFull is ReF-ER: far-policy samples give no algorithm gradient
	// (Rule 1), the KL penalty pulls toward the behaviours (Rule 2), and
	// beta steers the far fraction toward D. Method "refer".
	REFERFull REFERVariant = iota
	// REFERSkipOnly is ReF-ER-1, Rule 1 alone: beta is fixed at 1 (no KL
	// penalty), far samples are skipped. Method "refer-1".
	REFERSkipOnly
	// REFERPenaltyOnly is ReF-ER-2, Rule 2 alone: no sample is skipped
	// (algW = beta for all), beta still steers by the far fraction, and
	// rho is clipped at RhoClip (1e3). Method "refer-2".
	REFERPenaltyOnly
	// REFERNone is plain experience replay over the same episode store:
	// algW = 1, klW = 0 for every sample. Method "er".
	REFERNone
)

var referVariantNames = [...]string{REFERFull: "refer", REFERSkipOnly: "refer-1", REFERPenaltyOnly: "refer-2", REFERNone: "er"}

// REFERMethods are the method names of the ReF-ER variants, in Variant
// order ("refer", "refer-1", "refer-2", "er").
var REFERMethods = referVariantNames[:]

// referVariant returns the variant of method name and whether name is
// one. O(variants).
func referVariant(name string) (REFERVariant, bool) {
	for v, n := range referVariantNames {
		if n == name {
			return REFERVariant(v), true
		}
	}
	return 0, false
}

// String is the variant's method name: "refer", "refer-1", "refer-2" or "er".
func (v REFERVariant) String() string {
	if int(v) < len(referVariantNames) {
		return referVariantNames[v]
	}
	return fmt.Sprintf("REFERVariant(%d)", uint8(v))
}

// adapts reports whether beta follows Eq. 12 (else it stays 1).
func (v REFERVariant) adapts() bool { return v == REFERFull || v == REFERPenaltyOnly }

// REFERConfig configures the REFER stage. A zero field selects the default
// noted on it (Beta0's default is 0, so every zero is a default); start
// from DefaultREFERConfig.
type REFERConfig struct {
	// Variant selects the rules (full ReF-ER, ReF-ER-1, ReF-ER-2 or plain
	// ER). Default REFERFull.
	Variant REFERVariant
	// C sets c_max(k) = 1 + C/(1 + A·k) (Eq. 13), the near-policy bound:
	// a step is near-policy when 1/c_max < rho < c_max. > 0. Default 4.
	C float64
	// D is the far-policy fraction beta steers toward (Eq. 12), in (0, 1).
	// Default 0.1.
	D float64
	// A is the annealing rate of c_max and of the learning-rate scale
	// 1/(1 + A·k) (Eq. 13), per learner step k. >= 0 and finite. 0 means
	// 5/TotalSteps when TotalSteps is set (refer.md §7.12: c_max ends at
	// 1.67 and the learning rate at 1/6 of its start, as the paper's A
	// does over 1e7 steps), else DefaultREFERA (5e-7).
	A float64
	// TotalSteps is the run's planned number of learner steps, T_total,
	// for the default A. >= 0.
	TotalSteps int64
	// MaxSteps is N_max, the steps of finished episodes kept: the oldest
	// episodes are evicted while the others hold at least MaxSteps steps.
	// In [1, Capacity]; 0 means Capacity − Capacity/8. The buffer must
	// have room beyond it for the episodes still being played (up to one
	// per actor) and for the stripes' uneven filling (about Stripes ×
	// the actors' batch): steps the buffer overwrites before the stage
	// evicts them drop their episodes early (Stats.Overwritten), so make
	// Capacity about MaxSteps + actors × episode length + Stripes × batch.
	MaxSteps int
	// BetaRate is eta_b, beta's step (Eq. 12), in (0, 1]. 0 means
	// 0.1·B/MaxSteps with B the last Sample's batch size (refer.md §7.2,
	// the newer code's choice; about the paper's 1e-4 at its scale).
	BetaRate float64
	// Beta0 is the initial beta of the variants that adapt it (full and
	// ReF-ER-2), in [0, 1]. Default 0, as the paper's code.
	Beta0 float64
	// RecountEvery is how many learner steps pass between recounts of the
	// far counter (and recomputations of the reward scale and of every
	// Qret). >= 1; 0 means 1000.
	RecountEvery int
	// RhoClip is the largest rho a learner should use (RhoClip): ReF-ER-2
	// needs one (the paper's 1e3). 0 means DefaultREFERRhoClip for
	// REFERPenaltyOnly and no clip (+Inf) otherwise; > 1 when set.
	RhoClip float64
	// NoRewardScale turns off the reward scaling: by default the rewards
	// enter Retrace divided by sigma_r + 1e-7, sigma_r = sqrt(mean r²) over
	// the stored steps, recomputed every RecountEvery steps (App. B).
	NoRewardScale bool
	// NoRetrace is for learners that use no Retrace target (TD3 and DDPG
	// under ReF-ER, which keep their own critics' targets): AfterStep
	// then skips the sweeps of the refreshed episodes and the periodic
	// recomputation of the reward scale and every Qret, and Targets
	// returns each step's Qret as set when its episode finished (the
	// unscaled discounted return, bootstrapped on truncation).
	NoRetrace bool
}

// DefaultREFERConfig is full ReF-ER with the paper's C = 4, D = 0.1, beta0
// = 0, and A = 5/totalSteps (refer.md §7.12; the paper's 5e-7 if
// totalSteps is 0); N_max, eta_b and the recount period take their
// defaults.
func DefaultREFERConfig(totalSteps int64) REFERConfig {
	return REFERConfig{C: DefaultREFERC, D: DefaultREFERD, TotalSteps: totalSteps}
}

// Validate reports the first field out of range, wrapping buffer.ErrConfig.
// MaxSteps is checked against the buffer by NewREFER.
func (c REFERConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: refer: "+format, append([]any{buffer.ErrConfig}, args...)...)
	}
	fin := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case c.Variant > REFERNone:
		return bad("unknown Variant %d", c.Variant)
	case !(c.C >= 0) || !fin(c.C):
		return bad("C must be finite and > 0 (0: default 4), got %v", c.C)
	case !(c.D >= 0 && c.D < 1):
		return bad("D must be in (0, 1) (0: default 0.1), got %v", c.D)
	case !(c.A >= 0) || !fin(c.A):
		return bad("A must be finite and >= 0 (0: default), got %v", c.A)
	case c.TotalSteps < 0:
		return bad("TotalSteps must be >= 0, got %d", c.TotalSteps)
	case c.MaxSteps < 0:
		return bad("MaxSteps must be >= 0 (0: default), got %d", c.MaxSteps)
	case !(c.BetaRate >= 0 && c.BetaRate <= 1):
		return bad("BetaRate must be in (0, 1] (0: default), got %v", c.BetaRate)
	case !(c.Beta0 >= 0 && c.Beta0 <= 1):
		return bad("Beta0 must be in [0, 1], got %v", c.Beta0)
	case c.RecountEvery < 0:
		return bad("RecountEvery must be >= 1 (0: default), got %d", c.RecountEvery)
	case c.RhoClip != 0 && !(c.RhoClip > 1):
		return bad("RhoClip must be > 1 (0: default), got %v", c.RhoClip)
	}
	return nil
}

// withDefaults fills the zero fields for a buffer of capacity slots.
func (c REFERConfig) withDefaults(capacity int) REFERConfig {
	if c.C == 0 {
		c.C = DefaultREFERC
	}
	if c.D == 0 {
		c.D = DefaultREFERD
	}
	if c.A == 0 {
		c.A = DefaultREFERA
		if c.TotalSteps > 0 {
			c.A = 5 / float64(c.TotalSteps)
		}
	}
	if c.MaxSteps == 0 {
		c.MaxSteps = max(1, capacity-capacity/8)
	}
	if c.RecountEvery == 0 {
		c.RecountEvery = DefaultREFERRecountEvery
	}
	if c.RhoClip == 0 {
		c.RhoClip = math.Inf(1)
		if c.Variant == REFERPenaltyOnly {
			c.RhoClip = DefaultREFERRhoClip
		}
	}
	return c
}

// REFER is the replay stage of Remember and Forget Experience Replay
// (Novati & Koumoutsakos, ICML 2019, arXiv 1807.05827) for learners with
// parametric Gaussian policies (V-RACER, learner.VRACER): it keeps whole
// episodes, replays distinct steps uniformly, keeps each step's latest
// importance ratio rho = π(a|s)/μ(a|s), counts the far-policy steps
// (rho outside (1/c_max, c_max)), steers the penalty coefficient beta so
// that a fraction D of the stored steps is far-policy, and keeps
// V-RACER's Retrace targets Qret (Eq. 6–8) up to date.
//
// ReF-ER is not a priority sampler (refer.md §5): it does not use the
// buffer's sum tree. It follows the buffer through a buffer.Watcher (see
// refer_store.go for how episodes are assembled across stripes and how
// lost steps drop them) and samples from its own list of the steps of
// finished episodes.
//
// # Storage
//
// Per step the buffer holds what the actor wrote (actor.Gaussian): the
// observation, the unclipped action as sampled (ActionVec), the reward
// r_{t+1} and discount (γ, 0 at a termination), the episode id and step,
// the flags, and three float columns (REFERColumns): the behaviour's mean
// and std and, on a time-limit truncation, V(s_T). Per step the stage
// keeps, indexed by slot and checked against the slot's generation: rho
// (1 until refreshed), V, Qret, the KL of its last refresh, the reward and
// the discount. Per episode: its steps' slots in order, maxSampled and
// V(s_T). Globals: N (the stored steps of finished episodes), n_far, and
// the controller's beta, c_max and step k.
//
// # One learner step (refer.md §1)
//
//  1. Sample(rng, dst): index the steps written since the last call (an
//     episode becomes sampleable once all its steps are in, and the
//     oldest episodes are evicted while N − len(oldest) ≥ MaxSteps); then
//     draw dst.Len() distinct steps uniformly among the N stored steps.
//     Targets() holds each row's Qret as stored.
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
// Sample, Update, Refresh, RefreshBootstrap, RowWeights, Targets and
// AfterStep are called by one goroutine at a time (the learner's), which
// owns the stage's state; they may run concurrently with inserts into the
// buffer. Priority and Stats may be called from any goroutine. A REFER
// must not be copied after first use.
type REFER struct {
	buf   *buffer.Buffer
	cfg   REFERConfig
	cap   int
	watch *buffer.Watcher
	visit func(buffer.Meta) // r.ingest, bound once
	one   *buffer.Batch     // 1-row scratch for reading ingested steps
	u     *Uniform          // Update's write-back of priority 1

	bootCol  int // index of REFERBootColumn in the buffer's Floats
	maxSteps int

	// Per slot (see Storage). gen[s] != 0 iff a step of an open or live
	// episode is registered in slot s (its generation); pos[s] is its index
	// in live, or -1.
	gen        []uint32
	ep, t, pos []int32
	rew, disc  []float64
	rho, v     []float64
	qret, kl   []float64
	klSet      []bool
	mark       []uint32 // Sample's distinctness marks, by epoch

	eps  []referEp
	free []int32
	open map[uint64]int32
	// fifo holds the finished episodes in finishing order from fhead on
	// (entries of episodes dropped out of order are skipped).
	fifo  []referRef
	fhead int
	// live holds the slots of the steps of live episodes, N = len(live).
	live   []uint32
	nEps   int
	serial uint64

	// Far counter and KL sums over live steps. Invariant after a recount:
	// nFar == #{s in live : isFar(rho[s])}; between recounts it drifts by
	// the steps whose status changed with c_max.
	nFar  int
	klSum float64
	klN   int

	// Controller (refer.md §1, Eq. 12–13).
	beta, cmax, lrScale float64
	k                   uint64
	batch               int     // rows of the last Sample
	rscale              float64 // 1/(sigma_r + 1e-7), or 1
	sigmaR              float64
	scaled              bool // rscale computed at least once

	// Rows of the last Sample.
	epoch   uint32
	rowSlot []uint32
	rowGen  []uint32
	rowQret []float64
	touched []referRef

	// Owner-side counters, published by publish.
	ingested, nextGC                       uint64
	unread, malformed, overwritten         uint64
	evicted, abandoned, stale, recounts    uint64
	lastSampledKL, lastSampledFar, farDiff float64

	st referCounters
}

// referCounters are the Stats fields, atomics so that Stats may run on any
// goroutine (float64 values as bits).
type referCounters struct {
	farFraction, beta, cmax, lrScale, sampledKL, sampledFar, storedKL, sigmaR, farDrift atomic.Uint64
	nFar, steps, episodes, open                                                         atomic.Int64
	k, ingested, lapped, unread, malformed, overwritten, evicted, abandoned             atomic.Uint64
	stale, recounts                                                                     atomic.Uint64
}

var _ Selector = (*REFER)(nil)

// NewREFER validates cfg and returns a REFER stage over buf, which must
// store continuous actions, the episode columns and the float columns of
// REFERColumns (REFERColumnIndex says what is missing). It indexes the
// items already stored (a loaded buffer's finished episodes become
// sampleable with rho = 1). O(Capacity) memory, about 80 bytes per slot.
func NewREFER(buf *buffer.Buffer, cfg REFERConfig) (*REFER, error) {
	if buf == nil {
		return nil, fmt.Errorf("%w: refer: nil buffer", buffer.ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	bc := buf.Config()
	_, _, boot, err := REFERColumnIndex(bc)
	if err != nil {
		return nil, err
	}
	n := bc.Capacity
	if cfg.MaxSteps > n {
		return nil, fmt.Errorf("%w: refer: MaxSteps (%d) exceeds the buffer's capacity (%d)", buffer.ErrConfig, cfg.MaxSteps, n)
	}
	cfg = cfg.withDefaults(n)
	one, err := buf.NewBatch(1)
	if err != nil {
		return nil, fmt.Errorf("refer: %w", err)
	}
	r := &REFER{
		buf: buf, cfg: cfg, cap: n,
		one:      one,
		u:        NewUniform(buf),
		bootCol:  boot,
		maxSteps: cfg.MaxSteps,
		gen:      make([]uint32, n),
		ep:       make([]int32, n),
		t:        make([]int32, n),
		pos:      make([]int32, n),
		rew:      make([]float64, n),
		disc:     make([]float64, n),
		rho:      make([]float64, n),
		v:        make([]float64, n),
		qret:     make([]float64, n),
		kl:       make([]float64, n),
		klSet:    make([]bool, n),
		mark:     make([]uint32, n),
		open:     map[uint64]int32{},
		rscale:   1,
		sigmaR:   1,
		nextGC:   uint64(max(n/2, 1)),
	}
	for i := range r.pos {
		r.pos[i] = -1
	}
	r.beta = 1
	if cfg.Variant.adapts() {
		r.beta = cfg.Beta0
	}
	r.setK(0)
	r.visit = r.ingest
	r.watch = buf.NewWatcher()
	r.watch.Poll(r.visit)
	r.publish()
	return r, nil
}

// Config returns the stage's configuration with the defaults filled in.
func (r *REFER) Config() REFERConfig { return r.cfg }

// Buffer returns the buffer the stage samples from.
func (r *REFER) Buffer() *buffer.Buffer { return r.buf }

// Sample indexes the steps written since the last call, then fills every
// row of dst (made by the buffer's NewBatch) with a distinct step drawn
// uniformly among the N steps of stored finished episodes: dst.Prob[i] =
// 1/N, dst.Size = N, dst.Total = N, dst.MinProb = 1/N. Targets() then
// holds each row's stored Qret. The first Sample that finds steps computes
// the reward scale (and the Qret of everything stored with it).
//
// A drawn step whose slot is being overwritten (the buffer ran over a
// stored episode: MaxSteps leaves too little room) drops its episode,
// counted in Stats.Overwritten, and the row is drawn again.
//
// Errors: buffer.ErrEmpty when no episode has finished; ErrBatchSize for 0
// rows or more rows than stored steps (wrapped).
//
// Cost: O(new items) to index them (each read once, plus the Retrace
// sweep of each finished episode and evictions, O(its length)), and
// O(rows) draws and copies. It allocates only as the episode index grows
// (a map entry per open episode, the records' step slices until they are
// reused).
func (r *REFER) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	if err := checkArgs("refer", rng, dst); err != nil {
		return err
	}
	r.watch.Poll(r.visit)
	defer r.publish()
	if !r.scaled && len(r.live) > 0 {
		r.rescale()
	}
	n := dst.Len()
	r.rowSlot, r.rowGen, r.rowQret = r.rowSlot[:0], r.rowGen[:0], r.rowQret[:0]
	if len(r.live) == 0 {
		return fmt.Errorf("%w: refer: no finished episode stored", buffer.ErrEmpty)
	}
	if n < 1 || n > len(r.live) {
		return fmt.Errorf("%w: refer: %d rows requested, %d steps stored", buffer.ErrBatchSize, n, len(r.live))
	}
	r.batch = n
	if r.epoch++; r.epoch == 0 {
		clear(r.mark)
		r.epoch = 1
	}
	for row := 0; row < n; {
		if n > len(r.live) { // episodes dropped while drawing
			return fmt.Errorf("%w: refer: %d rows requested, %d steps left after overwrites", buffer.ErrBatchSize, n, len(r.live))
		}
		s := r.live[rng.IntN(len(r.live))]
		if r.mark[s] == r.epoch {
			continue
		}
		ref := buffer.Ref{Slot: s, Gen: r.gen[s]}
		if !r.buf.GatherRef(dst, row, ref) {
			r.dropLive(r.ep[s])
			r.overwritten++
			continue
		}
		r.mark[s] = r.epoch
		r.rowSlot = append(r.rowSlot, s)
		r.rowGen = append(r.rowGen, ref.Gen)
		r.rowQret = append(r.rowQret, r.qret[s])
		row++
	}
	N := len(r.live)
	p := 1 / float64(N)
	for i := range n {
		dst.Prob[i] = p
	}
	dst.Size, dst.Total, dst.MinProb = N, float64(N), p
	return nil
}

// Targets returns each row's Qret as stored when the last Sample drew it
// (in reward-scaled units): the off-policy return V-RACER's advantage
// Qret − V(s) uses (the stored value is used as it is, even if stale,
// App. C remark 1). The slice is the stage's, valid until the next
// Sample; do not modify it. O(1).
func (r *REFER) Targets() []float64 { return r.rowQret }

// Update implements Selector: it validates absTD and writes priority 1 for
// the still-stored refs (as Uniform.Update), so the call stays honest
// about stale refs. ReF-ER uses no priorities: V-RACER does not call it.
func (r *REFER) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	return r.u.Update(refs, absTD)
}

// Priority is 1: the stage samples uniformly. Safe for concurrent use.
func (r *REFER) Priority(absTD float64) float64 { return 1 }

// String names the stage and its parameters.
func (r *REFER) String() string {
	c := r.cfg
	return fmt.Sprintf("refer(variant=%v,C=%g,D=%g,A=%g,N_max=%d,eta_b=%s,beta0=%g,recount=%d,rho_clip=%g,reward_scale=%v)",
		c.Variant, c.C, c.D, c.A, c.MaxSteps, betaRateString(c.BetaRate), c.Beta0, c.RecountEvery, c.RhoClip, !c.NoRewardScale)
}

func betaRateString(x float64) string {
	if x == 0 {
		return "0.1B/N_max"
	}
	return fmt.Sprint(x)
}

// RhoClip is the largest rho a learner should use with this stage: 1e3 for
// ReF-ER-2 (the paper's clip, §5.3), +Inf otherwise (unless configured).
// Learners apply it (after clamping log rho to [−7, 7]) before RowWeights
// and Refresh. O(1).
func (r *REFER) RhoClip() float64 { return r.cfg.RhoClip }

// Beta is the current penalty coefficient beta (1 for ReF-ER-1 and plain
// ER). O(1).
func (r *REFER) Beta() float64 { return r.beta }

// CMax is the current near-policy bound c_max(k) = 1 + C/(1 + A·k). O(1).
func (r *REFER) CMax() float64 { return r.cmax }

// LRScale is the learning-rate factor 1/(1 + A·k) of Eq. 13: learners
// multiply their initial learning rate by it. O(1).
func (r *REFER) LRScale() float64 { return r.lrScale }

// Step is k, the learner step of the last AfterStep (0 before any). O(1).
func (r *REFER) Step() uint64 { return r.k }

// Near reports whether rho is near-policy: 1/c_max < rho < c_max with
// the current c_max. O(1).
func (r *REFER) Near(rho float64) bool { return !r.isFar(rho) }

func (r *REFER) isFar(rho float64) bool { return !(rho > 1/r.cmax && rho < r.cmax) }

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
// different lengths are an ErrShape error (nothing is written).
// O(len(rho)).
func (r *REFER) RowWeights(rho, algW, klW []float64) error {
	if len(algW) != len(rho) || len(klW) != len(rho) {
		return fmt.Errorf("%w: refer: RowWeights of %d rows into %d and %d weights", buffer.ErrShape, len(rho), len(algW), len(klW))
	}
	for i, x := range rho {
		near := 0.0
		if !r.isFar(x) {
			near = 1
		}
		switch r.cfg.Variant {
		case REFERFull:
			algW[i], klW[i] = r.beta*near, 1-r.beta
		case REFERSkipOnly:
			algW[i], klW[i] = near, 0
		case REFERPenaltyOnly:
			algW[i], klW[i] = r.beta, 1-r.beta
		default:
			algW[i], klW[i] = 1, 0
		}
	}
	return nil
}

// Refresh writes the learner's fresh values for the rows of the last
// Sample back into the stage (refer.md §1 step 4): rho (after RhoClip),
// V(s_t) and KL(μ||π) of each row. n_far changes by isFar(new) −
// isFar(old), both with the current c_max; each row's episode is noted
// for AfterStep's Retrace sweep. Rows whose episode was dropped since the
// Sample (its slot overwritten) are skipped and counted in Stats.Stale.
// The slices must have one value per row; a NaN or infinite value, or a
// rho <= 0, rejects the whole call (nothing is written). O(rows).
func (r *REFER) Refresh(rho, v, kl []float64) error {
	n := len(r.rowSlot)
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
	for i, s := range r.rowSlot {
		klSum += kl[i]
		if r.isFar(rho[i]) {
			far++
		}
		if r.gen[s] != r.rowGen[i] {
			r.stale++
			continue
		}
		if r.isFar(rho[i]) != r.isFar(r.rho[s]) {
			if r.isFar(rho[i]) {
				r.nFar++
			} else {
				r.nFar--
			}
		}
		r.rho[s], r.v[s] = rho[i], v[i]
		if r.klSet[s] {
			r.klSum -= r.kl[s]
		} else {
			r.klSet[s] = true
			r.klN++
		}
		r.kl[s] = kl[i]
		r.klSum += kl[i]
		h := r.ep[s]
		e := &r.eps[h]
		if e.maxSampled < 0 {
			r.touched = append(r.touched, referRef{h: h, serial: e.serial})
		}
		e.maxSampled = max(e.maxSampled, r.t[s])
	}
	if n > 0 {
		r.lastSampledKL = klSum / float64(n)
		r.lastSampledFar = float64(far) / float64(n)
	}
	return nil
}

// RefreshBootstrap refreshes V(s_T) of the episode whose last step is row
// of the last Sample, if that episode was cut by a time limit (refer.md
// §2: "if t+1 = T and the episode was truncated, V(s_T) is refreshed");
// vT is the learner's V of the row's NextObs. It reports whether it
// applied: false for a row that is not such a last step, or whose episode
// was dropped since the Sample. A row outside the last Sample (ErrShape)
// or a NaN or infinite vT (ErrPriority) is an error. O(1).
func (r *REFER) RefreshBootstrap(row int, vT float64) (bool, error) {
	if row < 0 || row >= len(r.rowSlot) {
		return false, fmt.Errorf("%w: refer: RefreshBootstrap of row %d, the last Sample has %d rows", buffer.ErrShape, row, len(r.rowSlot))
	}
	if math.IsNaN(vT) || math.IsInf(vT, 0) {
		return false, fmt.Errorf("%w: refer: RefreshBootstrap of row %d with V(s_T) = %v (must be finite)", buffer.ErrPriority, row, vT)
	}
	s := r.rowSlot[row]
	if r.gen[s] != r.rowGen[row] {
		return false, nil
	}
	h := r.ep[s]
	e := &r.eps[h]
	if !e.truncated || int(r.t[s]) != int(e.length)-1 {
		return false, nil
	}
	e.vboot = vT
	if e.maxSampled < 0 {
		r.touched = append(r.touched, referRef{h: h, serial: e.serial})
	}
	e.maxSampled = max(e.maxSampled, r.t[s])
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
func (r *REFER) AfterStep(k uint64) {
	for _, tr := range r.touched {
		if e := &r.eps[tr.h]; e.state == epLive && e.serial == tr.serial && e.maxSampled >= 0 {
			if !r.cfg.NoRetrace {
				r.sweep(tr.h, int(e.maxSampled))
			}
			e.maxSampled = -1
		}
	}
	r.touched = r.touched[:0]
	r.setK(k)
	if r.cfg.Variant.adapts() && len(r.live) > 0 {
		eb := r.cfg.BetaRate
		if eb == 0 {
			eb = min(1, 0.1*float64(max(r.batch, 1))/float64(r.maxSteps))
		}
		r.beta *= 1 - eb
		if r.farFraction() <= r.cfg.D {
			r.beta += eb
		}
		r.beta = min(1, max(0, r.beta))
	}
	if k%uint64(r.cfg.RecountEvery) == 0 {
		r.recount()
		r.rescale()
	}
	if invariants && r.cap <= 1<<14 {
		if err := r.check(); err != nil {
			panic("sampler: refer: broken invariant: " + err.Error())
		}
	}
	r.publish()
}

// SetController restores the controller's step k and beta (a learner
// resuming from a checkpoint): c_max, the learning-rate scale and beta are
// those after AfterStep(k). beta is ignored by the variants that fix it
// at 1. A beta outside [0, 1] (or NaN) is an ErrConfig error and changes
// nothing.
func (r *REFER) SetController(k uint64, beta float64) error {
	if !(beta >= 0 && beta <= 1) {
		return fmt.Errorf("%w: refer: SetController with beta %v (must be in [0, 1])", buffer.ErrConfig, beta)
	}
	r.setK(k)
	if r.cfg.Variant.adapts() {
		r.beta = beta
	}
	r.publish()
	return nil
}

// setK sets k and the Eq. 13 schedules.
func (r *REFER) setK(k uint64) {
	r.k = k
	x := 1 + r.cfg.A*float64(k)
	r.cmax = 1 + r.cfg.C/x
	r.lrScale = 1 / x
}

// farFraction is n_far/N, clamped to [0, 1] (the counter drifts between
// recounts).
func (r *REFER) farFraction() float64 {
	if len(r.live) == 0 {
		return 0
	}
	return min(1, max(0, float64(r.nFar)/float64(len(r.live))))
}

// recount sets n_far to the number of stored steps that are far with the
// current c_max, and the KL sums from the stored values. O(N).
func (r *REFER) recount() {
	far, kls, kln := 0, 0.0, 0
	for _, s := range r.live {
		if r.isFar(r.rho[s]) {
			far++
		}
		if r.klSet[s] {
			kls += r.kl[s]
			kln++
		}
	}
	r.farDiff = float64(r.nFar - far)
	r.nFar, r.klSum, r.klN = far, kls, kln
	r.recounts++
}

// rescale recomputes the reward scale 1/(sigma_r + 1e-7), sigma_r =
// sqrt(mean r²) over the stored steps (App. B, Eq. 16), and every Qret
// with it. O(N).
func (r *REFER) rescale() {
	if len(r.live) == 0 || r.cfg.NoRetrace {
		return
	}
	r.scaled = true
	if !r.cfg.NoRewardScale {
		var ss float64
		for _, s := range r.live {
			ss += r.rew[s] * r.rew[s]
		}
		r.sigmaR = math.Sqrt(ss / float64(len(r.live)))
		r.rscale = 1 / (r.sigmaR + referRewardEps)
	}
	for i := r.fhead; i < len(r.fifo); i++ {
		f := r.fifo[i]
		if e := &r.eps[f.h]; e.state == epLive && e.serial == f.serial {
			r.sweep(f.h, int(e.length)-1)
		}
	}
}

// REFERStats is a snapshot of a REFER stage, as of the end of its last
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
	// Steps is N, the stored steps of finished episodes; Episodes those
	// episodes; Open the episodes still being assembled (dead ones too).
	Steps    int `json:"steps"`
	Episodes int `json:"episodes"`
	Open     int `json:"open"`
	// RewardRMS is sigma_r, the reward scale's RMS (1 before the first
	// computation, and with NoRewardScale).
	RewardRMS float64 `json:"reward_rms"`
	// Ingested counts items the Watcher reported; Lapped those overwritten
	// before they could be (their episodes never finish); Unread those
	// overwritten between the report and the read.
	Ingested uint64 `json:"ingested"`
	Lapped   uint64 `json:"lapped"`
	Unread   uint64 `json:"unread"`
	// Malformed counts episodes dropped for inconsistent steps (a
	// repeated step index, a step after the episode's end).
	Malformed uint64 `json:"malformed"`
	// Evicted counts episodes dropped by the FIFO (MaxSteps); Overwritten
	// those dropped because the buffer overwrote one of their steps first
	// (too little room beyond MaxSteps); Abandoned open episodes that
	// received no step for a capacity's worth of inserts.
	Evicted     uint64 `json:"evicted"`
	Overwritten uint64 `json:"overwritten"`
	Abandoned   uint64 `json:"abandoned"`
	// Stale counts refreshed rows whose episode had been dropped since
	// the Sample.
	Stale uint64 `json:"stale"`
	// Recounts counts recounts of n_far; FarDrift is the counter minus the
	// true count found by the last one (the staleness the recount fixed).
	Recounts uint64  `json:"recounts"`
	FarDrift float64 `json:"far_drift"`
}

// Stats returns a snapshot. O(1); safe for concurrent use.
func (r *REFER) Stats() REFERStats {
	c := &r.st
	f := func(a *atomic.Uint64) float64 { return math.Float64frombits(a.Load()) }
	return REFERStats{
		FarFraction: f(&c.farFraction), NFar: int(c.nFar.Load()),
		Beta: f(&c.beta), CMax: f(&c.cmax), LRScale: f(&c.lrScale), K: c.k.Load(),
		SampledKL: f(&c.sampledKL), SampledFar: f(&c.sampledFar), StoredKL: f(&c.storedKL),
		Steps: int(c.steps.Load()), Episodes: int(c.episodes.Load()), Open: int(c.open.Load()),
		RewardRMS: f(&c.sigmaR),
		Ingested:  c.ingested.Load(), Lapped: c.lapped.Load(), Unread: c.unread.Load(), Malformed: c.malformed.Load(),
		Evicted: c.evicted.Load(), Overwritten: c.overwritten.Load(), Abandoned: c.abandoned.Load(),
		Stale: c.stale.Load(), Recounts: c.recounts.Load(), FarDrift: f(&c.farDrift),
	}
}

// publish stores the owner's state for Stats.
func (r *REFER) publish() {
	c := &r.st
	b := func(a *atomic.Uint64, x float64) { a.Store(math.Float64bits(x)) }
	b(&c.farFraction, r.farFraction())
	b(&c.beta, r.beta)
	b(&c.cmax, r.cmax)
	b(&c.lrScale, r.lrScale)
	b(&c.sampledKL, r.lastSampledKL)
	b(&c.sampledFar, r.lastSampledFar)
	storedKL := 0.0
	if r.klN > 0 {
		storedKL = r.klSum / float64(r.klN)
	}
	b(&c.storedKL, storedKL)
	b(&c.sigmaR, r.sigmaR)
	b(&c.farDrift, r.farDiff)
	c.nFar.Store(int64(r.nFar))
	c.steps.Store(int64(len(r.live)))
	c.episodes.Store(int64(r.nEps))
	c.open.Store(int64(len(r.open)))
	c.k.Store(r.k)
	c.ingested.Store(r.watch.Reported())
	c.lapped.Store(r.watch.Lapped())
	c.unread.Store(r.unread)
	c.malformed.Store(r.malformed)
	c.overwritten.Store(r.overwritten)
	c.evicted.Store(r.evicted)
	c.abandoned.Store(r.abandoned)
	c.stale.Store(r.stale)
	c.recounts.Store(r.recounts)
}
