package buffer

import (
	"fmt"
)

// CheckInvariants verifies the buffer's structure and returns the first
// violation found. It needs quiescence (no concurrent writers). Checked,
// exactly (priorities are fixed-point integers, so there is no tolerance):
//   - every internal sum node equals the sum of its 16 children, and each
//     stripe root the sum of its top level; no node is negative;
//   - every min node equals the smallest non-zero child (if tracked);
//   - no slot is mid-write (odd generation) and padding leaves are empty;
//   - a slot that was never written has priority 0, and the number of
//     written slots of each stripe equals min(written, capacity);
//   - every written slot's generation is the one its number of writes
//     gives (posGen: each write advances it one step);
//   - cursor >= written per stripe, and no priority exceeds MaxPriority.
//
// Cost: O(Capacity). Tests call it; builds with the invariants tag also call
// it from Save.
func (b *Buffer) CheckInvariants() error {
	for s := range b.stripes {
		if err := b.checkStripe(s); err != nil {
			return err
		}
	}
	return nil
}

// checkStripe is CheckInvariants for stripe s alone: it needs only that
// stripe at rest (SaveStriped checks a stripe it holds). O(stripe).
func (b *Buffer) checkStripe(s int) error {
	st := &b.stripes[s]
	sc := b.lay.stripeCap(s)
	if st.cursor.Load() < st.written.Load() {
		return fmt.Errorf("stripe %d: cursor %d < written %d", s, st.cursor.Load(), st.written.Load())
	}
	filled := 0
	wr := st.written.Load()
	for l := range b.lay.m[0] {
		w := b.tree[0][b.lay.node(0, s, l)].Load()
		g, u := w>>prioBits, w&prioMask
		switch {
		case l >= sc && w != 0:
			return fmt.Errorf("stripe %d: padding leaf %d is %#x", s, l, w)
		case g&1 == 1:
			return fmt.Errorf("stripe %d slot %d: generation %d is odd at quiescence", s, l, g)
		case g == 0 && u != 0:
			return fmt.Errorf("stripe %d slot %d: never written but priority %d", s, l, u)
		case u > b.q.maxUnits:
			return fmt.Errorf("stripe %d slot %d: priority %d units above the maximum %d", s, l, u, b.q.maxUnits)
		case g != 0 && uint64(l) < wr && g != posGen((wr-1-uint64(l))/uint64(sc)):
			return fmt.Errorf("stripe %d slot %d: generation %d after %d writes, want %d", s, l, g, (wr-1-uint64(l))/uint64(sc)+1, posGen((wr-1-uint64(l))/uint64(sc)))
		}
		if g != 0 {
			filled++
		}
	}
	if want := int(min(wr, uint64(sc))); filled != want {
		return fmt.Errorf("stripe %d: %d slots written, counters say %d", s, filled, want)
	}
	for k := 1; k <= b.nlev; k++ {
		nodes := 1
		if k < b.nlev {
			nodes = b.lay.m[k]
		}
		for j := range nodes {
			if j*fanout >= b.lay.m[k-1] { // padding node: no children
				if v := b.sumNode(k, s, j).Load(); v != 0 {
					return fmt.Errorf("stripe %d level %d padding node %d is %d", s, k, j, v)
				}
				continue
			}
			var sum uint64
			mn := emptyMin
			cbase := b.lay.node(k-1, s, j*fanout)
			for x := range fanout {
				v := b.tree[k-1][cbase+x].Load()
				if k == 1 {
					v &= prioMask
					if v != 0 {
						mn = min(mn, v)
					}
				} else if b.mins != nil {
					mn = min(mn, b.mins[k-1][cbase+x].Load())
				}
				sum += v
			}
			got := b.sumNode(k, s, j).Load()
			if int64(got) < 0 {
				return fmt.Errorf("stripe %d level %d node %d: negative sum %d", s, k, j, int64(got))
			}
			if got != sum {
				return fmt.Errorf("stripe %d level %d node %d: sum %d, children sum to %d", s, k, j, got, sum)
			}
			if b.mins != nil {
				if got := b.minNode(k, s, j).Load(); got != mn {
					return fmt.Errorf("stripe %d level %d node %d: min %d, children's min %d", s, k, j, got, mn)
				}
			}
		}
	}
	return nil
}

// assertBatch checks, under the invariants build tag, what every sampling
// call promises whatever runs concurrently: each row names an in-range slot
// with a live (even, non-zero) generation and a probability in (0, 1].
func (b *Buffer) assertBatch(dst *Batch) {
	if !invariantsEnabled {
		return
	}
	for i, r := range dst.Refs {
		if int(r.Slot) >= b.cfg.Capacity || r.Gen == 0 || r.Gen&1 == 1 {
			panic(fmt.Sprintf("buffer: invariant violated: row %d has ref %+v", i, r))
		}
		if p := dst.Prob[i]; !(p > 0 && p <= 1) {
			panic(fmt.Sprintf("buffer: invariant violated: row %d has probability %v", i, p))
		}
	}
	if dst.Size <= 0 || dst.Size > b.cfg.Capacity {
		panic(fmt.Sprintf("buffer: invariant violated: batch size %d", dst.Size))
	}
}

// assertStripe checks a stripe's counters after an insert (invariants tag).
func (b *Buffer) assertStripe(s int) {
	if !invariantsEnabled {
		return
	}
	st := &b.stripes[s]
	if w, c := st.written.Load(), st.cursor.Load(); w > c {
		panic(fmt.Sprintf("buffer: invariant violated: stripe %d written %d > cursor %d", s, w, c))
	}
}
