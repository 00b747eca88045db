package buffer

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// TestScanKernelsAgree checks the vector scan against the portable one on
// random groups, including zeros, masked generation bits, transiently
// negative nodes and targets at and beyond the group's sum.
func TestScanKernelsAgree(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 on this CPU: only the portable kernel runs")
	}
	const seed = 5
	rng := rand.New(rand.NewPCG(seed, 0))
	var grp [fanout]atomic.Uint64
	for it := range 200000 {
		var sum uint64
		for x := range grp {
			var v uint64
			switch rng.IntN(6) {
			case 0:
				v = 0
			case 1:
				v = rng.Uint64N(1 << 58) // 16 of them stay below 2^62, as a stripe does
			case 2:
				v = uint64(-int64(rng.Uint64N(1000) + 1)) // in-flight negative
			default:
				v = rng.Uint64N(1000)
			}
			if it%2 == 0 { // leaf words: generation bits above the priority
				v = rng.Uint64N(genMask)<<prioBits | v&prioMask
			}
			grp[x].Store(v)
			sum += v
		}
		mask := ^uint64(0)
		if it%2 == 0 {
			mask = prioMask
		}
		var u uint64
		switch rng.IntN(4) {
		case 0:
			u = 0
		case 1:
			u = rng.Uint64N(1 << 62)
		default:
			u = rng.Uint64N(16 * 1000)
		}
		var p1, p2 [fanout]uint64
		c1 := int(scan16AVX2(&grp[0], u, mask, &p1))
		c2 := scanGroupGo(&grp, u, mask, &p2)
		if c1 != c2 || p1 != p2 {
			t.Fatalf("seed %d iteration %d: avx2 (%d, %v) != go (%d, %v)", seed, it, c1, p1, c2, p2)
		}
	}
}
