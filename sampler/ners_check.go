package sampler

import (
	"fmt"
	"math"
)

// check verifies the stage's invariants (see the fields of NERS): the
// per-slot arrays span the buffer and hold finite reports, the history
// holds at most History refs and no more than were offered, the moments
// (and their row count) are finite with M2 >= 0, the
// last update is not in the future, and every stored generation is an
// item's (even) or 0 for a slot never reported. O(Capacity + History).
func (s *NERS) check() error {
	c := s.bcfg.Capacity
	switch {
	case len(s.td) != c || len(s.q) != c || len(s.y) != c || len(s.gen) != c:
		return fmt.Errorf("per-slot arrays of %d/%d/%d/%d for %d slots", len(s.td), len(s.q), len(s.y), len(s.gen), c)
	case s.histN < 0 || s.histN > len(s.hist) || s.seen < int64(s.histN):
		return fmt.Errorf("history holds %d of %d refs after %d offered", s.histN, len(s.hist), s.seen)
	case s.lastUpdate > s.steps || s.steps < 0:
		return fmt.Errorf("last update at step %d, now step %d", s.lastUpdate, s.steps)
	case !(s.momN >= 0) || math.IsInf(s.momN, 0) || len(s.momMean) != s.width || len(s.momM2) != s.width:
		return fmt.Errorf("moments over %v rows, %d and %d wide for %d features", s.momN, len(s.momMean), len(s.momM2), s.width)
	}
	for j := range s.width {
		if math.IsNaN(s.momMean[j]) || math.IsInf(s.momMean[j], 0) || !(s.momM2[j] >= -1e-9*max(1, math.Abs(s.momM2[j]))) || math.IsInf(s.momM2[j], 0) {
			return fmt.Errorf("feature %d: running mean %v, M2 %v", j, s.momMean[j], s.momM2[j])
		}
	}
	for slot, g := range s.gen {
		if g&1 == 1 {
			return fmt.Errorf("slot %d holds reports for an odd generation %d (a slot being written)", slot, g)
		}
		if !finite32(s.td[slot]) || !finite32(s.q[slot]) || !finite32(s.y[slot]) {
			return fmt.Errorf("slot %d: reported δ %v, Q %v, y %v (must be finite)", slot, s.td[slot], s.q[slot], s.y[slot])
		}
	}
	for i, r := range s.hist[:s.histN] {
		if int(r.Slot) >= c || r.Gen&1 == 1 || r.Gen == 0 {
			return fmt.Errorf("history entry %d names slot %d generation %d", i, r.Slot, r.Gen)
		}
	}
	return nil
}

// finite32 reports whether v is neither NaN nor infinite.
func finite32(v float32) bool { return v-v == 0 }

// assertInvariants panics on a broken invariant when built with -tags
// invariants (on buffers of up to 2^14 slots).
func (s *NERS) assertInvariants() {
	if invariants && s.bcfg.Capacity <= 1<<14 {
		if err := s.check(); err != nil {
			panic("sampler: ners: broken invariant: " + err.Error())
		}
	}
}
