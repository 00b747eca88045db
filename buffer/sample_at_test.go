package buffer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSampleAtMatchesProbabilities draws batches at uniformly random
// (sorted) positions: item frequencies must be p_i/Σp (chi-square at the
// 0.999 quantile), each row's Prob p_i/Σp; positions that ascend give
// items in the order of their cumulative ranges; a batch may hold more
// rows than the buffer has items. SampleUniformAt: frequencies 1/N.
func TestSampleAtMatchesProbabilities(t *testing.T) {
	for _, stripes := range []int{1, 4} {
		t.Run(fmt.Sprintf("stripes=%d", stripes), func(t *testing.T) {
			const seed = 20261126
			const n = 40
			cfg := Config{Capacity: n, Stripes: stripes, ObsDim: 1}
			b := mustNew(t, cfg)
			prio := func(i int) float64 {
				if i%13 == 0 {
					return 0
				}
				return float64(1 + (i*7)%11)
			}
			if err := b.Insert(items(cfg, 0, n, prio)); err != nil {
				t.Fatal(err)
			}
			total := 0.0
			for i := range n {
				total += prio(i)
			}
			probs := make([]float64, n)
			uniform := make([]float64, n)
			for i := range n {
				probs[i], uniform[i] = prio(i)/total, 1.0/n
			}
			rng := rand.New(rand.NewPCG(seed, 1))
			const rows = 64 // more than the items
			bt := mustBatch(t, b, rows)
			at := make([]float64, rows)
			counts, ucounts := make([]int, n), make([]int, n)
			for range 400 {
				for j := range at {
					at[j] = rng.Float64()
				}
				slices.Sort(at)
				if err := b.SampleAt(rng, at, bt); err != nil {
					t.Fatal(err)
				}
				for j := range rows {
					id := int(bt.Reward[j])
					counts[id]++
					if !near(bt.Prob[j], probs[id], 1e-12) {
						t.Fatalf("row %d: Prob %v, want %v", j, bt.Prob[j], probs[id])
					}
					// One stripe: the cumulative ranges follow the slots, so
					// ascending positions meet ascending slots.
					if stripes == 1 && j > 0 && bt.Refs[j].Slot < bt.Refs[j-1].Slot {
						t.Fatalf("rows %d, %d: positions %v ≤ %v gave slots %d > %d", j-1, j, at[j-1], at[j], bt.Refs[j-1].Slot, bt.Refs[j].Slot)
					}
				}
				if bt.Size != n || !near(bt.Total, total, 1e-9*total) {
					t.Fatalf("Size %d Total %v", bt.Size, bt.Total)
				}
				if err := b.SampleUniformAt(rng, at, bt); err != nil {
					t.Fatal(err)
				}
				for j := range rows {
					ucounts[int(bt.Reward[j])]++
					if bt.Prob[j] != 1.0/n {
						t.Fatalf("uniform row %d: Prob %v", j, bt.Prob[j])
					}
				}
			}
			if stat, q := chiSquare(t, counts, probs); stat > q {
				t.Fatalf("seed %d: chi-square %.1f above the 0.999 quantile %.1f", seed, stat, q)
			}
			if stat, q := chiSquare(t, ucounts, uniform); stat > q {
				t.Fatalf("seed %d: uniform chi-square %.1f above the 0.999 quantile %.1f", seed, stat, q)
			}
		})
	}
}

// TestSampleAtRefusesBadPositions: a length other than the batch's, a
// descending position, one outside [0, 1) or NaN is ErrShape; an empty
// buffer ErrEmpty; nil rng or batch ErrNil.
func TestSampleAtRefusesBadPositions(t *testing.T) {
	cfg := Config{Capacity: 8, Stripes: 1, ObsDim: 1}
	b := mustNew(t, cfg)
	rng := rand.New(rand.NewPCG(1, 1))
	bt := mustBatch(t, b, 2)
	if err := b.SampleAt(rng, []float64{0.1, 0.2}, bt); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty buffer: %v", err)
	}
	if err := b.Insert(items(cfg, 0, 4, func(int) float64 { return 1 })); err != nil {
		t.Fatal(err)
	}
	for _, at := range [][]float64{nil, {0.1}, {0.2, 0.1}, {0.1, 1}, {-0.1, 0.5}, {0.1, math.NaN()}} {
		for name, f := range map[string]func([]float64, *Batch) error{
			"SampleAt":        func(a []float64, d *Batch) error { return b.SampleAt(rng, a, d) },
			"SampleUniformAt": func(a []float64, d *Batch) error { return b.SampleUniformAt(rng, a, d) },
		} {
			if err := f(at, bt); !errors.Is(err, ErrShape) {
				t.Errorf("%s(%v): %v, want ErrShape", name, at, err)
			}
		}
	}
	if err := b.SampleAt(nil, []float64{0, 0.5}, bt); !errors.Is(err, ErrNil) {
		t.Errorf("nil rng: %v", err)
	}
	if err := b.SampleAt(rng, []float64{0, 0.5}, nil); !errors.Is(err, ErrNil) {
		t.Errorf("nil batch: %v", err)
	}
	if err := b.SampleAt(rng, []float64{0, 0.99}, bt); err != nil {
		t.Errorf("good positions: %v", err)
	}
}
