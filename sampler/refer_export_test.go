package sampler

import "sort"

// CheckREFER verifies the invariants of r's episode index.
func CheckREFER(r *REFER) error { return r.check() }

// REFERFarCounter is r's far counter n_far.
func REFERFarCounter(r *REFER) int { return r.nFar }

// REFERStoredRhos returns the stored rho of every stored step.
func REFERStoredRhos(r *REFER) []float64 {
	out := make([]float64, 0, len(r.live))
	for _, s := range r.live {
		out = append(out, r.rho[s])
	}
	return out
}

// REFERStep is the stage's state of one stored step.
type REFERStep struct {
	Slot             uint32
	Reward, Discount float64 // as stored (unscaled reward)
	Rho, V, Qret, KL float64
	Refreshed        bool
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
			ep.Steps = append(ep.Steps, REFERStep{Slot: s, Reward: r.rew[s], Discount: r.disc[s],
				Rho: r.rho[s], V: r.v[s], Qret: r.qret[s], KL: r.kl[s], Refreshed: r.klSet[s]})
		}
		out = append(out, ep)
	}
	return out
}

// REFERSetStep overwrites the stored rho and V of slot (no counter
// update: tests of the sweep only).
func REFERSetStep(r *REFER, slot uint32, rho, v float64) { r.rho[slot], r.v[slot] = rho, v }

// REFERSweepAll recomputes every stored episode's Qret from its end.
func REFERSweepAll(r *REFER) {
	for i := r.fhead; i < len(r.fifo); i++ {
		f := r.fifo[i]
		if e := &r.eps[f.h]; e.state == epLive && e.serial == f.serial {
			r.sweep(f.h, int(e.length)-1)
		}
	}
}

// REFERRewardScale is the factor rewards enter Retrace with.
func REFERRewardScale(r *REFER) float64 { return r.rscale }

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
