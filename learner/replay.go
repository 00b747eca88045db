package learner

import (
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// sampleWeighted fills b through m's stage and returns the rows' loss
// weights (m's Weighter at learner step step−1, or nil for all 1): the
// replay's sampling phase of a learner step. Errors name the step.
func sampleWeighted(m sampler.Method, rng *rand.Rand, b *buffer.Batch, step uint64) ([]float64, error) {
	if err := m.Selector.Sample(rng, b); err != nil {
		return nil, fmt.Errorf("learner: step %d: sample: %w", step, err)
	}
	if m.Weighter == nil {
		return nil, nil
	}
	if err := m.Weighter.Weights(b, int64(step-1)); err != nil {
		return nil, fmt.Errorf("learner: step %d: weights: %w", step, err)
	}
	return b.Weight, nil
}

// writeBack stores one step's feedback on batch b: the absolute TD errors
// through the Selector's Update, or, for a stage that scores items from
// features (sampler.FeatureUpdater, NERS), every row's Q(s, a) and target
// y through UpdateFeatures.
func writeBack(m sampler.Method, b *buffer.Batch, absTD, q, y []float64) (buffer.UpdateResult, error) {
	if fu, ok := m.Selector.(sampler.FeatureUpdater); ok {
		return fu.UpdateFeatures(b.Refs, q, y)
	}
	return m.Selector.Update(b.Refs, absTD)
}
