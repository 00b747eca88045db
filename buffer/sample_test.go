package buffer

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestSampleMatchesProbabilities draws many stratified batches and compares
// the item frequencies with p_i/sum(p) by a chi-square test at the 0.999
// quantile (conservative: stratified draws vary less than i.i.d. ones).
// Priority-0 items must never be drawn.
func TestSampleMatchesProbabilities(t *testing.T) {
	for _, stripes := range []int{1, 4, 64} {
		t.Run(fmt.Sprintf("stripes=%d", stripes), func(t *testing.T) {
			const seed = 20261121
			const n = 200
			cfg := Config{Capacity: n, Stripes: stripes, ObsDim: 1}
			b := mustNew(t, cfg)
			prio := func(i int) float64 {
				if i%17 == 0 {
					return 0
				}
				return float64(1 + (i*37)%23)
			}
			if err := b.Insert(items(cfg, 0, n, prio)); err != nil {
				t.Fatal(err)
			}
			total := 0.0
			for i := range n {
				total += prio(i)
			}
			probs := make([]float64, n)
			for i := range n {
				probs[i] = prio(i) / total // item id i is at slot... found through Reward
			}
			rng := rand.New(rand.NewPCG(seed, 0))
			bt := mustBatch(t, b, 32)
			counts := make([]int, n)
			for it := range 3000 {
				// alternate Sample and SampleRefs + GatherRef
				if err := sampleInto(b, rng, bt, it%2 == 1); err != nil {
					t.Fatal(err)
				}
				for j, r := range bt.Refs {
					id := int(bt.Reward[j])
					counts[id]++
					if want := probs[id]; !near(bt.Prob[j], want, 1e-12) {
						t.Fatalf("seed %d: row %d (slot %d) Prob %v, want %v", seed, j, r.Slot, bt.Prob[j], want)
					}
				}
			}
			stat, q := chiSquare(t, counts, probs)
			if stat > q {
				t.Fatalf("seed %d: chi-square %.1f above the 0.999 quantile %.1f", seed, stat, q)
			}
		})
	}
}

// TestSampleStratified checks that row j lands in stratum j: the item's
// cumulative mass range (in slot order) meets [jT/B, (j+1)T/B).
func TestSampleStratified(t *testing.T) {
	const seed = 7
	cfg := Config{Capacity: 1000, Stripes: 8, ObsDim: 1}
	b := mustNew(t, cfg)
	rng := rand.New(rand.NewPCG(seed, 1))
	if err := b.Insert(items(cfg, 0, 1000, func(int) float64 { return rng.Float64() * 3 })); err != nil {
		t.Fatal(err)
	}
	lo := make([]uint64, cfg.Capacity+1) // cumulative units by slot
	for s := range cfg.Capacity {
		_, _, li := b.leafIndex(s)
		lo[s+1] = lo[s] + b.tree[0][li].Load()&prioMask
	}
	total := lo[cfg.Capacity]
	for _, B := range []int{1, 7, 64, 256} {
		bt := mustBatch(t, b, B)
		for range 50 {
			if err := b.Sample(rng, bt); err != nil {
				t.Fatal(err)
			}
			for j, r := range bt.Refs {
				a, z := lo[r.Slot], lo[r.Slot+1]
				sa, sz := mulDiv(total, uint64(j), uint64(B)), mulDiv(total, uint64(j+1), uint64(B))
				if z <= sa || a >= sz {
					t.Fatalf("seed %d, B=%d: row %d drew slot %d with mass [%d,%d), outside stratum [%d,%d)", seed, B, j, r.Slot, a, z, sa, sz)
				}
			}
		}
	}
}

// TestStripesDoNotChangeTheDistribution is the metamorphic check: the same
// items in 1 and in 64 stripes have equal totals and are drawn with the
// same probabilities.
func TestStripesDoNotChangeTheDistribution(t *testing.T) {
	const n = 640
	prio := func(i int) float64 { return float64(1 + i%10) }
	var totals []float64
	for _, stripes := range []int{1, 64} {
		cfg := Config{Capacity: n, Stripes: stripes, ObsDim: 1}
		b := mustNew(t, cfg)
		for i := 0; i < n; i += 10 { // several batches, spread over stripes
			if err := b.Insert(items(cfg, i, 10, func(k int) float64 { return prio(i + k) })); err != nil {
				t.Fatal(err)
			}
		}
		totals = append(totals, b.TotalPriority())
		const seed = 11
		rng := rand.New(rand.NewPCG(seed, 2))
		bt := mustBatch(t, b, 64)
		counts := make([]int, n)
		probs := make([]float64, n)
		for i := range n {
			probs[i] = prio(i) / (5.5 * n)
		}
		for range 2000 {
			if err := b.Sample(rng, bt); err != nil {
				t.Fatal(err)
			}
			for j := range bt.Refs {
				counts[int(bt.Reward[j])]++
			}
		}
		if stat, q := chiSquare(t, counts, probs); stat > q {
			t.Fatalf("stripes=%d seed %d: chi-square %.1f above %.1f", stripes, seed, stat, q)
		}
	}
	if totals[0] != totals[1] {
		t.Fatalf("totals differ: %v", totals)
	}
}

func TestSampleUniformMatchesProbabilities(t *testing.T) {
	const seed = 99
	const n = 100
	cfg := Config{Capacity: n, Stripes: 8, ObsDim: 1}
	b := mustNew(t, cfg)
	if err := b.Insert(items(cfg, 0, n, func(i int) float64 { return float64(i % 3) })); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	bt := mustBatch(t, b, 50)
	counts := make([]int, n)
	probs := make([]float64, n)
	for i := range probs {
		probs[i] = 1.0 / n
	}
	for range 2000 {
		if err := b.SampleUniform(rng, bt); err != nil {
			t.Fatal(err)
		}
		for j := range bt.Refs {
			counts[int(bt.Reward[j])]++
			if bt.Prob[j] != 1.0/n {
				t.Fatalf("Prob %v, want 1/%d", bt.Prob[j], n)
			}
		}
	}
	if stat, q := chiSquare(t, counts, probs); stat > q {
		t.Fatalf("seed %d: chi-square %.1f above %.1f", seed, stat, q)
	}
}

func TestSampleDeterministic(t *testing.T) {
	cfg := Config{Capacity: 4096, ObsDim: 2}
	run := func() []Ref {
		b := mustNew(t, cfg)
		if err := b.Insert(items(cfg, 0, 4096, func(i int) float64 { return float64(1 + i%7) })); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(42, 42))
		bt := mustBatch(t, b, 64)
		var out []Ref
		for range 5 {
			if err := b.Sample(rng, bt); err != nil {
				t.Fatal(err)
			}
			out = append(out, bt.Refs...)
		}
		return out
	}
	a, c := run(), run()
	for i := range a {
		if a[i] != c[i] {
			t.Fatalf("same seed, different draw %d: %v vs %v", i, a[i], c[i])
		}
	}
}
