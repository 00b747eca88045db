package sampler

import (
	"fmt"
	"math"
)

// Evaluated reports the mean return of an evaluation of the greedy policy
// (Eq. 6's "evaluation return"). It only records the value: the learner's
// next Sample applies it (NERS). A later report replaces one not yet
// applied. A NaN or infinite return is refused with an error and nothing
// is recorded. O(1); safe for concurrent use with every other method.
func (s *NERS) Evaluated(meanReturn float64) error {
	if math.IsNaN(meanReturn) || math.IsInf(meanReturn, 0) {
		return fmt.Errorf("ners: evaluation return %v (must be finite)", meanReturn)
	}
	s.mu.Lock()
	s.pending, s.hasPend = meanReturn, true
	s.mu.Unlock()
	return nil
}

// applyEvaluation consumes a pending evaluation: the first one sets the
// baseline and empties the history; a later one at least Interval steps
// after the last update makes r_re = its return − the baseline, trains
// the scorer on it, becomes the baseline and empties the history; one
// that comes sooner is dropped (counted in Stats.Ignored), and so is one
// whose scorer update fails (the error is returned; the scorer, baseline
// and history are as before).
func (s *NERS) applyEvaluation() error {
	s.mu.Lock()
	v, ok := s.pending, s.hasPend
	s.hasPend = false
	s.mu.Unlock()
	if !ok {
		return nil
	}
	if s.hasBase && s.steps-s.lastUpdate < int64(s.cfg.Interval) {
		s.statMu.Lock()
		s.stats.Ignored++
		s.statMu.Unlock()
		return nil
	}
	if s.hasBase {
		if err := s.reinforce(v - s.baseline); err != nil {
			return err // the evaluation is dropped: baseline and history stay
		}
	}
	s.baseline, s.hasBase, s.lastUpdate = v, true, s.steps
	s.histN, s.seen = 0, 0
	return nil
}

// reinforce draws I_train, TrainSize refs uniformly (with replacement, as
// the official code) from the history, re-reads their items (refs whose
// slot was overwritten are dropped; up to 4·TrainSize draws are tried),
// builds their features with the per-slot store and takes one REINFORCE
// step of the scorer with reward r (Eq. 7). With an empty history it does
// nothing. O(TrainSize·(item size + width)) plus the scorer's pass.
func (s *NERS) reinforce(r float64) error {
	if s.histN == 0 {
		return nil
	}
	n, dropped := 0, 0
	for try := 0; n < s.cfg.TrainSize && try < 4*s.cfg.TrainSize; try++ {
		if s.buf.GatherRef(s.train, n, s.hist[s.rng.IntN(s.histN)]) {
			n++
		} else {
			dropped++
		}
	}
	s.statMu.Lock()
	s.stats.Dropped += uint64(dropped)
	s.statMu.Unlock()
	if n == 0 {
		return nil
	}
	x := s.features(s.train, n, nil, nil)
	s.standardise(x, n)
	var loss float64
	var err error
	if s.cfg.NormalizeTrain {
		loss, err = s.net.ReinforceNormalized(x, r, s.cfg.Alpha)
	} else {
		loss, err = s.net.Reinforce(x, r)
	}
	if err != nil {
		return fmt.Errorf("ners: scorer update with reward %v: %w", r, err)
	}
	s.statMu.Lock()
	s.stats.Updates++
	s.stats.Reward, s.stats.Loss, s.stats.TrainRows = r, loss, n
	s.statMu.Unlock()
	return nil
}

// NERSStats is a snapshot of a NERS stage.
type NERSStats struct {
	// Updates is the number of REINFORCE steps taken; Reward, Loss and
	// TrainRows those of the last one (r_re, −r_re·mean log σ, |I_train|
	// after dropping overwritten refs).
	Updates   uint64  `json:"updates"`
	Reward    float64 `json:"reward"`
	Loss      float64 `json:"loss"`
	TrainRows int     `json:"train_rows"`
	// Ignored counts evaluations that came less than Interval steps after
	// the last update; Dropped the I_train draws whose item was
	// overwritten.
	Ignored uint64 `json:"ignored"`
	Dropped uint64 `json:"dropped"`
	// ScoreMin, ScoreMax and ScoreMean describe the scores of the last
	// batch written back.
	ScoreMin  float64 `json:"score_min"`
	ScoreMax  float64 `json:"score_max"`
	ScoreMean float64 `json:"score_mean"`
}

// Stats returns a snapshot of the stage's counters. O(1); safe for
// concurrent use.
func (s *NERS) Stats() NERSStats {
	s.statMu.Lock()
	defer s.statMu.Unlock()
	return s.stats
}
