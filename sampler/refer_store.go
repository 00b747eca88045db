package sampler

import "github.com/apexrl/apex/buffer"

// The REFER stage's episode index: whole episodes assembled from the
// buffer's steps as a buffer.Watcher reports them, the finished ones in a
// FIFO and their steps in a dense list for uniform draws; the observer
// (the learner's controller) hears of each episode that finishes or is
// dropped. Everything here is owned by the stage's goroutine (the
// learner's).
//
// # Assembling episodes across stripes
//
// An actor hands its steps over in batches, and the buffer files each
// batch in the next stripe, so one episode's steps may lie in several
// stripes; the Watcher reports each stripe in insertion order but walks
// the stripes one after the other, so the steps of an episode may arrive
// out of order (the last before an earlier one). The index therefore
// files every step by (EpisodeID, EpisodeStep): an open episode is an
// array indexed by t, and it is finished when its last step (FlagTerminal
// or FlagTruncated, at t = T−1) has arrived and so have all T steps. Only
// then does it become visible to Sample, with its steps found in order by
// t, whatever stripes hold them.
//
// # Losing steps
//
// A step's slot may be overwritten by the buffer (its FIFO per stripe) or
// lapped before it was reported. When the Watcher reports a slot's new
// occupant, the episode that held the slot loses a step: a finished
// episode is dropped whole (Overwritten); an open one is marked dead, and
// its other steps are ignored as they arrive. An open episode that
// receives no step for a whole buffer's capacity of inserts (one of its
// steps was lapped, or its actor stopped) is abandoned, so the open set
// stays bounded.

// referNoSlot marks a step of an open episode that has not arrived.
const referNoSlot = ^uint32(0)

type referEpState uint8

const (
	epFree referEpState = iota // on the free list
	epOpen                     // collecting steps, in the open map
	epDead                     // lost a step: ignores the rest, in the open map until abandoned
	epLive                     // finished, sampleable, in the FIFO
)

// referEp is one episode's record.
type referEp struct {
	id uint64
	// serial numbers finished episodes in finishing order; FIFO entries
	// and touched entries carry it, so a record reused by a later episode
	// is never mistaken for the one they named.
	serial uint64
	// slots[t] is the slot of step t (referNoSlot until it arrives).
	// Invariant (open, live): gen[slots[t]] != 0, ep[slots[t]] == this
	// record and t[slots[t]] == t for every arrived t.
	slots   []uint32
	arrived int32
	// length is T once the last step arrived, else 0.
	length int32
	state  referEpState
	// truncated: the episode was cut by a time limit (its last step has
	// FlagTruncated and not FlagTerminal), so Retrace bootstraps from
	// vboot = V(s_T) as the actor stored it; otherwise V_T = 0.
	truncated bool
	vboot     float64
	// lastSeen is the stage's ingest count when a step of the episode
	// last arrived (open and dead records).
	lastSeen uint64
}

// referRef names a finished episode in the FIFO: its record and its
// serial.
type referRef struct {
	h      int32
	serial uint64
}

// newEpisode returns a fresh open record for episode id (not yet in the
// open map).
func (r *REFER) newEpisode(id uint64) int32 {
	var h int32
	if n := len(r.free); n > 0 {
		h = r.free[n-1]
		r.free = r.free[:n-1]
	} else {
		h = int32(len(r.eps))
		r.eps = append(r.eps, referEp{})
	}
	r.eps[h] = referEp{id: id, state: epOpen, slots: r.eps[h].slots[:0]}
	return h
}

// ingest files one newly written step (the Watcher's visit).
func (r *REFER) ingest(m buffer.Meta) {
	r.ingested++
	slot := m.Ref.Slot
	if r.gen[slot] != 0 {
		r.lose(slot) // the previous occupant was overwritten
	}
	if !r.buf.GatherRef(r.one, 0, m.Ref) {
		r.unread++ // overwritten since reported: its successor will be
	} else {
		r.file(m)
	}
	if r.ingested >= r.nextGC {
		r.gc()
	}
}

// file puts the step just read into r.one into its episode.
func (r *REFER) file(m buffer.Meta) {
	slot := m.Ref.Slot
	h, ok := r.open[m.EpisodeID]
	if !ok {
		h = r.newEpisode(m.EpisodeID)
		r.open[m.EpisodeID] = h
	}
	e := &r.eps[h]
	e.lastSeen = r.ingested
	if e.state == epDead {
		return
	}
	t := int(m.EpisodeStep)
	end := m.Flags&(buffer.FlagTerminal|buffer.FlagTruncated) != 0
	if t < 0 || t >= r.cap || (e.length > 0 && t >= int(e.length)) ||
		(t < len(e.slots) && e.slots[t] != referNoSlot) || (end && len(e.slots) > t+1) {
		r.malformed++ // a repeated step, one past the end, or an end before a later step
		r.kill(h)
		return
	}
	for len(e.slots) <= t {
		e.slots = append(e.slots, referNoSlot)
	}
	e.slots[t] = slot
	e.arrived++
	r.gen[slot], r.ep[slot], r.t[slot] = m.Ref.Gen, h, int32(t)
	r.rew[slot] = float64(r.one.Reward[0])
	r.disc[slot] = float64(r.one.Discount[0])
	if end {
		e.length = int32(t + 1)
		e.truncated = m.Flags&buffer.FlagTerminal == 0
		e.vboot = 0
		if e.truncated {
			e.vboot = float64(r.one.Floats[r.bootCol][0])
		}
	}
	if e.length > 0 && e.arrived == e.length {
		r.finish(h)
	}
}

// lose handles the overwrite of slot's registered step.
func (r *REFER) lose(slot uint32) {
	h := r.ep[slot]
	switch r.eps[h].state {
	case epLive:
		r.dropLive(h)
		r.overwritten++
	case epOpen:
		r.kill(h)
	}
}

// kill turns an open episode into a dead one: its slots are released and
// its later steps will be ignored.
func (r *REFER) kill(h int32) {
	e := &r.eps[h]
	for _, s := range e.slots {
		if s != referNoSlot {
			r.gen[s] = 0
		}
	}
	e.slots = e.slots[:0]
	e.arrived, e.state = 0, epDead
}

// finish makes open episode h sampleable: its steps join the live list,
// the observer hears of it, and the oldest episodes are evicted.
func (r *REFER) finish(h int32) {
	e := &r.eps[h]
	delete(r.open, e.id)
	r.serial++
	e.state, e.serial = epLive, r.serial
	for _, s := range e.slots {
		r.live.Add(s)
	}
	r.nEps++
	r.fifo = append(r.fifo, referRef{h: h, serial: e.serial})
	if r.obs != nil {
		r.report(h)
	}
	r.evict()
}

// evict drops the oldest finished episodes while the rest would still
// hold at least MaxSteps steps (refer.md §1, "drop the oldest while
// N − len(oldest) ≥ N_max"), so once the stage has filled,
//
//	MaxSteps ≤ N < MaxSteps + len(oldest episode)
//
// after every finished episode: N stays within one episode of MaxSteps.
func (r *REFER) evict() {
	for {
		h, ok := r.oldest()
		if !ok || r.live.Len()-int(r.eps[h].length) < r.maxSteps {
			return
		}
		r.dropLive(h)
		r.evicted++
	}
}

// oldest returns the oldest live episode, discarding FIFO entries of
// episodes dropped out of order (overwritten). Amortised O(1).
func (r *REFER) oldest() (int32, bool) {
	for r.fhead < len(r.fifo) {
		f := r.fifo[r.fhead]
		if e := &r.eps[f.h]; e.state == epLive && e.serial == f.serial {
			return f.h, true
		}
		r.fhead++
	}
	if r.fhead > 0 {
		r.fifo, r.fhead = r.fifo[:0], 0
	}
	return 0, false
}

// dropLive removes live episode h: the observer hears of it first, its
// steps leave the live list, and the record is freed. O(length).
func (r *REFER) dropLive(h int32) {
	if r.obs != nil {
		r.obs.EpisodeDropped(h)
	}
	e := &r.eps[h]
	for _, s := range e.slots {
		r.live.Remove(s)
		r.gen[s] = 0
	}
	r.nEps--
	e.slots = e.slots[:0]
	e.state = epFree
	r.free = append(r.free, h)
	if r.fhead > len(r.fifo)/2 && r.fhead > 64 {
		r.fifo = r.fifo[:copy(r.fifo, r.fifo[r.fhead:])]
		r.fhead = 0
	}
}

// gc abandons open episodes (and forgets dead ones) that received no step
// for a whole capacity of ingested items. It runs every Capacity/2
// ingests: O(open episodes).
func (r *REFER) gc() {
	r.nextGC = r.ingested + uint64(max(r.cap/2, 1))
	for id, h := range r.open {
		e := &r.eps[h]
		if r.ingested-e.lastSeen <= uint64(r.cap) {
			continue
		}
		if e.state == epOpen {
			r.kill(h)
			r.abandoned++
		}
		delete(r.open, id)
		e.state = epFree
		r.free = append(r.free, h)
	}
}
