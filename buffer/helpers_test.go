package buffer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// mustNew builds a buffer or fails the test.
func mustNew(tb interface {
	Helper()
	Fatalf(string, ...any)
}, cfg Config) *Buffer {
	tb.Helper()
	b, err := New(cfg)
	if err != nil {
		tb.Fatalf("New(%+v): %v", cfg, err)
	}
	return b
}

// items returns n discrete transitions whose Reward, Obs[0] and NextObs[0]
// all carry id0+i (so a torn copy shows as disagreeing columns) and whose
// priorities are prio(i) (nil prio: no priorities).
func items(cfg Config, id0, n int, prio func(i int) float64) *Transitions {
	t := makeTransitions(cfg, n)
	d := cfg.ObsDim
	for i := range n {
		id := float32(id0 + i)
		t.Reward[i] = id
		t.Obs[i*d] = id
		t.NextObs[i*d] = id + 0.5
		t.Discount[i] = 0.99
		if t.Action != nil {
			t.Action[i] = int32((id0 + i) % 3)
		}
		if prio != nil {
			t.Priority[i] = prio(i)
		}
	}
	if prio == nil {
		t.Priority = nil
	}
	return t
}

// chiSquare returns the statistic of observed counts against expected
// probabilities (cells with probability 0 must have count 0), the degrees
// of freedom, and the 0.999 quantile for them.
func chiSquare(t *testing.T, counts []int, probs []float64) (stat, q999 float64) {
	t.Helper()
	total := 0
	for _, c := range counts {
		total += c
	}
	df := -1
	for i, p := range probs {
		if p == 0 {
			if counts[i] != 0 {
				t.Fatalf("cell %d has probability 0 but was drawn %d times", i, counts[i])
			}
			continue
		}
		e := p * float64(total)
		stat += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
		df++
	}
	return stat, distuv.ChiSquared{K: float64(df)}.Quantile(0.999)
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func pow(x, y float64) float64 { return math.Pow(x, y) }

// sampleInto draws a batch with Sample, or with SampleRefs followed by
// GatherRef of every row (the two-step path), and fails if a live ref of
// the batch cannot be read.
func sampleInto(b *Buffer, rng *rand.Rand, bt *Batch, refsOnly bool) error {
	if !refsOnly {
		return b.Sample(rng, bt)
	}
	if err := b.SampleRefs(rng, bt); err != nil {
		return err
	}
	for j, r := range bt.Refs {
		if !b.GatherRef(bt, j, r) {
			return fmt.Errorf("row %d: ref %v unreadable right after SampleRefs", j, r)
		}
	}
	return nil
}

// mustBatch returns b.NewBatch(n) and fails the test on error.
func mustBatch(tb testing.TB, b *Buffer, n int) *Batch {
	tb.Helper()
	bt, err := b.NewBatch(n)
	if err != nil {
		tb.Fatalf("NewBatch(%d): %v", n, err)
	}
	return bt
}
