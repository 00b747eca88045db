package sampler

import (
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
)

// reseedStream is the PCG stream (its second seed word) a Reseeder seeds
// its per-sample generator with; fixed, so that a seed names one draw
// everywhere.
const reseedStream = 0x5a3b1e5eed

// Reseeder is a Selector that makes every Sample a pure function of one
// 64-bit seed: Sample draws seed := rng.Uint64() from the caller's
// generator (exactly one draw, whatever the inner stage does) and samples
// the inner Selector with a generator seeded from it (SampleSeed). A
// learner therefore consumes its own generator identically whether its
// stage runs in its process or behind a network: a remote Selector sends
// the seed, and the server, holding a Reseeder over the real stage, calls
// SampleSeed with it and draws the same batch.
//
// Priority, Update and String pass through to the inner Selector.
// Concurrency: Sample and SampleSeed reuse one generator and are called by
// one goroutine at a time, like every Selector's Sample (a server holds one
// Reseeder per sampling stream); Priority may be called from any goroutine.
// Cost: Sample adds one Uint64 draw and a PCG reseed (O(1), no allocation)
// to the inner Sample.
type Reseeder struct {
	inner Selector
	pcg   *rand.PCG
	rng   *rand.Rand
}

// Reseed returns sel wrapped in a Reseeder; a *Reseeder is returned as it
// is (wrapping twice would change the draws). A nil sel gives nil. O(1).
func Reseed(sel Selector) *Reseeder {
	switch s := sel.(type) {
	case nil:
		return nil
	case *Reseeder:
		return s
	}
	pcg := rand.NewPCG(0, reseedStream)
	return &Reseeder{inner: sel, pcg: pcg, rng: rand.New(pcg)}
}

// Unwrap is the inner Selector. O(1).
func (r *Reseeder) Unwrap() Selector { return r.inner }

// Sample draws one seed from rng and samples the inner Selector with it
// (SampleSeed). A nil rng is refused by the inner Selector's contract, so
// it is an error here too, with nothing drawn.
func (r *Reseeder) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	if rng == nil {
		return r.inner.Sample(nil, dst) // the inner stage's own error for a nil generator
	}
	return r.SampleSeed(rng.Uint64(), dst)
}

// SampleSeed fills dst as the inner Selector's Sample does, with a
// generator seeded from seed alone: the same seed, stage state and buffer
// contents give the same batch. One goroutine at a time (it reuses the
// Reseeder's generator); no allocation beyond the inner Sample's.
func (r *Reseeder) SampleSeed(seed uint64, dst *buffer.Batch) error {
	r.pcg.Seed(seed, reseedStream)
	return r.inner.Sample(r.rng, dst)
}

// Update passes through to the inner Selector.
func (r *Reseeder) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	return r.inner.Update(refs, absTD)
}

// Priority passes through to the inner Selector.
func (r *Reseeder) Priority(absTD float64) float64 { return r.inner.Priority(absTD) }

// String is the inner Selector's name.
func (r *Reseeder) String() string { return r.inner.String() }

// Unwrapped is sel without any Reseeder around it (sel itself otherwise),
// for callers that need the concrete stage. O(1).
func Unwrapped(sel Selector) Selector {
	if r, ok := sel.(*Reseeder); ok {
		return r.inner
	}
	return sel
}
