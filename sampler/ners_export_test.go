package sampler

import (
	"math"

	"github.com/apexrl/apex/buffer"
)

// NERSInputs returns the scorer's inputs for the first n rows of b as the
// stage builds them now (raw features, then the standardisation), copied;
// q and y as for features (nil: the per-slot store).
func NERSInputs(s *NERS, b *buffer.Batch, n int, q, y []float64) []float64 {
	x := s.features(b, n, q, y)
	s.standardise(x, n)
	return append([]float64(nil), x...)
}

// NERSRawFeatures returns the raw feature rows of the first n rows of b
// (NaN for an unreported δ, Q and y), copied.
func NERSRawFeatures(s *NERS, b *buffer.Batch, n int) []float64 {
	return append([]float64(nil), s.features(b, n, nil, nil)...)
}

// NERSHistory returns the refs held by the history reservoir and the
// number offered since the last update.
func NERSHistory(s *NERS) ([]buffer.Ref, int64) {
	return append([]buffer.Ref(nil), s.hist[:s.histN]...), s.seen
}

// NERSOffer offers r to the history reservoir.
func NERSOffer(s *NERS, r buffer.Ref) { s.offer(r) }

// CheckNERS verifies s's invariants.
func CheckNERS(s *NERS) error { return s.check() }

// NERSBreak corrupts one of s's invariants, by name.
func NERSBreak(s *NERS, what string) {
	switch what {
	case "gen":
		s.gen[0] = 3
	case "history":
		s.histN = len(s.hist) + 1
	case "moments":
		s.momMean[0] = math.NaN()
	case "steps":
		s.lastUpdate = s.steps + 1
	}
}
