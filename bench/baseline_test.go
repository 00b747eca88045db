package bench

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"
)

func TestTransitionIs44Bytes(t *testing.T) {
	if got := unsafe.Sizeof(Transition{}); got != 44 || transitionBytes != 44 {
		t.Fatalf("Sizeof(Transition) = %d, want 44 (transitionBytes = %d)", got, transitionBytes)
	}
}

func tr(x float32) Transition { return Transition{Obs: [4]float32{x}, Reward: x} }

func TestBaselineFIFOAndPriorities(t *testing.T) {
	b := NewBaseline(5) // not a power of two: 8 leaves, 3 always empty
	if b.leaves != 8 || b.Capacity() != 5 {
		t.Fatalf("leaves %d capacity %d", b.leaves, b.Capacity())
	}
	b.Insert([]Transition{tr(0), tr(1), tr(2)}, []float64{0.5, 2, 0})
	if b.Size() != 3 || b.Total() != 2.5 {
		t.Fatalf("size %d total %v, want 3, 2.5", b.Size(), b.Total())
	}
	// nil priorities take the largest priority set so far (2).
	b.Insert([]Transition{tr(3), tr(4), tr(5), tr(6)}, nil)
	if b.Size() != 5 {
		t.Fatalf("size %d, want 5", b.Size())
	}
	// Items 5 and 6 overwrote slots 0 and 1 (FIFO).
	wantX := []float32{5, 6, 2, 3, 4}
	wantP := []float64{2, 2, 0, 2, 2}
	for s := range 5 {
		if b.ring[s].Obs[0] != wantX[s] || b.Priority(s) != wantP[s] {
			t.Errorf("slot %d: x=%v p=%v, want x=%v p=%v", s, b.ring[s].Obs[0], b.Priority(s), wantX[s], wantP[s])
		}
	}
	b.UpdatePriorities([]int{2, 4}, []float64{3, 0.25})
	if b.Total() != 2+2+3+2+0.25 {
		t.Fatalf("total %v after update", b.Total())
	}
	if b.maxPrio != 3 {
		t.Fatalf("max priority %v, want 3", b.maxPrio)
	}
	if err := b.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestBaselineSampleErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := NewBaseline(4)
	if err := b.Sample(rng, NewBaselineBatch(2)); !errors.Is(err, errBaselineEmpty) {
		t.Fatalf("empty: %v", err)
	}
	b.Insert([]Transition{tr(1)}, []float64{0})
	if err := b.Sample(rng, NewBaselineBatch(2)); !errors.Is(err, errBaselineZero) {
		t.Fatalf("zero mass: %v", err)
	}
}

// chiSquareCritical is the upper 0.001 quantile of the chi-square
// distribution with df degrees of freedom (Wilson–Hilferty approximation).
func chiSquareCritical(df int) float64 {
	const z = 3.090 // standard normal upper 0.001 quantile
	k := float64(df)
	a := 2 / (9 * k)
	return k * math.Pow(1-a+z*math.Sqrt(a), 3)
}

// TestBaselineSamplingDistribution checks that stratified sampling draws
// each item with probability p_i / total: a chi-square goodness-of-fit test
// over 100 slots (some with priority 0, which must never be drawn), with a
// fixed seed.
func TestBaselineSamplingDistribution(t *testing.T) {
	const (
		capacity = 100
		batch    = 64
		rounds   = 4000
		seed     = 7
	)
	b := NewBaseline(capacity)
	prios := make([]float64, capacity)
	ts := make([]Transition, capacity)
	for i := range prios {
		prios[i] = float64(i % 7) // slots 0, 7, 14, ... have priority 0
		ts[i] = tr(float32(i))
	}
	b.Insert(ts, prios)
	total := b.Total()
	rng := rand.New(rand.NewPCG(seed, 0))
	dst := NewBaselineBatch(batch)
	counts := make([]float64, capacity)
	for range rounds {
		if err := b.Sample(rng, dst); err != nil {
			t.Fatal(err)
		}
		for j, s := range dst.Index {
			counts[s]++
			if dst.Transitions[j].Obs[0] != float32(s) {
				t.Fatalf("row %d: data of slot %v, index %d", j, dst.Transitions[j].Obs[0], s)
			}
			if want := prios[s] / total; math.Abs(dst.Prob[j]-want) > 1e-12 {
				t.Fatalf("row %d: prob %v, want %v", j, dst.Prob[j], want)
			}
		}
	}
	n := float64(batch * rounds)
	nonZero := 0
	for _, p := range prios {
		if p > 0 {
			nonZero++
		}
	}
	// chi2 is the statistic against the right probabilities p_i/total;
	// chi2Uniform against uniform over the non-zero slots, as a check that
	// the test can tell a wrong distribution apart.
	var chi2, chi2Uniform float64
	for i, c := range counts {
		if prios[i] == 0 {
			if c != 0 {
				t.Fatalf("slot %d has priority 0 but was drawn %v times", i, c)
			}
			continue
		}
		e := n * prios[i] / total
		chi2 += (c - e) * (c - e) / e
		u := n / float64(nonZero)
		chi2Uniform += (c - u) * (c - u) / u
	}
	df := nonZero - 1
	crit := chiSquareCritical(df)
	if chi2 > crit {
		t.Fatalf("seed %d: chi-square %.1f > %.1f (df %d, p = 0.001)", seed, chi2, crit, df)
	}
	if chi2Uniform <= crit {
		t.Fatalf("seed %d: the test cannot tell uniform sampling apart (chi-square %.1f <= %.1f)", seed, chi2Uniform, crit)
	}
	t.Logf("chi-square %.1f, df %d, critical %.1f (against uniform: %.0f)", chi2, df, crit, chi2Uniform)
}

// TestBaselineSamplingSkewed checks the descent on a skewed tree, where
// float rounding near range ends matters: tiny priorities beside huge ones
// and a partly filled ring (empty leaves to the right).
func TestBaselineSamplingSkewed(t *testing.T) {
	b := NewBaseline(1 << 10)
	ts := make([]Transition, 300)
	prios := make([]float64, 300)
	for i := range prios {
		prios[i] = 1e-9
	}
	prios[0], prios[299] = 1e6, 1e6
	b.Insert(ts, prios)
	rng := rand.New(rand.NewPCG(3, 0))
	dst := NewBaselineBatch(256)
	for range 200 {
		if err := b.Sample(rng, dst); err != nil {
			t.Fatal(err)
		}
		for _, s := range dst.Index {
			if s >= 300 {
				t.Fatalf("drew empty slot %d", s)
			}
		}
	}
}

func TestBaselineConcurrent(t *testing.T) {
	b := NewBaseline(1000)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			ts := make([]Transition, 32)
			for i := range 200 {
				b.Insert(ts, nil)
				if i%4 == 0 {
					b.UpdatePriorities([]int{w, 10 + w}, []float64{float64(i%5) + 0.5, 1})
				}
			}
		})
	}
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(9, 9))
		dst := NewBaselineBatch(16)
		for range 200 {
			if err := b.Sample(rng, dst); err != nil && !errors.Is(err, errBaselineEmpty) {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	if err := b.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if b.Size() != 1000 {
		t.Fatalf("size %d, want 1000", b.Size())
	}
}
