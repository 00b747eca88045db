package bench

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
)

// Transition is one CartPole-sized transition as a Go user stores it in a
// ring: 44 bytes (4+4 float32 observations, a discrete action, the reward
// and the bootstrap discount), no padding.
type Transition struct {
	Obs      [4]float32
	NextObs  [4]float32
	Action   int32
	Reward   float32
	Discount float32
}

// Baseline is the replay buffer "a Go user writes today", kept as the
// yardstick of apex bench (performance.md §3): a FIFO ring of Transition
// structs and a binary sum tree over their priorities, a []float64
// 1-rooted heap whose parents are recomputed from their two children on
// every set, searched by a branchy descent, all guarded by one sync.Mutex.
//
// Generations are NOT tracked: a priority write-back for a slot that was
// overwritten since it was sampled lands on the new occupant (the bug the
// apex buffer's generations exist to prevent), so Baseline has no stale
// count. This also makes it a little cheaper than a careful version, which
// favours the baseline in the comparison.
//
// Every method takes the mutex once per call, so a batch of inserts, a
// sample of B items or an update of B priorities is one critical section.
// Safe for concurrent use. A Baseline must not be copied after first use.
type Baseline struct {
	mu sync.Mutex
	// tree is the sum heap: tree[1] is the root, node i has children 2i and
	// 2i+1, leaf of slot s is tree[leaves+s]. Invariant: tree[i] ==
	// tree[2i] + tree[2i+1] for every 1 <= i < leaves (recomputed, so
	// exactly equal as floats); leaves of unused slots are 0.
	tree   []float64
	leaves int // power of two >= capacity
	ring   []Transition
	cursor int // next slot to write
	size   int // stored items, <= len(ring)
	// maxPrio is the largest priority ever set (1 at first): the priority
	// of items inserted without one.
	maxPrio float64
}

// BaselineBatch receives Baseline samples. Create it with NewBaselineBatch.
type BaselineBatch struct {
	// Transitions[i] is a copy of the item in Index[i].
	Transitions []Transition
	// Index[i] is the slot of row i.
	Index []int
	// Prob[i] is the probability with which row i was drawn: its priority
	// over the total.
	Prob []float64
}

// NewBaselineBatch allocates a batch of n rows.
func NewBaselineBatch(n int) *BaselineBatch {
	return &BaselineBatch{Transitions: make([]Transition, n), Index: make([]int, n), Prob: make([]float64, n)}
}

// Errors of Baseline.Sample.
var (
	errBaselineEmpty = errors.New("bench: baseline: sampling an empty buffer")
	errBaselineZero  = errors.New("bench: baseline: total priority is zero")
)

// NewBaseline allocates a Baseline of capacity slots. It panics if
// capacity < 1 (the harness validates first).
func NewBaseline(capacity int) *Baseline {
	if capacity < 1 {
		panic(fmt.Sprintf("bench: NewBaseline(%d): capacity must be positive", capacity))
	}
	leaves := 1
	for leaves < capacity {
		leaves <<= 1
	}
	return &Baseline{
		tree:    make([]float64, 2*leaves),
		leaves:  leaves,
		ring:    make([]Transition, capacity),
		maxPrio: 1,
	}
}

// Capacity is the number of slots.
func (b *Baseline) Capacity() int { return len(b.ring) }

// Size is the number of stored items.
func (b *Baseline) Size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size
}

// Total is the sum of all stored priorities (the tree's root).
func (b *Baseline) Total() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tree[1]
}

// Priority is the stored priority of slot.
func (b *Baseline) Priority(slot int) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tree[b.leaves+slot]
}

// Insert stores ts at the ring cursor, overwriting the oldest items. Item i
// gets prios[i], or the largest priority set so far when prios is nil.
// Priorities are trusted (finite, >= 0); len(prios) must be len(ts) if not
// nil. One critical section; O(len(ts) · log Capacity).
func (b *Baseline) Insert(ts []Transition, prios []float64) {
	b.mu.Lock()
	for i := range ts {
		p := b.maxPrio
		if prios != nil {
			p = prios[i]
			b.maxPrio = max(b.maxPrio, p)
		}
		b.ring[b.cursor] = ts[i]
		b.setLocked(b.cursor, p)
		if b.cursor++; b.cursor == len(b.ring) {
			b.cursor = 0
		}
		b.size = min(b.size+1, len(b.ring))
	}
	b.mu.Unlock()
}

// UpdatePriorities sets the priority of slot idx[i] to prios[i] (whoever
// occupies it now: generations are not tracked). Priorities are trusted.
// One critical section; O(len(idx) · log Capacity).
func (b *Baseline) UpdatePriorities(idx []int, prios []float64) {
	b.mu.Lock()
	for i, s := range idx {
		b.setLocked(s, prios[i])
		b.maxPrio = max(b.maxPrio, prios[i])
	}
	b.mu.Unlock()
}

// setLocked writes leaf slot and recomputes every ancestor from its two
// children. b.mu must be held.
func (b *Baseline) setLocked(slot int, p float64) {
	i := b.leaves + slot
	b.tree[i] = p
	for i > 1 {
		i >>= 1
		b.tree[i] = b.tree[2*i] + b.tree[2*i+1]
	}
}

// Sample draws len(dst.Index) items by stratified proportional sampling:
// the total mass is split into B equal ranges and one target is drawn
// uniformly in each; each target is found by one descent from the root.
// The items are copied into dst. One critical section; O(B · log Capacity).
func (b *Baseline) Sample(rng *rand.Rand, dst *BaselineBatch) error {
	n := len(dst.Index)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.size == 0 {
		return errBaselineEmpty
	}
	total := b.tree[1]
	if !(total > 0) {
		return errBaselineZero
	}
	seg := total / float64(n)
	top := math.Nextafter(total, 0)
	for j := range n {
		u := min((float64(j)+rng.Float64())*seg, top)
		s := b.findLocked(u)
		dst.Index[j] = s
		dst.Prob[j] = b.tree[b.leaves+s] / total
		dst.Transitions[j] = b.ring[s]
	}
	return nil
}

// findLocked returns the slot whose cumulative priority range holds u, for
// 0 <= u < total. A descent never enters a zero subtree, so float rounding
// cannot land on an empty leaf. b.mu must be held.
func (b *Baseline) findLocked(u float64) int {
	i := 1
	for i < b.leaves {
		l := b.tree[2*i]
		if u < l || b.tree[2*i+1] == 0 {
			i = 2 * i
		} else {
			u -= l
			i = 2*i + 1
		}
	}
	return i - b.leaves
}

// checkInvariants verifies the heap at quiescence: every parent equals the
// sum of its children exactly, and leaves beyond the stored items are 0.
func (b *Baseline) checkInvariants() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := 1; i < b.leaves; i++ {
		if b.tree[i] != b.tree[2*i]+b.tree[2*i+1] {
			return fmt.Errorf("node %d = %v, children sum to %v", i, b.tree[i], b.tree[2*i]+b.tree[2*i+1])
		}
	}
	for s := b.size; s < b.leaves; s++ {
		if b.tree[b.leaves+s] != 0 {
			return fmt.Errorf("unused leaf %d holds %v", s, b.tree[b.leaves+s])
		}
	}
	return nil
}
