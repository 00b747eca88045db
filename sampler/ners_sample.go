package sampler

import (
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
)

// Sample first applies a pending evaluation (a REINFORCE update of the
// scorer when one is due, see NERS), then draws dst.Len() items by
// stratified proportional sampling over the buffer's sum tree of
// score^Alpha priorities (buffer.Buffer.Sample: dst.Prob holds the
// probabilities actually used) and adds their refs to the history.
//
// Errors: those of buffer.Buffer.Sample (ErrEmpty, ErrBatchSize,
// ErrZeroMass, ErrRetries, wrapped), and a scorer update that produced
// non-finite values (model.ErrNonFinite, wrapped; the scorer is left as it
// was and the evaluation is dropped).
//
// Cost: O(dst.Len()·(log Capacity + item size)) for the draw; an update,
// when due, adds TrainSize gathers and one forward and backward pass of
// the scorer over TrainSize rows. No allocation after the first calls.
func (s *NERS) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	if err := checkArgs("ners", rng, dst); err != nil {
		return err
	}
	if err := s.applyEvaluation(); err != nil {
		return err
	}
	if err := s.buf.Sample(rng, dst); err != nil {
		return err
	}
	s.steps++
	s.last = dst
	for _, r := range dst.Refs {
		s.offer(r)
	}
	s.assertInvariants()
	return nil
}

// offer adds r to the history reservoir (Vitter's algorithm R). O(1).
func (s *NERS) offer(r buffer.Ref) {
	s.seen++
	if s.histN < len(s.hist) {
		s.hist[s.histN] = r
		s.histN++
		return
	}
	if j := s.rng.Int64N(s.seen); j < int64(len(s.hist)) {
		s.hist[j] = r
	}
}

// Weights fills b.Weight with w_i = (N·P(i))^-beta (Eq. 5) from the
// probabilities actually used, beta = Beta.At(step), normalised as
// Config.Normalize says. O(b.Len()).
func (s *NERS) Weights(b *buffer.Batch, step int64) error {
	if err := b.ImportanceWeights(s.cfg.Beta.At(step), s.cfg.Normalize); err != nil {
		return fmt.Errorf("ners: %w", err)
	}
	return nil
}
