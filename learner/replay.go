package learner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// replayStep is the replay half of one learner step, the part DQN, TD3
// and SAC share (V-RACER shares the sampling, the phase timing and the
// step count: its feedback goes back through ReF-ER's controller, between
// writing and wrote, and it keeps no |δ|):
//
//	r, w, err := startReplay(m, rng, batch, step, absTD, wts) // sample, the Weighter's weights
//	... targets and forward passes; the learner fills absTD with |δ| ...
//	w, err = r.scale(w)                                        // × the Normalizer's batch scale
//	... loss(w), backward, optimiser ...
//	err = r.writeBack(q, y)                                    // |δ| (or Q and y) back to the stage
//	... the learner's own later phases ...
//	r.commit(&counters, q)                                     // the shared counters
//
// Each phase's errors name the step and leave what the doc of the
// learner's Step says; commit runs only once the whole step succeeded, so
// a failed step changes no counter. A replayStep lives on its learner's
// stack for one Step: it allocates nothing.
type replayStep struct {
	m     sampler.Method
	b     *buffer.Batch
	step  uint64
	absTD []float64 // the learner's |δ| scratch, filled between start and scale
	wts   []float64 // the learner's scratch for the normalised weights
	res   buffer.UpdateResult
	// t0..t3: the step's start, the end of sampling, the start and end of
	// the write-back (Timing).
	t0, t1, t2, t3 time.Time
}

// startReplay starts step (1-based) of a learner: it samples b through
// m's stage and takes the rows' weights (nil: all 1; see sampleWeighted).
// absTD and wts are the learner's Batch-long scratch vectors.
func startReplay(m sampler.Method, rng *rand.Rand, b *buffer.Batch, step uint64, absTD, wts []float64) (replayStep, []float64, error) {
	r := replayStep{m: m, b: b, step: step, absTD: absTD, wts: wts, t0: time.Now()}
	w, err := sampleWeighted(m, rng, b, step)
	r.t1 = time.Now()
	return r, w, err
}

// scale returns the loss weights: w (nil: all 1) times the method's
// Normalizer's scale of the batch's |δ| (r.absTD), or w itself without a
// Normalizer (see normalize).
func (r *replayStep) scale(w []float64) ([]float64, error) {
	return normalize(r.m, r.wts, w, r.absTD, r.step)
}

// writeBack hands the step's feedback to the stage: |δ| through Update,
// or the rows' Q(s, a) (q) and targets (y) to a FeatureUpdater. Timed as
// the write-back phase; a learner with more stage feedback (ReF-ER's
// Refresh) calls wrote after it to extend that phase.
func (r *replayStep) writeBack(q, y []float64) error {
	r.writing()
	res, err := writeBack(r.m, r.b, r.absTD, q, y)
	r.t3 = time.Now()
	if err != nil {
		return fmt.Errorf("learner: step %d: priority write-back: %w", r.step, err)
	}
	r.res = res
	return nil
}

// writing starts the write-back phase now, for a learner whose stage
// takes its feedback another way (V-RACER's ReF-ER refresh); wrote ends
// it.
func (r *replayStep) writing() { r.t2 = time.Now() }

// wrote ends the write-back phase now.
func (r *replayStep) wrote() { r.t3 = time.Now() }

// count records the completed step's phase times and, last, its number:
// what every learner counts (commit adds the rest for DQN, TD3 and SAC).
func (r *replayStep) count(timing *phaseTimer, steps *atomic.Uint64) {
	timing.add(time.Since(r.t0), r.t1.Sub(r.t0), r.t3.Sub(r.t2))
	steps.Store(r.step)
}

// commit records the completed step in c: the batch's mean |δ| and mean
// Q(s, a) (q), the write-backs applied and stale, the phases' times, the
// sampled rows' moments and, last, the step count. O(Batch).
func (r *replayStep) commit(c *replayCounters, q []float64) {
	var sumTD, sumQ float64
	for i, d := range r.absTD {
		sumTD += d
		sumQ += q[i]
	}
	inv := 1 / float64(len(r.absTD))
	c.meanAbsTD.Store(math.Float64bits(sumTD * inv))
	c.meanQ.Store(math.Float64bits(sumQ * inv))
	c.writeBacks.Add(uint64(r.res.Applied))
	c.stale.Add(uint64(r.res.Stale))
	c.sampled.add(r.absTD, q)
	r.count(&c.timing, &c.steps)
}

// replayCounters are the Stats fields every replaying learner keeps
// alike, written by replayStep.commit (and restored by Load), each an
// atomic word so Stats may read them from any goroutine while Step writes
// them. Embedded in each learner's counters.
type replayCounters struct {
	timing     phaseTimer
	sampled    momentTracker
	steps      atomic.Uint64
	meanAbsTD  atomic.Uint64 // float64 bits
	meanQ      atomic.Uint64 // float64 bits
	writeBacks atomic.Uint64
	stale      atomic.Uint64
}

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
// features (the method's Features, NERS), every row's Q(s, a) and target
// y through UpdateFeatures.
func writeBack(m sampler.Method, b *buffer.Batch, absTD, q, y []float64) (buffer.UpdateResult, error) {
	if m.Features != nil {
		return m.Features.UpdateFeatures(b.Refs, q, y)
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
