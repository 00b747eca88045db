package buffer

// Meta is the small per-item record a Watcher reports for one newly written
// item: its Ref and the scalar columns a selection stage indexes by (TER's
// graph keys vertices by the state hashes and finds terminals by the
// flags). Columns the Config does not store read as 0.
type Meta struct {
	Ref           Ref
	Flags         uint32 // FlagTerminal | FlagTruncated
	Action        int32  // discrete action; 0 for a continuous buffer
	StateHash     uint64 // if Config.StateHash
	NextStateHash uint64 // if Config.StateHash
	EpisodeID     uint64 // if Config.Episode
	EpisodeStep   int32  // if Config.Episode
}

// Watcher reports the items written since its previous Poll, for one owner
// that keeps an index over the buffer's contents (TER's state graph). It
// reads only the stripes' completion counters and the items' own leaf
// words: Insert does no extra work for it, and any number of Watchers may
// follow one buffer.
//
// Each stripe is a FIFO ring, so the k-th item ever written to a stripe
// (its position k) lands in local slot k mod cap and is that slot's
// (k/cap+1)-th write; since every write advances the slot's generation by
// one step, the generation of a published position is a function of the
// position. Poll walks each stripe from the position after the last one it
// reported up to the stripe's completed-insert count, and for each
// position reads the slot's leaf word:
//
//   - the generation of this position: the item is read (Meta's columns,
//     checked against the generation afterwards, a sequence lock) and
//     reported;
//   - anything else, while the stripe's cursor shows no later write has
//     claimed the slot: the position's writer has not finished (the slot is
//     being written, or its claim is not made yet), so the stripe's walk
//     stops there until the next Poll;
//   - anything else once a later write has claimed the slot: the item was
//     lapped (overwritten before this Watcher saw it); it is skipped and
//     counted in Lapped. Positions more than a stripe's capacity behind
//     the cursor are skipped in one step, without reading their slots.
//
// So every item is reported at most once (per generation: a Ref repeats
// only after its slot has been overwritten 2^23-1 times), never torn, in
// insertion order within each stripe; stripes are walked in index order.
// An item whose slot is overwritten after it was reported is not reported
// again as removed: the owner learns it from its next occupant's report
// (same Slot, new Gen) or from a stale Ref. A new Watcher starts at the
// oldest item stored (every item currently held is reported by its first
// Poll), so it may be made at any time, also over a loaded checkpoint.
//
// Concurrency: Poll must not be called from two goroutines at once (a
// Watcher is owned by one goroutine, like a learner's stage); it may run
// concurrently with Insert, sampling, Gather*, UpdatePriorities and other
// Watchers. A Watcher must not be copied after first use.
type Watcher struct {
	b *Buffer
	// pos[s] is stripe s's next position to look at. It only grows; every
	// position below it (and at or above its starting value) was reported
	// or counted in lapped.
	pos              []uint64
	reported, lapped uint64
}

// NewWatcher returns a Watcher positioned at the oldest item of every
// stripe (or at the first slot a writer is still filling). O(Stripes).
func (b *Buffer) NewWatcher() *Watcher {
	w := &Watcher{b: b, pos: make([]uint64, len(b.stripes))}
	for s := range b.stripes {
		c := b.stripes[s].cursor.Load()
		if sc := uint64(b.lay.stripeCap(s)); c > sc {
			w.pos[s] = c - sc
		}
	}
	return w
}

// Poll calls visit for every item written since the previous call (see
// Watcher) and returns how many it reported. visit must not call Poll. A
// nil visit skips the items (they still count as reported).
//
// Cost: O(Stripes) atomic loads, plus per reported item two loads of its
// leaf word and one load per Meta column (no allocation); a position that
// must be classified as lapped or unfinished costs one more load of the
// stripe's cursor. Lapped runs are skipped in O(1).
func (w *Watcher) Poll(visit func(Meta)) int {
	if visit == nil {
		visit = func(Meta) {}
	}
	b := w.b
	n := 0
	for s := range b.stripes {
		st := &b.stripes[s]
		p := w.pos[s]
		done := st.written.Load()
		if done <= p {
			continue
		}
		sc := uint64(b.lay.stripeCap(s))
		if c := st.cursor.Load(); c > sc && p < c-sc {
			w.lapped += c - sc - p // their slots have been claimed by later writes
			p = c - sc
		}
		off := b.lay.stripeOffset(s)
		for ; p < done; p++ {
			l := int(p % sc)
			li := b.lay.node(0, s, l)
			want := posGen(p / sc)
			tag := b.tree[0][li].Load() >> prioBits
			if tag == want {
				m := b.readMeta(off + l)
				if b.tree[0][li].Load()>>prioBits == tag {
					m.Ref = Ref{Slot: uint32(off + l), Gen: uint32(tag)}
					visit(m)
					w.reported++
					n++
					continue
				}
				// Overwritten while read: only a later write changes the
				// tag of a published position; fall through to count it.
			}
			if st.cursor.Load() > p+sc {
				w.lapped++ // a later write claimed the slot
				continue
			}
			break // this position's write has not completed: next Poll
		}
		w.pos[s] = p
	}
	return n
}

// Reported is the number of items Poll has reported, ever. O(1).
func (w *Watcher) Reported() uint64 { return w.reported }

// Lapped is the number of items overwritten before Poll could report them,
// ever: insert faster than the owner polls, for a whole stripe's capacity,
// and the oldest unreported items are lost to it. O(1).
func (w *Watcher) Lapped() uint64 { return w.lapped }

// posGen is the generation a slot carries once its (lap+1)-th write is
// published: writes go 0 → claim (odd) → publish (even), and nextGen skips
// 0 when the 24-bit tag wraps, so published tags cycle through
// 2, 4, ..., 2^24-2.
func posGen(lap uint64) uint64 {
	const period = (genMask+1)/2 - 1 // even non-zero tags
	return 2 * (lap%period + 1)
}

// readMeta loads Meta's fields of global slot g (no check; see Poll).
func (b *Buffer) readMeta(g int) Meta {
	var m Meta
	l := &b.rl
	p := b.rec(g)
	m.Flags = load(field[uint32](p, l.flags))
	if l.action >= 0 {
		m.Action = load(field[int32](p, l.action))
	}
	if l.stateHash >= 0 {
		m.StateHash = load(field[uint64](p, l.stateHash))
		m.NextStateHash = load(field[uint64](p, l.nextStateHash))
	}
	if l.episodeID >= 0 {
		m.EpisodeID = load(field[uint64](p, l.episodeID))
		m.EpisodeStep = load(field[int32](p, l.episodeStep))
	}
	return m
}
