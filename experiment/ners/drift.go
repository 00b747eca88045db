package ners

import (
	"math"
	"math/rand/v2"

	"github.com/apexrl/apex/sampler"
)

// CodeWidths are the authors' code's scorer widths (youngmin0oh/NERS,
// memory.py: f_l and f_g in-128-256-128-64, f_s 128-128-64-1).
func CodeWidths(in int) sampler.NERSNetConfig {
	return sampler.NERSNetConfig{In: in, Local: []int{128, 256, 128, 64}, Global: []int{128, 256, 128, 64}, Score: []int{128, 64}}
}

// Drift is what Updates REINFORCE steps do to a fresh scorer's scores of
// one fixed batch of rows, averaged over seeds.
type Drift struct {
	Updates int
	// MeanAbsChange is the mean over the rows of |σ_after − σ_before|;
	// SDChange the change of the scores' sd over the rows (the spread
	// that makes sampling non-uniform).
	MeanAbsChange, SDChange float64
	// RatioBefore and RatioAfter are the largest over the smallest
	// priority σ^0.5 among the rows: 1 is uniform sampling.
	RatioBefore, RatioAfter float64
}

// ScorerDrift builds a scorer from cfg for each seed, scores a fixed batch
// of m rows of tanh(N(0, 1)) features, takes updates REINFORCE steps
// (Adam 1e-4, the authors' loss) each on a new batch of m such rows with
// reward +1 (sameSign) or a random ±1, and scores the fixed batch again.
// It measures how far the paper's update moves the sampling distribution
// within a 10k-step run (48 updates at one per 200 steps).
func ScorerDrift(cfg sampler.NERSNetConfig, m, updates int, sameSign bool, seeds []uint64) (Drift, error) {
	d := Drift{Updates: updates}
	spread := func(sc []float64) (sd, ratio float64) {
		var mean float64
		lo, hi := math.Inf(1), 0.0
		for _, s := range sc {
			mean += s / float64(len(sc))
			lo, hi = min(lo, s), max(hi, s)
		}
		for _, s := range sc {
			sd += (s - mean) * (s - mean) / float64(len(sc))
		}
		return math.Sqrt(sd), math.Sqrt(hi / lo)
	}
	k := float64(len(seeds))
	for _, seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 0xd41f7))
		net, err := sampler.NewNERSNet(cfg, rng)
		if err != nil {
			return Drift{}, err
		}
		in := net.Config().In
		rows := func() []float64 {
			x := make([]float64, m*in)
			for i := range x {
				x[i] = math.Tanh(rng.NormFloat64())
			}
			return x
		}
		fixed := rows()
		before := append([]float64(nil), net.Scores(fixed)...)
		for range updates {
			r := 1.0
			if !sameSign && rng.IntN(2) == 0 {
				r = -1
			}
			if _, err := net.Reinforce(rows(), r); err != nil {
				return Drift{}, err
			}
		}
		after := net.Scores(fixed)
		sd0, r0 := spread(before)
		sd1, r1 := spread(after)
		for i := range after {
			d.MeanAbsChange += math.Abs(after[i]-before[i]) / float64(m) / k
		}
		d.SDChange += (sd1 - sd0) / k
		d.RatioBefore += r0 / k
		d.RatioAfter += r1 / k
	}
	return d, nil
}
