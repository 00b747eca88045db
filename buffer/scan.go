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
