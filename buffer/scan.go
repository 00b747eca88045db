package buffer

import "sync/atomic"

// useAVX2 selects the vector scan where the CPU has it; tests flip it to
// compare both kernels.
var useAVX2 = hasAVX2

// scanGroupGo is the portable kernel of scanGroup: branch-free, with only the
// running sum and the count carried from one child to the next. Every value
// is below 2^63 (see quantize.go), so the sign of u-acc tells acc > u.
func scanGroupGo(grp *[fanout]atomic.Uint64, u, mask uint64, pre *[fanout]uint64) int {
	var acc uint64
	c := 0
	for x := range grp {
		v := grp[x].Load() & mask
		acc += v &^ uint64(int64(v)>>63) // a transiently negative node reads as 0
		pre[x] = acc
		c += int(1 + int64(u-acc)>>63)
	}
	return c
}

// scanRowsGo is the portable kernel of scanRows: one descent level for the
// rows listed in rows, each scanning its own group of lv (rows may share
// one), which starts at sc.base[r]. A row whose target lies beyond its group's sum, or whose
// chosen leaf (leaf level) reads 0, is left unchanged and listed in
// rows[:slow].
func scanRowsGo(lv []atomic.Uint64, mask uint64, rows []int32, sc *scratch, leaf bool) (slow int) {
	pre := &sc.pre
	for _, r := range rows {
		base := sc.base[r]
		grp := (*[fanout]atomic.Uint64)(lv[base : base+fanout])
		u := sc.u[r]
		c := scanGroupGo(grp, u, mask, pre)
		if c == fanout {
			rows[slow] = r
			slow++
			continue
		}
		var before uint64
		if c > 0 {
			before = pre[c-1]
		}
		if leaf {
			w := grp[c].Load()
			if w&mask == 0 {
				rows[slow] = r
				slow++
				continue
			}
			sc.word[r] = w
		}
		sc.u[r] = u - before
		sc.vsel[r] = pre[c] - before
		sc.node[r] = sc.node[r]<<fanShift + int32(c)
	}
	return slow
}
