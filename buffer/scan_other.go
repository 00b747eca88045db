//go:build !amd64

package buffer

import "sync/atomic"

const hasAVX2 = false

// scanGroup: see scan_amd64.go.
func scanGroup(grp *[fanout]atomic.Uint64, u, mask uint64, pre *[fanout]uint64) int {
	return scanGroupGo(grp, u, mask, pre)
}

// scanRows: see scan_amd64.go.
func scanRows(lv []atomic.Uint64, mask uint64, rows []int32, sc *scratch, leaf bool) (slow int) {
	return scanRowsGo(lv, mask, rows, sc, leaf)
}
