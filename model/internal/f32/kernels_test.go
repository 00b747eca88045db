package f32

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// simdImpls lists the SIMD implementations this CPU can run; tests compare
// each with Portable.
func simdImpls(t testing.TB) []Impl {
	var out []Impl
	for _, i := range []Impl{AVX2, AVX512} {
		if i.Available() {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		t.Logf("no SIMD implementation on this CPU/build: only Portable is tested")
	}
	return out
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(2*rng.Float64() - 1)
	}
	return s
}

// gemmCase is one random Gemm problem; A is either row-major (m×k) or a
// transposed view (k×m storage), as the backward pass uses it.
type gemmCase struct {
	m, n, k   int
	transA    bool
	ars, aps  int
	ldb, ldc  int
	a, b, c0  []float32
	bias, aux []float32
	init      Init
	post      Post
	descr     string
}

func newGemmCase(rng *rand.Rand, m, n, k int, transA bool, init Init, post Post) *gemmCase {
	g := &gemmCase{m: m, n: n, k: k, transA: transA, init: init, post: post}
	g.ldb = n + rng.IntN(3)
	g.ldc = n + rng.IntN(3)
	if transA {
		g.ars, g.aps = 1, m+rng.IntN(2)
		g.a = randSlice(rng, max(0, (k-1)*g.aps+m))
	} else {
		g.ars, g.aps = k+rng.IntN(2), 1
		g.a = randSlice(rng, max(0, (m-1)*g.ars+k))
	}
	g.b = randSlice(rng, max(0, (k-1)*g.ldb+n))
	// C has a margin after the block: Gemm must leave it alone.
	g.c0 = randSlice(rng, (m-1)*g.ldc+n+17)
	g.bias = randSlice(rng, n)
	g.aux = randSlice(rng, len(g.c0))
	for i := range g.aux {
		if rng.IntN(4) == 0 {
			g.aux[i] = 0 // ReLU outputs are often exactly 0
		}
	}
	g.descr = fmt.Sprintf("m=%d n=%d k=%d transA=%v init=%d post=%d ars=%d aps=%d ldb=%d ldc=%d", m, n, k, transA, init, post, g.ars, g.aps, g.ldb, g.ldc)
	return g
}

func (g *gemmCase) run(impl Impl) []float32 {
	c := append([]float32(nil), g.c0...)
	impl.Gemm(g.m, g.n, g.k, g.a, g.ars, g.aps, g.b, g.ldb, c, g.ldc, g.init, g.bias, g.post, g.aux)
	return c
}

// bound is the rounding tolerance for C[i][j]: summing k products in
// float32, with or without FMA, each implementation is within
// k·u·Σ|a·b| (+ the init term) of the exact value, u = 2⁻²⁴ (Higham,
// Accuracy and Stability, §3.1), so two of them are within twice that; the
// epilogues multiply by factors of magnitude ≤ 1. We allow 2·(k+2)·u·S.
func (g *gemmCase) bound(i, j int) float64 {
	s := math.Abs(float64(g.c0[i*g.ldc+j]))
	if g.init == InitBias {
		s = math.Abs(float64(g.bias[j]))
	} else if g.init == InitZero {
		s = 0
	}
	for p := range g.k {
		s += math.Abs(float64(g.a[i*g.ars+p*g.aps]) * float64(g.b[p*g.ldb+j]))
	}
	return 2*float64(g.k+2)*0x1p-24*s + 1e-30
}

func TestGemmMatchesPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 1))
	sizes := []int{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 64, 65, 100}
	for _, impl := range simdImpls(t) {
		for trial := range 400 {
			m := sizes[rng.IntN(len(sizes))]
			n := sizes[rng.IntN(len(sizes))]
			k := sizes[rng.IntN(len(sizes))]
			if trial%50 == 0 {
				k = 0
			}
			g := newGemmCase(rng, m, n, k, rng.IntN(2) == 0, Init(rng.IntN(3)), Post(rng.IntN(4)))
			want, got := g.run(Portable), g.run(impl)
			for idx := range want {
				i, j := idx/g.ldc, idx%g.ldc
				inBlock := i < m && j < n
				if !inBlock {
					if got[idx] != g.c0[idx] {
						t.Fatalf("%v %s: C[%d] outside the block changed: %v -> %v", impl, g.descr, idx, g.c0[idx], got[idx])
					}
					continue
				}
				if d := math.Abs(float64(got[idx]) - float64(want[idx])); d > g.bound(i, j) {
					t.Fatalf("%v %s: C[%d][%d] = %v, portable %v (|diff| %g > bound %g)", impl, g.descr, i, j, got[idx], want[idx], d, g.bound(i, j))
				}
			}
		}
	}
}

// TestGemmEveryMode runs every init and epilogue through both column paths
// of the SIMD kernels (64 full columns, then a masked tail of 17) against
// Portable.
func TestGemmEveryMode(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 8))
	for _, impl := range simdImpls(t) {
		for _, init := range []Init{InitZero, InitBias, InitAcc} {
			for _, post := range []Post{PostNone, PostReLU, PostReLUGrad, PostTanhGrad} {
				for _, transA := range []bool{false, true} {
					g := newGemmCase(rng, 9, 64+64+17, 11, transA, init, post)
					want, got := g.run(Portable), g.run(impl)
					for idx := range want {
						i, j := idx/g.ldc, idx%g.ldc
						if i < g.m && j < g.n {
							if d := math.Abs(float64(got[idx]) - float64(want[idx])); d > g.bound(i, j) {
								t.Fatalf("%v %s: C[%d][%d] = %v, portable %v", impl, g.descr, i, j, got[idx], want[idx])
							}
						} else if got[idx] != g.c0[idx] {
							t.Fatalf("%v %s: C[%d] outside the block changed", impl, g.descr, idx)
						}
					}
				}
			}
		}
	}
}

// TestGemmTailRows covers the rows left after the groups of four: through
// the stack copies, in several column slabs when n > tailMaxN and several
// blocks of k when k > tailMaxK.
func TestGemmTailRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 9))
	for _, impl := range simdImpls(t) {
		for _, sh := range [][3]int{{1, 5, 3}, {3, 300, 7}, {6, 2*tailMaxN + 9, tailMaxK}, {2, 40, tailMaxK + 1}, {3, 20, 2*tailMaxK + 5}, {7, 33, 0}} {
			for _, init := range []Init{InitZero, InitBias, InitAcc} {
				for _, post := range []Post{PostNone, PostReLU, PostReLUGrad, PostTanhGrad} {
					g := newGemmCase(rng, sh[0], sh[1], sh[2], rng.IntN(2) == 0, init, post)
					want, got := g.run(Portable), g.run(impl)
					for idx := range want {
						i, j := idx/g.ldc, idx%g.ldc
						if i < g.m && j < g.n {
							if d := math.Abs(float64(got[idx]) - float64(want[idx])); d > g.bound(i, j) {
								t.Fatalf("%v %s: C[%d][%d] = %v, portable %v", impl, g.descr, i, j, got[idx], want[idx])
							}
						} else if got[idx] != g.c0[idx] {
							t.Fatalf("%v %s: C[%d] outside the block changed", impl, g.descr, idx)
						}
					}
				}
			}
		}
	}
}

// TestGemmPortableExact checks the portable kernel itself against a float64
// triple loop on a small case, epilogues included.
func TestGemmPortableExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 2))
	for _, post := range []Post{PostNone, PostReLU, PostReLUGrad, PostTanhGrad} {
		for _, init := range []Init{InitZero, InitBias, InitAcc} {
			g := newGemmCase(rng, 5, 7, 6, post%2 == 0, init, post)
			got := g.run(Portable)
			for i := range g.m {
				for j := range g.n {
					s := 0.0
					switch init {
					case InitBias:
						s = float64(g.bias[j])
					case InitAcc:
						s = float64(g.c0[i*g.ldc+j])
					}
					for p := range g.k {
						s += float64(g.a[i*g.ars+p*g.aps]) * float64(g.b[p*g.ldb+j])
					}
					y := float64(g.aux[i*g.ldc+j])
					switch post {
					case PostReLU:
						s = max(s, 0)
					case PostReLUGrad:
						if !(y > 0) {
							s = 0
						}
					case PostTanhGrad:
						s *= 1 - y*y
					}
					if d := math.Abs(s - float64(got[i*g.ldc+j])); d > g.bound(i, j) {
						t.Fatalf("%s: C[%d][%d] = %v, want %v", g.descr, i, j, got[i*g.ldc+j], s)
					}
				}
			}
		}
	}
}

func TestGemmReLUKeepsNaN(t *testing.T) {
	for _, impl := range append(simdImpls(t), Portable) {
		for _, n := range []int{3, 70} { // the masked path, the wide path
			a := []float32{float32(math.NaN()), 1, -1, 2} // 4×1
			b := make([]float32, n)                       // 1×n
			for j := range b {
				b[j] = float32(j%3) - 1 // −1, 0, 1, …
			}
			c := make([]float32, 4*n)
			impl.Gemm(4, n, 1, a, 1, 1, b, n, c, n, InitZero, nil, PostReLU, nil)
			for j := range n {
				if !math.IsNaN(float64(c[j])) {
					t.Fatalf("%v n=%d: ReLU(NaN) = %v at column %d", impl, n, c[j], j)
				}
				if want := max(b[j], 0); c[n+j] != want || c[3*n+j] != 2*want {
					t.Fatalf("%v n=%d: column %d: %v, %v, want %v, %v", impl, n, j, c[n+j], c[3*n+j], want, 2*want)
				}
				if want := max(-b[j], 0); c[2*n+j] != want {
					t.Fatalf("%v n=%d: row 2 column %d = %v, want %v", impl, n, j, c[2*n+j], want)
				}
			}
		}
	}
}

func TestColSumMatchesPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 3))
	for _, impl := range simdImpls(t) {
		for range 200 {
			rows, n := rng.IntN(70), 1+rng.IntN(80)
			ld := n + rng.IntN(3)
			src := randSlice(rng, max(0, (rows-1)*ld+n))
			want := randSlice(rng, n+5)
			got := append([]float32(nil), want...)
			Portable.ColSum(want, src, rows, n, ld)
			impl.ColSum(got, src, rows, n, ld)
			for j := range want {
				// Both sum rows·1-magnitude values in float32 in different
				// orders: within 2·rows·u·Σ|x| ≤ 2·rows²·u.
				if d := math.Abs(float64(got[j] - want[j])); d > 2*float64(rows*rows+1)*0x1p-24 {
					t.Fatalf("%v rows=%d n=%d ld=%d: dst[%d] = %v, portable %v", impl, rows, n, ld, j, got[j], want[j])
				}
			}
		}
	}
}

func TestSumSqMatchesPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 4))
	for _, impl := range simdImpls(t) {
		for _, n := range []int{0, 1, 7, 15, 16, 17, 31, 33, 63, 64, 65, 100, 4610} {
			x := randSlice(rng, n)
			want, got := Portable.SumSq(x), impl.SumSq(x)
			// float32 lanes of ≤ n/16+1 terms each: relative error ≤ (n/16+2)·u.
			if d := math.Abs(got - want); d > float64(n/16+2)*0x1p-24*want+1e-30 {
				t.Fatalf("%v n=%d: SumSq = %v, portable %v", impl, n, got, want)
			}
		}
		if s := impl.SumSq([]float32{1, float32(math.NaN()), 2}); !math.IsNaN(s) {
			t.Errorf("%v: SumSq with a NaN = %v", impl, s)
		}
		if s := impl.SumSq([]float32{math.MaxFloat32, 3}); !math.IsInf(s, 1) {
			t.Errorf("%v: SumSq overflowing float32 = %v, want +Inf (the caller rescales)", impl, s)
		}
	}
}

func TestAdamUpdateMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 5))
	c := AdamConsts{Scale: 0.7, Beta1: 0.9, Beta2: 0.999, Step: 1e-3 / (1 - 0.9*0.9), InvSqrtBC2: float32(1 / math.Sqrt(1-0.999*0.999)), Eps: 1e-8}
	const u = 0x1p-24
	for _, impl := range append(simdImpls(t), Portable) {
		for _, n := range []int{1, 5, 8, 9, 16, 17, 33, 100, 4610} {
			p, g := randSlice(rng, n), randSlice(rng, n)
			m, v := randSlice(rng, n), randSlice(rng, n)
			for i := range v {
				v[i] *= v[i]
			}
			p0, m0, v0 := clone(p), clone(m), clone(v)
			impl.AdamUpdate(p, g, m, v, c)
			for i := range p {
				// The update in float64 from the same float32 inputs and
				// constants. float32 evaluation (with or without FMA) is
				// within a few roundings of each term: 4u of the terms'
				// magnitudes for m and v, and for p 4u·|p| plus the step's
				// relative error (4u, and m's error carried through).
				b1, b2 := float64(c.Beta1), float64(c.Beta2)
				gs := float64(c.Scale) * float64(g[i])
				mw := b1*float64(m0[i]) + (1-b1)*gs
				vw := b2*float64(v0[i]) + (1-b2)*gs*gs
				den := math.Sqrt(vw)*float64(c.InvSqrtBC2) + float64(c.Eps)
				step := float64(c.Step) * mw / den
				pw := float64(p0[i]) - step
				em := 4 * u * (math.Abs(b1*float64(m0[i])) + math.Abs((1-b1)*gs))
				ev := 4 * u * (b2*float64(v0[i]) + (1-b2)*gs*gs)
				ep := 4*u*math.Abs(pw) + 8*u*math.Abs(step) + float64(c.Step)*em/den
				if math.Abs(float64(m[i])-mw) > em || math.Abs(float64(v[i])-vw) > ev || math.Abs(float64(p[i])-pw) > ep {
					t.Fatalf("%v n=%d i=%d: p, m, v = %v %v %v, float64 reference %v %v %v", impl, n, i, p[i], m[i], v[i], pw, mw, vw)
				}
			}
		}
	}
}

func clone(s []float32) []float32 { return append([]float32(nil), s...) }

func TestGemmPanicsOnShortSlices(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"short a", func() {
			Portable.Gemm(2, 2, 2, make([]float32, 3), 2, 1, make([]float32, 4), 2, make([]float32, 4), 2, InitZero, nil, PostNone, nil)
		}},
		{"short c", func() {
			Best().Gemm(2, 2, 2, make([]float32, 4), 2, 1, make([]float32, 4), 2, make([]float32, 3), 2, InitZero, nil, PostNone, nil)
		}},
		{"short bias", func() {
			Best().Gemm(4, 2, 1, make([]float32, 4), 1, 1, make([]float32, 2), 2, make([]float32, 8), 2, InitBias, nil, PostNone, nil)
		}},
		{"short aux", func() {
			Best().Gemm(4, 2, 1, make([]float32, 4), 1, 1, make([]float32, 2), 2, make([]float32, 8), 2, InitZero, nil, PostReLUGrad, make([]float32, 7))
		}},
		{"ldc < n", func() {
			Best().Gemm(1, 3, 1, make([]float32, 1), 1, 1, make([]float32, 3), 3, make([]float32, 6), 2, InitZero, nil, PostNone, nil)
		}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tc.name)
				}
			}()
			tc.f()
		}()
	}
}

func TestTransposeMatchesPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 6))
	for _, impl := range append(simdImpls(t), Portable) {
		for range 100 {
			r, c := 1+rng.IntN(40), 1+rng.IntN(40)
			lds, ldd := c+rng.IntN(3), r+rng.IntN(3)
			src := randSlice(rng, (r-1)*lds+c)
			dst := randSlice(rng, (c-1)*ldd+r+5)
			before := clone(dst)
			impl.Transpose(dst, ldd, src, lds, r, c)
			for idx := range dst {
				j, i := idx/ldd, idx%ldd
				want := before[idx]
				if j < c && i < r {
					want = src[i*lds+j]
				}
				if dst[idx] != want {
					t.Fatalf("%v r=%d c=%d lds=%d ldd=%d: dst[%d] = %v, want %v", impl, r, c, lds, ldd, idx, dst[idx], want)
				}
			}
		}
	}
}

func TestPolyakMatchesPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 7))
	for _, impl := range simdImpls(t) {
		for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 100, 4610} {
			src, dst := randSlice(rng, n), randSlice(rng, n)
			want := clone(dst)
			Portable.Polyak(want, src, 0.005)
			impl.Polyak(dst, src, 0.005)
			for i := range dst {
				// Two products and a sum of magnitude ≤ 1: a few u.
				if d := math.Abs(float64(dst[i] - want[i])); d > 4*0x1p-24 {
					t.Fatalf("%v n=%d: dst[%d] = %v, portable %v", impl, n, i, dst[i], want[i])
				}
			}
		}
		a, b := []float32{1, 2}, []float32{3, 4}
		impl.Polyak(a, b, 1)
		if a[0] != 3 || a[1] != 4 {
			t.Errorf("%v: Polyak with tau 1 = %v, want a copy", impl, a)
		}
	}
}

func TestAdamUpdateFlushesSubnormalMoments(t *testing.T) {
	c := AdamConsts{Scale: 1, Beta1: 0.9, Beta2: 0.999, Step: 1e-3, InvSqrtBC2: 1, Eps: 1e-8}
	for _, impl := range append(simdImpls(t), Portable) {
		const n = 19
		p, g := make([]float32, n), make([]float32, n)
		m, v := make([]float32, n), make([]float32, n)
		for i := range m {
			m[i], v[i] = 1.2e-38, 1e-39 // normal but 0.9·m is not; subnormal
		}
		g[5] = 0.5
		impl.AdamUpdate(p, g, m, v, c)
		for i := range m {
			if i == 5 {
				if !(m[i] > 0.04 && v[i] > 2e-4) {
					t.Errorf("%v: m, v[5] = %v, %v", impl, m[i], v[i])
				}
				continue
			}
			if m[i] != 0 || v[i] != 0 || p[i] != 0 {
				t.Fatalf("%v: entry %d: m, v, p = %g, %g, %g, want 0 (flushed)", impl, i, m[i], v[i], p[i])
			}
		}
	}
}
