package buffer

import (
	"fmt"
	"math/rand/v2"
	"slices"
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

// TestScanRowsKernelsAgree checks the vector level kernel against the
// portable one: a level of random groups (zeros, transiently negative nodes,
// leaf words with generation bits), rows in random groups and stripes with
// targets inside, at and beyond their group's sum. Both kernels must move
// the same rows to the same children and hand back the same slow rows.
func TestScanRowsKernelsAgree(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 on this CPU: only the portable kernel runs")
	}
	const seed = 6
	rng := rand.New(rand.NewPCG(seed, 0))
	const stripes, mk, n = 3, 64, 40
	lv := make([]atomic.Uint64, stripes*mk)
	for it := range 2000 {
		leaf := it%2 == 0
		mask := ^uint64(0)
		if leaf {
			mask = prioMask
		}
		for x := range lv {
			var v uint64
			switch rng.IntN(8) {
			case 0:
				v = 0
			case 1:
				if !leaf {
					v = uint64(-int64(rng.Uint64N(1000) + 1)) // in-flight negative
				}
			default:
				v = rng.Uint64N(1000)
			}
			if leaf {
				v = (rng.Uint64N(genMask)|1)<<prioBits | v
				if rng.IntN(16) == 0 {
					v &^= prioMask // a slot being written: priority 0
				}
			}
			lv[x].Store(v)
		}
		var a, b scratch
		a.size(n, stripes)
		rows := make([]int32, 0, n)
		for r := range n {
			a.s[r] = int32(rng.IntN(stripes))
			a.node[r] = int32(rng.IntN(mk / fanout))
			a.u[r] = rng.Uint64N(18 * 1000) // some beyond the group's sum
			if rng.IntN(8) == 0 {
				a.u[r] = 0
			}
			if rng.IntN(3) > 0 {
				rows = append(rows, int32(r))
			}
		}
		b.size(n, stripes)
		copy(b.s, a.s)
		copy(b.node, a.node)
		copy(b.u, a.u)
		rowsA, rowsB := append([]int32(nil), rows...), append([]int32(nil), rows...)
		for r := range n {
			a.base[r] = int(a.s[r])*mk + int(a.node[r])<<fanShift
		}
		copy(b.base, a.base)
		slowA := scanRows(lv, mask, rowsA, &a, leaf)
		slowB := scanRowsGo(lv, mask, rowsB, &b, leaf)
		if slowA != slowB || !slices.Equal(rowsA[:slowA], rowsB[:slowB]) {
			t.Fatalf("seed %d iteration %d: slow rows avx2 %v, go %v", seed, it, rowsA[:slowA], rowsB[:slowB])
		}
		if !slices.Equal(a.u, b.u) || !slices.Equal(a.node, b.node) || !slices.Equal(a.vsel, b.vsel) || !slices.Equal(a.word, b.word) {
			t.Fatalf("seed %d iteration %d: kernels disagree\navx2 u %v node %v vsel %v word %v\ngo   u %v node %v vsel %v word %v",
				seed, it, a.u, a.node, a.vsel, a.word, b.u, b.node, b.vsel, b.word)
		}
		if slowA == len(rows) {
			t.Fatalf("seed %d iteration %d: every row took the slow path; the test would not compare the moves", seed, it)
		}
	}
}

// TestSampleKernelsAgree draws the same batches with the vector kernels and
// with the portable ones (same buffer, same seed): every row must name the
// same item with the same probability. Some priorities are 0, so rows meet
// zero children at every level.
func TestSampleKernelsAgree(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 on this CPU: only the portable kernel runs")
	}
	defer func(v bool) { useAVX2 = v }(useAVX2)
	const seed = 7
	buf := filled(t, cartPole(1<<14, func(c *Config) { c.Stripes = 4 }), seed)
	refs := make([]Ref, 0, 1<<12)
	prios := make([]float64, 0, 1<<12)
	for slot := 0; slot < 1<<14; slot += 4 {
		if ref, _, ok := buf.SlotPriority(slot); ok {
			refs, prios = append(refs, ref), append(prios, 0)
		}
	}
	if _, err := buf.UpdatePriorities(refs, prios); err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		var got [2]*Batch
		for i, avx := range []bool{true, false} {
			useAVX2 = avx
			got[i] = mustBatch(t, buf, 256)
			if err := buf.Sample(rand.New(rand.NewPCG(seed, uint64(round))), got[i]); err != nil {
				t.Fatalf("seed %d round %d avx2=%v: %v", seed, round, avx, err)
			}
		}
		if !slices.Equal(got[0].Refs, got[1].Refs) || !slices.Equal(got[0].Prob, got[1].Prob) {
			t.Fatalf("seed %d round %d: avx2 drew %v %v, portable %v %v", seed, round, got[0].Refs, got[0].Prob, got[1].Refs, got[1].Prob)
		}
		for j, r := range got[0].Refs {
			if r.Slot%4 == 0 {
				t.Fatalf("seed %d round %d: row %d drew slot %d, whose priority is 0", seed, round, j, r.Slot)
			}
		}
	}
}

// TestScanRowsLeafRereadUnderWriter: a writer keeps claiming and publishing
// the leaves of one group (priority 0 with an odd tag, then back) while both
// level kernels move rows through it. A row a kernel moves must carry a
// leaf word with a non-zero priority and an even tag: a leaf that read 0
// when re-read after the scan has to go back to the caller (slow rows).
func TestScanRowsLeafRereadUnderWriter(t *testing.T) {
	defer func(v bool) { useAVX2 = v }(useAVX2)
	const n, rounds = 64, 4000
	lv := make([]atomic.Uint64, fanout)
	live := func(x int) uint64 { return 2<<prioBits | uint64(10+x) }
	for x := range lv {
		lv[x].Store(live(x))
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for x := 0; ; x = (x + 1) % fanout {
			select {
			case <-stop:
				return
			default:
			}
			lv[x].Store(3 << prioBits) // claimed: odd tag, priority 0
			lv[x].Store(live(x))
		}
	}()
	defer func() { close(stop); <-done }()
	var sc scratch
	sc.size(n, 1)
	rows := make([]int32, n)
	slowSeen := 0
	for round := range rounds {
		useAVX2 = hasAVX2 && round%2 == 0
		for r := range n {
			sc.base[r], sc.node[r], sc.u[r], sc.word[r] = 0, 0, uint64(r*3), 0
			rows[r] = int32(r)
		}
		slow := scanRows(lv, prioMask, rows, &sc, true)
		slowSeen += slow
		isSlow := make(map[int32]bool, slow)
		for _, r := range rows[:slow] {
			isSlow[r] = true
		}
		for r := range int32(n) {
			if isSlow[r] {
				continue
			}
			if w := sc.word[r]; w&prioMask == 0 || (w>>prioBits)&1 == 1 {
				t.Fatalf("round %d (avx2=%v): row %d moved to leaf %d with word %#x (being written)", round, useAVX2, r, sc.node[r], w)
			}
		}
	}
	t.Logf("%d rows went back to the caller in %d rounds", slowSeen, rounds)
}

// BenchmarkSampleRefsKernels is SampleRefs of 256 rows with the AVX2 kernel
// and with the portable one, on the same full buffer: the ratio guards the
// vector kernel against losing to its scalar twin on some CPU (its loop once
// moved scalars into XMM registers with legacy-SSE MOVQ while the YMM upper
// halves were dirty, which made it 2× slower than the portable kernel on an
// AMD EPYC (Zen 3) KVM guest; VMOVQ made it 2-4× faster than the portable
// one there).
func BenchmarkSampleRefsKernels(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 on this CPU: only the portable kernel runs")
	}
	for _, lg := range []int{16, 20} {
		buf := filled(b, cartPole(1<<lg), 1)
		for _, avx := range []bool{true, false} {
			b.Run(fmt.Sprintf("N=2^%d/avx2=%v", lg, avx), func(b *testing.B) {
				defer func(old bool) { useAVX2 = old }(useAVX2)
				useAVX2 = avx
				rng := rand.New(rand.NewPCG(2, 3))
				bt := mustBatch(b, buf, 256)
				for b.Loop() {
					if err := buf.SampleRefs(rng, bt); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
