package sampler

import (
	"fmt"
	"math"

	"github.com/apexrl/apex/buffer"
)

// UpdateFeatures takes the learner's report on the last Sample's batch:
// q[i] = Q(s, a) and target[i] = y of row i (δ = y − Q). It stores them
// for the rows' slots, builds the batch's features D(I), scores the batch
// as a set with the scorer (no gradient) and writes score^Alpha back as
// the rows' priorities (batch-wise, buffer.Buffer.UpdatePriorities: refs
// overwritten since sampling are dropped and counted in the result).
//
// Errors, with nothing applied: no Sample yet, or refs that are not the
// last batch's refs in order (buffer.ErrShape); lengths that differ
// (buffer.ErrShape); a Q or target that is NaN, infinite or beyond
// float32's range, the per-slot store's (buffer.ErrPriority); a refused
// write-back (the buffer's error).
//
// Cost: O(B·width) for the features, one forward pass of the scorer over
// the B rows, and O(B·log Capacity) for the write-back. No allocation
// after the first call with a given batch size.
func (s *NERS) UpdateFeatures(refs []buffer.Ref, q, target []float64) (buffer.UpdateResult, error) {
	b := s.last
	switch {
	case b == nil:
		return buffer.UpdateResult{}, fmt.Errorf("%w: ners: UpdateFeatures before any Sample", buffer.ErrShape)
	case len(refs) != b.Len() || len(q) != len(refs) || len(target) != len(refs):
		return buffer.UpdateResult{}, fmt.Errorf("%w: ners: UpdateFeatures of %d refs, %d Q values and %d targets for a batch of %d rows",
			buffer.ErrShape, len(refs), len(q), len(target), b.Len())
	}
	for i, r := range refs {
		if r != b.Refs[i] {
			return buffer.UpdateResult{}, fmt.Errorf("%w: ners: UpdateFeatures row %d names slot %d gen %d, the last Sample drew slot %d gen %d there",
				buffer.ErrShape, i, r.Slot, r.Gen, b.Refs[i].Slot, b.Refs[i].Gen)
		}
		if !fitsFloat32(q[i]) || !fitsFloat32(target[i]) || !fitsFloat32(target[i]-q[i]) {
			return buffer.UpdateResult{}, fmt.Errorf("%w: ners: row %d: Q %v, target %v (must be finite, with |Q|, |target| and |target − Q| below %g)",
				buffer.ErrPriority, i, q[i], target[i], float64(math.MaxFloat32))
		}
	}
	// The batch's features from its own rows' reports (a slot drawn twice
	// in the batch, before and after an overwrite, gets each row's own),
	// scored with the moments updated by the batch; the moments are
	// restored and the per-slot store left alone if the write-back fails.
	n := b.Len()
	x := s.features(b, n, q, target)
	saved := s.saveMoments()
	s.observe(n)
	s.standardise(x, n)
	scores := s.net.Scores(x)
	s.prio = grow(s.prio, len(scores))
	lo, hi, sum := math.Inf(1), 0.0, 0.0
	for i, sc := range scores {
		s.prio[i] = math.Pow(sc, s.cfg.Alpha)
		lo, hi, sum = min(lo, sc), max(hi, sc), sum+sc
	}
	res, err := s.buf.UpdatePriorities(refs, s.prio)
	if err != nil {
		s.restoreMoments(saved)
		return res, fmt.Errorf("ners: %w", err)
	}
	for i, r := range refs {
		s.td[r.Slot], s.q[r.Slot], s.y[r.Slot], s.gen[r.Slot] = float32(target[i]-q[i]), float32(q[i]), float32(target[i]), r.Gen
	}
	s.statMu.Lock()
	s.stats.ScoreMin, s.stats.ScoreMax, s.stats.ScoreMean = lo, hi, sum/float64(len(scores))
	s.statMu.Unlock()
	s.assertInvariants()
	return res, nil
}

// Update is refused: NERS scores from the whole feature row (Q and the
// target as well as |δ|), so a learner must call UpdateFeatures. The error
// wraps buffer.ErrConfig and nothing is applied.
func (s *NERS) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	return buffer.UpdateResult{}, fmt.Errorf("%w: ners: Update with |δ| alone cannot score items; the learner must report Q and targets through UpdateFeatures (sampler.FeatureUpdater)", buffer.ErrConfig)
}

// Priority is the priority of a new item: 1, the most score^Alpha can be
// (Alg. 1 inserts with priority 1), whatever absTD an actor computed. NaN
// and +Inf give themselves, which Insert rejects. O(1); safe for
// concurrent use.
func (s *NERS) Priority(absTD float64) float64 {
	if math.IsNaN(absTD) || math.IsInf(absTD, 1) {
		return absTD
	}
	return 1
}

// fitsFloat32 reports whether v is finite and within float32's range (the
// per-slot store's type).
func fitsFloat32(v float64) bool { return math.Abs(v) <= math.MaxFloat32 }
