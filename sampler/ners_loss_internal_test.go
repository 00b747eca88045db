package sampler

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestNERSLossGradients: the analytic dL/dσ of both REINFORCE losses (the
// official code's mean log σ and the batch-normalised variant) match
// central finite differences of the loss in each score.
func TestNERSLossGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 31))
	const m, h = 9, 1e-7
	sc := make([]float64, m)
	for i := range sc {
		sc[i] = 0.01 + 0.98*rng.Float64()
	}
	for _, c := range []struct {
		name string
		loss func(sc, dsc []float64) float64
	}{
		{"log", func(sc, dsc []float64) float64 { return nersLogLoss(sc, 2.5, dsc) }},
		{"normalised alpha 0.5", func(sc, dsc []float64) float64 { return nersNormalizedLoss(sc, -1.5, 0.5, dsc) }},
		{"normalised alpha 1", func(sc, dsc []float64) float64 { return nersNormalizedLoss(sc, 3, 1, dsc) }},
	} {
		dsc, scratch := make([]float64, m), make([]float64, m)
		c.loss(sc, dsc)
		for j := range sc {
			p, q := slices.Clone(sc), slices.Clone(sc)
			p[j] += h
			q[j] -= h
			fd := (c.loss(p, scratch) - c.loss(q, scratch)) / (2 * h)
			if math.Abs(fd-dsc[j]) > 1e-5*max(1, math.Abs(fd)) {
				t.Errorf("%s: dL/dσ_%d = %v, finite differences %v", c.name, j, dsc[j], fd)
			}
		}
	}
	// The normalised loss depends only on the scores' ratios.
	scaled := slices.Clone(sc)
	for i := range scaled {
		scaled[i] *= 0.5
	}
	d := make([]float64, m)
	if a, b := nersNormalizedLoss(sc, 1, 0.7, d), nersNormalizedLoss(scaled, 1, 0.7, d); math.Abs(a-b) > 1e-12 {
		t.Errorf("normalised loss %v, %v after halving every score", a, b)
	}
}
