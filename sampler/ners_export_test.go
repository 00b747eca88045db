package sampler

import "github.com/apexrl/apex/buffer"

// NERSInputs returns the scorer's inputs for the first n rows of b as the
// stage builds them now (raw features, then the standardisation), copied.
func NERSInputs(s *NERS, b *buffer.Batch, n int) []float64 {
	x := s.features(b, n)
	s.standardise(x, n)
	return append([]float64(nil), x...)
}

// NERSRawFeatures returns the raw feature rows of the first n rows of b
// (NaN for an unreported δ, Q and y), copied.
func NERSRawFeatures(s *NERS, b *buffer.Batch, n int) []float64 {
	return append([]float64(nil), s.features(b, n)...)
}

// NERSHistory returns the refs held by the history reservoir and the
// number offered since the last update.
func NERSHistory(s *NERS) ([]buffer.Ref, int64) {
	return append([]buffer.Ref(nil), s.hist[:s.histN]...), s.seen
}

// NERSOffer offers r to the history reservoir.
func NERSOffer(s *NERS, r buffer.Ref) { s.offer(r) }
