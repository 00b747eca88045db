package buffer

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// metaItems builds n transitions whose Meta columns all derive from id0+i,
// so a torn read shows as disagreeing columns (checkMeta).
func metaItems(cfg Config, id0, n int) *Transitions {
	t := items(cfg, id0, n, nil)
	t.StateHash = make([]uint64, n)
	t.NextStateHash = make([]uint64, n)
	t.Flags = make([]uint32, n)
	t.EpisodeID = make([]uint64, n)
	t.EpisodeStep = make([]int32, n)
	for i := range n {
		id := uint64(id0 + i)
		t.StateHash[i], t.NextStateHash[i] = id, ^id
		t.Flags[i] = uint32(id % 3)
		t.EpisodeID[i], t.EpisodeStep[i] = 7*id, int32(id%1000)
	}
	return t
}

// checkMeta returns the id a Meta carries, or an error naming the column
// that disagrees with it.
func checkMeta(m Meta) (uint64, error) {
	id := m.StateHash
	switch {
	case m.NextStateHash != ^id:
		return id, fmt.Errorf("id %d: NextStateHash %#x", id, m.NextStateHash)
	case m.Flags != uint32(id%3):
		return id, fmt.Errorf("id %d: Flags %d", id, m.Flags)
	case m.Action != int32(id%3):
		return id, fmt.Errorf("id %d: Action %d", id, m.Action)
	case m.EpisodeID != 7*id || m.EpisodeStep != int32(id%1000):
		return id, fmt.Errorf("id %d: episode %d step %d", id, m.EpisodeID, m.EpisodeStep)
	case m.Ref.Gen == 0 || m.Ref.Gen&1 == 1:
		return id, fmt.Errorf("id %d: Ref %+v has no published generation", id, m.Ref)
	}
	return id, nil
}

func watchConfig(capacity, stripes int) Config {
	return Config{Capacity: capacity, Stripes: stripes, ObsDim: 2, StateHash: true, Episode: true}
}

// TestWatcherSequential: items come in insertion order per stripe, each
// once, and the ones overwritten between two polls are counted as lapped,
// exactly.
func TestWatcherSequential(t *testing.T) {
	cfg := watchConfig(64, 4) // 16 slots per stripe
	b := mustNew(t, cfg)
	w := b.NewWatcher()
	if n := w.Poll(func(Meta) { t.Fatal("an empty buffer reported an item") }); n != 0 {
		t.Fatalf("Poll on an empty buffer: %d", n)
	}
	last := make([]int64, 4) // per stripe, the last id seen
	for i := range last {
		last[i] = -1
	}
	seen := map[Ref]bool{}
	poll := func() int {
		return w.Poll(func(m Meta) {
			id, err := checkMeta(m)
			if err != nil {
				t.Fatal(err)
			}
			if seen[m.Ref] {
				t.Fatalf("Ref %+v reported twice", m.Ref)
			}
			seen[m.Ref] = true
			s, _ := b.lay.locate(int(m.Ref.Slot))
			if int64(id) <= last[s] {
				t.Fatalf("stripe %d: id %d after id %d", s, id, last[s])
			}
			last[s] = int64(id)
			if cur, _, ok := b.SlotPriority(int(m.Ref.Slot)); !ok || cur != m.Ref {
				t.Fatalf("id %d: reported %+v, the slot holds %+v", id, m.Ref, cur)
			}
		})
	}
	next := 0
	insert := func(n, batch int) {
		for done := 0; done < n; done += batch {
			if err := b.Insert(metaItems(cfg, next, batch)); err != nil {
				t.Fatal(err)
			}
			next += batch
		}
	}
	insert(40, 1)
	if n := poll(); n != 40 || w.Lapped() != 0 {
		t.Fatalf("after 40 inserts: reported %d, lapped %d", n, w.Lapped())
	}
	if n := poll(); n != 0 {
		t.Fatalf("a second Poll reported %d items", n)
	}
	insert(200, 5) // batches of 5 round-robin: 50 per stripe, 16 kept each
	if n := poll(); n != 64 || w.Lapped() != 200-64 {
		t.Fatalf("after 200 more inserts into 64 slots: reported %d (want 64), lapped %d (want 136)", n, w.Lapped())
	}
	insert(3, 3)
	if n := poll(); n != 3 || w.Reported() != 107 || w.Reported()+w.Lapped() != uint64(next) {
		t.Fatalf("reported %d, total reported %d, lapped %d, inserted %d", n, w.Reported(), w.Lapped(), next)
	}

	// A watcher made late starts at the oldest stored item.
	w2 := b.NewWatcher()
	if n := w2.Poll(func(Meta) {}); n != 64 || w2.Lapped() != 0 {
		t.Fatalf("new watcher over a full buffer: reported %d, lapped %d", n, w2.Lapped())
	}
}

// TestWatcherStopsAtUnfinishedWrite emulates an inserter descheduled
// between claiming its position and publishing it, with a later insert
// into the same stripe completed: the stripe's walk stops at the
// unfinished position, then reports both in order once it is published.
func TestWatcherStopsAtUnfinishedWrite(t *testing.T) {
	for _, claimed := range []bool{false, true} {
		t.Run(fmt.Sprintf("tagClaimed=%v", claimed), func(t *testing.T) {
			cfg := watchConfig(8, 1)
			b := mustNew(t, cfg)
			if err := b.Insert(metaItems(cfg, 0, 10)); err != nil { // wraps: positions 2..9 held
				t.Fatal(err)
			}
			w := b.NewWatcher()
			var ids []uint64
			poll := func() {
				w.Poll(func(m Meta) {
					id, err := checkMeta(m)
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, id)
				})
			}
			poll()
			if len(ids) != 8 || ids[0] != 2 || ids[7] != 9 {
				t.Fatalf("first poll: %v", ids)
			}
			// The stalled writer: position 10 (slot 2), claimed on the cursor.
			st := &b.stripes[0]
			pos := st.cursor.Add(1) - 1
			l := int(pos % 8)
			leaf := &b.tree[0][b.lay.node(0, 0, l)]
			old := leaf.Load()
			if claimed {
				leaf.Store((old>>prioBits + 1) << prioBits)
				b.addLeaf(0, l, -int64(old&prioMask))
			}
			if err := b.Insert(metaItems(cfg, 11, 1)); err != nil { // position 11 completes
				t.Fatal(err)
			}
			ids = ids[:0]
			poll()
			if len(ids) != 0 {
				t.Fatalf("reported %v past an unfinished write", ids)
			}
			// The stalled writer finishes.
			if !claimed {
				leaf.Store((old>>prioBits + 1) << prioBits)
				b.addLeaf(0, l, -int64(old&prioMask))
			}
			tr := metaItems(cfg, 10, 1)
			b.copyIn(l, tr, 0, 1)
			u := b.c.maxUnits.Load()
			leaf.Store(nextGen(old>>prioBits+1)<<prioBits | u)
			b.addLeaf(0, l, int64(u))
			if b.mins != nil {
				b.fixMinPath(0, l>>fanShift)
			}
			st.inserts.Add(1)
			st.written.Add(1)
			if err := b.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
			poll()
			if len(ids) != 2 || ids[0] != 10 || ids[1] != 11 || w.Lapped() != 0 {
				t.Fatalf("after the write completed: %v, lapped %d", ids, w.Lapped())
			}
		})
	}
}

// TestWatcherAfterLoad: generations and counters survive a checkpoint, so a
// watcher over the loaded buffer reports what it holds and then new items.
func TestWatcherAfterLoad(t *testing.T) {
	cfg := watchConfig(32, 2)
	b := mustNew(t, cfg)
	if err := b.Insert(metaItems(cfg, 0, 100)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := b.Save(&buf); err != nil {
		t.Fatal(err)
	}
	l, err := Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w := l.NewWatcher()
	if n := w.Poll(func(Meta) {}); n != 32 {
		t.Fatalf("loaded buffer: reported %d, want 32", n)
	}
	if err := l.Insert(metaItems(cfg, 100, 7)); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]bool{}
	if n := w.Poll(func(m Meta) { got[m.StateHash] = true }); n != 7 || len(got) != 7 || !got[100] || !got[106] {
		t.Fatalf("after 7 inserts: reported %d %v", n, got)
	}
}

// TestWatcherConcurrent: inserters of random batch sizes on a small buffer
// (slots are lapped all the time) and one watcher polling. No item is torn
// or reported twice; at quiescence every position was reported or counted
// as lapped, and every stored item was reported.
func TestWatcherConcurrent(t *testing.T) {
	for _, c := range []struct{ capacity, stripes, inserters int }{{256, 1, 3}, {256, 4, 4}, {1024, 16, 2}} {
		t.Run(fmt.Sprintf("cap=%d/stripes=%d", c.capacity, c.stripes), func(t *testing.T) {
			seed := uint64(c.capacity*100 + c.stripes)
			cfg := watchConfig(c.capacity, c.stripes)
			b := mustNew(t, cfg)
			rounds := 400
			if raceBuild {
				rounds = 150
			}
			var ids atomic.Int64
			var stop atomic.Bool
			var wg sync.WaitGroup
			// The watcher exists before the first insert: every position
			// counts as reported or lapped from position 0 on. (Made after
			// the inserters start, it would begin past items already lapped,
			// which it never sees and never counts.)
			w := b.NewWatcher()
			for k := range c.inserters {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(seed, uint64(k)))
					for range rounds {
						n := 1 + rng.IntN(40)
						id0 := int(ids.Add(int64(n))) - n
						if err := b.Insert(metaItems(cfg, id0, n)); err != nil {
							t.Error(err)
							return
						}
						if rng.IntN(4) == 0 {
							runtime.Gosched() // let the watcher in between bursts
						}
					}
				})
			}
			seenRef := map[Ref]bool{}
			seenID := map[uint64]bool{}
			var fail error
			visit := func(m Meta) {
				id, err := checkMeta(m)
				if err == nil && seenRef[m.Ref] {
					err = fmt.Errorf("Ref %+v reported twice", m.Ref)
				}
				if err == nil && seenID[id] {
					err = fmt.Errorf("id %d reported twice", id)
				}
				if err != nil && fail == nil {
					fail = err
				}
				seenRef[m.Ref], seenID[id] = true, true
			}
			done := make(chan struct{})
			go func() { wg.Wait(); stop.Store(true); close(done) }()
			polls := 0
			for !stop.Load() {
				w.Poll(visit)
				polls++
			}
			<-done
			w.Poll(visit)
			if fail != nil {
				t.Fatalf("seed %#x: %v", seed, fail)
			}
			total := uint64(ids.Load())
			if w.Reported()+w.Lapped() != total || int(w.Reported()) != len(seenID) {
				t.Fatalf("seed %#x: %d inserted, %d reported (%d distinct), %d lapped", seed, total, w.Reported(), len(seenID), w.Lapped())
			}
			for s := range c.capacity {
				ref, _, ok := b.SlotPriority(s)
				if !ok || !seenRef[ref] {
					t.Fatalf("seed %#x: slot %d holds %+v (ok=%v), never reported", seed, s, ref, ok)
				}
			}
			if err := b.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d inserted, %d reported, %d lapped, %d polls", total, w.Reported(), w.Lapped(), polls)
		})
	}
}

func TestPosGen(t *testing.T) {
	// Follow one slot's tag through the insert protocol across the wrap.
	tag := uint64(0)
	for lap := uint64(0); lap < 1<<23+5; lap++ {
		tag = nextGen(tag + 1) // claim (odd), publish
		if lap < 10 || lap > 1<<23-10 {
			if got := posGen(lap); got != tag {
				t.Fatalf("lap %d: posGen %d, the protocol gives %d", lap, got, tag)
			}
		}
	}
}
