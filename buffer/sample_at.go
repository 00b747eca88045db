package buffer

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// SampleAt draws row j of dst at position at[j] of the total priority
// mass T: the item whose cumulative mass range holds at[j]·T (positions
// are fractions of the mass, so a caller that planned them against an
// older T keeps their relative places). It is Sample with the targets
// given instead of drawn: a caller that spreads stratified targets over
// several buffers (remote.ShardedMethod, across replay shards) hands each
// buffer its share. dst.Prob[i] is p_i/T as read during the descent, Size,
// Total (T) and MinProb as Sample sets them. at must be ascending, each in
// [0, 1), one per row; unlike Sample, dst may have more rows than the
// buffer has items (positions may repeat an item). A row whose position
// meets a slot being written re-reads the tree at the same position, and
// after 64 tries draws over the whole mass (counted in
// Stats.StratumFallbacks). rng serves those fallbacks only.
//
// Errors: as Sample, and ErrShape for a len(at) other than dst.Len(), or a
// position outside [0, 1) or below its predecessor. Cost: as Sample. Safe
// for concurrent use with every other method.
func (b *Buffer) SampleAt(rng *rand.Rand, at []float64, dst *Batch) error {
	if at == nil {
		at = []float64{} // nil means "not positional" below; checkSampleAt refuses it
	}
	defer func() {
		if dst != nil {
			dst.scr.at = nil // do not keep the caller's slice
		}
	}()
	return b.sampleRows(rng, dst, at)
}

// SampleUniformAt is SampleUniform with row j at position at[j] of the
// stored items (the item at index ⌊at[j]·C⌋ of the C claimed slots, in
// stripe order): the uniform twin of SampleAt, whose mass is the number of
// items. dst.Prob[i] = 1/Size. Positions and errors as SampleAt. Cost as
// SampleUniform. Safe for concurrent use.
func (b *Buffer) SampleUniformAt(rng *rand.Rand, at []float64, dst *Batch) error {
	if at == nil {
		at = []float64{}
	}
	return b.sampleUniform(rng, dst, at)
}

// checkSampleAt checks SampleAt's positions against a batch of n rows and
// returns the buffer's size.
func (b *Buffer) checkSampleAt(at []float64, n int) (int, error) {
	size := b.Size()
	switch {
	case size == 0:
		return 0, fmt.Errorf("%w: cannot sample %d items", ErrEmpty, n)
	case n <= 0:
		return 0, fmt.Errorf("%w: batch of %d items", ErrBatchSize, n)
	case len(at) != n:
		return 0, fmt.Errorf("%w: %d positions for a batch of %d rows", ErrShape, len(at), n)
	}
	prev := 0.0
	for j, f := range at {
		if !(f >= prev && f < 1) { // NaN fails
			return 0, fmt.Errorf("%w: position %d is %v (positions ascend within [0, 1); the previous is %v)", ErrShape, j, f, prev)
		}
		prev = f
	}
	return size, nil
}

// position is fraction f of total in units, below total (total > 0).
func position(f float64, total uint64) uint64 {
	u := uint64(math.Floor(f * float64(total)))
	return min(u, total-1)
}
