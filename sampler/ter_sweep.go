package sampler

import (
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
)

// terSweep is the reverse breadth-first sweep of TER (Hong et al. 2022,
// Algorithm 1 as the released code runs it): one FIFO search queue and one
// visited mark for all roots (a multi-source BFS), and a FIFO batch queue
// of chosen transitions that survives sweep restarts.
type terSweep struct {
	// n is the current sweep's number (1, 2, ...; 0 before the first). A
	// vertex was queued in this sweep iff its epoch == n: the visited set
	// is reset in O(1) by n++.
	n      uint64
	search []int32 // FIFO of vertices; search[shead:] are pending
	shead  int
	roots  int // search[:roots] are the current sweep's roots
	// queue holds the chosen transitions in sweep order; queue[qhead:] are
	// pending. Bounded: Sample calls fill only once the queue is drained
	// (pop then resets it), and fill stops as soon as it holds the rows
	// still needed, so it never holds B + Preds items.
	queue []terItem
	qhead int
}

// terItem is one queued transition and the sweep that chose it.
type terItem struct {
	ref   buffer.Ref
	sweep uint64
}

// terTrace observes the sweep (tests only; nil in use).
type terTrace struct {
	expand func(sweep, vertex uint64, root bool)
	queue  func(sweep, to, from uint64, ref buffer.Ref)
}

func (s *terSweep) pending() int { return len(s.queue) - s.qhead }

func (s *terSweep) pop() terItem {
	it := s.queue[s.qhead]
	s.qhead++
	if s.qhead == len(s.queue) {
		s.queue, s.qhead = s.queue[:0], 0
	}
	return it
}

// idle reports whether no sweep is in progress (the search queue is empty).
func (s *terSweep) idle() bool { return s.shead == len(s.search) }

// fill runs the sweep until need transitions are queued, restarting it
// when the search queue runs dry, or until no sweep can start or a fresh
// sweep found nothing. Cost: O(vertices expanded × Preds) plus the stale
// transitions pruned on the way (each pruned once).
func (t *TER) fill(rng *rand.Rand, need int) {
	s := &t.sw
	for s.pending() < need {
		if s.idle() {
			s.search, s.shead = s.search[:0], 0
			if !t.startSweep(rng) {
				return
			}
		}
		i := s.shead
		s.shead++
		t.expand(rng, s.search[i], i < s.roots)
	}
}

// startSweep picks up to Roots distinct root vertices uniformly from V_E
// (or, before any terminal exists and under TERRandomRoots, from the
// vertices with a transition into them) and queues them as a new sweep.
// It reports false when there is no root. An empty sweep can only follow
// pruning that removed its roots' every transition, so fill's loop ends.
func (t *TER) startSweep(rng *rand.Rand) bool {
	g := t.g
	g.reap()
	src, at := g.terms, func(w int32) *int32 { return &g.verts[w].term }
	if len(src) == 0 {
		if t.cfg.NoTerminalFallback != TERRandomRoots {
			return false
		}
		src, at = g.succ, func(w int32) *int32 { return &g.verts[w].succ }
	}
	if len(src) == 0 {
		return false
	}
	s := &t.sw
	s.n++
	t.st.sweeps.Add(1)
	k := min(t.cfg.Roots, len(src))
	s.roots = k
	for j := range k { // partial Fisher-Yates: src[:k] is a uniform k-subset
		swapIn(src, j, j+rng.IntN(len(src)-j), at)
		v := src[j]
		g.verts[v].epoch = s.n
		s.search = append(s.search, v)
	}
	return true
}

// expand adds up to Preds transitions into vertex v to the batch queue:
// distinct predecessor edges chosen uniformly among those that still hold
// a live transition, one live transition chosen uniformly from each; the
// predecessors not yet queued in this sweep join the search queue. root
// says v is one of the sweep's roots (for the trace).
func (t *TER) expand(rng *rand.Rand, v int32, root bool) {
	g, s := t.g, &t.sw
	t.st.expanded.Add(1)
	if t.trace != nil {
		t.trace.expand(s.n, g.verts[v].key, root)
	}
	at := func(w int32) *int32 { return &g.edges[w].pi }
	for j := 0; j < t.cfg.Preds && j < len(g.verts[v].preds); {
		preds := g.verts[v].preds
		swapIn(preds, j, j+rng.IntN(len(preds)-j), at)
		e := preds[j]
		ref, ok := t.pickRef(rng, e)
		if !ok {
			continue // e was freed: preds[j] is now an edge not yet tried
		}
		s.queue = append(s.queue, terItem{ref: ref, sweep: s.n})
		t.st.queued.Add(1)
		u := g.edges[e].from
		if t.trace != nil {
			t.trace.queue(s.n, g.verts[v].key, g.verts[u].key, ref)
		}
		if g.verts[u].epoch != s.n {
			g.verts[u].epoch = s.n
			s.search = append(s.search, u)
		}
		j++
	}
}

// pickRef returns a uniformly chosen live transition of edge e, pruning the
// stale ones it meets (their slots were overwritten since they were
// indexed). ok is false when none was live: the edge has been freed then.
func (t *TER) pickRef(rng *rand.Rand, e int32) (buffer.Ref, bool) {
	g := t.g
	for n := len(g.edges[e].refs); n > 0; n = len(g.edges[e].refs) {
		r := g.edges[e].refs[rng.IntN(n)]
		if cur, _, ok := t.buf.SlotPriority(int(r.Slot)); ok && cur == r {
			return r, true
		}
		g.remove(r.Slot) // frees e with its last transition (refs nil)
		t.st.pruned.Add(1)
	}
	return buffer.Ref{}, false
}
