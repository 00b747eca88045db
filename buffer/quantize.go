package buffer

import (
	"math"
)

// Priorities are stored as fixed-point integers ("units") so that tree nodes
// can be updated with atomic adds: integer addition is exact and
// order-independent, so every internal node equals the sum of its children
// exactly once updates quiesce, with no drift and no periodic rebuild.
//
// A leaf holds at most maxLeafUnits units. That bound is chosen from the
// capacity so that even a node whose in-flight deltas double-count every
// leaf stays below 2^63; a node read as negative (as int64) is a transient
// state of concurrent updates and is read as 0.
const (
	prioBits = 40
	prioMask = 1<<prioBits - 1
	genBits  = 64 - prioBits
	genMask  = 1<<genBits - 1
)

// quantizer converts between float64 priorities and integer units.
type quantizer struct {
	scale    float64 // units per unit of priority (a power of two)
	maxUnits uint64  // units of MaxPriority; also the clamp for larger inputs
	maxPrio  float64
}

func newQuantizer(capacity int, maxPriority float64) (quantizer, error) {
	limit := uint64(prioMask)
	if l := uint64(1<<62) / uint64(capacity); l < limit {
		limit = l
	}
	// scale = 2^shift, the largest power of two with maxPriority*scale <= limit.
	_, e := math.Frexp(float64(limit) / maxPriority)
	scale := math.Ldexp(1, e-1)
	q := quantizer{scale: scale, maxPrio: maxPriority}
	q.maxUnits = uint64(maxPriority * scale)
	if q.maxUnits == 0 {
		q.maxUnits = 1
	}
	return q, nil
}

// units converts a validated priority (finite, >= 0). A positive priority
// smaller than the resolution becomes one unit, so it stays sampleable; a
// priority above MaxPriority is clamped (clamped reports it).
func (q quantizer) units(p float64) (u uint64, clamped bool) {
	if p <= 0 {
		return 0, false
	}
	if p >= q.maxPrio {
		return q.maxUnits, p > q.maxPrio
	}
	// p*scale+0.5 < maxUnits+1.5 < 2^62 (p < maxPrio, maxUnits is
	// maxPrio*scale truncated): the signed conversion is exact and
	// is one instruction (a conversion to uint64 branches on 2^63).
	u = uint64(int64(p*q.scale + 0.5))
	return min(max(u, 1), q.maxUnits), false
}

func (q quantizer) priority(u uint64) float64 { return float64(u) / q.scale }

// validPriority reports whether p may be stored.
func validPriority(p float64) bool { return p >= 0 && !math.IsInf(p, 1) } // NaN fails p >= 0
