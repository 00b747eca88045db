//go:build !race

package buffer

import (
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestCAS2 checks the paired claim: it swaps an aligned pair only when both
// words match, and a failed swap leaves both words as they were.
func TestCAS2(t *testing.T) {
	if !hasCAS2 {
		t.Skip("no CMPXCHG16B on this CPU: inserts claim one word at a time")
	}
	words := make([]atomic.Uint64, 4)
	p := &words[0]
	if uintptr(unsafe.Pointer(p))&15 != 0 {
		p = &words[1]
	}
	q := (*[2]atomic.Uint64)(unsafe.Pointer(p))
	q[0].Store(10)
	q[1].Store(20)
	if !cas2(p, 10, 20, 11, 21) {
		t.Fatal("cas2 failed on a matching pair")
	}
	if a, b := q[0].Load(), q[1].Load(); a != 11 || b != 21 {
		t.Fatalf("after a swap the pair is (%d, %d), want (11, 21)", a, b)
	}
	for _, old := range [][2]uint64{{11, 20}, {10, 21}, {0, 0}} {
		if cas2(p, old[0], old[1], 99, 99) {
			t.Fatalf("cas2 swapped with old (%d, %d) against (11, 21)", old[0], old[1])
		}
		if a, b := q[0].Load(), q[1].Load(); a != 11 || b != 21 {
			t.Fatalf("a failed cas2 changed the pair to (%d, %d)", a, b)
		}
	}
}
