package buffer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// cartPole is the 44-byte transition of the benchmarks: 4+4 float32
// observations, a discrete action, reward and discount.
func cartPole(capacity int, opts ...func(*Config)) Config {
	c := Config{Capacity: capacity, ObsDim: 4}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// filled returns a full buffer with priorities uniform(0,1)^0.6 (the
// distribution of the design notes' measurements).
func filled(tb testing.TB, cfg Config, seed uint64) *Buffer {
	tb.Helper()
	b, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	const chunk = 4096
	tr := makeTransitions(cfg, chunk)
	for done := 0; done < cfg.Capacity; done += chunk {
		n := min(chunk, cfg.Capacity-done)
		t := sliceTransitions(tr, cfg, n)
		for i := range n {
			t.Priority[i] = math.Pow(rng.Float64(), 0.6)
			t.Reward[i] = float32(done + i)
		}
		if err := b.Insert(t); err != nil {
			tb.Fatal(err)
		}
	}
	return b
}

// makeTransitions allocates n items of cfg's shape, priorities included.
func makeTransitions(cfg Config, n int) *Transitions {
	cfg = cfg.withDefaults()
	t := &Transitions{
		Obs:      make([]float32, n*cfg.ObsDim),
		NextObs:  make([]float32, n*cfg.ObsDim),
		Reward:   make([]float32, n),
		Discount: make([]float32, n),
		Priority: make([]float64, n),
	}
	if cfg.Action == Continuous {
		t.ActionVec = make([]float32, n*cfg.ActionDim)
	} else {
		t.Action = make([]int32, n)
	}
	return t
}

// sliceTransitions is the first n items of t.
func sliceTransitions(t *Transitions, cfg Config, n int) *Transitions {
	cfg = cfg.withDefaults()
	s := *t
	s.Obs, s.NextObs = t.Obs[:n*cfg.ObsDim], t.NextObs[:n*cfg.ObsDim]
	if t.Action != nil {
		s.Action = t.Action[:n]
	} else {
		s.ActionVec = t.ActionVec[:n*cfg.ActionDim]
	}
	s.Reward, s.Discount, s.Priority = t.Reward[:n], t.Discount[:n], t.Priority[:n]
	return &s
}

// BenchmarkBatch is one learner step on the replay path, one goroutine: 256
// stratified samples with their 44-byte rows copied (Sample), then 256
// priority write-backs.
func BenchmarkBatch(b *testing.B) { benchStep(b, (*Buffer).Sample) }

// BenchmarkBatchRefs is the tree-only learner step (the C check's and the
// Go prototype's definition): SampleRefs of 256 stratified items followed by
// their 256 write-backs, no data copied.
func BenchmarkBatchRefs(b *testing.B) { benchStep(b, (*Buffer).SampleRefs) }

func benchStep(b *testing.B, sample func(*Buffer, *rand.Rand, *Batch) error) {
	for _, lg := range []int{16, 17, 20} {
		for _, mt := range []bool{true, false} {
			b.Run(fmt.Sprintf("N=2^%d/mintree=%v", lg, mt), func(b *testing.B) {
				buf := filled(b, cartPole(1<<lg, func(c *Config) { c.NoMinTree = !mt }), 1)
				rng := rand.New(rand.NewPCG(2, 3))
				bt := mustBatch(b, buf, 256)
				prios := make([]float64, 256)
				for i := range prios {
					prios[i] = math.Pow(rng.Float64(), 0.6)
				}
				for b.Loop() {
					if err := sample(buf, rng, bt); err != nil {
						b.Fatal(err)
					}
					if _, err := buf.UpdatePriorities(bt.Refs, prios); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/batch")
			})
		}
	}
}

// BenchmarkGatherRows isolates Sample's row copies, with no tree: 256
// uniformly random stored slots per iteration, prefetched in one pass
// (touchRows) and copied into a batch (copyOut), as Sample does after its
// descent. At 2^20 the items (48 MiB of fields) do not fit in the cache.
func BenchmarkGatherRows(b *testing.B) {
	for _, lg := range []int{16, 20} {
		b.Run(fmt.Sprintf("N=2^%d", lg), func(b *testing.B) {
			buf := filled(b, cartPole(1<<lg), 1)
			rng := rand.New(rand.NewPCG(2, 3))
			bt := mustBatch(b, buf, 256)
			slots := make([]int32, 256)
			for b.Loop() {
				for i := range slots {
					slots[i] = int32(rng.IntN(1 << lg))
				}
				buf.touchRows(slots)
				for i, g := range slots {
					buf.copyOut(bt, i, int(g))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/batch")
		})
	}
}

// BenchmarkSample and BenchmarkUpdate split the batch into its halves.
func BenchmarkSample(b *testing.B) {
	buf := filled(b, cartPole(1<<20), 1)
	rng := rand.New(rand.NewPCG(2, 3))
	bt := mustBatch(b, buf, 256)
	for b.Loop() {
		if err := buf.Sample(rng, bt); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/batch")
}

func BenchmarkUpdate(b *testing.B) {
	for _, mt := range []bool{true, false} {
		b.Run(fmt.Sprintf("mintree=%v", mt), func(b *testing.B) {
			buf := filled(b, cartPole(1<<20, func(c *Config) { c.NoMinTree = !mt }), 1)
			rng := rand.New(rand.NewPCG(2, 3))
			bt := mustBatch(b, buf, 256)
			if err := buf.Sample(rng, bt); err != nil {
				b.Fatal(err)
			}
			prios := make([]float64, 256)
			for b.Loop() {
				for i := range prios {
					prios[i] = rng.Float64()
				}
				if _, err := buf.UpdatePriorities(bt.Refs, prios); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/batch")
		})
	}
}

// BenchmarkInsert measures inserts of 44-byte transitions with their
// priorities, one goroutine: single items and batches of 32 and 256, with
// and without the min tree.
func BenchmarkInsert(b *testing.B) {
	for _, lg := range []int{17, 20} {
		for _, c := range []struct {
			n  int
			mt bool
		}{{1, true}, {32, true}, {256, true}, {32, false}, {256, false}} {
			n := c.n
			b.Run(fmt.Sprintf("N=2^%d/batch=%d/mintree=%v", lg, n, c.mt), func(b *testing.B) {
				cfg := cartPole(1<<lg, func(cf *Config) { cf.NoMinTree = !c.mt })
				buf := filled(b, cfg, 1)
				t := makeTransitions(cfg, n)
				for i := range n {
					t.Priority[i] = 0.5 + float64(i)/64
				}
				for b.Loop() {
					if err := buf.Insert(t); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds()/1e6, "Mitems/s")
			})
		}
	}
}
