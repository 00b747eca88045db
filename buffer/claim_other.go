//go:build !amd64 || race

package buffer

import "sync/atomic"

// Without CMPXCHG16B (or under the race detector, which must see every
// claim as a sync/atomic operation) inserts claim one word at a time.
const hasCAS2 = false

func cas2(p *atomic.Uint64, old0, old1, new0, new1 uint64) bool {
	panic("buffer: cas2 without CMPXCHG16B")
}
