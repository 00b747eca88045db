package sampler_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// newREFERBuffer returns an empty buffer a REFER stage accepts
// (samplertest.REFERBuffer).
func newREFERBuffer(t testing.TB, capacity, stripes int) *buffer.Buffer {
	t.Helper()
	return samplertest.REFERBuffer(t, capacity, stripes)
}

// newREFER builds a stage or fails the test.
func newREFER(t testing.TB, buf *buffer.Buffer, cfg sampler.REFERConfig) *sampler.REFER {
	t.Helper()
	r, err := sampler.NewREFER(buf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// poll makes the stage index what was written (a Sample of one row;
// ErrEmpty is fine).
func poll(t testing.TB, r *sampler.REFER, buf *buffer.Buffer) {
	t.Helper()
	if err := r.Sample(rand.New(rand.NewPCG(0, 0)), samplertest.NewBatch(t, buf, 1)); err != nil && r.Stats().Steps > 0 {
		t.Fatal(err)
	}
}

// checkStored fails unless every stored episode's steps are, in order,
// the buffer's items of that episode (by GatherSlot) and the stage's
// invariants hold.
func checkStored(t testing.TB, r *sampler.REFER, buf *buffer.Buffer) {
	t.Helper()
	if err := sampler.CheckREFER(r); err != nil {
		t.Fatal(err)
	}
	b := samplertest.NewBatch(t, buf, 1)
	for _, ep := range sampler.REFEREpisodes(r) {
		for i, s := range ep.Steps {
			if !buf.GatherSlot(b, 0, int(s.Slot)) || b.EpisodeID[0] != ep.ID || b.EpisodeStep[0] != int32(i) || b.Obs[1] != float32(i) {
				t.Fatalf("episode %d step %d (slot %d): buffer holds episode %d step %d", ep.ID, i, s.Slot, b.EpisodeID[0], b.EpisodeStep[0])
			}
		}
	}
}

// episodeLog is an EpisodeObserver that keeps what it was told: the
// stored episodes by handle (copies), in finishing order, and the last
// Sample's rows.
type episodeLog struct {
	eps     map[int32]sampler.Episode
	order   []int32 // handles in finishing order (dropped ones removed)
	rows    []uint32
	indexed int
	err     string // the first event out of order
}

func newEpisodeLog() *episodeLog { return &episodeLog{eps: map[int32]sampler.Episode{}} }

func (l *episodeLog) EpisodeFinished(e sampler.Episode) {
	if _, ok := l.eps[e.Handle]; ok && l.err == "" {
		l.err = "handle reported finished twice without a drop"
	}
	e.Slots = slices.Clone(e.Slots)
	e.Reward, e.Discount = slices.Clone(e.Reward), slices.Clone(e.Discount)
	l.eps[e.Handle] = e
	l.order = append(l.order, e.Handle)
}

func (l *episodeLog) EpisodeDropped(h int32) {
	if _, ok := l.eps[h]; !ok && l.err == "" {
		l.err = "an episode dropped that was not stored"
	}
	delete(l.eps, h)
	l.order = slices.DeleteFunc(l.order, func(x int32) bool { return x == h })
}

func (l *episodeLog) Indexed() { l.indexed++ }

func (l *episodeLog) Sampled(rows []uint32) { l.rows = slices.Clone(rows) }

// check fails unless the log's stored episodes are the stage's, in the
// same order, with the same slots, rewards, discounts and ends.
func (l *episodeLog) check(t testing.TB, r *sampler.REFER) {
	t.Helper()
	if l.err != "" {
		t.Fatal(l.err)
	}
	stored := sampler.REFEREpisodes(r)
	if len(stored) != len(l.order) {
		t.Fatalf("the stage stores %d episodes, the observer %d", len(stored), len(l.order))
	}
	for i, ep := range stored {
		e := l.eps[l.order[i]]
		if e.ID != ep.ID || e.Truncated != ep.Truncated || e.VBoot != ep.VBoot || len(e.Slots) != len(ep.Steps) {
			t.Fatalf("episode %d: observer has %d (truncated %v, V(s_T) %v, %d steps), stage %d (%v, %v, %d steps)",
				i, e.ID, e.Truncated, e.VBoot, len(e.Slots), ep.ID, ep.Truncated, ep.VBoot, len(ep.Steps))
		}
		for k, s := range ep.Steps {
			if e.Slots[k] != s.Slot || e.Reward[k] != s.Reward || e.Discount[k] != s.Discount {
				t.Fatalf("episode %d step %d: observer has slot %d (r %v, d %v), stage %d (%v, %v)",
					ep.ID, k, e.Slots[k], e.Reward[k], e.Discount[k], s.Slot, s.Reward, s.Discount)
			}
		}
	}
}

// checkRows fails unless the last Sampled rows are dst's rows and each is
// a step of an episode the observer holds, at that step.
func (l *episodeLog) checkRows(t testing.TB, dst *buffer.Batch) {
	t.Helper()
	if len(l.rows) != dst.Len() {
		t.Fatalf("Sampled %d rows, the batch has %d", len(l.rows), dst.Len())
	}
	where := map[uint32][2]uint64{}
	for _, e := range l.eps {
		for k, s := range e.Slots {
			where[s] = [2]uint64{e.ID, uint64(k)}
		}
	}
	for i, s := range l.rows {
		if s != dst.Refs[i].Slot {
			t.Fatalf("row %d: Sampled slot %d, the batch's %d", i, s, dst.Refs[i].Slot)
		}
		w, ok := where[s]
		if !ok { // dropped while later rows were drawn: allowed, rare
			continue
		}
		if w[0] != dst.EpisodeID[i] || w[1] != uint64(dst.EpisodeStep[i]) {
			t.Fatalf("row %d (slot %d): observer has episode %d step %d, the batch %d step %d", i, s, w[0], w[1], dst.EpisodeID[i], dst.EpisodeStep[i])
		}
	}
}
