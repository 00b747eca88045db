//go:build !race

package buffer

import "sync/atomic"

// cas2 is in claim_amd64.s: a compare-and-swap of two adjacent leaf words
// (16-byte aligned) in one locked instruction.
//
//go:noescape
func cas2(p *atomic.Uint64, old0, old1, new0, new1 uint64) (swapped bool)

// hasCAS2 reports CMPXCHG16B (CPUID leaf 1, ECX bit 13).
var hasCAS2 = func() bool {
	_, _, ecx, _ := cpuid(1, 0)
	return ecx&(1<<13) != 0
}()
