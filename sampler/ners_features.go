package sampler

import (
	"math"

	"github.com/apexrl/apex/buffer"
)

// features writes the raw feature rows D(i) of the first n rows of b into
// s.featRows (n × width, row-major) and returns it: the observation, the
// action (one-hot for discrete actions, ActionVec/ActionScale otherwise),
// the reward, the next observation, EpisodeStep/Horizon (0 without a
// horizon or episode columns), then δ = y − Q (|δ| with AbsTD), Q and y:
// row i's q[i] and y[i] when q is not nil, else the per-slot store's, or
// NaN for an item the learner has not reported on (standardise turns it
// into nersFresh). O(n·width).
func (s *NERS) features(b *buffer.Batch, n int, q, y []float64) []float64 {
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
		switch {
		case q != nil:
			// As the store would round them, so a row's features do not
			// change between its report and a later re-read.
			row[k], row[k+1], row[k+2] = float64(float32(y[i]-q[i])), float64(float32(q[i])), float64(float32(y[i]))
		case s.gen[r.Slot] == r.Gen && r.Gen != 0:
			row[k], row[k+1], row[k+2] = float64(s.td[r.Slot]), float64(s.q[r.Slot]), float64(s.y[r.Slot])
		default:
			row[k], row[k+1], row[k+2] = math.NaN(), math.NaN(), math.NaN()
		}
		if s.cfg.AbsTD {
			row[k] = math.Abs(row[k])
		}
	}
	return x
}

// observe adds the first n raw rows of s.featRows to the running moments
// of each feature (Welford). A row with a value that is not finite, or
// whose update would overflow the moments, is left out. O(n·width).
func (s *NERS) observe(n int) {
	w := s.width
rows:
	for i := range n {
		row := s.featRows[i*w : (i+1)*w]
		for j, v := range row {
			if d := v - s.momMean[j]; math.IsNaN(d) || math.IsInf(d, 0) || math.IsInf(d*d*(s.momN+1), 0) {
				continue rows
			}
		}
		s.momN++
		for j, v := range row {
			d := v - s.momMean[j]
			s.momMean[j] += d / s.momN
			s.momM2[j] += d * (v - s.momMean[j])
		}
	}
}

// nersMoments is a copy of the running moments.
type nersMoments struct {
	n        float64
	mean, m2 []float64
}

// saveMoments copies the moments into reused scratch. O(width).
func (s *NERS) saveMoments() *nersMoments {
	m := &s.momSaved
	m.n = s.momN
	m.mean = append(m.mean[:0], s.momMean...)
	m.m2 = append(m.m2[:0], s.momM2...)
	return m
}

// restoreMoments puts back what saveMoments copied. O(width).
func (s *NERS) restoreMoments(m *nersMoments) {
	s.momN = m.n
	copy(s.momMean, m.mean)
	copy(s.momM2, m.m2)
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
