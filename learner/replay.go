package learner

import (
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
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

// normalize scales the rows' weights w (nil: all 1) by m's Normalizer's
// batch scale into dst and returns them (w itself without a Normalizer):
// the step's loss-scale phase. A non-finite |δ| is reported as such (a
// NaN in the data shows here first), not as the normaliser's refusal.
// Errors name the step. O(len(dst)).
func normalize(m sampler.Method, dst, w, absTD []float64, step uint64) ([]float64, error) {
	if m.Normalizer == nil {
		return w, nil
	}
	if err := model.CheckFinite("TD error", absTD); err != nil {
		return w, stepError(step, nil, err)
	}
	out, err := scaleWeights(dst, w, m.Normalizer, absTD)
	if err != nil {
		return w, fmt.Errorf("learner: step %d: normalizer: %w", step, err)
	}
	return out, nil
}

// scaleWeights sets dst[i] = w[i]·c (w nil: 1·c) with c = n.Scale(absTD),
// the method's batch scale (PAL's 1/λ̂), and returns dst. A Scale error, or
// a scale that is not finite and > 0 (a *model.NonFiniteError for NaN and
// infinities), returns w unchanged and the error. O(len(dst)).
func scaleWeights(dst, w []float64, n sampler.Normalizer, absTD []float64) ([]float64, error) {
	c, err := n.Scale(absTD)
	if err != nil {
		return w, err
	}
	if err := model.CheckFiniteValue("normalizer scale", c); err != nil {
		return w, err
	}
	if !(c > 0) {
		return w, fmt.Errorf("scale %v (must be > 0)", c)
	}
	for i := range dst {
		v := 1.0
		if w != nil {
			v = w[i]
		}
		dst[i] = v * c
	}
	return dst, nil
}
