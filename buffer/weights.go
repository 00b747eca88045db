package buffer

import (
	"fmt"

	"github.com/apexrl/apex/internal/xmath"
)

// Normalization selects how importance weights are scaled so they only ever
// scale updates down (Schaul et al. 2016 §3.4).
type Normalization uint8

const (
	// NormalizeBuffer divides by the largest weight any stored item could
	// get, (N·P_min)^-beta (OpenAI baselines; needs the min tree).
	NormalizeBuffer Normalization = iota
	// NormalizeBatch divides by the largest weight in the batch (dopamine,
	// the NERS code).
	NormalizeBatch
	// NormalizeNone leaves w_i = (N·P(i))^-beta as is.
	NormalizeNone
)

func (n Normalization) String() string {
	switch n {
	case NormalizeBuffer:
		return "buffer"
	case NormalizeBatch:
		return "batch"
	case NormalizeNone:
		return "none"
	}
	return fmt.Sprintf("Normalization(%d)", uint8(n))
}

// ImportanceWeights fills b.Weight with w_i = (N·P(i))^-beta, N = b.Size and
// P(i) = b.Prob[i] (the probability actually used), normalised as norm says.
// beta must be in [0, 1]. NormalizeBuffer needs b.MinProb (a buffer with a
// min tree); without it the call fails. O(Len).
//
// Errors (b's fields are checked, as a caller may fill them): ErrNil for a
// nil b, ErrBatchSize when rows were drawn from no items (Size < 1), and
// unwrapped errors for beta outside [0, 1], a Prob or MinProb outside
// (0, 1], or an unknown norm.
func (b *Batch) ImportanceWeights(beta float64, norm Normalization) error {
	if b == nil {
		return fmt.Errorf("%w: ImportanceWeights of a nil *Batch", ErrNil)
	}
	if len(b.Prob) > 0 && b.Size < 1 {
		return fmt.Errorf("%w: batch of %d rows drawn from Size = %d items", ErrBatchSize, len(b.Prob), b.Size)
	}
	if !(beta >= 0 && beta <= 1) {
		return fmt.Errorf("buffer: importance-weight exponent beta must be in [0, 1], got %v", beta)
	}
	if len(b.Weight) != len(b.Prob) {
		b.Weight = make([]float64, len(b.Prob))
	}
	n := float64(b.Size)
	for i, p := range b.Prob {
		if !(p > 0 && p <= 1) {
			return fmt.Errorf("buffer: row %d was drawn with probability %v; weights need P(i) in (0, 1]", i, p)
		}
	}
	xmath.PowAffine(b.Weight, b.Prob, n, 0, -beta) // (N·P(i))^-β, vectorized
	wmax := 0.0
	for _, w := range b.Weight {
		wmax = max(wmax, w)
	}
	switch norm {
	case NormalizeBatch:
	case NormalizeBuffer:
		if !(b.MinProb > 0) {
			return fmt.Errorf("buffer: NormalizeBuffer needs the buffer's minimum priority (Config.NoMinTree is set, or no item has one)")
		}
		if !(b.MinProb <= 1) {
			return fmt.Errorf("buffer: NormalizeBuffer: MinProb = %v is not a probability", b.MinProb)
		}
		// Items whose priority rose above the minimum after the batch was
		// drawn cannot exceed the bound; take the larger so weights stay <= 1.
		wmax = max(wmax, xmath.Pow(n*b.MinProb, -beta))
	case NormalizeNone:
		return nil
	default:
		return fmt.Errorf("buffer: unknown normalization %d", norm)
	}
	inv := 1 / wmax
	for i := range b.Weight {
		b.Weight[i] *= inv
	}
	return nil
}
