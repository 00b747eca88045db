package sampler_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// sweepLog checks the sweep's trace as it happens (TER §6.4's properties):
// no vertex is expanded twice in a sweep; a sweep's roots are terminal
// states; every other expanded vertex was queued as a predecessor earlier
// in the same sweep; every queued transition leads into the vertex being
// expanded. It records each queued Ref with its sweep and endpoints.
type sweepLog struct {
	mu       sync.Mutex // the trace runs on the learner's goroutine; tests read it there too
	sweep    uint64
	expanded map[uint64]bool // this sweep's expanded vertices
	found    map[uint64]bool // this sweep's queued predecessors
	current  uint64          // the vertex being expanded
	queued   []queuedItem    // in queue order
	next     int             // queued[next:] have not been matched to rows
	roots    int
	err      error
}

type queuedItem struct {
	ref             buffer.Ref
	sweep, to, from uint64
}

func newSweepLog(s *sampler.TER, terminal func(uint64) bool) *sweepLog {
	l := &sweepLog{}
	fail := func(format string, args ...any) {
		if l.err == nil {
			l.err = fmt.Errorf(format, args...)
		}
	}
	sampler.SetTERTrace(s, func(sweep, v uint64, root bool) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if sweep != l.sweep {
			if sweep != l.sweep+1 {
				fail("sweep %d follows sweep %d", sweep, l.sweep)
			}
			l.sweep, l.expanded, l.found = sweep, map[uint64]bool{}, map[uint64]bool{}
		}
		switch {
		case l.expanded[v]:
			fail("sweep %d: vertex %d expanded twice", sweep, v)
		case root && terminal != nil && !terminal(v):
			fail("sweep %d: root %d is not terminal", sweep, v)
		case !root && !l.found[v]:
			fail("sweep %d: vertex %d expanded but never queued as a predecessor", sweep, v)
		}
		if root {
			l.roots++
		}
		l.expanded[v], l.current = true, v
	}, func(sweep, to, from uint64, ref buffer.Ref) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if sweep != l.sweep || to != l.current || !l.expanded[to] {
			fail("sweep %d: transition %d→%d queued while expanding %d in sweep %d", sweep, from, to, l.current, l.sweep)
		}
		l.found[from] = true
		l.queued = append(l.queued, queuedItem{ref: ref, sweep: sweep, to: to, from: from})
	})
	return l
}

// checkRows checks a sampled batch against the log: PER rows first;
// each sweep row is the next transition the sweep queued (same sweep, same
// endpoints in the row's data, so its next state is the vertex that was
// being expanded), except for queued ones dropped as stale, which skipped
// (if not nil) must confirm. With fallback, rows after the sweep rows may
// come from PER (the graph ran dry).
func (l *sweepLog) checkRows(s *sampler.TER, b *buffer.Batch, nPER int, skipped func(buffer.Ref) error, fallback bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	for j := range b.Len() {
		if err := checkTERRow(b, j); err != nil {
			return err
		}
		switch sw := s.FromSweep(j); {
		case j < nPER && sw, j >= nPER && !sw && !fallback:
			return fmt.Errorf("row %d: FromSweep %v with %d PER rows", j, sw, nPER)
		case j > nPER && sw && !s.FromSweep(j-1):
			return fmt.Errorf("row %d: a sweep row after a PER fallback row", j)
		}
		if !s.FromSweep(j) {
			continue
		}
		for l.next < len(l.queued) && l.queued[l.next].ref != b.Refs[j] {
			if skipped != nil {
				if err := skipped(l.queued[l.next].ref); err != nil {
					return fmt.Errorf("row %d: queued %+v skipped: %v", j, l.queued[l.next].ref, err)
				}
			}
			l.next++
		}
		if l.next == len(l.queued) {
			return fmt.Errorf("row %d: %+v is not among the transitions queued since the last row", j, b.Refs[j])
		}
		q := l.queued[l.next]
		l.next++
		switch {
		case q.sweep != s.Sweep(j):
			return fmt.Errorf("row %d: queued in sweep %d, reported sweep %d", j, q.sweep, s.Sweep(j))
		case b.StateHash[j] != q.from || b.NextStateHash[j] != q.to:
			return fmt.Errorf("row %d: data %d→%d, queued as %d→%d", j, b.StateHash[j], b.NextStateHash[j], q.from, q.to)
		}
	}
	if l.next > 1<<12 { // forget what has been matched
		l.queued, l.next = append(l.queued[:0], l.queued[l.next:]...), 0
	}
	return nil
}

// TestTERSweepProperties overwrites slots between samples (a small
// buffer, up to 20 new items per batch, and the whole buffer now and then)
// and checks every sweep and every row: the trace properties of
// sweepLog, sweep rows in queue order with their queued endpoints, PER
// rows exactly the first floor(eta·B), and no expired item ever returned
// (each row's Ref is its slot's current occupant).
func TestTERSweepProperties(t *testing.T) {
	for _, c := range []struct {
		seed       uint64
		preds      int
		edgeAction bool
	}{{1, 3, false}, {2, 1, false}, {3, 3, true}, {4, 8, false}} {
		t.Run(fmt.Sprintf("seed=%d/preds=%d/action=%v", c.seed, c.preds, c.edgeAction), func(t *testing.T) {
			buf := terBuffer(t, 256, 4)
			walk := newTERWalk(c.seed, c.seed, 40, 25)
			id := 0
			insert := func(n int) {
				terInsert(t, buf, id, walk.steps(n))
				id += n
			}
			insert(256)
			cfg := sampler.DefaultTERConfig(100)
			cfg.Eta, cfg.Preds, cfg.EdgeAction = 0.25, c.preds, c.edgeAction
			s := newTER(t, buf, cfg)
			log := newSweepLog(s, terTerminal)
			rng := rand.New(rand.NewPCG(c.seed, 9))
			bt := samplertest.NewBatch(t, buf, 16)
			stale := func(r buffer.Ref) error { // a queued item skipped must have been overwritten
				if cur, _, ok := buf.SlotPriority(int(r.Slot)); ok && cur == r {
					return fmt.Errorf("still stored")
				}
				return nil
			}
			for round := range 400 {
				switch {
				case round%97 == 50:
					insert(256) // every queued transition goes stale
				default:
					insert(rng.IntN(21))
				}
				if err := s.Sample(rng, bt); err != nil {
					t.Fatalf("seed %d round %d: %v", c.seed, round, err)
				}
				if err := log.checkRows(s, bt, 4, stale, false); err != nil {
					t.Fatalf("seed %d round %d: %v", c.seed, round, err)
				}
				if n := sampler.TERQueueSlots(s); n > 2*(16+c.preds) {
					t.Fatalf("seed %d round %d: the batch queue holds %d slots", c.seed, round, n)
				}
				for j, ref := range bt.Refs {
					if cur, _, ok := buf.SlotPriority(int(ref.Slot)); !ok || cur != ref {
						t.Fatalf("seed %d round %d row %d: returned %+v, the slot holds %+v", c.seed, round, j, ref, cur)
					}
				}
				td := make([]float64, 16)
				for j := range td {
					td[j] = rng.Float64()
				}
				if _, err := s.Update(bt.Refs, td); err != nil {
					t.Fatal(err)
				}
			}
			if err := sampler.CheckTERGraph(s); err != nil {
				t.Fatalf("seed %d: %v", c.seed, err)
			}
			st := s.Stats()
			// Each Sample indexes every new item first, so no stale
			// transition is left to prune; stale queued ones are dropped.
			if st.Transitions != buf.Capacity() || st.Sweeps < 10 || (c.preds > 1 && st.Dropped == 0) || st.Pruned != 0 || st.Lapped != 0 || log.roots == 0 || st.Fallbacks != 0 {
				t.Fatalf("seed %d: %+v (roots %d)", c.seed, st, log.roots)
			}
			t.Logf("%+v", st)
		})
	}
}

// TestTERConcurrentActors: 8 actors insert random walks while the learner
// samples, weights and updates (run it with -race); the actors stay at
// most 64 items per learner step ahead, so they lap the learner's index
// now and then but not always. Every row is whole, the sweep's trace
// properties hold, and each sweep row's data matches what the sweep
// queued (its next state is the vertex that was expanded).
func TestTERConcurrentActors(t *testing.T) {
	const seed, actors = 77, 8
	buf := terBuffer(t, 1024, 8)
	terInsert(t, buf, 0, newTERWalk(seed, 1000, 60, 30).steps(1024))
	cfg := sampler.DefaultTERConfig(1000)
	s := newTER(t, buf, cfg)
	// Roots are not checked: when the actors lap the learner, every
	// terminal transition may be stale, and sweeps start from random roots.
	log := newSweepLog(s, nil)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var ids, steps atomic.Int64
	ids.Store(1024)
	for a := range actors {
		wg.Go(func() {
			w := newTERWalk(seed, uint64(a), 60, 30)
			r := rand.New(rand.NewPCG(seed, uint64(100+a)))
			for !stop.Load() {
				if ids.Load() > 1024+64*(steps.Load()+1) {
					runtime.Gosched()
					continue
				}
				n := 1 + r.IntN(8)
				id0 := int(ids.Add(int64(n))) - n
				if err := buf.Insert(terTransitions(id0, w.steps(n))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	bt := samplertest.NewBatch(t, buf, 32)
	td := make([]float64, 32)
	rounds := 600
	for round := range rounds {
		if err := s.Sample(rng, bt); err != nil {
			t.Errorf("seed %d round %d: %v", seed, round, err)
			break
		}
		if err := log.checkRows(s, bt, 16, nil, true); err != nil {
			t.Errorf("seed %d round %d: %v", seed, round, err)
			break
		}
		if err := s.Weights(bt, int64(round)); err != nil {
			t.Errorf("seed %d round %d: Weights: %v", seed, round, err)
			break
		}
		for j := range td {
			td[j] = rng.Float64()
		}
		if _, err := s.Update(bt.Refs, td); err != nil {
			t.Errorf("seed %d round %d: Update: %v", seed, round, err)
			break
		}
		_ = s.Stats() // readable while sampling
		steps.Add(1)
	}
	stop.Store(true)
	wg.Wait()
	st := s.Stats()
	if st.Sweeps == 0 || st.Transitions > buf.Capacity() {
		t.Fatalf("seed %d: %+v", seed, st)
	}
	if err := s.Sample(rng, bt); err != nil { // quiescent: index the rest
		t.Fatal(err)
	}
	if err := sampler.CheckTERGraph(s); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	t.Logf("inserted %d; %+v", ids.Load(), s.Stats())
}
