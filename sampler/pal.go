package sampler

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
)

// Normalizer scales a batch's loss by a factor computed from the batch's
// own TD errors, treated as a constant (no gradient flows through it): PAL's
// 1/λ̂. The learner computes |δ| for the batch in its forward pass, asks the
// Normalizer for the scale and multiplies every sample's loss weight by it.
type Normalizer interface {
	// Scale returns the factor for a batch whose items have absolute TD
	// errors absTD (for twin critics, the larger of the two per item). It
	// fails on an empty batch or a NaN, infinite or negative error.
	Scale(absTD []float64) (float64, error)
}

// PAL is the prioritized approximation loss's stage (Fujimoto et al. 2020,
// §5.2): selection is uniform (it replays like Uniform and stores no
// feedback), and the paired loss (model.Loss with Kind PAL, Method "pal")
// is divided by λ̂, the batch mean of max(|δ_i|, K)^Alpha, as the authors'
// code does (the paper's λ is the buffer-wide mean; the batch mean is its
// cheap, slightly biased estimate). With the same Alpha and K, uniform
// sampling with this loss has LAP's expected gradient (Observation 4) with
// no sum tree and no write-back.
//
// PAL is a Selector (uniform), a Weighter (all ones) and a Normalizer.
// Concurrency: as Selector says; Scale is called by the learner. A PAL must
// not be copied after first use.
type PAL struct {
	u   *Uniform
	cfg LAPConfig
}

var (
	_ Selector   = (*PAL)(nil)
	_ Weighter   = (*PAL)(nil)
	_ Normalizer = (*PAL)(nil)
)

// NewPAL validates cfg and returns a PAL stage over buf.
func NewPAL(buf *buffer.Buffer, cfg LAPConfig) (*PAL, error) {
	if buf == nil {
		return nil, fmt.Errorf("%w: pal: nil buffer", buffer.ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w (pal)", err)
	}
	return &PAL{u: NewUniform(buf), cfg: cfg}, nil
}

// Config returns the stage's configuration. O(1).
func (p *PAL) Config() LAPConfig { return p.cfg }

// Sample draws dst.Len() items uniformly with replacement (Uniform.Sample).
func (p *PAL) Sample(rng *rand.Rand, dst *buffer.Batch) error { return p.u.Sample(rng, dst) }

// Update validates the call and counts stale refs like Uniform.Update; PAL
// keeps no feedback, so the stored priorities stay 1.
func (p *PAL) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	return p.u.Update(refs, absTD)
}

// Priority is 1 for every input (uniform selection). O(1).
func (p *PAL) Priority(absTD float64) float64 { return 1 }

// Weights sets every weight of b to 1: PAL has no importance weights; its
// correction is the loss itself and Scale.
func (p *PAL) Weights(b *buffer.Batch, step int64) error { return p.u.Weights(b, step) }

// Scale returns 1/λ̂ with λ̂ = mean_i max(absTD[i], K)^Alpha (Eq. 10's
// normaliser over the batch). O(len(absTD)); no allocation.
func (p *PAL) Scale(absTD []float64) (float64, error) {
	if len(absTD) == 0 {
		return 0, fmt.Errorf("%w: pal: Scale of an empty batch", buffer.ErrBatchSize)
	}
	var sum float64
	for i, d := range absTD {
		if !(d >= 0) || math.IsInf(d, 1) {
			return 0, fmt.Errorf("%w: pal: absTD[%d] = %v (TD errors must be finite and >= 0)", buffer.ErrPriority, i, d)
		}
		sum += math.Pow(math.Max(d, p.cfg.K), p.cfg.Alpha)
	}
	if math.IsInf(sum, 1) || !(sum > 0) {
		return 0, fmt.Errorf("%w: pal: the batch's mean of max(|δ|, k)^alpha is %v (out of float64 range)", buffer.ErrPriority, sum/float64(len(absTD)))
	}
	return float64(len(absTD)) / sum, nil
}

// String names the stage and its parameters.
func (p *PAL) String() string { return fmt.Sprintf("pal(alpha=%g,k=%g)", p.cfg.Alpha, p.cfg.K) }
