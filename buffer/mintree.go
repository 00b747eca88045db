package buffer

import "sync/atomic"

// The min tree mirrors the sum tree's internal levels and holds, per node,
// the smallest non-zero priority below it (emptyMin if none), so importance
// weights can be normalised by the buffer-wide maximum weight
// (N·P_min)^-beta.
//
// A minimum cannot be maintained with deltas, so a writer recomputes each
// ancestor from its 16 children and installs it with a CAS, then re-reads
// the children and repeats until the node agrees with them. Any child written
// after that final re-read belongs to a writer that recomputes the node
// itself afterwards, so at quiescence every node equals the minimum of its
// children exactly. A writer stops climbing once a node did not change.

// minNode is node j of stripe s at level k of the min tree; level nlev is the
// stripe's minRoot.
func (b *Buffer) minNode(k, s, j int) *atomic.Uint64 {
	if k == b.nlev {
		return &b.stripes[s].minRoot
	}
	return &b.mins[k][b.lay.node(k, s, j)]
}

// childMin is the minimum over the 16 children of node j of level k.
func (b *Buffer) childMin(k, s, j int) uint64 {
	if k == 1 || (k == b.nlev && b.nlev == 1) {
		base := b.lay.node(0, s, j*fanout)
		if k == b.nlev {
			base = b.lay.node(0, s, 0)
		}
		g := (*[fanout]atomic.Uint64)(b.tree[0][base : base+fanout])
		// Branch-free, two independent chains: v-1 maps an empty leaf (0)
		// to the largest value, which is emptyMin.
		m0, m1 := emptyMin, emptyMin
		for i := 0; i < fanout; i += 2 {
			m0 = min(m0, g[i].Load()&prioMask-1)
			m1 = min(m1, g[i+1].Load()&prioMask-1)
		}
		m := min(m0, m1)
		if m == emptyMin {
			return emptyMin
		}
		return m + 1
	}
	base := b.lay.node(k-1, s, j*fanout)
	if k == b.nlev {
		base = b.lay.node(k-1, s, 0)
	}
	g := (*[fanout]atomic.Uint64)(b.mins[k-1][base : base+fanout])
	m0, m1 := emptyMin, emptyMin
	for i := 0; i < fanout; i += 2 {
		m0 = min(m0, g[i].Load())
		m1 = min(m1, g[i+1].Load())
	}
	return min(m0, m1)
}

// fixMin makes min node (k, s, j) agree with its children; it reports
// whether it changed the stored value.
func (b *Buffer) fixMin(k, s, j int) bool {
	node := b.minNode(k, s, j)
	changed := false
	for {
		old := node.Load()
		m := b.childMin(k, s, j)
		if m == old {
			return changed
		}
		if node.CompareAndSwap(old, m) {
			changed = true
		}
	}
}

// fixMinPath repairs the min tree above level-1 node j of stripe s.
func (b *Buffer) fixMinPath(s, j int) { b.fixMinRange(s, j, j) }

// fixMinRange repairs the min tree above level-1 nodes j0..j1 of stripe s,
// level by level: every node of the range, then once each the parents of
// the nodes that changed (and any parent between them), and so on while
// something changes. Children are always fixed before their parent, as on
// a single path, so the CAS-then-verify argument above holds; a run of
// runMax (128) inserts repairs its level-2 parent once instead of 8 times.
func (b *Buffer) fixMinRange(s, j0, j1 int) {
	for k := 1; k <= b.nlev; k++ {
		if k == b.nlev {
			j0, j1 = 0, 0
		}
		lo, hi := -1, -1
		for j := j0; j <= j1; j++ {
			if b.fixMin(k, s, j) {
				if lo < 0 {
					lo = j
				}
				hi = j
			}
		}
		if lo < 0 {
			return
		}
		j0, j1 = lo>>fanShift, hi>>fanShift
	}
}

// fixMinAfter repairs the min tree after leaf l of stripe s changed from
// units old to new (0 is empty) by a write that left the word written in the
// leaf, choosing the cheapest safe path. With M the level-1 node read after
// the leaf write:
//   - new < M: the group's minimum is now at most new, whatever old was, so
//     each node up the path is lowered to new by CAS (retrying while it stays
//     above new), climbing while a node was lowered; no children are read.
//     That is only right while the leaf still holds new: if another writer
//     changed the leaf meanwhile, its own repair may have finished before our
//     CASes landed, so we then re-derive every level we lowered from its
//     children (fixMin, CAS-then-verify) and keep climbing while values
//     change. A leaf change after that check is followed by its writer's
//     repair, which sees our lowered nodes and climbs through them.
//   - old > M and new >= M: old was not the minimum M came from, and new
//     does not undercut it: nothing to do. Any later CAS of the node is
//     followed by its writer's re-read of the children, which sees new.
//   - otherwise (old may have been the minimum and new is not below it):
//     recompute from the children (fixMinPath).
//
// Under PER most write-backs take the first two paths: a new item arrives at
// the maximum priority and its write-back lowers its group's minimum.
func (b *Buffer) fixMinAfter(s, l int, old, new uint64, leaf *atomic.Uint64, written uint64) {
	key := func(v uint64) uint64 {
		if v == 0 {
			return emptyMin
		}
		return v
	}
	ko, kn := key(old), key(new)
	j := l >> fanShift
	m := b.minNode(1, s, j).Load()
	switch {
	case kn < m:
		lowered := 0 // levels 1..lowered were lowered to kn
		for k, jk := 1, j; k <= b.nlev; k++ {
			if k == b.nlev {
				jk = 0
			}
			node := b.minNode(k, s, jk)
			stop := false
			for {
				cur := node.Load()
				if kn >= cur {
					stop = true
					break
				}
				if node.CompareAndSwap(cur, kn) {
					break
				}
			}
			if stop {
				break
			}
			lowered = k
			jk >>= fanShift
		}
		if lowered == 0 || leaf.Load() == written {
			return
		}
		// The leaf moved on: re-derive every lowered level, then climb on.
		changed := false
		for k := 1; k <= b.nlev; k++ {
			jk := j >> (fanShift * (k - 1))
			if k == b.nlev {
				jk = 0
			}
			changed = b.fixMin(k, s, jk)
			if k >= lowered && !changed {
				return
			}
		}
	case ko > m:
	default:
		b.fixMinPath(s, j)
	}
}
