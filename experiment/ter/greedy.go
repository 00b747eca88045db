package ter

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// GreedyPER is the PER baseline of TER's tabular NChain script
// (PERQLearning), the "tabular greedy max-priority" of the design notes'
// re-simulation: every transition enters with priority 1, each row replays
// a transition of the largest priority (ties broken uniformly at random),
// and its priority becomes the |δ| of that update (no exponent, no
// epsilon, no importance weights). Unlike sampler.PER it is deterministic
// up to ties, so a transition with |δ| = 0 is never replayed again while
// any other has a larger priority.
//
// Priorities are kept here, per buffer slot, not in the buffer's sum tree;
// new items are found through a buffer.Watcher. Rows of one batch are
// distinct (the B largest). Cost: O(Capacity) per row, a full scan: it is a
// tabular baseline, not a stage for large buffers.
//
// Concurrency: as sampler.Selector; Sample and Update from one goroutine.
type GreedyPER struct {
	buf    *buffer.Buffer
	watch  *buffer.Watcher
	refs   []buffer.Ref // by slot; Gen 0: nothing indexed
	prio   []float64    // by slot
	picked []uint32     // slots chosen for the current batch
}

var _ sampler.Selector = (*GreedyPER)(nil)

// NewGreedyPER returns the stage over buf. O(Capacity) memory.
func NewGreedyPER(buf *buffer.Buffer) (*GreedyPER, error) {
	if buf == nil {
		return nil, fmt.Errorf("%w: per-greedy: nil buffer", buffer.ErrConfig)
	}
	c := buf.Capacity()
	return &GreedyPER{buf: buf, watch: buf.NewWatcher(), refs: make([]buffer.Ref, c), prio: make([]float64, c)}, nil
}

// Sample indexes the items written since the last call (priority 1) and
// fills each row with an item of the largest priority not already in the
// batch. Prob is 1/Size. Errors: buffer.ErrEmpty, ErrBatchSize.
func (g *GreedyPER) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	g.watch.Poll(func(m buffer.Meta) { g.refs[m.Ref.Slot], g.prio[m.Ref.Slot] = m.Ref, 1 })
	n, size := dst.Len(), g.buf.Size()
	if size == 0 {
		return fmt.Errorf("%w: per-greedy: no items to sample", buffer.ErrEmpty)
	}
	if n < 1 || n > size {
		return fmt.Errorf("%w: per-greedy: %d rows requested, %d items stored", buffer.ErrBatchSize, n, size)
	}
	g.picked = g.picked[:0]
	for row := 0; row < n; {
		best, ties := -1, 0
		for s, r := range g.refs {
			if r.Gen == 0 || slices.Contains(g.picked, uint32(s)) {
				continue
			}
			switch p := g.prio[s]; {
			case best < 0 || p > g.prio[best]:
				best, ties = s, 1
			case p == g.prio[best]:
				if ties++; rng.IntN(ties) == 0 { // reservoir: uniform among the ties
					best = s
				}
			}
		}
		if best < 0 {
			return fmt.Errorf("%w: per-greedy: no live item for row %d", buffer.ErrRetries, row)
		}
		if !g.buf.GatherRef(dst, row, g.refs[best]) {
			g.refs[best] = buffer.Ref{} // overwritten: its successor arrives at the next Poll
			continue
		}
		g.picked = append(g.picked, uint32(best))
		dst.Prob[row] = 1 / float64(size)
		row++
	}
	dst.Size, dst.Total, dst.MinProb = size, g.buf.TotalPriority(), 0
	return nil
}

// Update sets the priority of each still-indexed ref to its |δ|.
func (g *GreedyPER) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	var res buffer.UpdateResult
	if err := checkTD("per-greedy", refs, absTD); err != nil {
		return res, err
	}
	for i, r := range refs {
		if int(r.Slot) < len(g.refs) && g.refs[r.Slot] == r {
			g.prio[r.Slot] = absTD[i]
			res.Applied++
		} else {
			res.Stale++
		}
	}
	return res, nil
}

// Priority is |δ| itself.
func (g *GreedyPER) Priority(absTD float64) float64 { return max(absTD, 0) }

// String names the stage.
func (g *GreedyPER) String() string {
	return "per-greedy(argmax priority, random ties; new items 1; priority |δ|)"
}
