package sampler

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"

	"github.com/apexrl/apex/buffer"
)

// Rank-based PER defaults (Schaul et al. 2016, §4).
const (
	// DefaultRankAlpha is the rank-based variant's exponent.
	DefaultRankAlpha = 0.7
	// DefaultRankBeta0 is the rank-based variant's initial IS exponent.
	DefaultRankBeta0 = 0.5
	// DefaultRefreshFraction re-sorts the rank order once the inserts and
	// priority updates since the last sort reach the number of ranked items.
	DefaultRefreshFraction = 1.0
)

// maxRedraws bounds the draws of one row inside its segment.
const maxRedraws = 64

// RankConfig configures the rank-based PER stage. Fields are used as given
// (0 is meaningful for Alpha, Eps and RefreshFraction); start from
// DefaultRankConfig for the paper's settings.
type RankConfig struct {
	// Alpha is the exponent of P(i) ∝ (1/rank(i))^Alpha. 0 cuts the ranks
	// into equal-size segments (uniform sampling). Finite and >= 0. Paper:
	// 0.7.
	Alpha float64
	// Beta is the importance-sampling exponent schedule (see PERConfig.Beta).
	// Paper: 0.5 → 1 over training.
	Beta Linear
	// Eps is added to |delta| to form the stored priority |delta|+Eps, which
	// orders the ranks. Finite and >= 0. An item whose stored priority is 0
	// is left out of the ranking (never sampled), so keep Eps > 0 for items
	// with delta = 0 to stay at the bottom of the ranking instead.
	// Default 1e-6.
	Eps float64
	// Normalize says how weights are scaled to at most 1 (see
	// PERConfig.Normalize). Rank does not need the buffer's min tree: the
	// smallest probability is that of the largest segment.
	Normalize buffer.Normalization
	// RefreshFraction sets how stale the rank order may grow: Sample
	// re-sorts it once the buffer's inserts plus applied priority updates
	// since the last sort reach RefreshFraction × (items ranked by that
	// sort), and at least 1. 0 re-sorts whenever anything changed; +Inf only
	// when forced (first Sample, fewer ranked items than the batch, a
	// segment that yields nothing readable, or an explicit Refresh).
	// Default 1: about one pass of changes over the ranked items, as
	// Schaul et al. re-sort once per 10^6 steps with a memory of 10^6.
	// Smaller values track priorities more closely at the cost of
	// O(N log N) re-sorts more often (see Rank).
	RefreshFraction float64
}

// DefaultRankConfig is the paper's rank-based setting: Alpha 0.7, beta
// 0.5 → 1 over betaSteps learner steps, Eps 1e-6, weights normalised by
// the buffer maximum, RefreshFraction 1.
func DefaultRankConfig(betaSteps int64) RankConfig {
	return RankConfig{
		Alpha:           DefaultRankAlpha,
		Beta:            Linear{Start: DefaultRankBeta0, End: 1, Steps: betaSteps},
		Eps:             DefaultEps,
		Normalize:       buffer.NormalizeBuffer,
		RefreshFraction: DefaultRefreshFraction,
	}
}

// Validate reports the first field out of range, wrapping buffer.ErrConfig.
func (c RankConfig) Validate() error {
	if err := checkExponent("rank", "Alpha", c.Alpha); err != nil {
		return err
	}
	if err := checkExponent("rank", "Eps", c.Eps); err != nil {
		return err
	}
	if err := checkBeta("rank", c.Beta); err != nil {
		return err
	}
	if !(c.RefreshFraction >= 0) {
		return fmt.Errorf("%w: rank: RefreshFraction must be >= 0, got %v", buffer.ErrConfig, c.RefreshFraction)
	}
	return checkNorm("rank", c.Normalize)
}

// Rank is rank-based prioritized experience replay (Schaul et al. 2016,
// arXiv 1511.05952, §3.3): item i has priority 1/rank(i), rank 1 being the
// largest |delta|, and P(i) ∝ rank(i)^-Alpha.
//
// # Selection
//
// The power-law CDF over the N ranked items is cut into k segments (k =
// batch size) whose masses are as close to 1/k as integer ranks allow (see
// SegmentBoundaries), and row j of a batch is drawn uniformly inside
// segment j. Each row's probability is therefore the one actually used,
// P = 1/(k·|segment|), and importance weights are computed from it, not
// from the power law. Boundaries depend only on N and k (Alpha is fixed per
// stage) and are recomputed only when either changes; the power-law prefix
// sums are cached, so a recomputation costs O(k log N) once the cache
// covers N.
//
// # Rank order
//
// Ranks come from a sorted array of slots, ordered by the priority the
// buffer stores for each (|delta|+Eps, raw: the buffer's sum tree is not
// used for selection), largest first, ties by slot. The array is only
// approximately current: it is re-sorted (the paper re-sorts its heap every
// 10^6 steps) when Sample finds that the buffer's inserts plus applied
// priority updates since the last sort reach RefreshFraction × N. New items
// get the buffer's maximum priority, so the re-sort puts them at the top
// ranks; until then an item written over an old slot inherits that slot's
// rank, and items in slots that were empty at the last sort are not
// reachable. Because fill-up inserts count as changes, the buffer can grow
// by at most a RefreshFraction share between sorts. Items with stored
// priority 0 are left out of the ranking, and a drawn slot whose current
// occupant has priority 0 is re-drawn, so they are never sampled.
//
// A re-sort reads every slot's priority (O(Capacity) atomic loads) and
// sorts the keys starting from the previous order, which pdqsort handles in
// close to linear time when few items moved and O(N log N) at worst; it
// allocates nothing. On the 2-core development machine, at 2^20 slots, a
// re-sort takes about 0.03 s when nothing moved and 0.1 s when 10% of the
// items moved (or from a shuffled start). Amortised, a re-sort after every
// f·N changes costs a learner that changes c items per step about
// c·(sort time)/(f·N) per step: at 2^20 slots and c = 512 (a batch of 256
// write-backs plus as many inserts), roughly 50–100 µs at the default f = 1
// and 10 times that at f = 0.1.
//
// Memory: about 16 bytes per buffer slot (sort keys and prefix sums).
//
// Concurrency: Priority may be called from any goroutine. Sample, Update,
// Weights, Refresh, Order, Boundaries and Stats are called by one goroutine
// at a time (the learner), concurrently with inserts into the buffer. A
// Rank must not be copied after first use.
type Rank struct {
	buf  *buffer.Buffer
	cfg  RankConfig
	prio []float64 // Update's scratch, reused

	// keys is the rank order: ascending keys are descending priority, ties
	// by ascending slot. key = ((maxUnits-units)>>drop)<<slotBits | slot.
	// Invariant: each slot appears at most once; len(keys) <= Capacity (its
	// capacity, so appends never reallocate).
	keys     []uint64
	seen     []uint64 // Refresh's bitset of slots already in keys
	scale    float64  // priority units per unit of priority (1/Resolution)
	maxUnits uint64
	slotBits uint
	drop     uint
	sorted   bool
	mark     uint64 // buffer Inserts+Updates read by the last sort

	// pre[b] = sum_{r=1..b} r^-Alpha, extended lazily; cap Capacity+1.
	pre []float64
	// bounds are the segment boundaries for bn ranked items and bk segments:
	// 0 = bounds[0] < bounds[1] < ... < bounds[bk] = bn; segment j holds the
	// 0-based positions [bounds[j], bounds[j+1]) of keys.
	bounds []int
	bn, bk int
	maxSeg int

	refreshes, rebuilds, redraws, fallbacks uint64
}

var (
	_ Selector = (*Rank)(nil)
	_ Weighter = (*Rank)(nil)
)

// NewRank validates cfg and returns a rank-based stage over buf. It
// allocates about 16 bytes per buffer slot up front.
func NewRank(buf *buffer.Buffer, cfg RankConfig) (*Rank, error) {
	if buf == nil {
		return nil, fmt.Errorf("%w: rank: nil buffer", buffer.ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := buf.Capacity()
	r := &Rank{
		buf:   buf,
		cfg:   cfg,
		keys:  make([]uint64, 0, c),
		seen:  make([]uint64, (c+63)/64),
		scale: 1 / buf.Resolution(),
		pre:   make([]float64, 1, c+1),
	}
	r.maxUnits = uint64(math.Ceil(buf.Config().MaxPriority * r.scale))
	r.slotBits = uint(bits.Len(uint(c - 1)))
	if ub := uint(bits.Len64(r.maxUnits)); ub+r.slotBits > 64 {
		r.drop = ub + r.slotBits - 64 // coarser priorities; ties by slot
	}
	return r, nil
}

// Config returns the stage's configuration. O(1).
func (r *Rank) Config() RankConfig { return r.cfg }

// Sample fills the dst.Len() = k rows of dst, row j with an item drawn
// uniformly from rank segment j, re-sorting the rank order first when it is
// due (see the type doc). dst.Prob[j] = 1/(k·|segment j|); dst.Size is the
// number of ranked items N (the population the probabilities sum to 1
// over); dst.MinProb = 1/(k·largest segment); dst.Total is the buffer's
// total stored priority (unused by rank selection).
//
// A drawn slot that is being written, or whose occupant has priority 0, is
// re-drawn inside its segment; if a segment yields nothing after 64 draws
// the order is re-sorted and the batch drawn again, once.
//
// Errors (wrapped): buffer.ErrNil (a nil rng or dst), buffer.ErrEmpty,
// buffer.ErrBatchSize (k = 0, k above
// the stored items, or above the items with non-zero priority),
// buffer.ErrZeroMass (no stored item has a non-zero priority),
// buffer.ErrRetries.
//
// Cost: O(k·(item size) + Stripes) when no re-sort is due, plus the
// re-sort (type doc) and O(k log N) when N or k changed (O(N) the first time
// the prefix cache grows to N). No allocation after the first call with a
// given dst.
func (r *Rank) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	if err := checkArgs("rank", rng, dst); err != nil {
		return err
	}
	k := dst.Len()
	size := r.buf.Size()
	switch {
	case size == 0:
		return fmt.Errorf("%w: rank: cannot sample %d items", buffer.ErrEmpty, k)
	case k <= 0:
		return fmt.Errorf("%w: rank: batch of %d items", buffer.ErrBatchSize, k)
	case k > size:
		return fmt.Errorf("%w: rank: batch of %d items but only %d stored", buffer.ErrBatchSize, k, size)
	}
	fresh := false
	if r.due() {
		r.Refresh()
		fresh = true
	}
	for {
		n := len(r.keys)
		if n < k && !fresh {
			r.Refresh()
			fresh = true
			continue
		}
		if n == 0 {
			return fmt.Errorf("%w: rank: %d items stored, all with priority 0", buffer.ErrZeroMass, size)
		}
		if n < k {
			return fmt.Errorf("%w: rank: batch of %d items but only %d of %d stored items have a non-zero priority", buffer.ErrBatchSize, k, n, size)
		}
		r.segments(n, k)
		row, ok := r.draw(rng, dst)
		if ok {
			break
		}
		if fresh {
			return fmt.Errorf("%w: rank: row %d of %d (segment of %d items)", buffer.ErrRetries, row, k, r.bounds[row+1]-r.bounds[row])
		}
		r.Refresh()
		fresh = true
	}
	dst.Size = len(r.keys)
	dst.Total = r.buf.TotalPriority()
	dst.MinProb = 1 / (float64(k) * float64(r.maxSeg))
	return nil
}

// draw fills every row from its segment; on failure it reports the row.
func (r *Rank) draw(rng *rand.Rand, dst *buffer.Batch) (int, bool) {
	k := len(r.bounds) - 1
	mask := uint64(1)<<r.slotBits - 1
	for j := range k {
		lo, hi := r.bounds[j], r.bounds[j+1]
		for tries := 0; ; tries++ {
			if tries == maxRedraws {
				if !r.fallback(dst, j, hi) {
					return j, false
				}
				break
			}
			if tries > 0 && tries%8 == 0 {
				// The segment keeps meeting slots being overwritten (a segment
				// may hold a single item): let the writer finish.
				runtime.Gosched()
			}
			pos := lo
			if hi-lo > 1 {
				pos += rng.IntN(hi - lo)
			}
			slot := int(r.keys[pos] & mask)
			ref, p, ok := r.buf.SlotPriority(slot)
			if ok && p > 0 && r.buf.GatherSlot(dst, j, slot) && dst.Refs[j] == ref {
				dst.Prob[j] = 1 / (float64(k) * float64(hi-lo))
				break
			}
			r.redraws++
		}
	}
	return 0, true
}

// fallback fills row j with the first readable item at rank positions from
// start on (wrapping around), reporting the probability of the segment that
// item belongs to. It keeps a sampler from waiting on a writer that holds a
// whole segment (a one-item segment whose slot is being overwritten).
func (r *Rank) fallback(dst *buffer.Batch, j, start int) bool {
	n, k := len(r.keys), len(r.bounds)-1
	mask := uint64(1)<<r.slotBits - 1
	for i := range n {
		pos := (start + i) % n
		slot := int(r.keys[pos] & mask)
		ref, p, ok := r.buf.SlotPriority(slot)
		if !ok || p <= 0 || !r.buf.GatherSlot(dst, j, slot) || dst.Refs[j] != ref {
			continue
		}
		seg := sort.SearchInts(r.bounds, pos+1) - 1 // bounds[seg] <= pos < bounds[seg+1]
		dst.Prob[j] = 1 / (float64(k) * float64(r.bounds[seg+1]-r.bounds[seg]))
		r.fallbacks++
		return true
	}
	return false
}

// due reports whether the rank order must be re-sorted before sampling.
func (r *Rank) due() bool {
	if !r.sorted {
		return true
	}
	f := r.cfg.RefreshFraction
	if math.IsInf(f, 1) {
		return false
	}
	th := max(uint64(math.Ceil(f*float64(len(r.keys)))), 1)
	return r.pending() >= th
}

// pending counts the buffer's inserts and applied priority updates since
// the last sort. O(Stripes).
func (r *Rank) pending() uint64 {
	st := r.buf.Stats()
	return st.Inserts + st.Updates - r.mark
}

// Refresh re-sorts the rank order now from the priorities the buffer
// stores. Sample calls it when due; call it directly to force a fresh
// order. Slots being written at that moment are left out until the next
// sort. Cost: O(Capacity) atomic loads plus the sort (see the type doc);
// no allocation.
func (r *Rank) Refresh() {
	st := r.buf.Stats()
	r.mark = st.Inserts + st.Updates // changes racing the scan count as pending
	clear(r.seen)
	mask := uint64(1)<<r.slotBits - 1
	// Re-key the previous order in place first, so the sort starts from a
	// nearly sorted array, then add the slots it did not hold.
	w := 0
	for _, key := range r.keys {
		slot := int(key & mask)
		r.seen[slot>>6] |= 1 << (slot & 63)
		if nk, ok := r.key(slot); ok {
			r.keys[w] = nk
			w++
		}
	}
	r.keys = r.keys[:w]
	for slot := range r.buf.Capacity() {
		if r.seen[slot>>6]&(1<<(slot&63)) != 0 {
			continue
		}
		if nk, ok := r.key(slot); ok {
			r.keys = append(r.keys, nk)
		}
	}
	slices.Sort(r.keys)
	r.sorted = true
	r.refreshes++
}

// key is the sort key of slot's current occupant; ok is false when the slot
// is empty, being written, or holds priority 0.
func (r *Rank) key(slot int) (uint64, bool) {
	_, p, ok := r.buf.SlotPriority(slot)
	if !ok || !(p > 0) {
		return 0, false
	}
	u := min(uint64(p*r.scale+0.5), r.maxUnits)
	return ((r.maxUnits-u)>>r.drop)<<r.slotBits | uint64(slot), true
}

// segments makes bounds current for n ranked items and k segments.
func (r *Rank) segments(n, k int) {
	if n == r.bn && k == r.bk {
		return
	}
	for b := len(r.pre); b <= n; b++ {
		r.pre = append(r.pre, r.pre[b-1]+math.Pow(float64(b), -r.cfg.Alpha))
	}
	r.bounds = segmentBounds(r.bounds, r.pre, n, k)
	r.bn, r.bk = n, k
	r.maxSeg = 0
	for j := range k {
		r.maxSeg = max(r.maxSeg, r.bounds[j+1]-r.bounds[j])
	}
	r.rebuilds++
}

// Update stores |delta|+Eps for refs[i] (the raw value the rank order sorts
// by). Validation and staleness as PER.Update. Cost: O(len(refs)·log
// Capacity); no allocation once the scratch slice has grown.
func (r *Rank) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	if err := checkTD("rank", refs, absTD); err != nil {
		return buffer.UpdateResult{}, err
	}
	r.prio = grow(r.prio, len(absTD))
	for i, d := range absTD {
		r.prio[i] = d + r.cfg.Eps
	}
	return r.buf.UpdatePriorities(refs, r.prio)
}

// Priority is the stored priority for |delta| = absTD, absTD+Eps. A
// negative absTD (unknown) gives the buffer's current MaxPriority, which is
// what Insert assigns when Transitions.Priority is nil (and ranks the item
// first at the next sort). O(1); safe for concurrent use.
func (r *Rank) Priority(absTD float64) float64 {
	if absTD < 0 {
		return r.buf.MaxPriority()
	}
	return absTD + r.cfg.Eps
}

// Weights fills b.Weight with importance weights for a batch drawn by
// Sample: w_j = (N·P_j)^-beta with P_j = 1/(k·|segment j|), beta =
// Beta.At(step), normalised as Config.Normalize says (PER §3.4 with the
// probability actually used). O(b.Len()).
func (r *Rank) Weights(b *buffer.Batch, step int64) error {
	return b.ImportanceWeights(r.cfg.Beta.At(step), r.cfg.Normalize)
}

// String names the stage and its parameters.
func (r *Rank) String() string {
	c := r.cfg
	return fmt.Sprintf("rank(alpha=%g,beta=%s,eps=%g,norm=%v,refresh=%g)", c.Alpha, fmtLinear(c.Beta), c.Eps, c.Normalize, c.RefreshFraction)
}

// Order appends to dst[:0] the slots of the current rank order, rank 1
// (largest stored priority at the last sort) first, and returns it.
// O(N).
func (r *Rank) Order(dst []int) []int {
	dst = dst[:0]
	mask := uint64(1)<<r.slotBits - 1
	for _, key := range r.keys {
		dst = append(dst, int(key&mask))
	}
	return dst
}

// Boundaries appends to dst[:0] the segment boundaries used by the last
// Sample (k+1 positions into Order, 0 first, N last; empty before the first
// Sample) and returns it. O(k).
func (r *Rank) Boundaries(dst []int) []int { return append(dst[:0], r.bounds...) }

// RankStats is a snapshot of a Rank's counters, for diagnostics.
type RankStats struct {
	// Ranked is the number of items in the rank order (N).
	Ranked int
	// Pending counts the buffer's inserts and applied priority updates
	// since the last sort.
	Pending uint64
	// Refreshes counts sorts of the rank order.
	Refreshes uint64
	// Rebuilds counts computations of the segment boundaries.
	Rebuilds uint64
	// Redraws counts rows drawn again inside their segment (slot being
	// written, priority 0, or overwritten during the copy).
	Redraws uint64
	// Fallbacks counts rows whose whole segment stayed unreadable (its
	// slots kept being overwritten) and that took the nearest readable item
	// below it in rank order instead, with that item's own probability.
	Fallbacks uint64
}

// Stats returns the counters. O(Stripes).
func (r *Rank) Stats() RankStats {
	return RankStats{
		Ranked:    len(r.keys),
		Pending:   r.pending(),
		Refreshes: r.refreshes,
		Rebuilds:  r.rebuilds,
		Redraws:   r.redraws,
		Fallbacks: r.fallbacks,
	}
}

// SegmentBoundaries appends to dst[:0], and returns, the k+1 boundaries
// 0 = b_0 < b_1 < ... < b_k = n that cut ranks 1..n into k segments of
// nearly equal mass under P(rank r) = r^-alpha / sum_{q<=n} q^-alpha.
// Segment j holds ranks b_j+1 .. b_{j+1}.
//
// The rule: with C(b) the mass of ranks 1..b, each inner boundary b_s is
// the b nearest to C(b) = s/k (the smaller b on a tie), then raised to
// b_{s-1}+1 and lowered to n-(k-s) so that every segment holds at least one
// rank. Without those clamps each C(b_s) is within half an item's mass of
// s/k; with them (only where single items weigh 1/k or more) every
// segment still has |mass - 1/k| <= the largest item's mass (that of rank
// 1).
// alpha = 0 gives segments whose sizes differ by at most one.
//
// It needs 1 <= k <= n <= buffer.MaxCapacity and a finite alpha >= 0;
// anything else is an error wrapping buffer.ErrConfig (dst is then
// returned as is). Cost: O(n) (it allocates the prefix sums; Rank caches
// them instead).
func SegmentBoundaries(dst []int, n, k int, alpha float64) ([]int, error) {
	if k < 1 || k > n || n > buffer.MaxCapacity || !(alpha >= 0) || math.IsInf(alpha, 1) {
		return dst, fmt.Errorf("%w: SegmentBoundaries(n=%d, k=%d, alpha=%v): need 1 <= k <= n <= %d and finite alpha >= 0",
			buffer.ErrConfig, n, k, alpha, buffer.MaxCapacity)
	}
	pre := make([]float64, n+1)
	for b := 1; b <= n; b++ {
		pre[b] = pre[b-1] + math.Pow(float64(b), -alpha)
	}
	return segmentBounds(dst, pre, n, k), nil
}

// segmentBounds implements SegmentBoundaries over the prefix sums pre
// (pre[b] = sum_{r<=b} r^-alpha, len(pre) > n). O(k log n).
func segmentBounds(dst []int, pre []float64, n, k int) []int {
	dst = append(dst[:0], 0)
	z := pre[n]
	for s := 1; s < k; s++ {
		t := float64(s) / float64(k) * z
		// b: the largest index in [prev, n] with pre[b] <= t. If even
		// pre[prev] > t (a heavy item, or a clamped prev) the nearest index
		// is at most prev and the clamp below takes prev+1, as the rule says.
		lo, hi := dst[s-1], n+1
		for hi-lo > 1 {
			m := int(uint(lo+hi) >> 1)
			if pre[m] <= t {
				lo = m
			} else {
				hi = m
			}
		}
		b := lo
		if b < n && pre[b+1]-t < t-pre[b] {
			b++
		}
		b = max(b, dst[s-1]+1)
		b = min(b, n-(k-s))
		dst = append(dst, b)
	}
	return append(dst, n)
}
