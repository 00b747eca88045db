//go:build !purego

package f32

import "golang.org/x/sys/cpu"

// Assembly kernels (gemm_avx512_amd64.s, gemm_avx2_amd64.s). Their
// contracts are in the .s files; kernels.go checks every bound before it
// calls them.

//go:noescape
func gemm4AVX512(k int, a *float32, ars, aps int, b *float32, ldb int, c *float32, ldc int, n int, bias, aux *float32, mode int)

//go:noescape
func colSumAVX512(dst, src *float32, rows, n, ld int)

//go:noescape
func sumSqAVX512(x *float32, n int, out *[16]float32)

//go:noescape
func adamAVX512(p, grad, m, v *float32, n int, c *[8]float32)

//go:noescape
func gemm4AVX2(k int, a *float32, ars, aps int, b *float32, ldb int, c *float32, ldc int, n int, bias, aux *float32, mode int)

//go:noescape
func colSumAVX2(dst, src *float32, rows, n, ld int)

//go:noescape
func sumSqAVX2(x *float32, n int, out *[16]float32)

//go:noescape
func adamAVX2(p, grad, m, v *float32, n int, c *[8]float32)

//go:noescape
func transpose8AVX2(src *float32, lds int, dst *float32, ldd int)

//go:noescape
func axpbyAVX512(dst, src *float32, n int, a, b float32)

//go:noescape
func axpbyAVX2(dst, src *float32, n int, a, b float32)

// hasAVX2 and hasAVX512 report what the CPU and the operating system (the
// saved register state, which x/sys/cpu checks through XGETBV) support.
// BZHI (BMI2) is part of both kernels' tail masks.
var (
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasBMI2
	hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F
)

func gemm4(impl Impl, k int, a *float32, ars, aps int, b *float32, ldb int, c *float32, ldc int, n int, bias, aux *float32, mode int) {
	if impl == AVX512 {
		gemm4AVX512(k, a, ars, aps, b, ldb, c, ldc, n, bias, aux, mode)
	} else {
		gemm4AVX2(k, a, ars, aps, b, ldb, c, ldc, n, bias, aux, mode)
	}
}

func colSumAsm(impl Impl, dst, src *float32, rows, n, ld int) {
	if impl == AVX512 {
		colSumAVX512(dst, src, rows, n, ld)
	} else {
		colSumAVX2(dst, src, rows, n, ld)
	}
}

func sumSqAsm(impl Impl, x *float32, n int, out *[16]float32) {
	if impl == AVX512 {
		sumSqAVX512(x, n, out)
	} else {
		sumSqAVX2(x, n, out)
	}
}

func adamAsm(impl Impl, p, g, m, v *float32, n int, c *[8]float32) {
	if impl == AVX512 {
		adamAVX512(p, g, m, v, n, c)
	} else {
		adamAVX2(p, g, m, v, n, c)
	}
}

func transpose8(src *float32, lds int, dst *float32, ldd int) { transpose8AVX2(src, lds, dst, ldd) }

func axpbyAsm(impl Impl, dst, src *float32, n int, a, b float32) {
	if impl == AVX512 {
		axpbyAVX512(dst, src, n, a, b)
	} else {
		axpbyAVX2(dst, src, n, a, b)
	}
}

//go:noescape
func cvt64to32AVX2(dst *float32, src *float64, n int)

//go:noescape
func cvt32to64AVX2(dst *float64, src *float32, n int)

func cvt64to32Asm(dst *float32, src *float64, n int) { cvt64to32AVX2(dst, src, n) }

func cvt32to64Asm(dst *float64, src *float32, n int) { cvt32to64AVX2(dst, src, n) }
