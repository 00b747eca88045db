package buffer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"runtime"
	"unsafe"

	"github.com/apexrl/apex/checkpoint"
)

// Striped checkpoints.
//
// SaveStriped writes a checkpoint while inserts, samples and write-backs
// go on. It takes the stripes one at a time: it closes the stripe's gate
// (a word in the stripe header: a frozen bit and a count of the writers
// inside), waits for the Insert and UpdatePriorities calls inside the
// stripe to leave, copies the stripe's counters, leaves and records into
// scratch memory, opens the gate, and only then encodes and writes the
// copy. While a stripe is closed, Insert puts its batch into the next
// stripe (a one-stripe buffer's Insert waits), a write-back to one of its
// slots waits for the copy, and sampling goes on untouched (it writes
// nothing of the stripe). A stripe's writers touch only that stripe's
// leaves, tree nodes, records and header, plus the running maximum, which
// they raise before leaving: so at the instant a stripe is closed with no
// writer inside, the stripe is exactly at rest.
//
// Consistency: each stripe is a consistent snapshot at its own instant
// (the moment it was closed): its items, generations, priorities and
// counters are those of a buffer with no insert or write-back half done.
// Stripes are taken in order, so stripe s is older than stripe s+1 by the
// copy of stripe s; an item inserted meanwhile may be in a later stripe,
// and a write-back may be in one stripe's copy but not in another's. The
// learner-side counters (samples, updates, stale counts, the running
// maximum priority, the round-robin position) are read after the last
// stripe: the running maximum then bounds every stored priority (it only
// grows), and the other counters are at least the events the stripes
// show. Load restores exactly what was written.
//
// Deadlock freedom: SaveStriped closes one stripe at a time and holds
// nothing else while waiting for it to empty; a writer is inside at most
// one stripe at a time and never waits while inside one (UpdatePriorities
// goes stripe by stripe, leaving a closed stripe for last), so every wait
// ends with one stripe's copy. Two SaveStriped calls cannot overlap (the
// second fails).

// gateFrozen is the gate's frozen bit; the bits below count writers.
const gateFrozen = 1 << 63

// spinWaits is how many times a wait for a stripe yields the processor
// (runtime.Gosched) before it blocks on a channel: a writer leaving a
// stripe takes well under that, a stripe's copy (up to milliseconds) much
// longer, and a blocked waiter burns no core (the package reads no
// clock, so it blocks rather than sleeps).
const spinWaits = 64

// enterStripe admits a writer to stripe s unless a snapshot holds it.
// O(1): one atomic add (two when refused).
func (b *Buffer) enterStripe(s int) bool {
	g := &b.stripes[s].gate
	if g.Add(1)&gateFrozen == 0 {
		return true
	}
	b.left(g.Add(^uint64(0)))
	return false
}

// leaveStripe ends a writer's stay in stripe s.
func (b *Buffer) leaveStripe(s int) { b.left(b.stripes[s].gate.Add(^uint64(0))) }

// left wakes SaveStriped when a writer's leaving emptied a frozen stripe
// (gate, the gate's new value, is gateFrozen alone). A token already
// waiting suffices: SaveStriped re-reads the gate after each.
func (b *Buffer) left(gate uint64) {
	if gate == gateFrozen {
		select {
		case b.drained <- struct{}{}:
		default:
		}
	}
}

// waitThaw waits while a snapshot holds stripe s: it yields the
// processor spinWaits times, then blocks until the copy ends.
//
// The channel it blocks on is the latest frozen stripe's (stored before
// that stripe's gate closed): if stripe s is still frozen after the load,
// that channel is s's own or one already closed (one stripe is frozen at
// a time), so the wait ends no later than s's copy.
func (b *Buffer) waitThaw(s int) {
	g := &b.stripes[s].gate
	for range spinWaits {
		if g.Load()&gateFrozen == 0 {
			return
		}
		runtime.Gosched()
	}
	for {
		ch := b.thawed.Load()
		if g.Load()&gateFrozen == 0 {
			return
		}
		<-*ch
	}
}

// enterWait enters stripe s, waiting for a snapshot's copy of it to end.
func (b *Buffer) enterWait(s int) {
	for !b.enterStripe(s) {
		b.waitThaw(s)
	}
}

// freezeStripe closes stripe s to writers and waits until none is inside:
// it yields the processor spinWaits times, then blocks until the last
// writer leaves (left). Only SaveStriped calls it, one stripe at a time.
func (b *Buffer) freezeStripe(s int) {
	ch := make(chan struct{})
	b.thawed.Store(&ch)
	select {
	case <-b.drained: // a token of an earlier stripe's
	default:
	}
	g := &b.stripes[s].gate
	g.Add(gateFrozen)
	for range spinWaits {
		if g.Load() == gateFrozen {
			return
		}
		runtime.Gosched()
	}
	for g.Load() != gateFrozen {
		<-b.drained
	}
}

// thawStripe opens stripe s again and wakes the writers waiting for it.
func (b *Buffer) thawStripe(s int) {
	b.stripes[s].gate.Add(^uint64(gateFrozen - 1))
	close(*b.thawed.Load())
}

// ErrSnapshotBusy is returned by SaveStriped when another SaveStriped of
// the same buffer is running.
var ErrSnapshotBusy = errors.New("buffer: another SaveStriped of this buffer is running")

// stripeCopy is one stripe as SaveStriped copied it.
type stripeCopy struct {
	cursor, written, inserts uint64
	leaves                   []uint64 // the stripe's leaf words, stripeCap of them
	rows                     []uint64 // its records, stripeCap × stride bytes
}

// SaveStriped writes a checkpoint of b to w while b is in use: Insert,
// Sample, UpdatePriorities and the readers may run concurrently from any
// number of goroutines. It copies one stripe at a time under that
// stripe's own short critical section (see Striped checkpoints above for
// what each caller sees meanwhile and for the consistency the checkpoint
// gives: each stripe a consistent snapshot at its own instant, the
// learner-side counters read after the last stripe), then writes the copy
// while the stripe serves again. Load reads it (format version 2, below).
// On error w may hold a partial checkpoint.
//
// Writers are held only during a stripe's memory copy, never during w's
// writes: a slow w slows the checkpoint, not the buffer. One SaveStriped
// at a time per buffer (ErrSnapshotBusy otherwise); it must not run
// concurrently with Save or Load into b (they need quiescence anyway).
//
// Cost: O(Capacity × item size) time; scratch memory of one stripe
// (Capacity/Stripes × (8 + record size) bytes) plus 64 KiB. Each stripe's
// critical section copies that much memory: more stripes, shorter stalls.
func (b *Buffer) SaveStriped(w io.Writer) error {
	if w == nil {
		return fmt.Errorf("%w: SaveStriped to a nil io.Writer", ErrNil)
	}
	js, err := encodeConfig(b.cfg)
	if err != nil {
		return fmt.Errorf("buffer: SaveStriped: %w", err)
	}
	if !b.snapshotting.CompareAndSwap(false, true) {
		return ErrSnapshotBusy
	}
	defer b.snapshotting.Store(false)
	cols, err := b.ckColumns(b.ckLayout())
	if err != nil {
		return fmt.Errorf("buffer: SaveStriped: %w", err)
	}
	maxCap := b.lay.stripeCap(0) // stripe 0 is never smaller than the others
	cp := stripeCopy{leaves: make([]uint64, maxCap), rows: make([]uint64, maxCap*b.rl.stride/8)}
	err = checkpoint.Save(w, ckKind, ckVersionStriped, func(w io.Writer) error {
		cw := &ckWriter{w: w}
		cw.write(binary.LittleEndian.AppendUint32(nil, uint32(len(js))))
		cw.write(js)
		cw.pad(len(js))
		scratch := make([]byte, ckScratch)
		for s := range b.stripes {
			b.copyStripe(s, &cp)
			if err := b.checkStripeCopy(s, &cp, cols); err != nil {
				return err
			}
			writeSection(cw, ckIDStripe, []uint64{cp.cursor, cp.written, cp.inserts})
			writeSection(cw, ckIDLeaves, cp.leaves)
			n := len(cp.leaves)
			base := unsafe.Pointer(unsafe.SliceData(cp.rows))
			for _, col := range cols {
				b.writeRecordColumnFrom(cw, col, base, n, &scratch)
			}
			if cw.err != nil {
				return cw.err
			}
		}
		c := &b.c
		writeSection(cw, ckIDCounters, []uint64{
			c.samples.Load(), c.updates.Load(), c.staleUpd.Load(), c.staleReads.Load(),
			c.torn.Load(), c.clamped.Load(), c.nextStripe.Load(), c.maxUnits.Load(),
			c.fallbacks.Load(),
		})
		return cw.err
	})
	if err != nil {
		return fmt.Errorf("buffer: SaveStriped: %w", err)
	}
	return nil
}

// copyStripe copies stripe s into cp under its critical section: closed,
// emptied of writers, copied, opened. Under the invariants build tag the
// stripe is checked while closed (it is at rest then). O(stripe bytes).
func (b *Buffer) copyStripe(s int, cp *stripeCopy) {
	sc := b.lay.stripeCap(s)
	cp.leaves = cp.leaves[:sc]
	nrow := sc * b.rl.stride / 8
	off := b.lay.stripeOffset(s) * b.rl.stride / 8
	h := &b.stripes[s]
	b.freezeStripe(s)
	cp.cursor, cp.written, cp.inserts = h.cursor.Load(), h.written.Load(), h.inserts.Load()
	leaves := b.tree[0][b.lay.node(0, s, 0):][:sc]
	for i := range leaves {
		cp.leaves[i] = leaves[i].Load()
	}
	copy(cp.rows[:nrow], b.rows[off:off+nrow])
	if invariantsEnabled {
		if err := b.checkStripe(s); err != nil {
			b.thawStripe(s)
			panic("buffer: invariant violated in a stripe at rest (SaveStriped): " + err.Error())
		}
	}
	b.thawStripe(s)
}

// checkStripeCopy checks what SaveStriped copied of stripe s as
// checkCheckpoint and checkFiniteRecords check a whole buffer (the copy
// is at rest, so a failure is a bug or memory corruption: the checkpoint
// would not load). O(stripe).
func (b *Buffer) checkStripeCopy(s int, cp *stripeCopy, cols []ckColumn) error {
	sc := len(cp.leaves)
	if cp.cursor != cp.written {
		return fmt.Errorf("stripe %d: cursor %d but %d inserts completed at rest", s, cp.cursor, cp.written)
	}
	filled := int(min(cp.written, uint64(sc)))
	off := b.lay.stripeOffset(s)
	for l, w := range cp.leaves {
		g, u := w>>prioBits, w&prioMask
		switch {
		case g&1 == 1:
			return fmt.Errorf("slot %d (stripe %d): generation %d is odd at rest", off+l, s, g)
		case u > b.q.maxUnits:
			return fmt.Errorf("slot %d (stripe %d): priority %d units above the maximum %d", off+l, s, u, b.q.maxUnits)
		case (l < filled) != (g != 0):
			return fmt.Errorf("slot %d (stripe %d): generation %d, but the stripe's counters say its first %d slots are written", off+l, s, g, filled)
		}
	}
	base := unsafe.Pointer(unsafe.SliceData(cp.rows))
	for _, c := range cols {
		if _, ok := c.ptr.(*[]float32); !ok {
			continue
		}
		o, w, _ := b.recordColumn(c)
		for i := range sc {
			v := unsafe.Slice((*float32)(unsafe.Add(base, i*b.rl.stride+o)), w)
			var acc float32
			for _, x := range v {
				acc += x * 0 // 0 for finite x, NaN otherwise
			}
			if acc == 0 {
				continue
			}
			for j, x := range v {
				if x-x != 0 {
					return fmt.Errorf("slot %d: %s[%d] is %v (must be finite)", off+i, c.name, j, x)
				}
			}
		}
	}
	return nil
}

// loadStriped reads the stripes and counters of a version 2 checkpoint
// (after its config) for Load: the stripes' counters, leaves and columns
// concatenated in global slot order, as version 1 holds them. Columns go
// straight into the records when the stream is known to hold every
// declared byte (cr.exact), else into their Transitions columns, growing
// as data arrives (as loadColumn). O(Capacity × item size).
func (b *Buffer) loadStriped(cr *ckReader, cols []ckColumn) (counters, stripeCtr, leaves []uint64, err error) {
	lay := newLayout(b.cfg.Capacity, b.cfg.Stripes)
	if cr.exact {
		leaves = make([]uint64, 0, b.cfg.Capacity)
		b.initRows()
	}
	for s := range b.cfg.Stripes {
		sc, off := lay.stripeCap(s), lay.stripeOffset(s)
		st, err := readSection[uint64](cr, ckIDStripe, fmt.Sprintf("stripe %d", s), 3)
		if err != nil {
			return nil, nil, nil, err
		}
		stripeCtr = append(stripeCtr, st...)
		lv, err := readSection[uint64](cr, ckIDLeaves, fmt.Sprintf("leaves of stripe %d", s), sc)
		if err != nil {
			return nil, nil, nil, err
		}
		leaves = append(leaves, lv...)
		for _, c := range cols {
			if cr.exact {
				err = b.readRecordColumnAt(cr, c, off, sc)
			} else {
				err = appendColumn(cr, c, sc*(c.n/b.cfg.Capacity))
			}
			if err != nil {
				return nil, nil, nil, err
			}
		}
	}
	counters, err = readSection[uint64](cr, ckIDCounters, "counters", ckNumCounters)
	return counters, stripeCtr, leaves, err
}

// appendColumn reads a section of n values of column c and appends them
// to c's Transitions column.
func appendColumn(cr *ckReader, c ckColumn, n int) error {
	switch p := c.ptr.(type) {
	case *[]float32:
		return appendSection(cr, c, n, p)
	case *[]int32:
		return appendSection(cr, c, n, p)
	case *[]uint32:
		return appendSection(cr, c, n, p)
	case *[]uint64:
		return appendSection(cr, c, n, p)
	case *[]int64:
		return appendSection(cr, c, n, p)
	}
	return fmt.Errorf("column %s: unsupported type %T", c.name, c.ptr)
}

func appendSection[T word](cr *ckReader, c ckColumn, n int, dst *[]T) error {
	v, err := readSection[T](cr, c.id, c.name, n)
	if err != nil {
		return err
	}
	*dst = append(*dst, v...)
	return nil
}

// ckRemainingStriped is ckRemaining for a version 2 checkpoint: the bytes
// after its header and config, refusing sizes beyond maxCheckpointBytes.
// O(columns): the stripes come in two sizes.
func ckRemainingStriped(cfg *Config, cols []ckColumn) (int64, error) {
	lay := newLayout(cfg.Capacity, cfg.Stripes)
	total := uint64(4 + ckSectionHeader + 8*ckNumCounters) // checksum, counters
	groups := [2]struct{ stripes, slots int }{{lay.rem, lay.base + 1}, {cfg.Stripes - lay.rem, lay.base}}
	for _, g := range groups {
		if g.stripes == 0 {
			continue
		}
		per := uint64(2*ckSectionHeader + 3*8)
		nb, ok := mulBounded(g.slots, 8, maxCheckpointBytes)
		if !ok {
			return 0, fmt.Errorf("a stripe of %d slots exceeds the checkpoint size limit", g.slots)
		}
		per += uint64(nb)
		for _, c := range cols {
			nb, ok := mulBounded(g.slots, (c.n/cfg.Capacity)*columnElem(c), maxCheckpointBytes)
			if !ok {
				return 0, fmt.Errorf("column %s: a stripe of %d slots exceeds the checkpoint size limit", c.name, g.slots)
			}
			per += uint64(ckSectionHeader + nb + pad8(nb))
		}
		hi, lo := bits.Mul64(per, uint64(g.stripes))
		if hi != 0 || lo > maxCheckpointBytes || total+lo > maxCheckpointBytes {
			return 0, fmt.Errorf("the config declares more than %d bytes of data", uint64(maxCheckpointBytes))
		}
		total += lo
	}
	return int64(total), nil
}
