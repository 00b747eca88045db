package sampler_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

func TestUniformConformance(t *testing.T) {
	samplertest.Run(t, func(t *testing.T, buf *buffer.Buffer) sampler.Selector {
		return sampler.NewUniform(buf)
	}, samplertest.Options{})
}

// TestUniformIgnoresPriorities draws from items with very uneven stored
// priorities, some 0, and checks the frequencies against 1/N.
func TestUniformIgnoresPriorities(t *testing.T) {
	const n, k, rounds, seed = 40, 8, 10_000, 0x0171
	buf := samplertest.NewBuffer(t, n)
	prio := make([]float64, n)
	probs := make([]float64, n)
	for i := range prio {
		prio[i] = float64(i%5) * float64(i) // zeros and up to 156
		probs[i] = 1.0 / n
	}
	samplertest.Insert(t, buf, 0, n, prio)
	s := sampler.NewUniform(buf)
	rng := rand.New(rand.NewPCG(seed, 1))
	b := samplertest.NewBatch(t, buf, k)
	counts := make([]int, n)
	for range rounds {
		if err := s.Sample(rng, b); err != nil {
			t.Fatal(err)
		}
		for j := range k {
			if b.Prob[j] != 1.0/n {
				t.Fatalf("row %d: Prob %v, want 1/%d", j, b.Prob[j], n)
			}
			counts[samplertest.ID(b, j)]++
		}
	}
	samplertest.ChiSquare(t, seed, counts, probs)
}

func TestUniformUpdateAndWeights(t *testing.T) {
	buf := samplertest.NewBuffer(t, 16)
	prio := make([]float64, 16)
	for i := range prio {
		prio[i] = float64(i) / 4
	}
	samplertest.Insert(t, buf, 0, 16, prio)
	s := sampler.NewUniform(buf)
	for _, d := range []float64{-1, 0, 0.5, 100, math.NaN()} {
		if p := s.Priority(d); p != 1 {
			t.Errorf("Priority(%v) = %v, want 1", d, p)
		}
	}
	b := samplertest.NewBatch(t, buf, 16)
	if err := s.Sample(rand.New(rand.NewPCG(2, 2)), b); err != nil {
		t.Fatal(err)
	}
	td := make([]float64, 16)
	for j := range td {
		td[j] = float64(j)
	}
	res, err := s.Update(b.Refs, td)
	if err != nil || res.Applied != 16 || res.Stale != 0 {
		t.Fatalf("Update: %+v, %v", res, err)
	}
	for _, ref := range b.Refs {
		if _, p, _ := buf.SlotPriority(int(ref.Slot)); p != 1 {
			t.Errorf("slot %d: priority %v after Update, want 1", ref.Slot, p)
		}
	}
	b.Weight = nil
	if err := s.Weights(b, 0); err != nil {
		t.Fatal(err)
	}
	if len(b.Weight) != 16 {
		t.Fatalf("%d weights for 16 rows", len(b.Weight))
	}
	for j, w := range b.Weight {
		if w != 1 {
			t.Errorf("row %d: weight %v, want 1", j, w)
		}
	}
	// The weights agree with PER's formula for P = 1/N at any beta.
	if err := b.ImportanceWeights(1, buffer.NormalizeNone); err != nil {
		t.Fatal(err)
	}
	for j, w := range b.Weight {
		if math.Abs(w-1) > 1e-12 {
			t.Errorf("row %d: (N·P)^-1 = %v, want 1", j, w)
		}
	}
}

func TestUniformNoAllocs(t *testing.T) {
	buf := samplertest.NewBuffer(t, 1024)
	samplertest.Insert(t, buf, 0, 1024, nil)
	s := sampler.NewUniform(buf)
	rng := rand.New(rand.NewPCG(3, 3))
	b := samplertest.NewBatch(t, buf, 32)
	td := make([]float64, 32)
	cycle := func() {
		if err := s.Sample(rng, b); err != nil {
			t.Fatal(err)
		}
		if err := s.Weights(b, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(b.Refs, td); err != nil {
			t.Fatal(err)
		}
	}
	cycle()
	if a := testing.AllocsPerRun(50, cycle); a != 0 {
		t.Errorf("Sample+Weights+Update allocate %v times per batch", a)
	}
}
