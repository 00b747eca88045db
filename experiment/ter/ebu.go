package ter

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// EBU is plain episodic backward replay, the baseline of TER's NChain
// figure (after Lee et al. 2019, arXiv 1805.12375, without their diffusion
// factor: each transition is replayed alone, as TER's tabular script does):
// the transitions of successful episodes (those that ended in a true
// termination, buffer.FlagTerminal) are replayed one row at a time from the
// terminal transition backwards. It starts at the latest successful episode
// (highest EpisodeID), then moves to the next earlier one, and after the
// earliest restarts at the latest, so episodes completed meanwhile are
// reached on the next pass. Episodes that timed out (FlagTruncated) are
// never replayed; before any successful episode exists (or once all have
// been overwritten) rows are drawn uniformly, as the script does.
//
// It reads the buffer through a buffer.Watcher (no work on Insert) and
// needs Config.Episode. An episode is assembled when its terminal item is
// indexed, from the items of that episode indexed so far: with one
// inserter (the experiments here) that is the whole episode. A transition
// overwritten before it is replayed is skipped; an episode whose terminal
// transition was overwritten is forgotten.
//
// Concurrency: as sampler.Selector; Sample and Update from one goroutine.
// An EBU must not be copied after first use.
type EBU struct {
	buf   *buffer.Buffer
	watch *buffer.Watcher
	open  map[uint64][]ebuItem // items of episodes not closed yet, by EpisodeID
	metas []buffer.Meta        // scratch of one Poll
	// eps are the successful episodes by ascending id; eps[cur] is being
	// replayed, its refs[pos:] still to go (pos == len: exhausted). cur
	// == -1 before the first row.
	eps      []ebuEpisode
	cur, pos int
	one      *buffer.Batch // one-row scratch for the uniform fallback
	st       EBUStats
}

type ebuItem struct {
	ref  buffer.Ref
	step int32
}

type ebuEpisode struct {
	id   uint64
	refs []buffer.Ref // the terminal transition first, then backwards
}

// EBUStats counts what an EBU did.
type EBUStats struct {
	// Episodes is the number of successful episodes held; Passes counts
	// restarts at the latest one.
	Episodes, Passes int
	// Replayed counts rows from episodes, Uniform rows drawn uniformly,
	// Skipped stale transitions passed over.
	Replayed, Uniform, Skipped int
}

var _ sampler.Selector = (*EBU)(nil)

// NewEBU returns an EBU over buf, which must store episode ids and steps
// (buffer.Config.Episode). It indexes the items already stored (O(Size));
// later ones are indexed by each Sample.
func NewEBU(buf *buffer.Buffer) (*EBU, error) {
	if buf == nil || !buf.Config().Episode {
		return nil, fmt.Errorf("%w: ebu: the buffer must store episode ids (buffer.Config.Episode)", buffer.ErrConfig)
	}
	one, err := buf.NewBatch(1)
	if err != nil {
		return nil, fmt.Errorf("ebu: %w", err)
	}
	e := &EBU{buf: buf, watch: buf.NewWatcher(), open: map[uint64][]ebuItem{}, cur: -1, one: one}
	e.ingest()
	e.st.Episodes = len(e.eps)
	return e, nil
}

// ingest indexes the items written since the last call. O(new items), plus
// a sort of each episode that closes.
func (e *EBU) ingest() {
	e.metas = e.metas[:0]
	e.watch.Poll(func(m buffer.Meta) { e.metas = append(e.metas, m) })
	for _, m := range e.metas {
		e.open[m.EpisodeID] = append(e.open[m.EpisodeID], ebuItem{ref: m.Ref, step: m.EpisodeStep})
	}
	for _, m := range e.metas {
		switch {
		case m.Flags&buffer.FlagTerminal != 0:
			e.close(m.EpisodeID)
		case m.Flags&buffer.FlagTruncated != 0:
			delete(e.open, m.EpisodeID)
		}
	}
}

// close moves episode id from open to eps, backwards.
func (e *EBU) close(id uint64) {
	items := e.open[id]
	delete(e.open, id)
	slices.SortFunc(items, func(a, b ebuItem) int { return cmp.Compare(b.step, a.step) })
	ep := ebuEpisode{id: id, refs: make([]buffer.Ref, len(items))}
	for i, it := range items {
		ep.refs[i] = it.ref
	}
	i, _ := slices.BinarySearchFunc(e.eps, id, func(x ebuEpisode, id uint64) int { return cmp.Compare(x.id, id) })
	e.eps = slices.Insert(e.eps, i, ep)
	if e.cur >= 0 && i <= e.cur {
		e.cur++
	}
}

// next copies the next transition of the backward replay into row of dst.
// It reports false when no successful episode is left.
func (e *EBU) next(dst *buffer.Batch, row int) bool {
	for len(e.eps) > 0 {
		if e.cur < 0 || e.pos >= len(e.eps[e.cur].refs) {
			e.advance()
		}
		ref := e.eps[e.cur].refs[e.pos]
		e.pos++
		if e.buf.GatherRef(dst, row, ref) {
			return true
		}
		e.st.Skipped++
		if e.pos == 1 { // the terminal transition is gone: forget the episode
			e.eps = slices.Delete(e.eps, e.cur, e.cur+1)
			if len(e.eps) == 0 {
				e.cur = -1
			} else {
				e.advance() // eps[cur-1] is the next earlier episode
			}
		}
	}
	return false
}

// advance moves to the start of the next earlier episode, or back to the
// latest after the earliest. len(eps) > 0.
func (e *EBU) advance() {
	if e.cur--; e.cur < 0 {
		e.cur = len(e.eps) - 1
		e.st.Passes++
	}
	e.pos = 0
}

// Sample fills every row of dst with the next transitions of the backward
// replay (uniform draws if there is no successful episode), after indexing
// the items written since the last call. Prob is 1/Size for every row (the
// replay order is deterministic; there is no draw to correct for). Errors:
// buffer.ErrEmpty, ErrBatchSize (0 rows or more than are stored).
// Cost: O(new items) to index them plus O(rows) copies.
func (e *EBU) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	e.ingest()
	n, size := dst.Len(), e.buf.Size()
	if size == 0 {
		return fmt.Errorf("%w: ebu: no items to sample", buffer.ErrEmpty)
	}
	if n < 1 || n > size {
		return fmt.Errorf("%w: ebu: %d rows requested, %d items stored", buffer.ErrBatchSize, n, size)
	}
	for row := range n {
		if e.next(dst, row) {
			e.st.Replayed++
			continue
		}
		if err := e.buf.SampleUniform(rng, e.one); err != nil {
			return err
		}
		if !e.buf.GatherRef(dst, row, e.one.Refs[0]) {
			return fmt.Errorf("%w: ebu: a uniformly drawn item was overwritten before it was copied", buffer.ErrRetries)
		}
		e.st.Uniform++
	}
	dst.Size, dst.Total, dst.MinProb = size, e.buf.TotalPriority(), 0
	for i := range dst.Prob {
		dst.Prob[i] = 1 / float64(size)
	}
	e.st.Episodes = len(e.eps)
	return nil
}

// Update keeps no priorities: it only validates its arguments (lengths;
// NaN, infinite or negative errors) and applies nothing.
func (e *EBU) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	return buffer.UpdateResult{}, checkTD("ebu", refs, absTD)
}

// Priority is 1: EBU ignores priorities.
func (e *EBU) Priority(float64) float64 { return 1 }

// String names the stage.
func (e *EBU) String() string { return "ebu(backward from terminals, latest episode first)" }

// Stats returns the counters, as of the last Sample.
func (e *EBU) Stats() EBUStats { return e.st }

// checkTD validates a write-back as the sampler stages do.
func checkTD(stage string, refs []buffer.Ref, absTD []float64) error {
	if len(refs) != len(absTD) {
		return fmt.Errorf("%w: %s: %d refs but %d TD errors", buffer.ErrShape, stage, len(refs), len(absTD))
	}
	for i, d := range absTD {
		if !(d >= 0) || d > 1e308 {
			return fmt.Errorf("%w: %s: absTD[%d] = %v (TD errors must be finite and >= 0)", buffer.ErrPriority, stage, i, d)
		}
	}
	return nil
}
