package sampler

import (
	"fmt"

	"github.com/apexrl/apex/buffer"
)

// terGraph is TER's index over the buffer's contents (Hong et al. 2022
// §4.2): successor vertex → predecessor edges → the transitions (Refs)
// along each edge, and the terminal set V_E. Vertices are the buffer's
// exact state hashes. It is owned by one goroutine (the TER stage's).
//
// Every buffer slot holds at most one of the graph's transitions, found
// through slots: when a Watcher reports a slot's new occupant, the old one
// leaves the graph in O(1) (swap-remove), so the graph never holds more
// transitions than the buffer has slots, and stale ones only for slots
// overwritten since the last ingest (found stale when met and pruned).
// Vertices with no transition in or out are freed between sweeps (reap),
// never during one, so a vertex's visited mark lives for the whole sweep.
type terGraph struct {
	verts  []terVertex // by vertex id; free ones are on vfree
	vfree  []int32
	vindex map[uint64]int32 // state hash → vertex id
	edges  []terEdge        // by edge id; free ones are on efree
	efree  []int32
	eindex map[terEdgeKey]int32
	// slots[s] locates slot s's transition. Invariant: for every live edge
	// e and index i, slots[edges[e].refs[i].Slot] == {e+1, i, terminal}.
	slots []terSlot
	// terms is V_E: the vertices with a live terminal transition into them
	// (termIn > 0), each at index verts[v].term.
	terms []int32
	// succ is the vertices with a live transition into them (in > 0),
	// each at index verts[v].succ: the random roots before any terminal.
	succ []int32
	// dead is the vertices whose in and out counts dropped to 0 since the
	// last reap (some may have been revived).
	dead []int32
	// nrefs counts transitions, nverts vertices with in+out > 0.
	nrefs, nverts int
	edgeAction    bool
}

type terVertex struct {
	key   uint64
	preds []int32 // edges into the vertex, each at index edges[e].pi
	// in, out and termIn count live transitions into it, out of it, and
	// terminal ones into it.
	in, out, termIn int32
	term, succ      int32  // index in terms / succ, or -1
	epoch           uint64 // the last sweep that queued it
	dead            bool   // on the dead list
}

// terEdge is the transitions from vertex from to vertex to (with action,
// or -1 when edges are keyed by the state pair only).
type terEdge struct {
	to, from, action int32
	pi               int32 // index in verts[to].preds
	refs             []buffer.Ref
}

type terEdgeKey struct{ to, from, action int32 }

type terSlot struct {
	edge1 int32 // edge id + 1; 0: the slot has no transition in the graph
	idx   int32 // index in the edge's refs
	term  bool  // the transition is a true termination
}

func newTERGraph(capacity int, edgeAction bool) *terGraph {
	return &terGraph{
		vindex:     map[uint64]int32{},
		eindex:     map[terEdgeKey]int32{},
		slots:      make([]terSlot, capacity),
		edgeAction: edgeAction,
	}
}

// add indexes a newly written item, removing the slot's previous occupant
// first. O(1) expected.
func (g *terGraph) add(m buffer.Meta) {
	slot := m.Ref.Slot
	if g.slots[slot].edge1 != 0 {
		g.remove(slot)
	}
	u := g.vertex(m.StateHash)
	v := g.vertex(m.NextStateHash)
	k := terEdgeKey{to: v, from: u, action: -1}
	if g.edgeAction {
		k.action = m.Action
	}
	e, ok := g.eindex[k]
	if !ok {
		e = g.newEdge(k)
	}
	ed := &g.edges[e]
	ed.refs = append(ed.refs, m.Ref)
	term := m.Flags&buffer.FlagTerminal != 0
	g.slots[slot] = terSlot{edge1: e + 1, idx: int32(len(ed.refs) - 1), term: term}
	g.nrefs++

	if g.verts[u].in == 0 && g.verts[u].out == 0 {
		g.nverts++
	}
	g.verts[u].out++
	vx := &g.verts[v]
	if vx.in == 0 && vx.out == 0 {
		g.nverts++
	}
	if vx.in++; vx.in == 1 {
		vx.succ = int32(len(g.succ))
		g.succ = append(g.succ, v)
	}
	if term {
		if vx.termIn++; vx.termIn == 1 {
			vx.term = int32(len(g.terms))
			g.terms = append(g.terms, v)
		}
	}
}

// remove takes slot's transition out of the graph, freeing its edge if it
// was the last one. Vertices are left for reap. O(1).
func (g *terGraph) remove(slot uint32) {
	s := g.slots[slot]
	e := s.edge1 - 1
	ed := &g.edges[e]
	last := int32(len(ed.refs) - 1)
	if s.idx != last {
		moved := ed.refs[last]
		ed.refs[s.idx] = moved
		g.slots[moved.Slot].idx = s.idx
	}
	ed.refs = ed.refs[:last]
	if c := cap(ed.refs); c > 32 && len(ed.refs) < c/4 {
		ed.refs = append(make([]buffer.Ref, 0, c/2), ed.refs...)
	}
	g.slots[slot] = terSlot{}
	g.nrefs--
	u, v := ed.from, ed.to
	if last == 0 {
		g.freeEdge(e)
	}

	vx := &g.verts[v]
	if vx.in--; vx.in == 0 {
		g.unlist(&g.succ, vx.succ, func(w int32) *int32 { return &g.verts[w].succ })
		vx.succ = -1
	}
	if s.term {
		if vx.termIn--; vx.termIn == 0 {
			g.unlist(&g.terms, vx.term, func(w int32) *int32 { return &g.verts[w].term })
			vx.term = -1
		}
	}
	g.verts[u].out--
	g.mortal(v)
	if u != v {
		g.mortal(u)
	}
}

// mortal puts v on the dead list if nothing goes in or out of it; called
// once per vertex after a removal that lowered its counts.
func (g *terGraph) mortal(v int32) {
	vx := &g.verts[v]
	if vx.in == 0 && vx.out == 0 {
		g.nverts--
		if !vx.dead {
			vx.dead = true
			g.dead = append(g.dead, v)
		}
	}
}

// unlist swap-removes index i of *list; at(w) is where vertex w keeps its
// index in that list.
func (g *terGraph) unlist(list *[]int32, i int32, at func(w int32) *int32) {
	l := *list
	last := int32(len(l) - 1)
	if i != last {
		l[i] = l[last]
		*at(l[i]) = i
	}
	*list = l[:last]
}

// swapIn swaps entries i and j of list, keeping their owners' indices.
func swapIn(list []int32, i, j int, at func(w int32) *int32) {
	if i == j {
		return
	}
	list[i], list[j] = list[j], list[i]
	*at(list[i]), *at(list[j]) = int32(i), int32(j)
}

// vertex returns the id of the vertex with key, creating it. O(1) expected.
func (g *terGraph) vertex(key uint64) int32 {
	if v, ok := g.vindex[key]; ok {
		return v
	}
	var v int32
	if n := len(g.vfree); n > 0 {
		v = g.vfree[n-1]
		g.vfree = g.vfree[:n-1]
	} else {
		v = int32(len(g.verts))
		g.verts = append(g.verts, terVertex{})
	}
	g.verts[v] = terVertex{key: key, term: -1, succ: -1, preds: g.verts[v].preds[:0]}
	g.vindex[key] = v
	return v
}

func (g *terGraph) newEdge(k terEdgeKey) int32 {
	var e int32
	if n := len(g.efree); n > 0 {
		e = g.efree[n-1]
		g.efree = g.efree[:n-1]
	} else {
		e = int32(len(g.edges))
		g.edges = append(g.edges, terEdge{})
	}
	to := &g.verts[k.to]
	g.edges[e] = terEdge{to: k.to, from: k.from, action: k.action, pi: int32(len(to.preds))}
	to.preds = append(to.preds, e)
	g.eindex[k] = e
	return e
}

func (g *terGraph) freeEdge(e int32) {
	ed := &g.edges[e]
	delete(g.eindex, terEdgeKey{to: ed.to, from: ed.from, action: ed.action})
	to := &g.verts[ed.to]
	g.unlist(&to.preds, ed.pi, func(w int32) *int32 { return &g.edges[w].pi })
	*ed = terEdge{to: -1}
	g.efree = append(g.efree, e)
}

// reap frees the vertices on the dead list that are still dead. Called
// only while no sweep is in progress (the search queue is empty), so no
// queued vertex id is reused and no visited mark is lost. O(len(dead)).
func (g *terGraph) reap() {
	for _, v := range g.dead {
		vx := &g.verts[v]
		vx.dead = false
		if vx.in != 0 || vx.out != 0 {
			continue
		}
		delete(g.vindex, vx.key)
		if cap(vx.preds) > 32 {
			vx.preds = nil
		}
		g.vfree = append(g.vfree, v)
	}
	g.dead = g.dead[:0]
}

// check verifies the graph's invariants (tests and -tags invariants).
// O(graph size + buffer capacity).
func (g *terGraph) check() error {
	free := make([]bool, len(g.verts))
	for _, v := range g.vfree {
		free[v] = true
	}
	var in, out, termIn = make([]int32, len(g.verts)), make([]int32, len(g.verts)), make([]int32, len(g.verts))
	nrefs, nedges := 0, 0
	for e := range g.edges {
		ed := &g.edges[e]
		if ed.to < 0 {
			continue
		}
		nedges++
		if len(ed.refs) == 0 {
			return fmt.Errorf("edge %d (%d→%d) has no transitions", e, ed.from, ed.to)
		}
		if free[ed.to] || free[ed.from] {
			return fmt.Errorf("edge %d joins a freed vertex", e)
		}
		if got, ok := g.eindex[terEdgeKey{ed.to, ed.from, ed.action}]; !ok || got != int32(e) {
			return fmt.Errorf("edge %d is not indexed", e)
		}
		if p := g.verts[ed.to].preds; int(ed.pi) >= len(p) || p[ed.pi] != int32(e) {
			return fmt.Errorf("edge %d: preds index %d wrong", e, ed.pi)
		}
		for i, r := range ed.refs {
			s := g.slots[r.Slot]
			if s.edge1 != int32(e)+1 || s.idx != int32(i) {
				return fmt.Errorf("edge %d ref %d (slot %d): slot record %+v", e, i, r.Slot, s)
			}
			in[ed.to]++
			out[ed.from]++
			if s.term {
				termIn[ed.to]++
			}
		}
		nrefs += len(ed.refs)
	}
	if nrefs != g.nrefs || nedges != len(g.eindex) {
		return fmt.Errorf("%d transitions on %d edges, counted %d on %d", nrefs, nedges, g.nrefs, len(g.eindex))
	}
	slotted := 0
	for _, s := range g.slots {
		if s.edge1 != 0 {
			slotted++
		}
	}
	if slotted != nrefs {
		return fmt.Errorf("%d slot records for %d transitions", slotted, nrefs)
	}
	nverts := 0
	for v := range g.verts {
		vx := &g.verts[v]
		if free[v] {
			continue
		}
		if got, ok := g.vindex[vx.key]; !ok || got != int32(v) {
			return fmt.Errorf("vertex %d (key %#x) is not indexed", v, vx.key)
		}
		if vx.in != in[v] || vx.out != out[v] || vx.termIn != termIn[v] {
			return fmt.Errorf("vertex %d: in/out/termIn %d/%d/%d, edges say %d/%d/%d", v, vx.in, vx.out, vx.termIn, in[v], out[v], termIn[v])
		}
		if (vx.term >= 0) != (vx.termIn > 0) || (vx.term >= 0 && g.terms[vx.term] != int32(v)) {
			return fmt.Errorf("vertex %d: terminal index %d with %d terminal transitions in", v, vx.term, vx.termIn)
		}
		if (vx.succ >= 0) != (vx.in > 0) || (vx.succ >= 0 && g.succ[vx.succ] != int32(v)) {
			return fmt.Errorf("vertex %d: successor index %d with %d transitions in", v, vx.succ, vx.in)
		}
		if vx.in+vx.out > 0 {
			nverts++
		} else if !vx.dead {
			return fmt.Errorf("vertex %d has no transitions and is not on the dead list", v)
		}
	}
	if nverts != g.nverts || len(g.vindex)+len(g.vfree) != len(g.verts) {
		return fmt.Errorf("%d live vertices, counted %d; %d indexed + %d free of %d", nverts, g.nverts, len(g.vindex), len(g.vfree), len(g.verts))
	}
	return nil
}
