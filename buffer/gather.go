package buffer

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
// use with writers.
func (b *Buffer) GatherSlot(dst *Batch, row, slot int) bool {
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
func (b *Buffer) GatherRef(dst *Batch, row int, ref Ref) bool {
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

// copyOut copies global slot g into row of dst.
func (b *Buffer) copyOut(dst *Batch, row, g int) {
	t := &dst.Transitions
	d := b.cfg.ObsDim
	copyCol(t.Obs[row*d:(row+1)*d], b.obs[g*d:(g+1)*d])
	copyCol(t.NextObs[row*d:(row+1)*d], b.nextObs[g*d:(g+1)*d])
	if b.action != nil {
		copyCol(t.Action[row:row+1], b.action[g:g+1])
	} else {
		w := b.width
		copyCol(t.ActionVec[row*w:(row+1)*w], b.actionVec[g*w:(g+1)*w])
	}
	copyCol(t.Reward[row:row+1], b.reward[g:g+1])
	copyCol(t.Discount[row:row+1], b.discount[g:g+1])
	copyCol(t.Flags[row:row+1], b.flags[g:g+1])
	if b.episodeID != nil {
		copyCol(t.EpisodeID[row:row+1], b.episodeID[g:g+1])
		copyCol(t.EpisodeStep[row:row+1], b.episodeStep[g:g+1])
	}
	if b.globalStep != nil {
		copyCol(t.GlobalStep[row:row+1], b.globalStep[g:g+1])
	}
	if b.actorID != nil {
		copyCol(t.ActorID[row:row+1], b.actorID[g:g+1])
	}
	if b.stateHash != nil {
		copyCol(t.StateHash[row:row+1], b.stateHash[g:g+1])
		copyCol(t.NextStateHash[row:row+1], b.nextStateHash[g:g+1])
	}
	for i, f := range b.cfg.Floats {
		w := f.Width
		copyCol(t.Floats[i][row*w:(row+1)*w], b.floats[i][g*w:(g+1)*w])
	}
}
