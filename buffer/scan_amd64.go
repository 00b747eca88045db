package buffer

import "sync/atomic"

// scan16AVX2 is in scan_amd64.s.
//
//go:noescape
func scan16AVX2(grp *atomic.Uint64, u, mask uint64, pre *[fanout]uint64) (c uint64)

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func xgetbv0() (eax uint32)

// hasAVX2 reports whether the CPU and the OS support AVX2 (CPUID leaf 1:
// OSXSAVE and AVX; XCR0: XMM and YMM state; leaf 7: AVX2).
var hasAVX2 = func() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const osxsave, avx, popcnt = 1 << 27, 1 << 28, 1 << 23
	if ecx1&osxsave == 0 || ecx1&avx == 0 || ecx1&popcnt == 0 || xgetbv0()&6 != 6 {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<5) != 0
}()

// scanGroup counts the children of grp whose inclusive prefix sum (of the
// masked, non-negative values) is <= u and writes the prefixes to pre.
func scanGroup(grp *[fanout]atomic.Uint64, u, mask uint64, pre *[fanout]uint64) int {
	if useAVX2 {
		return int(scan16AVX2(&grp[0], u, mask, pre))
	}
	return scanGroupGo(grp, u, mask, pre)
}

// scanRowsAVX2 is in scan_amd64.s: one descent level for a list of rows,
// each scanning its own node group.
//
//go:noescape
func scanRowsAVX2(lv *atomic.Uint64, base *int, mask uint64, rows *int32, n int, node *int32, u *uint64, vsel *uint64, word *uint64, pre *[fanout + 1]uint64) (slow int)

// scanRows runs one descent level for rows (see scanRowsGo), with the
// vector kernel where the CPU has AVX2.
func scanRows(lv []atomic.Uint64, mask uint64, rows []int32, sc *scratch, leaf bool) (slow int) {
	if !useAVX2 || len(rows) == 0 {
		return scanRowsGo(lv, mask, rows, sc, leaf)
	}
	var word *uint64
	if leaf {
		word = &sc.word[0]
	}
	return scanRowsAVX2(&lv[0], &sc.base[0], mask, &rows[0], len(rows), &sc.node[0], &sc.u[0], &sc.vsel[0], word, &sc.pre17)
}
