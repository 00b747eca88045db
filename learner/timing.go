package learner

import (
	"sync/atomic"
	"time"
)

// Timing is a learner's cumulative wall time in completed steps, with the
// replay's share split out: the selection stage's Sample (and Weights) and
// its priority write-back (Update). Replay cost as a share of learner time
// is the run-time comparison of Fujimoto et al. 2020, Appendix B.
type Timing struct {
	// Steps is the time spent in completed steps, the phases below
	// included.
	Steps time.Duration `json:"steps_ns"`
	// Sample is the time in the stage's Sample and Weights.
	Sample time.Duration `json:"sample_ns"`
	// WriteBack is the time in the stage's Update.
	WriteBack time.Duration `json:"write_back_ns"`
}

// phaseTimer accumulates Timing; written by the stepping goroutine, read
// from any.
type phaseTimer struct {
	steps, sample, writeBack atomic.Int64
}

// add records one completed step: its whole duration and its two replay
// phases. Three atomic adds.
func (p *phaseTimer) add(step, sample, writeBack time.Duration) {
	p.steps.Add(int64(step))
	p.sample.Add(int64(sample))
	p.writeBack.Add(int64(writeBack))
}

// load returns the totals.
func (p *phaseTimer) load() Timing {
	return Timing{Steps: time.Duration(p.steps.Load()), Sample: time.Duration(p.sample.Load()), WriteBack: time.Duration(p.writeBack.Load())}
}

// store sets the totals (a restored checkpoint's).
func (p *phaseTimer) store(t Timing) {
	p.steps.Store(int64(t.Steps))
	p.sample.Store(int64(t.Sample))
	p.writeBack.Store(int64(t.WriteBack))
}
