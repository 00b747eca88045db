package sampler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/xmath"
)

// TER defaults (Hong et al. 2022, arXiv 2203.15845, §4.4, App. B.5 and the
// released code).
const (
	// DefaultTEREta is the share of each batch drawn by PER: 0.5, the
	// Minigrid value. The paper finds Minigrid insensitive to it and
	// Sokoban best at 0.1-0.2 (Fig. 5: too much sweep converges
	// prematurely there); 0.5 is the safe middle for a task we know nothing
	// about, since half of every batch still reaches the states the sweep
	// cannot (those with no path to a terminal).
	DefaultTEREta = 0.5
	// DefaultTERRoots is K, the terminal vertices a sweep starts from.
	DefaultTERRoots = 8
	// DefaultTERPreds is P_max, the predecessors one expansion queues (the
	// paper's 3; the Minigrid scripts use 1).
	DefaultTERPreds = 3
)

// TERFallback says what TER does while the graph has no terminal vertex
// (Algorithm 1 is silent; the released code uses random vertices).
type TERFallback uint8

const (
	// TERRandomRoots starts sweeps from vertices drawn uniformly among
	// those with a transition into them, as the released code does.
	TERRandomRoots TERFallback = iota
	// TERPEROnly draws whole batches from PER until a terminal exists.
	TERPEROnly
)

func (f TERFallback) String() string {
	switch f {
	case TERRandomRoots:
		return "random-roots"
	case TERPEROnly:
		return "per-only"
	}
	return fmt.Sprintf("TERFallback(%d)", uint8(f))
}

// TERConfig configures the TER stage. Fields are used as given (0 is a
// meaningful Eta); start from DefaultTERConfig.
type TERConfig struct {
	// Eta is the share of each batch of B rows drawn by PER: the first
	// floor(Eta·B) rows (computed with a 1e-9 tolerance, so 0.3·10 gives 3
	// despite rounding); the rest come from the sweep. In [0, 1]. 0 replays
	// the sweep only, 1 is PER. Default 0.5 (see DefaultTEREta).
	Eta float64
	// Roots is K, the number of distinct terminal vertices a sweep starts
	// from (fewer if V_E is smaller). >= 1. Paper: 8.
	Roots int
	// Preds is P_max, the most predecessor edges one expanded vertex
	// contributes a transition from. >= 1. Paper: 3.
	Preds int
	// PER configures the PER part: its priorities (Update and Priority
	// apply to every row) and the importance weights of its rows.
	PER PERConfig
	// EdgeAction keys edges by (predecessor, action) rather than by the
	// state pair (v, v'): two actions leading from v to v' are then two
	// predecessors, each contributing a transition, as TER's tabular NChain
	// script keys them. Needs discrete actions. Default false (the paper).
	EdgeAction bool
	// NoTerminalFallback is what to do before the graph has a terminal
	// vertex. Default TERRandomRoots.
	NoTerminalFallback TERFallback
}

// DefaultTERConfig is the paper's setting: Eta 0.5, K = 8 roots, P_max = 3
// predecessors, edges keyed by state pairs, random roots before any
// terminal, and DefaultPERConfig(betaSteps) for the PER part.
func DefaultTERConfig(betaSteps int64) TERConfig {
	return TERConfig{
		Eta:   DefaultTEREta,
		Roots: DefaultTERRoots,
		Preds: DefaultTERPreds,
		PER:   DefaultPERConfig(betaSteps),
	}
}

// Validate reports the first field out of range, wrapping buffer.ErrConfig.
func (c TERConfig) Validate() error {
	switch {
	case !(c.Eta >= 0 && c.Eta <= 1):
		return fmt.Errorf("%w: ter: Eta must be in [0, 1], got %v", buffer.ErrConfig, c.Eta)
	case c.Roots < 1:
		return fmt.Errorf("%w: ter: Roots (K) must be >= 1, got %d", buffer.ErrConfig, c.Roots)
	case c.Preds < 1:
		return fmt.Errorf("%w: ter: Preds (P_max) must be >= 1, got %d", buffer.ErrConfig, c.Preds)
	case c.NoTerminalFallback > TERPEROnly:
		return fmt.Errorf("%w: ter: unknown NoTerminalFallback %v", buffer.ErrConfig, c.NoTerminalFallback)
	}
	if err := c.PER.Validate(); err != nil {
		return fmt.Errorf("ter: %w", err)
	}
	return nil
}

// PERRows is the number of PER rows in a batch of n: floor(Eta·n).
func (c TERConfig) PERRows(n int) int {
	return min(n, max(0, int(math.Floor(c.Eta*float64(n)+1e-9))))
}

// TER is Topological Experience Replay (Hong et al., ICLR 2022, arXiv
// 2203.15845): stored transitions form a graph whose vertices are states
// (the buffer's exact state hashes, buffer.Config.StateHash) and whose
// edges lead from a state to its successors; batches replay the graph
// backwards from terminal states in breadth-first order, so each value is
// updated after the values it bootstraps from, and trajectories stitch at
// shared states. A fixed share of every batch comes from PER (§4.4).
//
// The graph maps a successor vertex to its predecessor edges and each edge
// to its transitions (Refs); V_E is the set of vertices reached by a true
// termination (buffer.FlagTerminal; a time-limit truncation is not
// terminal). A sweep is a multi-source FIFO BFS from up to Roots terminal
// vertices drawn uniformly: each expanded vertex queues one uniformly
// chosen live transition from each of up to Preds predecessor edges chosen
// uniformly, and its predecessors join the search queue unless this sweep
// already queued them (so no vertex is expanded twice per sweep; the
// visited set is reset in O(1) by a sweep counter). When the search queue
// runs dry a new sweep starts; transitions already queued are kept.
//
// Sample fills rows [0, floor(Eta·B)) by PER (stratified proportional over
// the same buffer) and rows [floor(Eta·B), B) with queued transitions in
// sweep order. A queued transition whose slot was overwritten before it is
// read is dropped (counted) and the next one taken: never trained on. If
// the graph has nothing to give (empty, or no terminal yet under
// TERPEROnly) the remaining rows come from PER too (counted as fallbacks).
// Weights gives PER rows their importance weights and sweep rows weight 1
// (the released code); Update writes PER priorities for every row.
//
// The graph follows the buffer through a buffer.Watcher: each Sample first
// indexes the items written since the previous one, and a slot's new
// occupant replaces the old one in O(1), so the graph holds at most one
// transition per buffer slot, with no periodic compaction: memory is
// O(Capacity), about 12 bytes per slot and 8 per transition plus some 100
// bytes per vertex and per edge (at most one of each per transition).
// Transitions overwritten since the last ingest are pruned when the sweep
// meets them; vertices with nothing left in or out are freed when no sweep
// is in progress (the next sweep start, or a Sample between sweeps),
// terminals as soon as their last terminal transition goes.
//
// Concurrency: Priority may be called from any goroutine and Stats from
// any goroutine; Sample, Weights, Update, FromSweep and Sweep by one
// goroutine at a time (the learner), concurrently with inserts into the
// buffer. A TER must not be copied after first use.
type TER struct {
	buf   *buffer.Buffer
	cfg   TERConfig
	per   *PER
	watch *buffer.Watcher
	g     *terGraph
	sw    terSweep
	add   func(buffer.Meta) // g.add, bound once
	// src[row] is the sweep that queued row of the last Sample, 0 for a
	// PER row.
	src       []uint64
	perB, one *buffer.Batch // refs-only scratch batches for PER draws
	st        terCounters
	trace     *terTrace
}

// terCounters are TER's Stats, atomics so Stats may be read from any
// goroutine (the sizes are published at the end of each Sample).
type terCounters struct {
	sweeps, expanded, queued, dropped, pruned, fallbacks, redraws atomic.Uint64
	ingested, lapped                                              atomic.Uint64
	vertices, terminals, edges, transitions                       atomic.Int64
}

var (
	_ Selector = (*TER)(nil)
	_ Weighter = (*TER)(nil)
)

// maxPERRedraws bounds the re-draws of one PER row whose item was
// overwritten between its draw and its copy.
const maxPERRedraws = 64

// NewTER validates cfg and returns a TER stage over buf, which must store
// state hashes (buffer.Config.StateHash; discrete actions too with
// EdgeAction, and a min tree for the PER part's NormalizeBuffer). It
// indexes the items already stored (O(Size)); later ones are indexed by
// each Sample. O(Capacity) memory for the slot index.
func NewTER(buf *buffer.Buffer, cfg TERConfig) (*TER, error) {
	if buf == nil {
		return nil, fmt.Errorf("%w: ter: nil buffer", buffer.ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	bc := buf.Config()
	if !bc.StateHash {
		return nil, fmt.Errorf("%w: ter: the buffer must store state hashes (buffer.Config.StateHash): TER's graph keys vertices by them", buffer.ErrConfig)
	}
	if cfg.EdgeAction && bc.Action != buffer.Discrete {
		return nil, fmt.Errorf("%w: ter: EdgeAction keys edges by discrete actions, the buffer's are %v", buffer.ErrConfig, bc.Action)
	}
	per, err := NewPER(buf, cfg.PER)
	if err != nil {
		return nil, fmt.Errorf("ter: %w", err)
	}
	t := &TER{
		buf:   buf,
		cfg:   cfg,
		per:   per,
		watch: buf.NewWatcher(),
		g:     newTERGraph(buf.Capacity(), cfg.EdgeAction),
		perB:  &buffer.Batch{},
		one:   &buffer.Batch{Refs: make([]buffer.Ref, 1), Prob: make([]float64, 1)},
	}
	t.add = t.g.add
	t.watch.Poll(t.add)
	t.publish()
	return t, nil
}

// Config returns the stage's configuration. O(1).
func (t *TER) Config() TERConfig { return t.cfg }

// Sample fills every row of dst (made by the buffer's NewBatch): it first
// indexes the items written since the last call, then draws the PER rows
// and takes the sweep rows as the type doc says. dst.Prob holds P(i) for
// PER rows; a sweep row has no draw probability, and its Prob is 1/Size,
// so the importance weight (N·P)^-beta of a sweep row is 1 whatever beta,
// as Weights gives it. Size, Total and MinProb come from the PER draw (or
// the buffer's state when no row is PER). FromSweep and Sweep tell the
// rows apart until the next call.
//
// Errors: buffer.ErrEmpty, ErrBatchSize (0 rows or more rows than items),
// and PER's (ErrZeroMass when every priority is 0 and some row must come
// from PER; ErrRetries).
//
// Cost: O(new items) to index them, O(rows + vertices expanded × Preds +
// stale transitions pruned) for the sweep, and PER's O(rows·log Capacity)
// descents; one copy per row. No allocation once queues and scratch have
// grown.
func (t *TER) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	if err := checkArgs("ter", rng, dst); err != nil {
		return err
	}
	t.watch.Poll(t.add)
	if t.sw.idle() {
		t.g.reap() // no sweep holds vertex marks (Eta = 1 never starts one)
	}
	defer t.publish()
	n := dst.Len()
	size := t.buf.Size()
	if size == 0 {
		return fmt.Errorf("%w: ter: no items to sample", buffer.ErrEmpty)
	}
	if n < 1 || n > size {
		return fmt.Errorf("%w: ter: %d rows requested, %d items stored", buffer.ErrBatchSize, n, size)
	}
	if cap(t.src) < n {
		t.src = make([]uint64, n)
	}
	t.src = t.src[:n]
	clear(t.src)

	nPER := t.cfg.PERRows(n)
	row := nPER
	for row < n {
		if t.sw.pending() == 0 {
			t.fill(rng, n-row)
			if t.sw.pending() == 0 {
				break
			}
		}
		it := t.sw.pop()
		if !t.buf.GatherRef(dst, row, it.ref) {
			t.st.dropped.Add(1) // overwritten since it was chosen
			continue
		}
		t.src[row] = it.sweep
		row++
	}
	if row < n {
		t.st.fallbacks.Add(uint64(n - row))
	}
	if err := t.samplePER(rng, dst, nPER, row); err != nil {
		return err
	}
	p := 1 / float64(dst.Size)
	for r := nPER; r < row; r++ {
		dst.Prob[r] = p
	}
	if invariants && len(t.g.slots) <= 1<<14 {
		if err := t.g.check(); err != nil {
			panic("sampler: ter: broken graph invariant: " + err.Error())
		}
	}
	return nil
}

// samplePER draws rows [0, nPER) and [sweepEnd, dst.Len()) of dst by one
// stratified proportional draw. A row whose item is overwritten between
// the draw and the copy is re-drawn over the whole mass (counted).
func (t *TER) samplePER(rng *rand.Rand, dst *buffer.Batch, nPER, sweepEnd int) error {
	n := dst.Len()
	m := nPER + n - sweepEnd
	if m == 0 {
		dst.Size, dst.Total, dst.MinProb = t.buf.Size(), t.buf.TotalPriority(), 0
		if p, ok := t.buf.MinPriority(); ok && dst.Total > 0 {
			dst.MinProb = p / dst.Total
		}
		return nil
	}
	pb := t.perB
	if cap(pb.Refs) < m {
		pb.Refs, pb.Prob = make([]buffer.Ref, n), make([]float64, n)
	}
	pb.Refs, pb.Prob = pb.Refs[:m], pb.Prob[:m]
	if err := t.buf.SampleRefs(rng, pb); err != nil {
		return err
	}
	dst.Size, dst.Total, dst.MinProb = pb.Size, pb.Total, pb.MinProb
	for j := range m {
		row := j
		if j >= nPER {
			row = sweepEnd + j - nPER
		}
		ref, p := pb.Refs[j], pb.Prob[j]
		for tries := 0; !t.buf.GatherRef(dst, row, ref); tries++ {
			if tries == maxPERRedraws {
				return fmt.Errorf("%w: ter: PER row %d was overwritten %d times before it could be read", buffer.ErrRetries, row, tries)
			}
			t.st.redraws.Add(1)
			if err := t.buf.SampleRefs(rng, t.one); err != nil {
				return err
			}
			ref, p = t.one.Refs[0], t.one.Prob[0]
		}
		dst.Prob[row] = p
	}
	return nil
}

// FromSweep reports whether row of the last successful Sample came from
// the sweep (false: from PER). O(1); the learner's goroutine.
func (t *TER) FromSweep(row int) bool { return t.src[row] != 0 }

// Sweep is the number (1, 2, ...) of the sweep that queued row of the
// last successful Sample, or 0 for a PER row. Rows of one sweep are consecutive and
// in the order the sweep queued them. O(1); the learner's goroutine.
func (t *TER) Sweep(row int) uint64 { return t.src[row] }

// Weights fills b.Weight for the batch the last Sample filled: PER rows get
// PER's importance weights w_i = (N·P(i))^-beta, beta = PER.Beta.At(step),
// normalised over the PER rows as PER.Normalize says (by the buffer's
// largest possible weight, or the largest of the batch's PER rows); sweep
// rows get weight 1, unscaled (the released code). A batch of another
// length than the last Sample's is an error (buffer.ErrShape). O(b.Len()).
func (t *TER) Weights(b *buffer.Batch, step int64) error {
	if b == nil {
		return fmt.Errorf("%w: ter: Weights of a nil *buffer.Batch", buffer.ErrNil)
	}
	n := b.Len()
	if n != len(t.src) || len(b.Prob) != n {
		return fmt.Errorf("%w: ter: Weights of a %d-row batch, the last Sample filled %d rows", buffer.ErrShape, n, len(t.src))
	}
	if len(b.Weight) != n {
		b.Weight = make([]float64, n)
	}
	c := t.cfg.PER
	beta := c.Beta.At(step)
	size := float64(b.Size)
	wmax, perRows := 0.0, 0
	for i, p := range b.Prob {
		if t.src[i] != 0 {
			b.Weight[i] = 1
			continue
		}
		if !(p > 0) {
			return fmt.Errorf("ter: PER row %d was drawn with probability %v; weights need P(i) > 0", i, p)
		}
		w := xmath.Pow(size*p, -beta)
		b.Weight[i] = w
		wmax = max(wmax, w)
		perRows++
	}
	if perRows == 0 || c.Normalize == buffer.NormalizeNone {
		return nil
	}
	if c.Normalize == buffer.NormalizeBuffer {
		if !(b.MinProb > 0) {
			return fmt.Errorf("ter: NormalizeBuffer needs the buffer's minimum priority (Config.NoMinTree is set, or no item has one)")
		}
		wmax = max(wmax, xmath.Pow(size*b.MinProb, -beta))
	}
	inv := 1 / wmax
	for i := range b.Weight {
		if t.src[i] == 0 {
			b.Weight[i] *= inv
		}
	}
	return nil
}

// Update stores PER priorities (absTD[i]+Eps)^Alpha for every row, sweep
// rows included (the released code updates both parts); see PER.Update.
func (t *TER) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	return t.per.Update(refs, absTD)
}

// Priority is PER's priority for |delta| = absTD (PER.Priority). O(1);
// safe for concurrent use.
func (t *TER) Priority(absTD float64) float64 { return t.per.Priority(absTD) }

// String names the stage and its parameters.
func (t *TER) String() string {
	c := t.cfg
	edges := "pair"
	if c.EdgeAction {
		edges = "action"
	}
	return fmt.Sprintf("ter(eta=%g,roots=%d,preds=%d,edges=%s,no-terminal=%v,%v)", c.Eta, c.Roots, c.Preds, edges, c.NoTerminalFallback, t.per)
}

// TERStats is a snapshot of a TER stage's counters (monotone, since
// NewTER) and of its graph's size as of the end of the last Sample.
type TERStats struct {
	// Sweeps counts sweeps started.
	Sweeps uint64
	// Expanded counts vertices expanded.
	Expanded uint64
	// Queued counts transitions the sweeps queued.
	Queued uint64
	// Dropped counts queued transitions whose slot was overwritten before
	// Sample read them (never trained on; the next one was taken).
	Dropped uint64
	// Pruned counts stale transitions removed from the graph when a sweep
	// met them.
	Pruned uint64
	// Fallbacks counts sweep rows filled from PER because the graph had
	// nothing to give.
	Fallbacks uint64
	// PERRedraws counts PER rows re-drawn because their item was
	// overwritten between the draw and the copy.
	PERRedraws uint64
	// Ingested counts items indexed into the graph.
	Ingested uint64
	// Lapped counts items overwritten before the stage could index them
	// (more than a stripe's capacity inserted between two Samples).
	Lapped uint64
	// Vertices is |V| (vertices with a transition in or out), Terminals
	// |V_E|, Edges the predecessor edges and Transitions the indexed
	// transitions (at most the buffer's capacity).
	Vertices, Terminals, Edges, Transitions int
}

// Stats returns a snapshot, for diagnostics and metrics. O(1); safe for
// concurrent use.
func (t *TER) Stats() TERStats {
	s := &t.st
	return TERStats{
		Sweeps:      s.sweeps.Load(),
		Expanded:    s.expanded.Load(),
		Queued:      s.queued.Load(),
		Dropped:     s.dropped.Load(),
		Pruned:      s.pruned.Load(),
		Fallbacks:   s.fallbacks.Load(),
		PERRedraws:  s.redraws.Load(),
		Ingested:    s.ingested.Load(),
		Lapped:      s.lapped.Load(),
		Vertices:    int(s.vertices.Load()),
		Terminals:   int(s.terminals.Load()),
		Edges:       int(s.edges.Load()),
		Transitions: int(s.transitions.Load()),
	}
}

// publish stores the owner-side sizes for Stats.
func (t *TER) publish() {
	s, g := &t.st, t.g
	s.ingested.Store(t.watch.Reported())
	s.lapped.Store(t.watch.Lapped())
	s.vertices.Store(int64(g.nverts))
	s.terminals.Store(int64(len(g.terms)))
	s.edges.Store(int64(len(g.eindex)))
	s.transitions.Store(int64(g.nrefs))
}
