package buffer

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// useCAS2 selects the paired claim where the CPU has CMPXCHG16B; tests
// flip it to run the one-word claim too.
var useCAS2 = hasCAS2

// runMax is the longest run of consecutive slots written in one pass; it
// bounds writeRun's stack array (zeroed on every call, so it is kept small).
// A run of 128 leaves touches at most 9 level-1 nodes.
const runMax = 128

// Insert stores every transition of t, or none: t is validated first
// (column lengths against the Config, priorities finite and >= 0, discrete
// actions in range, every float value finite) and an invalid batch is
// rejected whole with an error wrapping ErrShape, ErrPriority or
// ErrNonFinite (ErrNil for a nil t).
//
// Items get t.Priority, or the maximum priority seen so far when t.Priority
// is nil. The batch goes to the next stripe in round-robin order as one run
// of consecutive slots (split across stripes only if it is larger than a
// stripe), overwriting that stripe's oldest items.
//
// Cost: O(n) column copies plus, per item, an atomic load, a CAS (one per
// aligned pair of slots on amd64, with CMPXCHG16B) and a store (the
// generation protocol), and
// O(n/16 + depth) atomic adds for the tree. Safe for concurrent use; an
// inserter waits only if it laps a slot another inserter is still writing
// (possible only when one inserter stalls for a whole stripe's worth of
// inserts). A stripe that SaveStriped is copying is skipped (the batch
// goes to the next one); a one-stripe buffer's Insert waits for the copy.
func (b *Buffer) Insert(t *Transitions) error {
	if t == nil {
		return fmt.Errorf("%w: Insert of a nil *Transitions", ErrNil)
	}
	if err := t.check(&b.cfg); err != nil {
		return err
	}
	n := t.Len()
	for done := 0; done < n; {
		s := int(b.c.nextStripe.Add(1)-1) & (len(b.stripes) - 1)
		if !b.enterStripe(s) {
			// SaveStriped is copying this stripe: take the next one (it
			// holds one stripe at a time). A one-stripe buffer waits.
			if len(b.stripes) == 1 {
				b.waitThaw(s)
			}
			continue
		}
		sc := b.lay.stripeCap(s)
		k := min(n-done, sc) // a chunk never laps its own stripe
		st := &b.stripes[s]
		start := int((st.cursor.Add(uint64(k)) - uint64(k)) % uint64(sc))
		for off := 0; off < k; {
			l := (start + off) % sc
			r := min(k-off, sc-l, runMax)
			b.writeRun(s, l, t, done+off, r)
			off += r
		}
		st.inserts.Add(uint64(k))
		st.written.Add(uint64(k))
		b.assertStripe(s)
		b.leaveStripe(s)
		done += k
	}
	return nil
}

// writeRun writes rows [row0, row0+r) of t into local slots [l0, l0+r) of
// stripe s. r <= runMax and the run does not wrap.
func (b *Buffer) writeRun(s, l0 int, t *Transitions, row0, r int) {
	leaves := b.tree[0][b.lay.node(0, s, l0):]
	leaves = leaves[:r]
	// ws holds, per slot, the claimed (old) word, then the new priority.
	var ws [runMax]uint64

	// Phase 1: claim each slot: odd tag, priority 0. From here on the slot
	// is never sampled, write-backs to its old occupant fail their CAS, and
	// readers copying it see the tag change. Then the old occupants' mass
	// leaves the tree in one aggregated pass, so descents steer away from the
	// run while it is being written: a sampler never waits on a slow writer.
	// (One combined pass at the end was measured 12% faster for inserts, but
	// a writer descheduled mid-copy then left mass in the tree that no
	// descent could reach, and samplers whose stratum fell there failed.)
	//
	// A slot with an odd tag belongs to an inserter we lapped (it stalled for
	// a whole stripe's worth of inserts). Before waiting for it we remove the
	// mass of the slots claimed so far, likewise. Claims go in increasing
	// slot order and runs never wrap, so two waiting inserters cannot wait on
	// each other.
	//
	// The run's records are written in phase 2: ask for their lines first
	// (up to 16 KiB), so their misses overlap the claims. Measured on the
	// 16-core device machine, inserts of 256 at 2^20: about 33 M items/s
	// with this pass, 24 M without it, 27 M with the prefetches spread over
	// the claim loop (16 slots ahead).
	g0 := b.lay.stripeOffset(s) + l0
	prefetchLines(b.rec(g0), min((r*b.rl.stride+cacheLine-1)/cacheLine, 256))
	flushed := 0 // ws[:flushed] have had their old mass removed
	for i := 0; i < len(leaves); i++ {
		p := &leaves[i]
		// Two slots at once where the pair is 16-byte aligned and neither
		// is claimed: half the locked instructions (inserts of 256 at 2^20
		// about 10% faster). Otherwise (or if the pair changed under us)
		// one at a time, below.
		if useCAS2 && uintptr(unsafe.Pointer(p))&15 == 0 && i+1 < len(leaves) {
			w0, w1 := p.Load(), leaves[i+1].Load()
			if (w0|w1)>>prioBits&1 == 0 && cas2(p, w0, w1, (w0>>prioBits+1)<<prioBits, (w1>>prioBits+1)<<prioBits) {
				ws[i], ws[i+1] = w0, w1
				i++
				continue
			}
		}
		for {
			w := p.Load()
			if w>>prioBits&1 == 1 {
				if flushed < i {
					b.addRunWords(s, l0+flushed, ws[flushed:i], -1)
					flushed = i
				}
				runtime.Gosched()
				continue
			}
			if p.CompareAndSwap(w, (w>>prioBits+1)<<prioBits) {
				ws[i] = w
				break
			}
		}
	}
	b.addRunWords(s, l0+flushed, ws[flushed:r], -1)

	// Phase 2: scatter the columns into the records.
	b.copyIn(g0, t, row0, r)

	// Phase 3: publish each slot (even tag, new priority); then the new mass
	// enters the tree.
	b.publish(leaves, ws[:r], t, row0)
	b.addRunWords(s, l0, ws[:r], 1)
	if b.mins != nil {
		b.fixMinRange(s, l0>>fanShift, (l0+r-1)>>fanShift)
	}
}

// publish stores the new words of a run: ws[i] holds the claimed word (the
// tag before the claim) on entry and the new priority in units on return.
// It raises the running maximum and counts clamped priorities.
func (b *Buffer) publish(leaves []atomic.Uint64, ws []uint64, t *Transitions, row0 int) {
	if len(t.Priority) == 0 { // absent: nil, or an empty column (a decoded batch's)
		m := b.c.maxUnits.Load()
		for i := range leaves {
			storeOwned(&leaves[i], nextGen(ws[i]>>prioBits+1)<<prioBits|m)
			ws[i] = m
		}
		return
	}
	var hi uint64
	clamped := 0
	for i := range leaves {
		u, c := b.q.units(t.Priority[row0+i])
		if c {
			clamped++
		}
		storeOwned(&leaves[i], nextGen(ws[i]>>prioBits+1)<<prioBits|u)
		ws[i] = u
		hi = max(hi, u)
	}
	if clamped > 0 {
		b.c.clamped.Add(uint64(clamped))
	}
	b.raiseMax(hi)
}

// addRunWords adds sign × (ws[i] & prioMask) to every ancestor of local leaf
// l0+i of stripe s (see addRun).
func (b *Buffer) addRunWords(s, l0 int, ws []uint64, sign int64) {
	r := len(ws)
	switch r {
	case 0:
		return
	case 1:
		b.addLeaf(s, l0, sign*int64(ws[0]&prioMask))
		return
	}
	const groups = runMax/fanout + 2
	var bufA, bufB [groups]int64
	j0 := l0 >> fanShift
	// Sum each group of up to fanout leaves in a register: accumulating
	// into bufA[x] directly chains every add through memory.
	for i, x := 0, 0; i < r; x++ {
		end := min(r, (j0+x+1)<<fanShift-l0)
		var acc uint64
		for _, w := range ws[i:end] {
			acc += w & prioMask
		}
		bufA[x] = sign * int64(acc)
		i = end
	}
	b.addGroups(s, &bufA, &bufB, j0, (l0+r-1)>>fanShift-j0+1)
}

// addGroups adds acc[x] to level-1 node j0+x of stripe s and the folded sums
// to the levels above; next is scratch of the same size.
func (b *Buffer) addGroups(s int, acc, next *[runMax/fanout + 2]int64, j0, cnt int) {
	for k := 1; k <= b.nlev; k++ {
		for x := range cnt {
			if acc[x] != 0 {
				b.sumNode(k, s, j0+x).Add(uint64(acc[x]))
			}
		}
		if k == b.nlev {
			return
		}
		nj0 := j0 >> fanShift
		ncnt := (j0+cnt-1)>>fanShift - nj0 + 1
		clear(next[:ncnt])
		for x := range cnt {
			next[(j0+x)>>fanShift-nj0] += acc[x]
		}
		acc, next, j0, cnt = next, acc, nj0, ncnt
	}
}

// addLeaf adds d to every ancestor of local leaf l of stripe s.
func (b *Buffer) addLeaf(s, l int, d int64) {
	if d == 0 {
		return
	}
	for k := 1; k < b.nlev; k++ {
		l >>= fanShift
		b.tree[k][b.lay.node(k, s, l)].Add(uint64(d))
	}
	b.stripes[s].root.Add(uint64(d))
}

// raiseMax makes the running maximum at least u.
func (b *Buffer) raiseMax(u uint64) {
	for {
		m := b.c.maxUnits.Load()
		if u <= m || b.c.maxUnits.CompareAndSwap(m, u) {
			return
		}
	}
}

// sumNode is node j of stripe s at level k of the sum tree; level nlev is
// the stripe root.
func (b *Buffer) sumNode(k, s, j int) *atomic.Uint64 {
	if k == b.nlev {
		return &b.stripes[s].root
	}
	return &b.tree[k][b.lay.node(k, s, j)]
}
