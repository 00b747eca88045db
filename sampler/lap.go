package sampler

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/xmath"
)

// LAP and PAL defaults (Fujimoto, Meger & Precup 2020, arXiv:2007.06049,
// §6 and the authors' code): alpha 0.4 and k 1 for continuous control and
// the classic-control DQN runs; the paper's Atari setting is alpha 0.6 with
// k 0.01.
const (
	// DefaultLAPAlpha is the exponent of LAP's priority max(|δ|, k)^alpha
	// and of PAL's loss.
	DefaultLAPAlpha = 0.4
	// DefaultLAPK is the threshold k: LAP's priority floor and Huber(k)'s
	// and PAL's switch point.
	DefaultLAPK = 1.0
)

// LAPConfig configures LAP and PAL, which share it: the pairing is only an
// equivalent pair of sampler and loss when both use the same Alpha and K.
type LAPConfig struct {
	// Alpha is the exponent in max(|δ|, K)^Alpha. Finite and >= 0 (0:
	// uniform selection with a Huber(K) loss). Paper: 0.4 (MuJoCo), 0.6
	// (Atari).
	Alpha float64
	// K is the threshold: the priority floor max(|δ|, K) and the switch of
	// Huber(K) and of PAL's loss. Finite and > 0. Paper: 1 (MuJoCo), 0.01
	// (Atari).
	K float64
}

// DefaultLAPConfig returns the paper's continuous-control setting, alpha
// 0.4 and k 1.
func DefaultLAPConfig() LAPConfig { return LAPConfig{Alpha: DefaultLAPAlpha, K: DefaultLAPK} }

// Validate reports the first field out of range, wrapping buffer.ErrConfig.
func (c LAPConfig) Validate() error {
	if err := checkExponent("lap", "Alpha", c.Alpha); err != nil {
		return err
	}
	if !(c.K > 0) || math.IsInf(c.K, 1) {
		return fmt.Errorf("%w: lap: K must be finite and > 0, got %v", buffer.ErrConfig, c.K)
	}
	return nil
}

// Floor is the smallest priority LAP stores, K^Alpha. O(1).
func (c LAPConfig) Floor() float64 { return xmath.Pow(c.K, c.Alpha) }

// priority is max(absTD, K)^Alpha (Eq. 9), with overflow passed on as the
// largest float64 (the buffer clamps it to its MaxPriority and counts it).
func (c LAPConfig) priority(absTD float64) float64 {
	v := xmath.Pow(math.Max(absTD, c.K), c.Alpha)
	if math.IsInf(v, 1) {
		v = math.MaxFloat64
	}
	return v
}

// LAP is loss-adjusted prioritized replay (Fujimoto et al. 2020, §5.1):
// items are drawn in proportion to p_i = max(|δ_i|, K)^Alpha from the
// buffer's sum tree, new items get the largest priority ever stored, and
// the paired loss is Huber(K) with no importance weights (Method "lap").
// Because every stored priority is at least K^Alpha, no item is starved and
// no epsilon is needed. For twin critics the learner passes
// max(|δ1|, |δ2|) as the item's error.
//
// LAP is a Selector and not a Weighter: its expected gradient is already
// the one PAL gets with uniform sampling (Observation 4), and IS weights
// would undo it.
//
// Sampling is stratified (one draw in each of dst.Len() equal slices of
// the mass, as in Ape-X) where the paper's code draws i.i.d.; both draw
// item i with marginal probability p_i/total per row, and stratification
// only lowers the variance of the batch.
//
// Concurrency: as Selector says. A LAP must not be copied after first use.
type LAP struct {
	buf  *buffer.Buffer
	cfg  LAPConfig
	prio []float64 // Update's scratch, reused
}

var _ Selector = (*LAP)(nil)

// NewLAP validates cfg and returns a LAP stage over buf. The buffer's
// initial priority (Config.InitialPriority, the "maximum seen" before any
// write-back) must be at least K^Alpha, so that every leaf stays >= K^Alpha.
func NewLAP(buf *buffer.Buffer, cfg LAPConfig) (*LAP, error) {
	if buf == nil {
		return nil, fmt.Errorf("%w: lap: nil buffer", buffer.ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if ip, floor := buf.Config().InitialPriority, cfg.Floor(); ip < floor {
		return nil, fmt.Errorf("%w: lap: the buffer's InitialPriority %v is below the priority floor K^Alpha = %v (set InitialPriority >= %v)",
			buffer.ErrConfig, ip, floor, floor)
	}
	return &LAP{buf: buf, cfg: cfg}, nil
}

// Config returns the stage's configuration. O(1).
func (l *LAP) Config() LAPConfig { return l.cfg }

// Sample draws dst.Len() items by stratified proportional sampling over the
// buffer's sum tree (buffer.Buffer.Sample); dst.Prob holds p_i/total as
// read during the draw. Errors and cost as PER.Sample.
func (l *LAP) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	return l.buf.Sample(rng, dst)
}

// Update stores max(absTD[i], K)^Alpha for refs[i] (Eq. 9). The whole call
// is validated first (lengths, NaN, infinite or negative errors) and
// rejected with nothing written; stale refs are dropped and counted in the
// result's Stale. The buffer's running maximum, the priority of new items,
// only ever grows. Cost: O(len(refs)·log Capacity); no allocation once the
// scratch slice has grown.
func (l *LAP) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	if err := checkTD("lap", refs, absTD); err != nil {
		return buffer.UpdateResult{}, err
	}
	l.prio = grow(l.prio, len(absTD))
	for i, d := range absTD {
		l.prio[i] = math.Max(d, l.cfg.K)
	}
	xmath.PowAffine(l.prio, l.prio, 1, 0, l.cfg.Alpha) // priority(d) for every row, vectorized
	for i, v := range l.prio {
		if math.IsInf(v, 1) {
			l.prio[i] = math.MaxFloat64 // as priority
		}
	}
	return l.buf.UpdatePriorities(refs, l.prio)
}

// Priority is the priority stored for an actor-computed |δ| = absTD,
// max(absTD, K)^Alpha; a negative absTD (unknown) gives the buffer's
// current maximum, NaN and +Inf give NaN and +Inf (which Insert rejects).
// O(1); safe for concurrent use.
func (l *LAP) Priority(absTD float64) float64 {
	switch {
	case absTD < 0:
		return l.buf.MaxPriority()
	case math.IsNaN(absTD) || math.IsInf(absTD, 1):
		return absTD
	}
	return l.cfg.priority(absTD)
}

// String names the stage and its parameters.
func (l *LAP) String() string { return fmt.Sprintf("lap(alpha=%g,k=%g)", l.cfg.Alpha, l.cfg.K) }
