package buffer

import (
	"fmt"
)

// readRow copies the item in global slot g into row of dst and reports
// whether the slot still carries tag afterwards (the sequence-lock check);
// tag must have been read from the slot's leaf before the call.
func (b *Buffer) readRow(dst *Batch, row, g, li int, tag uint64) bool {
	b.copyOut(dst, row, g)
	return b.tree[0][li].Load()>>prioBits == tag
}

// GatherSlot copies the current occupant of slot into row of dst and sets
// dst.Refs[row]; it leaves dst.Prob alone. It returns false, copying
// nothing usable, when slot is out of range, has never been written, or was
// being overwritten (the caller re-draws). O(item size). Safe for concurrent
// use with writers. It panics if row is outside dst or dst is nil or was not
// made by this buffer's NewBatch (a programming error: the bool result is
// the hot path's "re-draw", with no room for an error).
func (b *Buffer) GatherSlot(dst *Batch, row, slot int) bool {
	b.mustRow(dst, row)
	if slot < 0 || slot >= b.cfg.Capacity {
		return false
	}
	_, _, li := b.leafIndex(slot)
	w := b.tree[0][li].Load()
	tag := w >> prioBits
	if tag == 0 || tag&1 == 1 {
		return false
	}
	if !b.readRow(dst, row, slot, li, tag) {
		b.c.torn.Add(1)
		return false
	}
	dst.Refs[row] = Ref{Slot: uint32(slot), Gen: uint32(tag)}
	return true
}

// GatherRef copies the item ref names into row of dst, if it is still
// stored. A ref whose slot has been overwritten (before or during the copy)
// is dropped: it returns false and counts in Stats.StaleReads. O(item size).
// It panics if row is outside dst or dst is nil or was not made by this
// buffer's NewBatch (a programming error, as for GatherSlot).
func (b *Buffer) GatherRef(dst *Batch, row int, ref Ref) bool {
	b.mustRow(dst, row)
	if int(ref.Slot) >= b.cfg.Capacity {
		return false
	}
	_, _, li := b.leafIndex(int(ref.Slot))
	tag := b.tree[0][li].Load() >> prioBits
	if uint32(tag) != ref.Gen || tag == 0 || tag&1 == 1 || !b.readRow(dst, row, int(ref.Slot), li, tag) {
		b.c.staleReads.Add(1)
		return false
	}
	dst.Refs[row] = ref
	return true
}

// checkBatch reports whether dst has the columns this buffer fills, for n
// rows (NewBatch makes such a batch); data says whether the item columns are
// needed or only Refs and Prob.
func (b *Buffer) checkBatch(dst *Batch, data bool) error {
	n := len(dst.Refs)
	c := &b.cfg
	bad := func(name string, got, want int) error {
		return fmt.Errorf("%w: batch column %s has %d values, want %d for %d rows (make batches with NewBatch of this buffer)", ErrShape, name, got, want, n)
	}
	if len(dst.Prob) != n {
		return bad("Prob", len(dst.Prob), n)
	}
	if !data {
		return nil
	}
	t := &dst.Transitions
	type col struct {
		name      string
		got, want int
	}
	var arr [16]col // no allocation: GatherSlot and GatherRef check on every call
	cols := append(arr[:0],
		col{"Obs", len(t.Obs), n * c.ObsDim}, col{"NextObs", len(t.NextObs), n * c.ObsDim},
		col{"Reward", len(t.Reward), n}, col{"Discount", len(t.Discount), n}, col{"Flags", len(t.Flags), n},
	)
	if c.Action == Discrete {
		cols = append(cols, col{"Action", len(t.Action), n})
	} else {
		cols = append(cols, col{"ActionVec", len(t.ActionVec), n * c.ActionDim})
	}
	if c.Episode {
		cols = append(cols, col{"EpisodeID", len(t.EpisodeID), n}, col{"EpisodeStep", len(t.EpisodeStep), n})
	}
	if c.GlobalStep {
		cols = append(cols, col{"GlobalStep", len(t.GlobalStep), n})
	}
	if c.ActorID {
		cols = append(cols, col{"ActorID", len(t.ActorID), n})
	}
	if c.StateHash {
		cols = append(cols, col{"StateHash", len(t.StateHash), n}, col{"NextStateHash", len(t.NextStateHash), n})
	}
	if len(t.Floats) != len(c.Floats) {
		return bad("Floats (columns)", len(t.Floats), len(c.Floats))
	}
	for _, x := range cols {
		if x.got != x.want {
			return bad(x.name, x.got, x.want)
		}
	}
	for i, f := range c.Floats {
		if got, want := len(t.Floats[i]), n*f.Width; got != want {
			return bad("Floats["+f.Name+"]", got, want)
		}
	}
	return nil
}

// mustRow panics with a clear message when dst cannot take row (a
// programming error: Gather* return bool on their hot path).
func (b *Buffer) mustRow(dst *Batch, row int) {
	if dst == nil {
		panic("buffer: Gather into a nil *Batch (make one with NewBatch)")
	}
	if row < 0 || row >= len(dst.Refs) {
		panic(fmt.Sprintf("buffer: row %d out of range for a batch of %d rows", row, len(dst.Refs)))
	}
	if err := b.checkBatch(dst, true); err != nil {
		panic(err.Error())
	}
}
