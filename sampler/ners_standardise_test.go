package sampler_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// TestNERSStandardisationByHand: the scorer's δ, Q and y inputs are
// tanh((v − mean)/sd) with the mean and sample sd (n − 1) of every row
// reported so far, against values worked out by hand; with RawFeatures
// they are tanh(v) (the authors' code); a feature with no spread gives 0.
func TestNERSStandardisationByHand(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-7 } // the sd carries a 1e-8 guard
	buf := samplertest.NewBuffer(t, 8)
	samplertest.Insert(t, buf, 0, 8, nil)
	rng := rand.New(rand.NewPCG(7, 7))

	s := newNERS(t, buf, sampler.NERSConfig{})
	w := s.Width()
	b := samplertest.NewBatch(t, buf, 4)
	if err := s.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	// Q = 0, 1, 2, 3 and y = 1: δ = 1, 0, −1, −2. Q's mean is 1.5 and its
	// sample sd √(5/3) = 1.2910; δ's mean −0.5, the same sd; y has none.
	q, y := []float64{0, 1, 2, 3}, []float64{1, 1, 1, 1}
	if _, err := s.UpdateFeatures(b.Refs, q, y); err != nil {
		t.Fatal(err)
	}
	in := sampler.NERSInputs(s, b, 4, q, y)
	wantQ := []float64{-0.8216564906947734, -0.36902881148103855, 0.36902881148103855, 0.8216564906947734}
	for i := range 4 {
		td, qq, yy := in[i*w+w-3], in[i*w+w-2], in[i*w+w-1]
		if !near(td, -wantQ[i]) || !near(qq, wantQ[i]) || yy != 0 {
			t.Errorf("row %d: δ, Q, y inputs %v %v %v; want %v %v 0", i, td, qq, yy, -wantQ[i], wantQ[i])
		}
	}
	// A second batch with Q = 4: the moments run over all 8 rows, Q's
	// mean 2.75 and sample sd √(17.5/7) = 1.5811.
	b2 := samplertest.NewBatch(t, buf, 4)
	if err := s.Sample(rng, b2); err != nil {
		t.Fatal(err)
	}
	q2 := []float64{4, 4, 4, 4}
	if _, err := s.UpdateFeatures(b2.Refs, q2, y); err != nil {
		t.Fatal(err)
	}
	in = sampler.NERSInputs(s, b, 4, q, y)
	in2 := sampler.NERSInputs(s, b2, 4, q2, y)
	if got := in[w-2]; !near(got, -0.9401399137223732) {
		t.Errorf("Q = 0 after 8 rows: input %v, want tanh(−2.75/1.5811) = −0.94014", got)
	}
	if got := in2[w-2]; !near(got, 0.6587314872521947) {
		t.Errorf("Q = 4 after 8 rows: input %v, want tanh(1.25/1.5811) = 0.65873", got)
	}

	raw := newNERS(t, buf, sampler.NERSConfig{RawFeatures: true})
	b3 := samplertest.NewBatch(t, buf, 4)
	if err := raw.Sample(rng, b3); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.UpdateFeatures(b3.Refs, q, y); err != nil {
		t.Fatal(err)
	}
	in = sampler.NERSInputs(raw, b3, 4, q, y)
	if td, qq, yy := in[3*w+w-3], in[3*w+w-2], in[3*w+w-1]; !near(td, -0.9640275800758169) || !near(qq, 0.9950547536867305) || !near(yy, 0.7615941559557649) {
		t.Errorf("raw features, row 3: δ, Q, y inputs %v %v %v; want tanh(−2), tanh(3), tanh(1)", td, qq, yy)
	}
}
