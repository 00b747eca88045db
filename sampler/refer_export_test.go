package sampler

import "sort"

// CheckREFER verifies the invariants of r's episode index.
func CheckREFER(r *REFER) error { return r.check() }

// REFERStep is the stage's record of one stored step.
type REFERStep struct {
	Slot             uint32
	Reward, Discount float64 // as stored
}

// REFEREpisode is one stored (finished) episode, steps in order.
type REFEREpisode struct {
	ID        uint64
	Truncated bool
	VBoot     float64
	Steps     []REFERStep
}

// REFEREpisodes returns the stored episodes in FIFO order (oldest first).
func REFEREpisodes(r *REFER) []REFEREpisode {
	var out []REFEREpisode
	for i := r.fhead; i < len(r.fifo); i++ {
		f := r.fifo[i]
		e := &r.eps[f.h]
		if e.state != epLive || e.serial != f.serial {
			continue
		}
		ep := REFEREpisode{ID: e.id, Truncated: e.truncated, VBoot: e.vboot}
		for _, s := range e.slots {
			ep.Steps = append(ep.Steps, REFERStep{Slot: s, Reward: r.rew[s], Discount: r.disc[s]})
		}
		out = append(out, ep)
	}
	return out
}

// REFERRowSlots returns the slots of the last Sample's rows.
func REFERRowSlots(r *REFER) []uint32 { return append([]uint32(nil), r.rowSlot...) }

// REFEROpenIDs lists the ids of open (or dead) episodes, sorted.
func REFEROpenIDs(r *REFER) []uint64 {
	var ids []uint64
	for id := range r.open {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}
