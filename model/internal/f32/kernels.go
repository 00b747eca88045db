package f32

import (
	"fmt"
	"math"
)

// Impl names one implementation of the kernels. The zero value, Auto,
// means the best one the CPU supports (Best); Portable is the pure-Go twin
// every other implementation is tested against and the only one on
// architectures other than amd64 (or with the purego build tag).
//
// Its methods are the kernels: plain functions of their arguments, with
// no state, so any number of goroutines may call them as long as what one
// call writes no other call reads or writes. A kernel's output must not
// overlap its inputs unless its doc says so.
type Impl uint8

const (
	// Auto resolves to Best() wherever an Impl is used.
	Auto Impl = iota
	// Portable is plain Go, on every architecture.
	Portable
	// AVX2 is amd64 assembly on 8-lane ymm registers with FMA (Haswell,
	// Zen 1 and later).
	AVX2
	// AVX512 is amd64 assembly on 16-lane zmm registers with opmasks
	// (AVX-512F: Skylake-SP, Ice Lake, Sapphire Rapids, Zen 4 and later).
	AVX512
)

var implNames = [...]string{Auto: "auto", Portable: "portable", AVX2: "avx2", AVX512: "avx512"}

// String returns "auto", "portable", "avx2" or "avx512".
func (i Impl) String() string {
	if int(i) < len(implNames) {
		return implNames[i]
	}
	return fmt.Sprintf("Impl(%d)", uint8(i))
}

// Available reports whether i can run on this CPU and build (Auto and
// Portable always can).
func (i Impl) Available() bool {
	switch i {
	case Auto, Portable:
		return true
	case AVX2:
		return hasAVX2
	case AVX512:
		return hasAVX512
	}
	return false
}

// Best returns the fastest implementation available: AVX512, then AVX2,
// then Portable. It is decided once, from the CPU's feature flags.
func Best() Impl {
	switch {
	case hasAVX512:
		return AVX512
	case hasAVX2:
		return AVX2
	}
	return Portable
}

// resolve turns Auto into Best and panics on an implementation this CPU
// lacks (a programmer error: check Available).
func (i Impl) resolve() Impl {
	if i == Auto {
		return Best()
	}
	if !i.Available() {
		panic(fmt.Sprintf("f32: implementation %v is not available on this CPU or build", i))
	}
	return i
}

// Init selects what Gemm adds the product to.
type Init uint8

const (
	// InitZero: C = A·B.
	InitZero Init = iota
	// InitBias: C[i][j] = bias[j] + (A·B)[i][j] (a layer's forward).
	InitBias
	// InitAcc: C += A·B.
	InitAcc
)

// Post selects Gemm's element-wise epilogue, applied before the store.
type Post uint8

const (
	// PostNone stores the sum as it is.
	PostNone Post = iota
	// PostReLU stores max(c, 0) (a ReLU layer's forward).
	PostReLU
	// PostReLUGrad stores c·[aux > 0]: with aux a ReLU layer's output, the
	// gradient flowing back through it.
	PostReLUGrad
	// PostTanhGrad stores c·(1 − aux²): with aux a tanh layer's output,
	// the gradient flowing back through it.
	PostTanhGrad
)

// Gemm computes the m×n matrix
//
//	C[i][j] = post(init[i][j] + Σ_{p<k} A(i, p)·B[p][j])
//
// where A(i, p) = a[i·ars + p·aps] (so A row-major m×k is ars = k,
// aps = 1, and Xᵀ for a row-major k×m X is ars = 1, aps = m), B is
// row-major with row stride ldb ≥ n, C row-major with row stride ldc ≥ n,
// bias has n entries (InitBias only) and aux has C's layout (ldc) for the
// gradient epilogues. Entries of C outside the m×n block are not touched.
//
// The SIMD implementations compute four rows at a time with a register
// tile of 4×64 (AVX-512) or 4×16 (AVX2) and mask the last columns. The
// last m mod 4 rows (all of them when m < 4, as in dW of a layer with
// fewer than four inputs) go through the same kernel on zero-padded
// copies on the stack. Products are summed in the
// order p = 0, 1, …, k−1 with FMA, so results differ from Portable's by
// rounding only.
//
// Cost: 2·m·n·k flops, no allocation. It panics if a slice is too short
// for the shape and strides, or on negative sizes.
func (i Impl) Gemm(m, n, k int, a []float32, ars, aps int, b []float32, ldb int, c []float32, ldc int, init Init, bias []float32, post Post, aux []float32) {
	checkGemm(m, n, k, a, ars, aps, b, ldb, c, ldc, init, bias, post, aux)
	if m == 0 || n == 0 {
		return
	}
	impl := i.resolve()
	if impl == Portable {
		gemmGeneric(m, n, k, a, ars, aps, b, ldb, c, ldc, init, bias, post, aux)
		return
	}
	m4 := m &^ 3
	mode := int(init) | int(post)<<2
	var pa, pb, pbias, paux *float32
	if k > 0 {
		pb = &b[0]
	}
	if init == InitBias {
		pbias = &bias[0]
	}
	for r := 0; r < m4; r += 4 {
		if k > 0 {
			pa = &a[r*ars]
		}
		if post >= PostReLUGrad {
			paux = &aux[r*ldc]
		}
		gemm4(impl, k, pa, ars, aps, pb, ldb, &c[r*ldc], ldc, n, pbias, paux, mode)
	}
	if m4 < m {
		gemmTail(impl, m-m4, n, k, a[min(m4*ars, len(a)):], ars, aps, b, ldb, c[m4*ldc:], ldc, init, bias, post, auxRows(aux, m4*ldc, post))
	}
}

// auxRows returns aux from offset off when the epilogue reads it.
func auxRows(aux []float32, off int, post Post) []float32 {
	if post < PostReLUGrad {
		return nil
	}
	return aux[off:]
}

// Bounds of gemmTail's stack scratch: A's rows in blocks of tailMaxK
// steps of k, C and aux in slabs of tailMaxN columns (12 KiB in all).
const (
	tailMaxK = 256
	tailMaxN = 128
)

// gemmTail computes rem < 4 rows of C with the SIMD kernel: A's rows are
// copied into a zero-padded 4×kb block, and C's (and aux's) into 4×slab
// blocks, all on the stack; the kernel's extra rows are computed and
// dropped. A k longer than tailMaxK goes in blocks, the partial sums kept
// in C between them (the sum order stays p = 0, 1, …), the epilogue
// applied after the last.
func gemmTail(impl Impl, rem, n, k int, a []float32, ars, aps int, b []float32, ldb int, c []float32, ldc int, init Init, bias []float32, post Post, aux []float32) {
	var ap [4 * tailMaxK]float32
	var cp, xp [4 * tailMaxN]float32
	for kb := 0; ; kb += tailMaxK {
		kk := min(tailMaxK, k-kb)
		for i := range rem {
			for p := range kk {
				ap[i*kk+p] = a[i*ars+(kb+p)*aps]
			}
		}
		in, po := init, post
		if kb > 0 {
			in = InitAcc
		}
		last := kb+kk >= k
		if !last {
			po = PostNone
		}
		mode := int(in) | int(po)<<2
		for j0 := 0; j0 < n; j0 += tailMaxN {
			nj := min(tailMaxN, n-j0)
			for i := range rem {
				if in == InitAcc {
					copy(cp[i*nj:(i+1)*nj], c[i*ldc+j0:i*ldc+j0+nj])
				}
				if po >= PostReLUGrad {
					copy(xp[i*nj:(i+1)*nj], aux[i*ldc+j0:i*ldc+j0+nj])
				}
			}
			var pb, pbias *float32
			if kk > 0 {
				pb = &b[kb*ldb+j0]
			}
			if in == InitBias {
				pbias = &bias[j0]
			}
			gemm4(impl, kk, &ap[0], kk, 1, pb, ldb, &cp[0], nj, nj, pbias, &xp[0], mode)
			for i := range rem {
				copy(c[i*ldc+j0:i*ldc+j0+nj], cp[i*nj:(i+1)*nj])
			}
		}
		if last {
			return
		}
	}
}

func checkGemm(m, n, k int, a []float32, ars, aps int, b []float32, ldb int, c []float32, ldc int, init Init, bias []float32, post Post, aux []float32) {
	switch {
	case m < 0 || n < 0 || k < 0:
		panic(fmt.Sprintf("f32: Gemm: negative size m=%d n=%d k=%d", m, n, k))
	case ars < 0 || aps < 0:
		panic(fmt.Sprintf("f32: Gemm: negative A strides %d, %d", ars, aps))
	case ldb < n || ldc < n:
		panic(fmt.Sprintf("f32: Gemm: ldb = %d, ldc = %d, n = %d (strides must be >= n)", ldb, ldc, n))
	case init > InitAcc || post > PostTanhGrad:
		panic(fmt.Sprintf("f32: Gemm: invalid init %d or post %d", init, post))
	}
	if m == 0 || n == 0 {
		return
	}
	if k > 0 {
		if need := (m-1)*ars + (k-1)*aps + 1; len(a) < need {
			panic(fmt.Sprintf("f32: Gemm: len(a) = %d, the %d×%d view needs %d", len(a), m, k, need))
		}
		if need := (k-1)*ldb + n; len(b) < need {
			panic(fmt.Sprintf("f32: Gemm: len(b) = %d, the %d×%d view needs %d", len(b), k, n, need))
		}
	}
	need := (m-1)*ldc + n
	if len(c) < need {
		panic(fmt.Sprintf("f32: Gemm: len(c) = %d, the %d×%d view needs %d", len(c), m, n, need))
	}
	if init == InitBias && len(bias) < n {
		panic(fmt.Sprintf("f32: Gemm: len(bias) = %d < n = %d", len(bias), n))
	}
	if post >= PostReLUGrad && len(aux) < need {
		panic(fmt.Sprintf("f32: Gemm: len(aux) = %d, the %d×%d view needs %d", len(aux), m, n, need))
	}
}

// gemmGeneric is Gemm's portable twin (bounds already checked). Rows go
// four at a time, so each row of B is loaded once for four rows of C;
// every C[i][j] still sums its products in the order p = 0, 1, …, k−1.
func gemmGeneric(m, n, k int, a []float32, ars, aps int, b []float32, ldb int, c []float32, ldc int, init Init, bias []float32, post Post, aux []float32) {
	for i := range m {
		ci := c[i*ldc : i*ldc+n]
		switch init {
		case InitZero:
			clear(ci)
		case InitBias:
			copy(ci, bias[:n])
		}
	}
	i := 0
	for ; i+4 <= m; i += 4 {
		c0 := c[i*ldc : i*ldc+n]
		c1 := c[(i+1)*ldc : (i+1)*ldc+n]
		c2 := c[(i+2)*ldc : (i+2)*ldc+n]
		c3 := c[(i+3)*ldc : (i+3)*ldc+n]
		for p := range k {
			a0, a1 := a[i*ars+p*aps], a[(i+1)*ars+p*aps]
			a2, a3 := a[(i+2)*ars+p*aps], a[(i+3)*ars+p*aps]
			bp := b[p*ldb : p*ldb+n]
			c0, c1, c2, c3 := c0[:len(bp)], c1[:len(bp)], c2[:len(bp)], c3[:len(bp)] // no bounds checks below
			for j, bv := range bp {
				c0[j] += a0 * bv
				c1[j] += a1 * bv
				c2[j] += a2 * bv
				c3[j] += a3 * bv
			}
		}
	}
	for ; i < m; i++ {
		ci := c[i*ldc : i*ldc+n]
		for p := range k {
			aip := a[i*ars+p*aps]
			bp := b[p*ldb : p*ldb+n]
			ci := ci[:len(bp)]
			for j, bv := range bp {
				ci[j] += aip * bv
			}
		}
	}
	for i := range m {
		ci := c[i*ldc : i*ldc+n]
		switch post {
		case PostReLU:
			for j, v := range ci {
				if !(v > 0) && v == v { // a NaN stays NaN, as in the SIMD kernels
					ci[j] = 0
				}
			}
		case PostReLUGrad:
			ai := aux[i*ldc : i*ldc+n]
			for j, y := range ai {
				if !(y > 0) {
					ci[j] = 0
				}
			}
		case PostTanhGrad:
			ai := aux[i*ldc : i*ldc+n]
			for j, y := range ai {
				ci[j] *= 1 - y*y
			}
		}
	}
}

// Transpose writes the r×c row-major matrix src (row stride lds ≥ c)
// into dst as c×r (row stride ldd ≥ r): dst[j·ldd + i] = src[i·lds + j].
// The SIMD implementations move 8×8 blocks through ymm registers (AVX2
// shuffles, also on AVX512) and do the edges in Go. Cost O(r·c), no
// allocation. It panics on a slice too short for the shape.
func (i Impl) Transpose(dst []float32, ldd int, src []float32, lds int, r, c int) {
	switch {
	case r < 0 || c < 0 || lds < c || ldd < r:
		panic(fmt.Sprintf("f32: Transpose: r=%d c=%d lds=%d ldd=%d", r, c, lds, ldd))
	case r == 0 || c == 0:
		return
	case len(src) < (r-1)*lds+c || len(dst) < (c-1)*ldd+r:
		panic(fmt.Sprintf("f32: Transpose: len(src) = %d, len(dst) = %d for %d×%d (strides %d, %d)", len(src), len(dst), r, c, lds, ldd))
	}
	r8, c8 := 0, 0
	if impl := i.resolve(); impl != Portable {
		r8, c8 = r&^7, c&^7
		for i0 := 0; i0 < r8; i0 += 8 {
			for j0 := 0; j0 < c8; j0 += 8 {
				transpose8(&src[i0*lds+j0], lds, &dst[j0*ldd+i0], ldd)
			}
		}
	}
	// The edges (or everything, portably): rows ≥ r8 of every column, and
	// columns ≥ c8 of the rows < r8.
	for i0 := range r {
		j0 := 0
		if i0 < r8 {
			j0 = c8
		}
		row := src[i0*lds : i0*lds+c]
		for j := j0; j < c; j++ {
			dst[j*ldd+i0] = row[j]
		}
	}
}

// Polyak sets dst[i] = tau·src[i] + (1−tau)·dst[i] (the soft target
// update, model.Polyak). Cost O(n), no allocation. It panics on lengths
// that differ or tau outside [0, 1].
func (i Impl) Polyak(dst, src []float32, tau float32) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("f32: Polyak: len(dst) = %d, len(src) = %d", len(dst), len(src)))
	}
	if !(tau >= 0 && tau <= 1) {
		panic(fmt.Sprintf("f32: Polyak: tau = %g (must be in [0, 1])", tau))
	}
	if len(dst) == 0 {
		return
	}
	keep := 1 - tau
	if impl := i.resolve(); impl != Portable {
		axpbyAsm(impl, &dst[0], &src[0], len(dst), tau, keep)
		return
	}
	src = src[:len(dst)]
	for j, s := range src {
		dst[j] = tau*s + keep*dst[j]
	}
}

// ColSum sets dst[j] = Σ_{r<rows} src[r·ld + j] for j < n: the bias
// gradient of a layer, the column sums of its B×Out dZ. Cost O(rows·n), no
// allocation. It panics on a slice too short or ld < n.
func (i Impl) ColSum(dst, src []float32, rows, n, ld int) {
	switch {
	case rows < 0 || n < 0 || ld < n:
		panic(fmt.Sprintf("f32: ColSum: rows=%d n=%d ld=%d", rows, n, ld))
	case len(dst) < n:
		panic(fmt.Sprintf("f32: ColSum: len(dst) = %d < n = %d", len(dst), n))
	case rows > 0 && len(src) < (rows-1)*ld+n:
		panic(fmt.Sprintf("f32: ColSum: len(src) = %d, %d rows of stride %d need %d", len(src), rows, ld, (rows-1)*ld+n))
	}
	if n == 0 {
		return
	}
	if rows == 0 {
		clear(dst[:n])
		return
	}
	if impl := i.resolve(); impl != Portable {
		colSumAsm(impl, &dst[0], &src[0], rows, n, ld)
		return
	}
	d := dst[:n]
	copy(d, src[:n])
	for r := 1; r < rows; r++ {
		row := src[r*ld : r*ld+n]
		for j, v := range row {
			d[j] += v
		}
	}
}

// flush returns 0 for a subnormal x (|x| < 2⁻¹²⁶), else x: what MXCSR's
// flush-to-zero mode does to the SIMD kernels' results.
func flush(x float32) float32 {
	if x > -0x1p-126 && x < 0x1p-126 {
		return 0
	}
	return x
}

// SumSq returns Σ x[i]² (the squared global norm of a gradient). The SIMD
// implementations sum in 16 float32 lanes and add the lanes in float64;
// Portable sums in float64. An overflow shows as +Inf, a NaN entry as NaN.
// Cost O(len(x)), no allocation.
func (i Impl) SumSq(x []float32) float64 {
	if len(x) == 0 {
		return 0
	}
	if impl := i.resolve(); impl != Portable {
		var lanes [16]float32
		sumSqAsm(impl, &x[0], len(x), &lanes)
		s := 0.0
		for _, v := range lanes {
			s += float64(v)
		}
		return s
	}
	s := 0.0
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return s
}

// AdamConsts are the per-step constants of the fused Adam update:
//
//	g' = Scale·g
//	m ← Beta1·m + (1−Beta1)·g'
//	v ← Beta2·v + (1−Beta2)·g'²
//	p ← p − Step·m / (sqrt(v)·InvSqrtBC2 + Eps)
//
// with Step = lr/(1−β₁ᵗ) and InvSqrtBC2 = 1/sqrt(1−β₂ᵗ) (Kingma & Ba 2015,
// Algorithm 1, the bias corrections folded in as model.Adam does) and
// Scale the gradient-clipping factor (1 without clipping).
type AdamConsts struct {
	Scale, Beta1, Beta2, Step, InvSqrtBC2, Eps float32
}

// AdamUpdate applies the fused Adam update of c to the n = len(p)
// parameters in one pass (g is read, not scaled in place). Moments that
// fall below the smallest normal float32 (2⁻¹²⁶) are stored as 0: a
// parameter whose gradient stays 0 would otherwise keep its second moment
// in the subnormal range for some 16,000 steps (β₂ = 0.999), and subnormal
// arithmetic is about 30 times slower; the SIMD implementations do it by
// setting MXCSR's flush-to-zero and denormals-are-zero modes for the call. Cost O(n): a
// square root and a division per parameter, no allocation. It panics
// unless g, m and v have p's length.
func (i Impl) AdamUpdate(p, g, m, v []float32, c AdamConsts) {
	n := len(p)
	if len(g) != n || len(m) != n || len(v) != n {
		panic(fmt.Sprintf("f32: AdamUpdate: len(p, g, m, v) = %d, %d, %d, %d", n, len(g), len(m), len(v)))
	}
	if n == 0 {
		return
	}
	if impl := i.resolve(); impl != Portable {
		k := [8]float32{c.Scale, c.Beta1, 1 - c.Beta1, c.Beta2, 1 - c.Beta2, c.Step, c.InvSqrtBC2, c.Eps}
		adamAsm(impl, &p[0], &g[0], &m[0], &v[0], n, &k)
		return
	}
	c1, c2 := 1-c.Beta1, 1-c.Beta2
	g, m, v = g[:n], m[:n], v[:n]
	for j, gj := range g {
		gs := c.Scale * gj
		mj := c.Beta1*m[j] + c1*gs
		vj := c.Beta2*v[j] + c2*(gs*gs)
		mj, vj = flush(mj), flush(vj)
		m[j], v[j] = mj, vj
		p[j] -= (c.Step * mj) / (float32(math.Sqrt(float64(vj)))*c.InvSqrtBC2 + c.Eps)
	}
}
