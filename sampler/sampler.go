// Package sampler holds the swappable selection stages of apex's replay
// path: which stored items a batch replays, how learner feedback becomes
// stored priority, and how each sampled item is weighted in the loss.
//
// One small interface, Selector (modelled on Reverb's ItemSelector), and one
// file per method: uniform.go, per.go (PER proportional), rank.go (PER
// rank-based), lap.go (LAP), pal.go (PAL), ter.go (TER, reverse sweeps
// over a graph of state codes mixed with PER), refer.go (ReF-ER's
// stage: uniform over the steps of finished episodes, with the far-policy
// controller and Retrace targets V-RACER trains on) and ners.go (NERS: a
// learned set scorer, ners_net.go, sets the sum tree's priorities). What
// does not fit Selector gets its own small interface rather than growing
// it: Weighter (importance weights before the forward pass), Normalizer (a
// loss scale from the batch's own TD errors, PAL's 1/λ̂), FeatureUpdater (a stage that scores
// from Q and the target as well as δ, NERS) and EvaluationHook (a stage
// trained on evaluation returns, NERS). Every Selector except REFER and
// NERS passes the conformance suite in sampler/samplertest (REFER replays
// whole episodes, which the suite's buffers do not hold; NERS takes its
// feedback through UpdateFeatures, not Update; their own tests cover the
// same properties).
//
// A replay method is a stage paired with the loss its expected gradient
// was derived for (Fujimoto et al. 2020): Method holds the pairing, and
// the capabilities a method has beyond Selector (Features, Evaluated,
// State, Stats, Episodes, Positional: drawing at given positions of the
// mass, for sampling across replay shards; nil when absent). Each method
// is described by a Spec registered in registry.go (one method_<name>.go
// file per method; Register adds more, Methods and Lookup list them): its options and
// flags, its buffer layout, its learners, its loss and how it is built.
// NewMethod builds the valid ones by name (uniform, per, rank with Huber,
// MSE or L1; lap with Huber(k); pal, uniform selection with the PAL loss
// over the batch mean of max(|δ|, k)^α; ter with the learner's loss and
// importance weights on its PER rows; refer, refer-1, refer-2 and er with
// V-RACER's own losses; ners with the learner's loss and importance
// weights). Learners take a Method.
package sampler

import (
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
)

// Selector is a selection stage over a buffer.Buffer.
//
// Concurrency: Priority may be called from any goroutine at any time (actors
// call it). Sample and Update are called by one goroutine at a time (the
// learner); they may run concurrently with inserts into the buffer.
type Selector interface {
	// Sample fills every row of dst (dst.Len() rows): it chooses items,
	// copies their data and sets Refs, Prob (the probability each row was
	// drawn with, as actually used), Size, Total and MinProb. It fails with
	// buffer.ErrEmpty, buffer.ErrZeroMass or buffer.ErrBatchSize (wrapped)
	// when the buffer cannot supply dst.Len() items.
	Sample(rng *rand.Rand, dst *buffer.Batch) error
	// Update turns the learner's absolute TD errors for sampled items into
	// stored priorities. Refs whose slot was overwritten since sampling are
	// dropped and counted in the result. A NaN, infinite or negative error,
	// or len(refs) != len(absTD), is an error and nothing is applied.
	Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error)
	// Priority is the priority to store for a new item whose actor computed
	// absolute TD error absTD (Ape-X actors compute their own). A negative
	// absTD means "unknown": the caller should then leave Priority nil in
	// buffer.Transitions so the item gets the buffer's maximum priority.
	Priority(absTD float64) float64
	// String names the stage and its parameters, e.g. "per(alpha=0.6,...)".
	String() string
}

// Weighter computes per-item loss weights for a sampled batch: importance
// weights for PER, all ones for uniform. step is the learner step (it drives
// annealing schedules).
type Weighter interface {
	Weights(b *buffer.Batch, step int64) error
}

// FeatureUpdater is implemented by a stage that scores items from more
// than |δ| (NERS). A learner whose Selector implements it calls
// UpdateFeatures instead of Update: for every row of the last Sample's
// batch, in order, Q(s, a) as the loss saw it and the target y it was
// regressed toward (δ = y − Q), all rows at once, since a row's score
// depends on the whole batch. Refs overwritten since sampling are dropped
// and counted in the result; non-finite values, or refs that are not the
// last batch's, are an error and nothing is applied.
type FeatureUpdater interface {
	UpdateFeatures(refs []buffer.Ref, q, target []float64) (buffer.UpdateResult, error)
}

// EvaluationHook is implemented by a stage that learns from the returns of
// evaluations (NERS's replay reward). The runtime calls Evaluated with the
// mean return of each evaluation of the greedy policy. It is safe for
// concurrent use with the learner's calls; a non-finite return is an
// error.
type EvaluationHook interface {
	Evaluated(meanReturn float64) error
}

// Linear is a schedule that moves linearly from Start at step 0 to End at
// step Steps and stays at End afterwards (PER's beta annealing, Schaul et
// al. 2016 §3.4). Steps <= 0 means End from the start.
type Linear struct {
	Start, End float64
	Steps      int64
}

// At is the schedule's value at step. O(1).
func (l Linear) At(step int64) float64 {
	if l.Steps <= 0 || step >= l.Steps {
		return l.End
	}
	if step <= 0 {
		return l.Start
	}
	return l.Start + (l.End-l.Start)*float64(step)/float64(l.Steps)
}
