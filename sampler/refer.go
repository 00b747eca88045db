package sampler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/slotset"
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

// AdaptsBeta reports whether the variant's beta follows Eq. 12 (full
// ReF-ER and ReF-ER-2); the others fix it at 1.
func (v REFERVariant) AdaptsBeta() bool { return v == REFERFull || v == REFERPenaltyOnly }

// REFERConfig configures a ReF-ER method: the REFER stage uses MaxSteps
// (and Capacity for its default); every other field configures the
// learner-side controller the method pairs with (learner.REFERController:
// per-step rho, V, KL and Retrace targets, beta and c_max, the
// learning-rate scale), which reads it through EpisodeSource.Config. A
// zero field selects the default noted on it (Beta0's default is 0, so
// every zero is a default); start from DefaultREFERConfig.
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
	// under ReF-ER, which keep their own critics' targets): the
	// controller's AfterStep then skips the sweeps of the refreshed
	// episodes and the periodic recomputation of the reward scale and
	// every Qret, and its Targets returns each step's Qret as set when its
	// episode finished (the unscaled discounted return, bootstrapped on
	// truncation).
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
// parametric Gaussian policies (V-RACER, TD3 under ReF-ER): it keeps whole
// episodes, evicts the oldest beyond MaxSteps steps, and replays distinct
// steps of the stored episodes uniformly.
//
// ReF-ER's learner-side state (each step's importance ratio rho, V, KL
// and Retrace target, the far-policy counter, the penalty coefficient
// beta, c_max and the learning-rate scale) is not the stage's: it is kept
// by the learner's controller (learner.REFERController), which follows
// the stage through its EpisodeSource capability (the method's
// Method.Episodes): Observe registers it for the stage's episode events
// (an episode finished, an episode dropped, new steps indexed, the rows a
// Sample drew).
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
// keeps, indexed by slot and checked against the slot's generation, the
// step's episode and index, its reward and its discount (reported with
// the episode when it finishes). Per episode: its steps' slots in order
// and the stored V(s_T). Globals: N, the stored steps of finished
// episodes.
//
// # Concurrency
//
// Sample, Update and Observe are called by one goroutine at a time (the
// learner's), which owns the stage's state and receives the observer's
// events; they may run concurrently with inserts into the buffer.
// Priority and Stats may be called from any goroutine. A REFER must not
// be copied after first use.
type REFER struct {
	buf   *buffer.Buffer
	cfg   REFERConfig
	cap   int
	watch *buffer.Watcher
	visit func(buffer.Meta) // r.ingest, bound once
	one   *buffer.Batch     // 1-row scratch for reading ingested steps
	u     *Uniform          // Update's write-back of priority 1
	obs   EpisodeObserver   // nil: no events

	bootCol  int // index of REFERBootColumn in the buffer's Floats
	maxSteps int

	// Per slot (see Storage). gen[s] != 0 iff a step of an open or live
	// episode is registered in slot s (its generation).
	gen       []uint32
	ep, t     []int32
	rew, disc []float64
	mark      []uint32 // Sample's distinctness marks, by epoch

	eps  []referEp
	free []int32
	open map[uint64]int32
	// fifo holds the finished episodes in finishing order from fhead on
	// (entries of episodes dropped out of order are skipped).
	fifo  []referRef
	fhead int
	// live holds the slots of the steps of live episodes, N = live.Len()
	// (the controller's copy iterates in the same order).
	live   slotset.Set
	nEps   int
	serial uint64

	// Rows of the last Sample, and the episode-report scratch.
	epoch       uint32
	rowSlot     []uint32
	epRew, epDs []float64

	// Owner-side counters, published by publish.
	ingested, nextGC               uint64
	unread, malformed, overwritten uint64
	evicted, abandoned             uint64

	st referCounters
}

// referCounters are the Stats fields, atomics so that Stats may run on any
// goroutine.
type referCounters struct {
	steps, episodes, open                                                atomic.Int64
	ingested, lapped, unread, malformed, overwritten, evicted, abandoned atomic.Uint64
}

var (
	_ Selector      = (*REFER)(nil)
	_ EpisodeSource = (*REFER)(nil)
)

// NewREFER validates cfg and returns a REFER stage over buf, which must
// store continuous actions, the episode columns and the float columns of
// REFERColumns (REFERColumnIndex says what is missing). It indexes the
// items already stored (a loaded buffer's finished episodes become
// sampleable, and are reported to the observer Observe registers).
// O(Capacity) memory, about 40 bytes per slot.
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
		live:     slotset.Make(n),
		rew:      make([]float64, n),
		disc:     make([]float64, n),
		mark:     make([]uint32, n),
		open:     map[uint64]int32{},
		nextGC:   uint64(max(n/2, 1)),
	}
	r.visit = r.ingest
	r.watch = buf.NewWatcher()
	r.watch.Poll(r.visit)
	r.publish()
	return r, nil
}

// Config returns the method's ReF-ER configuration with the defaults
// filled in (the stage's MaxSteps and the controller's parameters).
func (r *REFER) Config() REFERConfig { return r.cfg }

// Buffer returns the buffer the stage samples from.
func (r *REFER) Buffer() *buffer.Buffer { return r.buf }

// Slots is the buffer's capacity (EpisodeSource).
func (r *REFER) Slots() int { return r.cap }

// Observe implements EpisodeSource: o receives the stage's episode events
// from now on (a later call replaces it; nil removes it), and at once an
// EpisodeFinished for every episode already stored, oldest first.
// O(stored steps).
func (r *REFER) Observe(o EpisodeObserver) {
	r.obs = o
	if o == nil {
		return
	}
	for i := r.fhead; i < len(r.fifo); i++ {
		f := r.fifo[i]
		if e := &r.eps[f.h]; e.state == epLive && e.serial == f.serial {
			r.report(f.h)
		}
	}
}

// report tells the observer that live episode h finished.
func (r *REFER) report(h int32) {
	e := &r.eps[h]
	r.epRew, r.epDs = r.epRew[:0], r.epDs[:0]
	for _, s := range e.slots {
		r.epRew = append(r.epRew, r.rew[s])
		r.epDs = append(r.epDs, r.disc[s])
	}
	r.obs.EpisodeFinished(Episode{Handle: h, ID: e.id, Slots: e.slots, Reward: r.epRew, Discount: r.epDs,
		Truncated: e.truncated, VBoot: e.vboot})
}

// Sample indexes the steps written since the last call, then fills every
// row of dst (made by the buffer's NewBatch) with a distinct step drawn
// uniformly among the N steps of stored finished episodes: dst.Prob[i] =
// 1/N, dst.Size = N, dst.Total = N, dst.MinProb = 1/N. The observer hears
// of the episodes that finished or were dropped while indexing, then
// Indexed, then Sampled with the rows' slots.
//
// A drawn step whose slot is being overwritten (the buffer ran over a
// stored episode: MaxSteps leaves too little room) drops its episode,
// counted in Stats.Overwritten, and the row is drawn again.
//
// Errors: buffer.ErrEmpty when no episode has finished; ErrBatchSize for 0
// rows or more rows than stored steps (wrapped).
//
// Cost: O(new items) to index them (each read once, plus the observer's
// work on each finished and evicted episode, O(its length)), and O(rows)
// draws and copies. It allocates only as the episode index grows (a map
// entry per open episode, the records' step slices until they are
// reused).
func (r *REFER) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	if err := checkArgs("refer", rng, dst); err != nil {
		return err
	}
	r.watch.Poll(r.visit)
	defer r.publish()
	if r.obs != nil {
		r.obs.Indexed()
	}
	n := dst.Len()
	r.rowSlot = r.rowSlot[:0]
	if r.obs != nil {
		defer func() { r.obs.Sampled(r.rowSlot) }()
	}
	if invariants && r.cap <= 1<<14 {
		if err := r.check(); err != nil {
			panic("sampler: refer: broken invariant: " + err.Error())
		}
	}
	if r.live.Len() == 0 {
		return fmt.Errorf("%w: refer: no finished episode stored", buffer.ErrEmpty)
	}
	if n < 1 || n > r.live.Len() {
		return fmt.Errorf("%w: refer: %d rows requested, %d steps stored", buffer.ErrBatchSize, n, r.live.Len())
	}
	if r.epoch++; r.epoch == 0 {
		clear(r.mark)
		r.epoch = 1
	}
	for row := 0; row < n; {
		if n > r.live.Len() { // episodes dropped while drawing
			return fmt.Errorf("%w: refer: %d rows requested, %d steps left after overwrites", buffer.ErrBatchSize, n, r.live.Len())
		}
		s := r.live.Slots()[rng.IntN(r.live.Len())]
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
		row++
	}
	N := r.live.Len()
	p := 1 / float64(N)
	for i := range n {
		dst.Prob[i] = p
	}
	dst.Size, dst.Total, dst.MinProb = N, float64(N), p
	return nil
}

// Update implements Selector: it validates absTD and writes priority 1 for
// the still-stored refs (as Uniform.Update), so the call stays honest
// about stale refs. ReF-ER uses no priorities: its learners do not call
// it.
func (r *REFER) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	return r.u.Update(refs, absTD)
}

// Priority is 1: the stage samples uniformly. Safe for concurrent use.
func (r *REFER) Priority(absTD float64) float64 { return 1 }

// String names the stage and its parameters (the controller's included:
// they are the method's).
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

// REFERStats is a snapshot of a REFER stage's episode index, as of the end
// of its last Sample. The controller's state (beta, c_max, the far
// fraction, KL) is the learner's: learner.REFERStats.
type REFERStats struct {
	// Steps is N, the stored steps of finished episodes; Episodes those
	// episodes; Open the episodes still being assembled (dead ones too).
	Steps    int `json:"steps"`
	Episodes int `json:"episodes"`
	Open     int `json:"open"`
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
}

// Stats returns a snapshot. O(1); safe for concurrent use.
func (r *REFER) Stats() REFERStats {
	c := &r.st
	return REFERStats{
		Steps: int(c.steps.Load()), Episodes: int(c.episodes.Load()), Open: int(c.open.Load()),
		Ingested: c.ingested.Load(), Lapped: c.lapped.Load(), Unread: c.unread.Load(), Malformed: c.malformed.Load(),
		Evicted: c.evicted.Load(), Overwritten: c.overwritten.Load(), Abandoned: c.abandoned.Load(),
	}
}

// publish stores the owner's state for Stats.
func (r *REFER) publish() {
	c := &r.st
	c.steps.Store(int64(r.live.Len()))
	c.episodes.Store(int64(r.nEps))
	c.open.Store(int64(len(r.open)))
	c.ingested.Store(r.watch.Reported())
	c.lapped.Store(r.watch.Lapped())
	c.unread.Store(r.unread)
	c.malformed.Store(r.malformed)
	c.overwritten.Store(r.overwritten)
	c.evicted.Store(r.evicted)
	c.abandoned.Store(r.abandoned)
}
