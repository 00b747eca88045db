package sampler

import (
	"math"

	"github.com/apexrl/apex/buffer"
)

// features writes the raw feature rows D(i) of the first n rows of b into
// s.featRows (n × width, row-major) and returns it: the observation, the
// action (one-hot for discrete actions, ActionVec/ActionScale otherwise),
// the reward, the next observation, EpisodeStep/Horizon (0 without a
// horizon or episode columns), then δ (|δ| with AbsTD), Q and y from the
// per-slot store, or NaN for an item the learner has not reported on
// (standardise turns it into nersFresh). O(n·width).
func (s *NERS) features(b *buffer.Batch, n int) []float64 {
	od, w := s.bcfg.ObsDim, s.width
	s.featRows = grow(s.featRows, n*w)
	x := s.featRows[:n*w]
	timed := s.cfg.Horizon > 0 && s.bcfg.Episode
	for i := range n {
		row := x[i*w : (i+1)*w]
		k := 0
		for _, v := range b.Obs[i*od : (i+1)*od] {
			row[k] = float64(v)
			k++
		}
		if s.bcfg.Action == buffer.Continuous {
			for _, v := range b.ActionVec[i*s.actW : (i+1)*s.actW] {
				row[k] = float64(v) / s.cfg.ActionScale
				k++
			}
		} else {
			clear(row[k : k+s.actW])
			if a := int(b.Action[i]); a >= 0 && a < s.actW {
				row[k+a] = 1
			}
			k += s.actW
		}
		row[k] = float64(b.Reward[i])
		k++
		for _, v := range b.NextObs[i*od : (i+1)*od] {
			row[k] = float64(v)
			k++
		}
		row[k] = 0
		if timed {
			row[k] = float64(b.EpisodeStep[i]) / float64(s.cfg.Horizon)
		}
		k++
		r := b.Refs[i]
		if s.gen[r.Slot] == r.Gen && r.Gen != 0 {
			d := float64(s.td[r.Slot])
			if s.cfg.AbsTD {
				d = math.Abs(d)
			}
			row[k], row[k+1], row[k+2] = d, float64(s.q[r.Slot]), float64(s.y[r.Slot])
		} else {
			row[k], row[k+1], row[k+2] = math.NaN(), math.NaN(), math.NaN()
		}
	}
	return x
}

// observe adds the first n raw rows of s.featRows to the running moments
// of each feature (Welford). O(n·width).
func (s *NERS) observe(n int) {
	w := s.width
	for i := range n {
		s.momN++
		for j, v := range s.featRows[i*w : (i+1)*w] {
			d := v - s.momMean[j]
			s.momMean[j] += d / s.momN
			s.momM2[j] += d * (v - s.momMean[j])
		}
	}
}

// standardise turns the first n raw rows of x into the scorer's inputs in
// place: tanh((v − mean)/sd) per feature with the running moments (mean 0
// and sd 1 before two rows were observed), or tanh(v) with RawFeatures;
// a NaN (an unreported δ, Q or y) becomes nersFresh. O(n·width).
func (s *NERS) standardise(x []float64, n int) {
	w := s.width
	for j := range w {
		mean, sd := 0.0, 1.0
		if !s.cfg.RawFeatures && s.momN >= 2 {
			mean, sd = s.momMean[j], math.Sqrt(s.momM2[j]/(s.momN-1))+nersStdEps
		}
		for i := range n {
			v := x[i*w+j]
			if math.IsNaN(v) {
				x[i*w+j] = nersFresh
				continue
			}
			x[i*w+j] = math.Tanh((v - mean) / sd)
		}
	}
}
