package buffer

import (
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCheckpointWhileInUse measures what a checkpoint costs the
// buffer's users: two inserters (a batch of 64 every millisecond each:
// 128 K items/s, ten times Ape-X's rate) and a learner (a stratified draw
// of 256 with its write-back every 2 ms: 128 K samples/s) run paced on a
// full 2^20-slot CartPole buffer, so the machine is not saturated and a
// stall shows as a long call and a rate below the pace, while the
// benchmark's loop checkpoints to io.Discard, b.N times:
//
//	none     no checkpoint (the loop sleeps 20 ms): the baseline rates
//	locked   Save under a lock every writer holds shared (what a replay
//	         server did before SaveStriped: inserts and write-backs stop
//	         for the whole Save)
//	striped  SaveStriped: one stripe held at a time
//
// Reported: inserts/s and samples/s over the run, and the longest single
// Insert and draw-plus-write-back calls (the stalls). Run with -count and
// compare modes of the same run: the machine's load moves every figure.
//
//	go test -run '^$' -bench CheckpointWhileInUse -benchtime 20x -count 3 ./buffer
func BenchmarkCheckpointWhileInUse(b *testing.B) {
	cfg := cartPole(1 << 20)
	buf := filled(b, cfg, 1)
	for _, mode := range []string{"none", "locked", "striped"} {
		b.Run("mode="+mode, func(b *testing.B) {
			var (
				mu                 sync.RWMutex
				stop               atomic.Bool
				wg                 sync.WaitGroup
				inserted, sampled  atomic.Int64
				maxIns, maxSample  atomic.Int64
				writerLock, unlock = mu.RLock, mu.RUnlock
			)
			if mode != "locked" {
				writerLock, unlock = func() {}, func() {}
			}
			raise := func(m *atomic.Int64, d time.Duration) {
				for v := m.Load(); int64(d) > v && !m.CompareAndSwap(v, int64(d)); v = m.Load() {
				}
			}
			for g := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tr := makeTransitions(cfg, 64)
					for i := range tr.Priority {
						tr.Priority[i] = float64(g+i%7) / 8
					}
					next := time.Now()
					for !stop.Load() {
						next = pace(next, time.Millisecond)
						t0 := time.Now()
						writerLock()
						err := buf.Insert(tr)
						unlock()
						raise(&maxIns, time.Since(t0))
						if err != nil {
							panic(err)
						}
						inserted.Add(64)
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(3, 3))
				bt, _ := buf.NewBatch(256)
				p := make([]float64, 256)
				next := time.Now()
				for !stop.Load() {
					next = pace(next, 2*time.Millisecond)
					t0 := time.Now()
					if err := buf.Sample(rng, bt); err != nil {
						panic(err)
					}
					for i := range p {
						p[i] = rng.Float64()
					}
					writerLock()
					_, err := buf.UpdatePriorities(bt.Refs, p)
					unlock()
					raise(&maxSample, time.Since(t0))
					if err != nil {
						panic(err)
					}
					sampled.Add(256)
				}
			}()
			start := time.Now()
			b.ResetTimer()
			for range b.N {
				switch mode {
				case "none":
					time.Sleep(20 * time.Millisecond)
				case "locked":
					mu.Lock()
					err := buf.Save(io.Discard)
					mu.Unlock()
					if err != nil {
						b.Fatal(err)
					}
				case "striped":
					if err := buf.SaveStriped(io.Discard); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			el := time.Since(start).Seconds()
			stop.Store(true)
			wg.Wait()
			b.ReportMetric(float64(inserted.Load())/el, "inserts/s")
			b.ReportMetric(float64(sampled.Load())/el, "samples/s")
			b.ReportMetric(float64(maxIns.Load())/1e3, "max-insert-µs")
			b.ReportMetric(float64(maxSample.Load())/1e3, "max-draw-µs")
		})
	}
}

// pace sleeps until next+period (at once if that has passed: a stalled
// caller does not catch up) and returns the time it woke for.
func pace(next time.Time, period time.Duration) time.Time {
	next = next.Add(period)
	if d := time.Until(next); d > 0 {
		time.Sleep(d)
		return next
	}
	return time.Now()
}
