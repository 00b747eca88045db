package buffer

import (
	"fmt"
	"sync/atomic"
)

// cacheLine is the assumed cache-line size. Stripe headers are padded to two
// lines (128 bytes) because x86 prefetches adjacent line pairs, as the Go
// runtime's poolLocal does.
const cacheLine = 64

// stripe is the header of one stripe: its ring cursor, its completion count
// and its tree roots, alone on a 128-byte block so inserters on different
// stripes never share a line.
type stripe struct {
	// cursor counts slots claimed by inserters, ever. Slot cursor%cap is the
	// next to be written. Invariant: written <= cursor.
	cursor atomic.Uint64
	// written counts inserts completed, ever (Stats.Inserts sums it).
	// Invariant: size of the stripe = min(written, cap).
	written atomic.Uint64
	// root is the sum of the stripe's top-level nodes (priority units, two's
	// complement while deltas are in flight). Invariant at quiescence:
	// root == sum of the stripe's leaves' priorities.
	root atomic.Uint64
	// minRoot is the smallest non-zero leaf priority of the stripe (units),
	// or emptyMin. Invariant at quiescence: min over the top-level minima.
	minRoot atomic.Uint64
	// inserts counts items inserted into this stripe (for Stats).
	inserts atomic.Uint64
	// gate admits the stripe's writers while SaveStriped copies it:
	// bit gateFrozen is set while a snapshot holds the stripe, the low
	// bits count the Insert and UpdatePriorities calls inside it (see
	// snapshot.go).
	gate atomic.Uint64
	_    [2*cacheLine - 6*8]byte
}

// emptyMin is the min-tree value of a group with no non-zero leaf.
const emptyMin = ^uint64(0)

// counters are learner-side event counts, kept apart from stripe headers.
type counters struct {
	samples    atomic.Uint64
	updates    atomic.Uint64
	staleUpd   atomic.Uint64
	staleReads atomic.Uint64
	torn       atomic.Uint64
	clamped    atomic.Uint64
	nextStripe atomic.Uint64 // round-robin stripe choice of Insert
	maxUnits   atomic.Uint64 // largest priority ever written, units
	fallbacks  atomic.Uint64 // rows that left their stratum (see redraw)
	_          [2*cacheLine - 9*8]byte
}

// Buffer is a fixed-capacity prioritized replay buffer: row-major records
// (one per slot, every column of an item in one cache line where it fits;
// see rows.go) split into power-of-two stripes, each a FIFO ring with its
// own 16-ary fixed-point sum tree (and optional min tree), plus a per-slot
// generation.
//
// # Concurrency
//
// Insert, Sample, SampleUniform, Gather*, UpdatePriorities and the readers
// (Size, Stats, ...) may be called from any number of goroutines at once.
// None of them takes a lock: every shared word is read and written with
// atomics. A slot's generation tag lives in the same 64-bit word as its
// priority, so a priority write-back is a compare-and-swap that fails if the
// slot was overwritten since it was sampled (the update is then dropped and
// counted, never applied to the new occupant). A slot being written carries
// an odd tag and priority 0, so it is never sampled; readers re-check the
// tag after copying and re-draw on a torn read (a sequence lock).
//
// Save, Load and CheckInvariants need quiescence: no concurrent writers.
// SaveStriped does not: it holds one stripe at a time, for the copy of
// that stripe only (snapshot.go).
//
// A Buffer must not be copied after first use.
type Buffer struct {
	cfg   Config
	lay   layout
	q     quantizer
	init  uint64 // InitialPriority in units
	nlev  int    // stored tree levels, leaves included
	width int    // action width

	stripes []stripe
	// tree[k] is level k of every stripe's sum tree (tree[0]: the leaves).
	// A leaf word is gen<<prioBits | units. Invariant at quiescence: each
	// node of level k>0 equals the sum of its 16 children's units, exactly.
	tree [][]atomic.Uint64
	// mins[k] (k >= 1) is the min tree over the same leaves: the smallest
	// non-zero child, emptyMin if none. nil when Config.NoMinTree.
	mins [][]atomic.Uint64

	c counters

	// snapshotting is set while SaveStriped runs (one at a time).
	snapshotting atomic.Bool
	// thawed is closed when the stripe SaveStriped holds opens again: a
	// new channel per frozen stripe, stored before the stripe's gate
	// closes (writers waiting for a copy block on it; snapshot.go).
	thawed atomic.Pointer[chan struct{}]
	// drained (capacity 1) gets a token when the last writer leaves a
	// frozen stripe (SaveStriped waits on it; snapshot.go).
	drained chan struct{}

	// rows holds the items row-major: global slot g's record is the
	// rl.stride bytes at byte offset g·rl.stride, each column at its offset
	// in rl (rows.go). []uint64 so that records are 8-byte aligned.
	rows []uint64
	rl   rowLayout
}

// New validates cfg and allocates a Buffer. The cost is O(Capacity) memory,
// zeroed.
func New(cfg Config) (*Buffer, error) {
	cfg, err := cfg.validated()
	if err != nil {
		return nil, err
	}
	b := &Buffer{cfg: cfg}
	b.initIndex()
	b.initRows()
	return b, nil
}

// Config returns the validated configuration, defaults filled in.
func (b *Buffer) Config() Config {
	c := b.cfg
	c.Floats = append([]FloatColumn(nil), c.Floats...)
	return c
}

// Capacity is the number of slots. O(1).
func (b *Buffer) Capacity() int { return b.cfg.Capacity }

// Resolution is the smallest priority step the buffer represents: stored
// priorities are multiples of it, and a positive priority below it is stored
// as one step (so it stays sampleable). O(1).
func (b *Buffer) Resolution() float64 { return 1 / b.q.scale }

// Size is the number of stored items. O(Stripes), lock-free; under
// concurrent inserts it may lag by the inserts in flight.
func (b *Buffer) Size() int {
	n := 0
	for s := range b.stripes {
		w := b.stripes[s].written.Load()
		c := uint64(b.lay.stripeCap(s))
		n += int(min(w, c))
	}
	return n
}

// TotalPriority is the sum of all stored priorities. O(Stripes).
func (b *Buffer) TotalPriority() float64 {
	var t uint64
	for s := range b.stripes {
		t += clampNode(b.stripes[s].root.Load())
	}
	return b.q.priority(t)
}

// MaxPriority is the largest priority written so far (at least
// Config.InitialPriority): the default priority of new items. O(1).
func (b *Buffer) MaxPriority() float64 { return b.q.priority(b.c.maxUnits.Load()) }

// MinPriority is the smallest non-zero stored priority; ok is false when no
// item has a non-zero priority or the buffer has no min tree. O(Stripes).
func (b *Buffer) MinPriority() (p float64, ok bool) {
	u := b.minUnits()
	if u == emptyMin {
		return 0, false
	}
	return b.q.priority(u), true
}

func (b *Buffer) minUnits() uint64 {
	if b.mins == nil {
		return emptyMin
	}
	m := emptyMin
	for s := range b.stripes {
		m = min(m, b.stripes[s].minRoot.Load())
	}
	return m
}

// clampNode reads a sum node: a value that is negative as int64 is a
// transient state of in-flight deltas and counts as 0.
func clampNode(v uint64) uint64 {
	if int64(v) < 0 {
		return 0
	}
	return v
}

// Stats is a snapshot of the buffer's counters, for diagnostics and
// metrics. Counters are monotone; each is read atomically, but the snapshot
// as a whole is not a single point in time.
type Stats struct {
	Capacity int
	Stripes  int
	Size     int
	// Inserts counts items inserted, ever.
	Inserts uint64
	// Samples counts items returned by sampling calls.
	Samples uint64
	// Updates counts priority write-backs applied.
	Updates uint64
	// StaleUpdates counts write-backs dropped because the slot had been
	// overwritten since it was sampled.
	StaleUpdates uint64
	// StaleReads counts GatherRef reads dropped for the same reason.
	StaleReads uint64
	// TornReads counts sampled items re-drawn because the slot was
	// overwritten while being copied.
	TornReads uint64
	// PrioritiesClamped counts priorities above MaxPriority stored as
	// MaxPriority.
	PrioritiesClamped uint64
	// StratumFallbacks counts sampled rows drawn over the whole mass rather
	// than their stratum, because 64 draws in the stratum all failed: the
	// slots there were being written (an inserter descheduled mid-write) or
	// the stratum's mass had left the tree since the batch read it. Rare;
	// see Sample.
	StratumFallbacks uint64
	TotalPriority    float64
	MaxPriority      float64
	// MinPriority is the smallest non-zero stored priority (0 if none or no
	// min tree).
	MinPriority float64
}

// Stats returns a snapshot. O(Stripes), lock-free.
func (b *Buffer) Stats() Stats {
	st := Stats{
		Capacity:          b.cfg.Capacity,
		Stripes:           b.cfg.Stripes,
		Size:              b.Size(),
		Samples:           b.c.samples.Load(),
		Updates:           b.c.updates.Load(),
		StaleUpdates:      b.c.staleUpd.Load(),
		StaleReads:        b.c.staleReads.Load(),
		TornReads:         b.c.torn.Load(),
		PrioritiesClamped: b.c.clamped.Load(),
		StratumFallbacks:  b.c.fallbacks.Load(),
		TotalPriority:     b.TotalPriority(),
		MaxPriority:       b.MaxPriority(),
	}
	for s := range b.stripes {
		st.Inserts += b.stripes[s].inserts.Load()
	}
	st.MinPriority, _ = b.MinPriority()
	return st
}

// NewBatch allocates a Batch of n rows with the columns this buffer stores.
// O(n · item size) memory, zeroed. Safe for concurrent use.
//
// n may be 0 (sampling into such a batch returns ErrBatchSize) and may
// exceed Capacity (GatherRef can fill any number of rows; sampling refuses
// more rows than are stored). Errors (wrapping ErrBatchSize): n negative,
// above MaxCapacity (row indices are 32-bit), or a batch that would need
// more than MaxBytes.
func (b *Buffer) NewBatch(n int) (*Batch, error) {
	c := &b.cfg
	switch {
	case n < 0:
		return nil, fmt.Errorf("%w: NewBatch of %d rows (must not be negative)", ErrBatchSize, n)
	case n > MaxCapacity:
		return nil, fmt.Errorf("%w: NewBatch of %d rows exceeds the maximum %d", ErrBatchSize, n, MaxCapacity)
	}
	if row := batchRowBytes(c); uint64(n) > MaxBytes/row {
		return nil, fmt.Errorf("%w: NewBatch of %d rows of %d bytes each exceeds MaxBytes (%d)", ErrBatchSize, n, row, uint64(MaxBytes))
	}
	bt := &Batch{
		Refs:   make([]Ref, n),
		Prob:   make([]float64, n),
		Weight: make([]float64, n),
	}
	bt.Transitions = *newColumns(c, n)
	return bt, nil
}

// leafIndex is the flat leaf index of global slot.
func (b *Buffer) leafIndex(slot int) (s, local, leaf int) {
	s, local = b.lay.locate(slot)
	return s, local, b.lay.node(0, s, local)
}

// nextGen returns the generation a slot gets when a write that began at
// odd tag t completes. Tag 0 means "never written", so it is skipped.
func nextGen(odd uint64) uint64 {
	g := (odd + 1) & genMask
	if g == 0 {
		g = 2
	}
	return g
}
