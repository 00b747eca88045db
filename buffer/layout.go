package buffer

import "math/bits"

// Tree layout.
//
// Each stripe owns a 16-ary sum tree over its leaves. All stripes' nodes of
// one level live in one flat array (stripes are subtrees of one allocation:
// the Go prototype in the design notes measured separate allocations 2-4 µs
// slower per batch). Level 0 holds the leaves; level k holds, per stripe,
// m[k] nodes, each the sum of 16 nodes of level k-1. The top stored level has
// exactly 16 nodes per stripe, and their sum is the stripe's root, kept in
// the padded stripe header ("the small top level holds the stripe totals").
//
// Node j of level k (within a stripe) has children 16j..16j+15 of level k-1.
// With 16 uint64 children a node group spans two cache lines; a descent at
// 2^16 leaves per stripe reads 4 groups.

const (
	fanShift = 4
	fanout   = 1 << fanShift
	fanMask  = fanout - 1
)

type layout struct {
	stripes   int
	base, rem int   // stripe s holds base+1 slots if s < rem, else base
	shift     int   // log2(base) when rem == 0 and base is a power of two, else -1
	m         []int // nodes per stripe at each level; m[0] = leaves per stripe (padded)
}

func newLayout(capacity, stripes int) layout {
	l := layout{stripes: stripes, base: capacity / stripes, rem: capacity % stripes, shift: -1}
	if l.rem == 0 && l.base&(l.base-1) == 0 {
		l.shift = bits.TrailingZeros(uint(l.base))
	}
	maxCap := l.base
	if l.rem > 0 {
		maxCap++
	}
	n := roundUp(maxCap, fanout)
	l.m = append(l.m, n)
	for n > fanout {
		n = roundUp((n+fanout-1)/fanout, fanout)
		l.m = append(l.m, n)
	}
	return l
}

func roundUp(n, k int) int { return (n + k - 1) / k * k }

// levels is the number of stored levels (leaves included).
func (l layout) levels() int { return len(l.m) }

// stripeCap is the number of slots of stripe s.
func (l layout) stripeCap(s int) int {
	if s < l.rem {
		return l.base + 1
	}
	return l.base
}

// stripeOffset is the global slot of stripe s's first slot.
func (l layout) stripeOffset(s int) int {
	if s < l.rem {
		return s * (l.base + 1)
	}
	return s*l.base + l.rem
}

// locate maps a global slot to (stripe, local index). slot must be in range.
// With power-of-two stripes (the default configurations) it is two shifts;
// otherwise two divisions.
func (l layout) locate(slot int) (s, local int) {
	if l.shift >= 0 {
		return slot >> l.shift, slot & (l.base - 1)
	}
	big := l.rem * (l.base + 1)
	if slot < big {
		return slot / (l.base + 1), slot % (l.base + 1)
	}
	slot -= big
	return l.rem + slot/l.base, slot % l.base
}

// node is the index in the flat level-k array of node j of stripe s.
func (l layout) node(k, s, j int) int { return s*l.m[k] + j }
