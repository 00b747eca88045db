package sampler

import (
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
)

// Positional is the capability of a stage that draws at positions the
// caller gives, as fractions of the stage's mass: what sampling across
// replay shards needs (remote.ShardedMethod maps a batch's stratified
// targets over the shards' masses and hands each shard its share as
// fractions of that shard's mass). A method declares it in
// Method.Positional: proportional PER and LAP (the mass is the total
// priority), uniform and PAL (the mass is the number of items). Rank-based
// PER, TER, NERS and the ReF-ER methods have none: rank's probabilities
// depend on the whole buffer's ordering, TER mixes sweeps with PER rows,
// NERS re-scores its candidates, ReF-ER draws whole episodes' steps.
//
// Concurrency: as Selector's Sample (one goroutine at a time), and Mass
// from any goroutine.
type Positional interface {
	// Mass is the stage's current mass, the measure positions are
	// fractions of: the total priority, or the number of items of a
	// uniform stage. O(Stripes).
	Mass() float64
	// SampleAt fills every row of dst as Sample does, row j at position
	// at[j] of the mass as it is now (the item whose cumulative range holds
	// at[j]·Mass), and returns that mass. dst.Prob[i] is row i's
	// probability within the stage (its share of the mass), Size, Total
	// and MinProb as Sample sets them. at ascends within [0, 1), one
	// position per row; dst may have more rows than the buffer has items.
	// rng serves the fallbacks of rows that meet items being written.
	// Errors as Sample's, and buffer.ErrShape for bad positions.
	SampleAt(rng *rand.Rand, at []float64, dst *buffer.Batch) (mass float64, err error)
}

// proportionalAt is the Positional capability of a stage that samples in
// proportion to its stored priorities (PER, LAP): positions over the
// buffer's total priority.
type proportionalAt struct{ buf *buffer.Buffer }

func (p proportionalAt) Mass() float64 { return p.buf.TotalPriority() }

func (p proportionalAt) SampleAt(rng *rand.Rand, at []float64, dst *buffer.Batch) (float64, error) {
	if err := checkArgs("positional", rng, dst); err != nil {
		return 0, err
	}
	if err := p.buf.SampleAt(rng, at, dst); err != nil {
		return 0, err
	}
	return dst.Total, nil
}

// uniformAt is the Positional capability of a stage that samples
// uniformly (uniform, PAL): positions over the stored items, mass the
// number of items.
type uniformAt struct{ buf *buffer.Buffer }

func (u uniformAt) Mass() float64 { return float64(u.buf.Size()) }

func (u uniformAt) SampleAt(rng *rand.Rand, at []float64, dst *buffer.Batch) (float64, error) {
	if err := checkArgs("positional", rng, dst); err != nil {
		return 0, err
	}
	if u.buf == nil {
		return 0, fmt.Errorf("%w: uniform: nil buffer", buffer.ErrConfig)
	}
	if err := u.buf.SampleUniformAt(rng, at, dst); err != nil {
		return 0, err
	}
	return float64(dst.Size), nil
}
