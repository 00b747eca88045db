package sampler

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/xmath"
)

// PER paper defaults (Schaul et al. 2016, arXiv 1511.05952, §4 and App. B.2;
// eps from OpenAI baselines).
const (
	// DefaultPERAlpha is the proportional variant's prioritisation exponent.
	DefaultPERAlpha = 0.6
	// DefaultPERBeta0 is the proportional variant's initial IS exponent.
	DefaultPERBeta0 = 0.4
	// DefaultEps is added to |delta| so an item whose TD error is 0 stays
	// sampleable (PER §3.3).
	DefaultEps = 1e-6
)

// PERConfig configures the proportional PER stage. Fields are used as given
// (0 is a meaningful value for Alpha, Eps and Beta); start from
// DefaultPERConfig for the paper's settings.
type PERConfig struct {
	// Alpha is the exponent of P(i) = p_i^Alpha / sum_k p_k^Alpha (PER Eq. 1)
	// applied when |delta| becomes a priority: 0 samples uniformly, 1 fully
	// in proportion to |delta|+Eps. Finite and >= 0. Paper: 0.6.
	Alpha float64
	// Beta is the importance-sampling exponent as a schedule of the learner
	// step, w_i = (N·P(i))^-beta (PER §3.4); Start and End must lie in
	// [0, 1]. Paper: 0.4 at step 0 rising linearly to 1 at the end of
	// training (Steps = the planned number of learner steps).
	Beta Linear
	// Eps is added to |delta| before the exponent: p_i = (|delta_i|+Eps)^Alpha.
	// Finite and >= 0. With Eps = 0 an item whose |delta| is 0 gets priority
	// 0 and is never sampled again (Alg. 1 as printed). Default 1e-6.
	Eps float64
	// Normalize says how weights are scaled to at most 1. NormalizeBuffer
	// (the zero value, OpenAI baselines) divides by the largest weight any
	// stored item could get and needs the buffer's min tree.
	Normalize buffer.Normalization
}

// DefaultPERConfig is the paper's proportional setting: Alpha 0.6, beta
// 0.4 → 1 over betaSteps learner steps, Eps 1e-6, normalised by the buffer
// maximum.
func DefaultPERConfig(betaSteps int64) PERConfig {
	return PERConfig{
		Alpha:     DefaultPERAlpha,
		Beta:      Linear{Start: DefaultPERBeta0, End: 1, Steps: betaSteps},
		Eps:       DefaultEps,
		Normalize: buffer.NormalizeBuffer,
	}
}

// Validate reports the first field out of range, wrapping buffer.ErrConfig.
func (c PERConfig) Validate() error {
	if err := checkExponent("per", "Alpha", c.Alpha); err != nil {
		return err
	}
	if err := checkExponent("per", "Eps", c.Eps); err != nil {
		return err
	}
	if err := checkBeta("per", c.Beta); err != nil {
		return err
	}
	return checkNorm("per", c.Normalize)
}

// PER is proportional prioritized experience replay (Schaul et al. 2016,
// arXiv 1511.05952, §3.3): the buffer stores p_i = (|delta_i|+Eps)^Alpha,
// Sample draws stratified-proportionally from the buffer's sum tree, and
// Weights returns importance weights (N·P(i))^-beta normalised to at most 1,
// with beta annealed by the Beta schedule.
//
// Concurrency: Priority may be called from any goroutine; Sample, Update
// and Weights by one goroutine at a time (the learner: Update reuses a
// scratch slice), concurrently with inserts into the buffer. A PER must not
// be copied after first use.
type PER struct {
	buf  *buffer.Buffer
	cfg  PERConfig
	prio []float64 // Update's scratch, reused
}

var (
	_ Selector = (*PER)(nil)
	_ Weighter = (*PER)(nil)
)

// NewPER validates cfg and returns a PER stage over buf. NormalizeBuffer
// needs a buffer with a min tree (Config.NoMinTree unset).
func NewPER(buf *buffer.Buffer, cfg PERConfig) (*PER, error) {
	if buf == nil {
		return nil, fmt.Errorf("%w: per: nil buffer", buffer.ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Normalize == buffer.NormalizeBuffer && buf.Config().NoMinTree {
		return nil, fmt.Errorf("%w: per: NormalizeBuffer needs the buffer's min tree (Config.NoMinTree is set)", buffer.ErrConfig)
	}
	return &PER{buf: buf, cfg: cfg}, nil
}

// Config returns the stage's configuration. O(1).
func (p *PER) Config() PERConfig { return p.cfg }

// Sample draws dst.Len() items by stratified proportional sampling over the
// buffer's sum tree (buffer.Buffer.Sample): row j's item is drawn from the
// j-th of dst.Len() equal slices of the total priority mass; dst.Prob holds
// p_i/total as read during the draw. Items with priority 0 are never drawn.
// Errors: buffer.ErrEmpty, ErrBatchSize, ErrZeroMass, ErrRetries (wrapped).
// Cost: O(dst.Len()·(log Capacity + item size)); no allocation after the
// first call with a given dst.
func (p *PER) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	return p.buf.Sample(rng, dst)
}

// Update stores (absTD[i]+Eps)^Alpha for refs[i]. The whole call is
// validated first (lengths, NaN, infinite or negative errors) and rejected
// with nothing written. Refs whose slot was overwritten since sampling are
// dropped and counted in the result's Stale. A priority that overflows
// float64 is passed on as the largest float64, which the buffer clamps to
// its MaxPriority and counts. Cost: O(len(refs)·log Capacity); no
// allocation once the scratch slice has grown to the batch size.
func (p *PER) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	if err := checkTD("per", refs, absTD); err != nil {
		return buffer.UpdateResult{}, err
	}
	p.prio = grow(p.prio, len(absTD))
	xmath.PowAffine(p.prio, absTD, 1, p.cfg.Eps, p.cfg.Alpha) // priority(d) for every row, vectorized
	for i, v := range p.prio {
		if math.IsInf(v, 1) {
			p.prio[i] = math.MaxFloat64 // as priority
		}
	}
	return p.buf.UpdatePriorities(refs, p.prio)
}

// Priority is the priority stored for |delta| = absTD, (absTD+Eps)^Alpha
// (by xmath.Pow: within about 1e-14 relative of math.Pow's).
// A negative absTD (unknown) gives the buffer's current MaxPriority, which
// is what Insert assigns when Transitions.Priority is nil. NaN and +Inf give
// NaN and +Inf, which Insert rejects. O(1); safe for concurrent use.
func (p *PER) Priority(absTD float64) float64 {
	if absTD < 0 {
		return p.buf.MaxPriority()
	}
	if math.IsInf(absTD, 1) {
		return absTD
	}
	return p.priority(absTD)
}

func (p *PER) priority(absTD float64) float64 {
	v := xmath.Pow(absTD+p.cfg.Eps, p.cfg.Alpha)
	if math.IsInf(v, 1) {
		v = math.MaxFloat64 // the buffer clamps it to MaxPriority and counts it
	}
	return v
}

// Weights fills b.Weight with the importance weights of a batch drawn by
// Sample, w_i = (N·P(i))^-beta with beta = Beta.At(step), normalised as
// Config.Normalize says (buffer.Batch.ImportanceWeights). O(b.Len()).
func (p *PER) Weights(b *buffer.Batch, step int64) error {
	return b.ImportanceWeights(p.cfg.Beta.At(step), p.cfg.Normalize)
}

// String names the stage and its parameters.
func (p *PER) String() string {
	c := p.cfg
	return fmt.Sprintf("per(alpha=%g,beta=%s,eps=%g,norm=%v)", c.Alpha, fmtLinear(c.Beta), c.Eps, c.Normalize)
}

// Annotate fills t.Priority (reusing its capacity) with s.Priority(absTD[i])
// for every item of t, so an actor that computed its own TD errors (Ape-X)
// can insert items with their priorities. A negative absTD[i] means unknown:
// for the buffer-backed stages in this package it becomes the buffer's
// current maximum priority. A length mismatch (buffer.ErrShape) or a NaN or
// +Inf error (buffer.ErrPriority) is rejected and t is left alone, as are a
// nil s or t (buffer.ErrNil). O(t.Len()); safe to call from actor
// goroutines (Priority is).
func Annotate(s Selector, t *buffer.Transitions, absTD []float64) error {
	if s == nil || t == nil {
		return fmt.Errorf("%w: annotate: nil Selector or Transitions", buffer.ErrNil)
	}
	if len(absTD) != t.Len() {
		return fmt.Errorf("%w: annotate: %d TD errors for %d transitions", buffer.ErrShape, len(absTD), t.Len())
	}
	for i, d := range absTD {
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return fmt.Errorf("%w: annotate: absTD[%d] = %v (TD errors must be finite)", buffer.ErrPriority, i, d)
		}
	}
	t.Priority = grow(t.Priority, len(absTD))
	for i, d := range absTD {
		t.Priority[i] = s.Priority(d)
	}
	return nil
}

// checkTD validates an Update call before anything is written.
func checkTD(stage string, refs []buffer.Ref, absTD []float64) error {
	if len(refs) != len(absTD) {
		return fmt.Errorf("%w: %s: %d refs but %d TD errors", buffer.ErrShape, stage, len(refs), len(absTD))
	}
	for i, d := range absTD {
		if !(d >= 0) || math.IsInf(d, 1) { // NaN fails d >= 0
			return fmt.Errorf("%w: %s: absTD[%d] = %v (TD errors must be finite and >= 0)", buffer.ErrPriority, stage, i, d)
		}
	}
	return nil
}

func checkExponent(stage, name string, v float64) error {
	if !(v >= 0) || math.IsInf(v, 1) {
		return fmt.Errorf("%w: %s: %s must be finite and >= 0, got %v", buffer.ErrConfig, stage, name, v)
	}
	return nil
}

func checkBeta(stage string, l Linear) error {
	in := func(x float64) bool { return x >= 0 && x <= 1 }
	if !in(l.Start) || !in(l.End) {
		return fmt.Errorf("%w: %s: Beta must stay in [0, 1], got %v → %v", buffer.ErrConfig, stage, l.Start, l.End)
	}
	return nil
}

// checkArgs refuses a nil rng or batch before a stage touches either
// (wrapping buffer.ErrNil).
func checkArgs(stage string, rng *rand.Rand, dst *buffer.Batch) error {
	switch {
	case rng == nil:
		return fmt.Errorf("%w: %s: Sample needs a *rand.Rand, got nil", buffer.ErrNil, stage)
	case dst == nil:
		return fmt.Errorf("%w: %s: Sample into a nil *buffer.Batch", buffer.ErrNil, stage)
	}
	return nil
}

func checkNorm(stage string, n buffer.Normalization) error {
	switch n {
	case buffer.NormalizeBuffer, buffer.NormalizeBatch, buffer.NormalizeNone:
		return nil
	}
	return fmt.Errorf("%w: %s: unknown Normalize %v", buffer.ErrConfig, stage, n)
}

func fmtLinear(l Linear) string {
	if l.Steps <= 0 || l.Start == l.End {
		return fmt.Sprintf("%g", l.End)
	}
	return fmt.Sprintf("%g→%g/%d", l.Start, l.End, l.Steps)
}

// grow returns s resized to n, reusing its backing array when it is large
// enough.
func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}
