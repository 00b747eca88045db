package buffer

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
)

// maxRedraws bounds the re-draws of one row (torn reads, or a descent that
// found only zero priorities because of concurrent overwrites).
const maxRedraws = 256

// wideAfter is the number of failed tries after which a row leaves its
// stratum (see redraw).
const wideAfter = 64

// Sample draws dst.Len() items by stratified proportional sampling (PER,
// Schaul et al. 2016 §3.3) and copies their data into dst: the total
// priority mass T is split into B equal ranges and one target is drawn
// uniformly in each, so row j holds an item whose cumulative mass range
// meets [jT/B, (j+1)T/B). dst.Prob[i] is the priority read during the
// descent over the T read at the start. Items with priority 0 are never
// drawn. Each copy is checked against the slot's generation; an item
// overwritten while being copied is re-drawn in its stratum and counted in
// Stats.TornReads. A row whose stratum met only slots being written for 64
// draws (an inserter descheduled mid-write) is drawn over the whole mass
// instead, counted in Stats.StratumFallbacks, so sampling never waits on a
// writer.
//
// Errors: ErrNil (a nil rng or dst), ErrEmpty (no items), ErrBatchSize (0
// rows or more rows than items), ErrShape (dst not made by this buffer's
// NewBatch), ErrZeroMass (every priority is 0), ErrRetries (a stratum kept
// meeting items being overwritten).
//
// Cost: SampleRefs, then one copy per row after a pass that prefetches every
// row's lines at once (their cache misses overlap). No allocation after the
// first call with a given dst. Safe for concurrent use with every other
// method.
func (b *Buffer) Sample(rng *rand.Rand, dst *Batch) error {
	return b.sampleRows(rng, dst, nil)
}

// sampleRows is Sample, or SampleAt when at is not nil.
func (b *Buffer) sampleRows(rng *rand.Rand, dst *Batch, at []float64) error {
	total, err := b.sampleRefs(rng, dst, true, at)
	if err != nil {
		return err
	}
	sc := &dst.scr
	n := dst.Len()
	b.touchRows(sc.slot)
	for j := range n {
		tries, torn := 0, 0
		for {
			if sc.ok[j] {
				w := sc.word[j]
				st, l := int(sc.s[j]), int(sc.node[j])
				g := b.lay.stripeOffset(st) + l
				tag := w >> prioBits
				if b.readRow(dst, j, g, b.lay.node(0, st, l), tag) {
					dst.Refs[j] = Ref{Slot: uint32(g), Gen: uint32(tag)}
					dst.Prob[j] = prob(w&prioMask, total)
					break
				}
				b.c.torn.Add(1)
				torn++
			}
			if tries++; tries > maxRedraws {
				return fmt.Errorf("%w: row %d of %d (%d torn reads, %d descents that found no item)", ErrRetries, j, n, torn, tries-torn)
			}
			if tries%8 == 0 {
				runtime.Gosched() // let the writer that keeps tearing our reads finish
			}
			b.redraw(rng, sc, j, total, n, tries)
		}
	}
	b.c.samples.Add(uint64(n))
	b.assertBatch(dst)
	return nil
}

// SampleRefs is Sample without the data: it fills dst.Refs, Prob, Size,
// Total and MinProb (the item columns are left alone), for callers that read
// data later with GatherRef or not at all. Errors as Sample.
//
// Cost: the B descents advance together level by level (16-ary, about
// log16(Capacity/Stripes) levels): each level first prefetches every row's
// node group, so their cache misses overlap. At the top level, rows that
// share a node group are resolved in one merge walk; every other row scans
// its group (16 wide), all of a level's rows in one assembly loop where the
// CPU has AVX2. No allocation after the first call
// with a given dst. Safe for concurrent use with every other method; a
// descent that meets a node changed under it clamps to a valid child.
func (b *Buffer) SampleRefs(rng *rand.Rand, dst *Batch) error {
	total, err := b.sampleRefs(rng, dst, false, nil)
	if err != nil {
		return err
	}
	sc := &dst.scr
	n := dst.Len()
	for j := range n {
		for tries := 0; !sc.ok[j]; tries++ {
			if tries > maxRedraws {
				return fmt.Errorf("%w: row %d of %d (descents found no item)", ErrRetries, j, n)
			}
			if tries%8 == 7 {
				runtime.Gosched()
			}
			b.redraw(rng, sc, j, total, n, tries)
		}
		w := sc.word[j]
		dst.Refs[j] = Ref{Slot: uint32(b.lay.stripeOffset(int(sc.s[j])) + int(sc.node[j])), Gen: uint32(w >> prioBits)}
		dst.Prob[j] = prob(w&prioMask, total)
	}
	b.c.samples.Add(uint64(n))
	b.assertBatch(dst)
	return nil
}

// sampleRefs runs the batched descent and sets dst.Size, Total and MinProb;
// rows whose descent failed have sc.ok false. It returns the total in units.
// With at (SampleAt's positions, checked) the targets are at[j]·total
// instead of stratified draws.
func (b *Buffer) sampleRefs(rng *rand.Rand, dst *Batch, data bool, at []float64) (uint64, error) {
	if err := checkArgs(rng, dst); err != nil {
		return 0, err
	}
	n := dst.Len()
	size, err := b.checkSample(n)
	if at != nil {
		size, err = b.checkSampleAt(at, n)
	}
	if err != nil {
		return 0, err
	}
	if err := b.checkBatch(dst, data); err != nil {
		return 0, err
	}
	sc := &dst.scr
	sc.size(n, len(b.stripes))
	sc.at = at
	total := b.stripeMasses(sc.roots)
	if total == 0 {
		return 0, fmt.Errorf("%w: %d items stored, all with priority 0", ErrZeroMass, size)
	}
	// Stratified targets (or the given positions), ascending, mapped to
	// stripes in one merge pass.
	st := newStrata(total, n)
	s, cum := 0, uint64(0)
	for j := range n {
		var u uint64
		if at != nil {
			u = position(at[j], total)
		} else {
			u = st.next(rng)
		}
		for s < len(sc.roots)-1 && u >= cum+sc.roots[s] {
			cum += sc.roots[s]
			s++
		}
		sc.s[j], sc.u[j], sc.node[j], sc.ok[j] = int32(s), u-cum, 0, true
		sc.vsel[j] = sc.roots[s]
	}
	b.descend(sc, rng)
	if data { // the slots Sample's prefetch pass reads
		for j := range n {
			sc.slot[j] = 0 // a failed row's node index is partial: touch slot 0 instead
			if sc.ok[j] {
				sc.slot[j] = int32(b.lay.stripeOffset(int(sc.s[j])) + int(sc.node[j]))
			}
		}
	}
	dst.Size, dst.Total = size, b.q.priority(total)
	dst.MinProb = 0
	if m := b.minUnits(); m != emptyMin {
		dst.MinProb = float64(m) / float64(total)
	}
	return total, nil
}

// checkArgs refuses a nil rng or batch (ErrNil).
func checkArgs(rng *rand.Rand, dst *Batch) error {
	switch {
	case rng == nil:
		return fmt.Errorf("%w: sampling needs a *rand.Rand, got nil", ErrNil)
	case dst == nil:
		return fmt.Errorf("%w: sampling into a nil *Batch (make one with NewBatch)", ErrNil)
	}
	return nil
}

func (b *Buffer) checkSample(n int) (size int, err error) {
	size = b.Size()
	switch {
	case size == 0:
		return 0, fmt.Errorf("%w: cannot sample %d items", ErrEmpty, n)
	case n <= 0:
		return 0, fmt.Errorf("%w: batch of %d items", ErrBatchSize, n)
	case n > size:
		return 0, fmt.Errorf("%w: batch of %d items but only %d stored", ErrBatchSize, n, size)
	}
	return size, nil
}

// stripeMasses writes each stripe's mass into dst and returns their sum.
// A stripe's mass is the sum of its 16 top-level nodes, not its root:
// UpdatePriorities adds each call's root deltas once, at its end, so during
// a call the root can disagree with the tree below it by the whole call's
// change, and targets falling in that gap would all clamp to one item. The
// top level is at most one item's delta away from its children. O(16·Stripes)
// loads of one cached array.
func (b *Buffer) stripeMasses(dst []uint64) uint64 {
	top := b.tree[b.nlev-1]
	mt := b.lay.m[b.nlev-1]
	mask := ^uint64(0)
	if b.nlev == 1 { // the top level is the leaves: drop their generation bits
		mask = prioMask
	}
	var total uint64
	for s := range dst {
		var m uint64
		grp := top[s*mt : s*mt+fanout]
		for x := range grp {
			m += clampNode(grp[x].Load() & mask)
		}
		dst[s] = m
		total += m
	}
	return total
}

// stratum draws a target uniformly in [total*j/n, total*(j+1)/n), exactly
// (128-bit products, no float rounding).
func stratum(rng *rand.Rand, total uint64, j, n int) uint64 {
	lo := mulDiv(total, uint64(j), uint64(n))
	hi := mulDiv(total, uint64(j+1), uint64(n))
	if hi <= lo {
		return lo
	}
	return lo + rng.Uint64N(hi-lo)
}

// prob is an item's probability as drawn: its priority over the total read
// at the start. A concurrent write-back can raise the item above that total
// between the two reads; the probability is then capped at 1.
func prob(units, total uint64) float64 { return float64(min(units, total)) / float64(total) }

// strata yields one target per stratum, in order, with the bounds
// floor(total*j/n) kept incrementally (no division per row).
type strata struct {
	q, r, n  uint64 // total = q*n + r
	lo, frac uint64 // lo = floor(total*j/n); frac = (r*j) mod n
}

func newStrata(total uint64, n int) strata {
	return strata{q: total / uint64(n), r: total % uint64(n), n: uint64(n)}
}

// next draws the target of the next stratum.
func (s *strata) next(rng *rand.Rand) uint64 {
	lo := s.lo
	hi := lo + s.q
	s.frac += s.r
	if s.frac >= s.n {
		s.frac -= s.n
		hi++
	}
	s.lo = hi
	if hi <= lo {
		return lo
	}
	return lo + rng.Uint64N(hi-lo)
}

func mulDiv(a, b, c uint64) uint64 {
	h, l := bits.Mul64(a, b)
	q, _ := bits.Div64(h, l, c)
	return q
}

// redraw draws a new target in row j's stratum and descends for it alone.
// After wideAfter failed tries the target is drawn over the whole mass
// instead: the stratum is then covered by slots being written (an inserter
// was descheduled between claiming slots and removing their mass), and the
// row should not wait on the scheduler. Such rows are counted in
// Stats.StratumFallbacks. A SampleAt row re-descends at its own position
// (the tree re-read) before that fallback.
func (b *Buffer) redraw(rng *rand.Rand, sc *scratch, j int, total uint64, n, tries int) {
	var u uint64
	switch {
	case tries < wideAfter && sc.at != nil: // SampleAt: the same position, re-read
		u = position(sc.at[j], total)
	case tries < wideAfter:
		u = stratum(rng, total, j, n)
	default:
		if tries == wideAfter {
			b.c.fallbacks.Add(1)
		}
		u = rng.Uint64N(total)
	}
	s, cum := 0, uint64(0)
	for s < len(sc.roots)-1 && u >= cum+sc.roots[s] {
		cum += sc.roots[s]
		s++
	}
	u -= cum
	// Targets beyond a stripe's current root (it shrank since the snapshot)
	// are clamped inside the descent.
	sc.s[j], sc.u[j], sc.node[j], sc.ok[j] = int32(s), u, 0, true
	sc.vsel[j] = sc.roots[s]
	b.descendOne(sc, j, rng)
}

// descend advances every row's descent level by level: first a pass that
// prefetches each row's next node group (so the cache misses of all rows
// overlap; PREFETCHT0 retires without waiting for its line, where a pass of
// loads held the reorder buffer: 26 → 22 µs per batch at 2^20), then the
// selection pass. Prefetching a row's next group as soon as its node was
// chosen, with no separate pass, measured the same; one assembly loop
// issuing all 512 prefetches back to back measured 5 µs slower than this
// call per row. At the top level, which every row of a stripe shares, rows
// are sorted by target, so rows under the same parent are contiguous and
// their residuals ascend: such a run is resolved with one merge walk over
// the 16 children instead of one scan per row. Below it every row scans its
// own group (selectRows): detecting the rare shared groups there cost more
// than it saved (BatchRefs at 2^20 18.2 → 16.5 µs without it; walking no
// level at all measured the same at 2^20 and slower at 2^17).
func (b *Buffer) descend(sc *scratch, rng *rand.Rand) {
	const touchMinNodes = 4096 // 32 KiB: a level this small is read from L1/L2
	n := len(sc.u)
	for k := b.nlev - 1; k >= 0; k-- {
		lv := b.tree[k]
		mk := b.lay.m[k]
		base := sc.base[:n]
		for i := range base {
			base[i] = int(sc.s[i])*mk + int(sc.node[i])<<fanShift
		}
		if len(lv) > touchMinNodes { // smaller levels stay in cache anyway
			for _, g := range base {
				prefetchGroup(&lv[g])
			}
		}
		m := 0 // the rows selectRows moves, in sc.rows
		if k < b.nlev-1 {
			// Below the top level rows seldom share a group (at 2^20 with 16
			// stripes, 256 rows meet 4096 groups at level 2): skip the run
			// detection and scan every row; rows that share a group simply
			// scan it each.
			for r := range n {
				if sc.ok[r] {
					sc.rows[m] = int32(r)
					m++
				}
			}
			b.selectRows(sc, sc.rows[:m], k, rng)
			continue
		}
		for i := 0; i < n; {
			j := i + 1
			for j < n && base[j] == base[i] {
				j++
			}
			if j-i > 2 {
				b.walk(sc, i, j, k, rng)
			} else {
				for r := i; r < j; r++ {
					if sc.ok[r] {
						sc.rows[m] = int32(r)
						m++
					}
				}
			}
			i = j
		}
		b.selectRows(sc, sc.rows[:m], k, rng)
	}
}

// selectRows moves each of rows (rows still descending, each scanned on its
// own) into the child of its level-k group that holds its residual target,
// in one kernel call (scanRows: an assembly loop with AVX2). Rows the kernel
// leaves alone (a target beyond the group's sum, or a chosen leaf being
// written) go through scan, which handles those cases.
func (b *Buffer) selectRows(sc *scratch, rows []int32, k int, rng *rand.Rand) {
	mask := ^uint64(0)
	if k == 0 {
		mask = prioMask // leaves: drop the generation bits
	}
	slow := scanRows(b.tree[k], mask, rows, sc, k == 0)
	for _, r := range rows[:slow] {
		b.scan(sc, int(r), k, rng)
	}
}

// walk resolves rows [i, j), which share their parent node and have
// ascending residuals, in one pass over the parent's 16 children at level k.
func (b *Buffer) walk(sc *scratch, i, j, k int, rng *rand.Rand) {
	base := sc.base[i]
	grp := (*[fanout]atomic.Uint64)(b.tree[k][base : base+fanout])
	mask := uint64(prioMask)
	if k != 0 {
		mask = ^uint64(0)
	}
	c, cum := 0, uint64(0)
	v := grp[0].Load() & mask
	v &^= uint64(int64(v) >> 63)
	for r := i; r < j; r++ {
		if !sc.ok[r] {
			continue
		}
		u := sc.u[r]
		for u-cum >= v && c < fanout-1 {
			cum += v
			c++
			v = grp[c].Load() & mask
			v &^= uint64(int64(v) >> 63)
		}
		if u-cum >= v { // beyond the group's current sum: fall back
			b.scan(sc, r, k, rng)
			continue
		}
		if k == 0 {
			sc.word[r] = grp[c].Load()
			if sc.word[r]&prioMask == 0 {
				sc.ok[r] = false
				continue
			}
		}
		sc.u[r] = u - cum
		sc.vsel[r] = v
		sc.node[r] = sc.node[r]<<fanShift + int32(c)
	}
}

// descendOne runs row i's descent alone.
func (b *Buffer) descendOne(sc *scratch, i int, rng *rand.Rand) {
	for k := b.nlev - 1; k >= 0 && sc.ok[i]; k-- {
		b.scan(sc, i, k, rng)
	}
}

// scan picks, in row i's current node group at level k, the child whose
// cumulative range holds the row's residual target. If the group sums to
// less than the target (write-backs lowered priorities after the level
// above was read), the target is rescaled to the same relative position in
// the group's current sum (u·sum/v, v the group's value as read a level
// up), which keeps the stratification instead of piling the difference onto
// the last child or drawing it away from the end of the range; a group
// that is all zero fails the row (it is re-drawn). At the leaves, a
// chosen slot that is being written (priority 0 when re-read) also fails the
// row.
func (b *Buffer) scan(sc *scratch, i, k int, rng *rand.Rand) {
	base := int(sc.s[i])*b.lay.m[k] + int(sc.node[i])<<fanShift
	grp := (*[fanout]atomic.Uint64)(b.tree[k][base : base+fanout])
	u := sc.u[i]
	mask := uint64(prioMask)
	if k != 0 {
		mask = ^uint64(0)
	}
	pre := &sc.pre
	c := scanGroup(grp, u, mask, pre)
	if c == fanout { // overshoot: rescale the target into the group's sum
		sum := pre[fanout-1]
		if sum == 0 {
			sc.ok[i] = false
			return
		}
		if v := sc.vsel[i]; v > sum && u < v {
			u = mulDiv(u, sum, v) // the same relative position, now < sum
		} else {
			u = rng.Uint64N(sum)
		}
		c = 0
		for c < fanout-1 && pre[c] <= u {
			c++
		}
	}
	var before uint64
	if c > 0 {
		before = pre[c-1]
	}
	sc.vsel[i] = pre[c] - before
	if k == 0 {
		w := grp[c].Load()
		if w&prioMask == 0 {
			sc.ok[i] = false
			return
		}
		sc.word[i] = w
	}
	sc.u[i] = u - before
	sc.node[i] = sc.node[i]<<fanShift + int32(c)
}

// SampleUniform draws dst.Len() items uniformly (with replacement) among
// the stored items, whatever their priorities; dst.Prob[i] = 1/Size. Items
// being written are re-drawn. Errors as Sample, except that zero total
// priority is allowed. O(B·(Stripes + item size)). Safe for concurrent use.
func (b *Buffer) SampleUniform(rng *rand.Rand, dst *Batch) error {
	return b.sampleUniform(rng, dst, nil)
}

// sampleUniform is SampleUniform, or SampleUniformAt when at is not nil.
func (b *Buffer) sampleUniform(rng *rand.Rand, dst *Batch, at []float64) error {
	if err := checkArgs(rng, dst); err != nil {
		return err
	}
	n := dst.Len()
	var err error
	if at != nil {
		_, err = b.checkSampleAt(at, n)
	} else {
		_, err = b.checkSample(n)
	}
	if err != nil {
		return err
	}
	if err := b.checkBatch(dst, true); err != nil {
		return err
	}
	sc := &dst.scr
	sc.size(n, len(b.stripes))
	// Draw over the claimed slots (cursor), not the completed count
	// (written): while a stripe first fills, a stalled inserter's claimed
	// slots may precede completed ones. Slots not written yet are re-drawn,
	// so the draw is uniform over the stored items; Prob is 1/Size.
	var claimed, size uint64
	for s := range b.stripes {
		st := &b.stripes[s]
		c := uint64(b.lay.stripeCap(s))
		size += min(st.written.Load(), c)
		sc.roots[s] = min(st.cursor.Load(), c)
		claimed += sc.roots[s]
	}
	var total uint64 // reported in dst.Total only
	for s := range b.stripes {
		total += clampNode(b.stripes[s].root.Load())
	}
	for j := range n {
		tries := 0
		for {
			var r uint64
			if at != nil && tries < wideAfter { // SampleUniformAt: the same position, re-read
				r = position(at[j], claimed)
			} else {
				r = rng.Uint64N(claimed)
			}
			s := 0
			for r >= sc.roots[s] {
				r -= sc.roots[s]
				s++
			}
			li := b.lay.node(0, s, int(r))
			tag := b.tree[0][li].Load() >> prioBits
			g := b.lay.stripeOffset(s) + int(r)
			if tag != 0 && tag&1 == 0 {
				if b.readRow(dst, j, g, li, tag) {
					dst.Refs[j] = Ref{Slot: uint32(g), Gen: uint32(tag)}
					dst.Prob[j] = 1 / float64(size)
					break
				}
				b.c.torn.Add(1)
			}
			if tries++; tries > maxRedraws {
				return fmt.Errorf("%w: row %d of %d", ErrRetries, j, n)
			}
			if tries%8 == 0 {
				runtime.Gosched()
			}
		}
	}
	dst.Size, dst.Total = int(size), b.q.priority(total)
	dst.MinProb = 0
	if m := b.minUnits(); m != emptyMin && total > 0 {
		dst.MinProb = float64(m) / float64(total)
	}
	b.c.samples.Add(uint64(n))
	b.assertBatch(dst)
	return nil
}
