package sampler

import (
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
)

// Uniform replays every stored item with the same probability 1/Size,
// whatever its stored priority (the DQN baseline; PER's alpha = 0 without
// the sum tree). Its loss weights are all 1.
//
// Update stores priority 1 for each still-stored ref rather than doing
// nothing: it validates the call like every stage, counts stale refs through
// the buffer's generation check (result and Stats.StaleUpdates stay honest),
// and keeps the buffer's tree uniform, so a proportional reader of the same
// buffer (or MinProb) also sees equal priorities. Writing an unchanged
// priority is one compare-and-swap, with no tree propagation.
//
// Concurrency: Priority may be called from any goroutine; Sample, Update
// and Weights by one goroutine at a time (Update reuses a scratch slice),
// concurrently with inserts into the buffer. A Uniform must not be copied
// after first use.
type Uniform struct {
	buf  *buffer.Buffer
	ones []float64 // Update's scratch, all 1
}

var (
	_ Selector = (*Uniform)(nil)
	_ Weighter = (*Uniform)(nil)
)

// NewUniform returns a uniform stage over buf. It cannot fail: a nil buf
// (like a zero Uniform) gives a stage whose Sample and Update return
// buffer.ErrConfig, so NewUniform keeps its one-result signature.
func NewUniform(buf *buffer.Buffer) *Uniform {
	return &Uniform{buf: buf}
}

// noBuffer reports a Uniform built over no buffer.
func (u *Uniform) noBuffer() error {
	if u.buf == nil {
		return fmt.Errorf("%w: uniform: nil buffer", buffer.ErrConfig)
	}
	return nil
}

// Sample draws dst.Len() items uniformly with replacement among the stored
// items (buffer.Buffer.SampleUniform); dst.Prob[i] = 1/Size. Items with
// priority 0 are drawn like any other. Errors: buffer.ErrEmpty,
// ErrBatchSize, ErrRetries (wrapped). Cost: O(dst.Len()·(Stripes + item
// size)); no allocation after the first call with a given dst.
func (u *Uniform) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	if err := u.noBuffer(); err != nil {
		return err
	}
	return u.buf.SampleUniform(rng, dst)
}

// Update validates absTD (lengths; NaN, infinite or negative errors reject
// the whole call) and stores priority 1 for every ref whose item is still
// stored; the others are counted in the result's Stale. Cost:
// O(len(refs)); no allocation once the scratch slice has grown.
func (u *Uniform) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	if err := checkTD("uniform", refs, absTD); err != nil {
		return buffer.UpdateResult{}, err
	}
	if err := u.noBuffer(); err != nil {
		return buffer.UpdateResult{}, err
	}
	if cap(u.ones) < len(refs) {
		u.ones = make([]float64, len(refs))
		for i := range u.ones {
			u.ones[i] = 1
		}
	}
	return u.buf.UpdatePriorities(refs, u.ones[:len(refs)])
}

// Priority is 1 for every input. O(1); safe for concurrent use.
func (u *Uniform) Priority(absTD float64) float64 { return 1 }

// Weights sets every weight of b to 1 (allocating b.Weight only if its
// length is not b.Len()). O(b.Len()). A nil b is an error
// (buffer.ErrNil).
func (u *Uniform) Weights(b *buffer.Batch, step int64) error {
	if b == nil {
		return fmt.Errorf("%w: uniform: Weights of a nil *buffer.Batch", buffer.ErrNil)
	}
	if len(b.Weight) != b.Len() {
		b.Weight = make([]float64, b.Len())
	}
	for i := range b.Weight {
		b.Weight[i] = 1
	}
	return nil
}

// String names the stage.
func (u *Uniform) String() string { return "uniform" }
