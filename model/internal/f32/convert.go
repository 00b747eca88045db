package f32

import "fmt"

// ToFloat32 sets dst[i] = float32(src[i]) (round to nearest even; beyond
// float32's range ±Inf, NaN stays NaN), exactly as Go's conversion does:
// model's float32 path rounds its float64 parameters and inputs with it.
// The SIMD implementations (both use AVX2's VCVTPD2PS) convert 8 values
// per instruction pair. Cost O(n), no allocation. It panics unless the
// lengths are equal.
func (i Impl) ToFloat32(dst []float32, src []float64) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("f32: ToFloat32: len(dst) = %d, len(src) = %d", len(dst), len(src)))
	}
	j := 0
	if n := len(dst) &^ 7; n > 0 && i.resolve() != Portable {
		cvt64to32Asm(&dst[0], &src[0], n)
		j = n
	}
	src = src[:len(dst)]
	for ; j < len(dst); j++ {
		dst[j] = float32(src[j])
	}
}

// ToFloat64 sets dst[i] = float64(src[i]) (exact): model's float32 path
// widens its outputs and gradients with it. Cost O(n), no allocation. It
// panics unless the lengths are equal.
func (i Impl) ToFloat64(dst []float64, src []float32) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("f32: ToFloat64: len(dst) = %d, len(src) = %d", len(dst), len(src)))
	}
	j := 0
	if n := len(dst) &^ 7; n > 0 && i.resolve() != Portable {
		cvt32to64Asm(&dst[0], &src[0], n)
		j = n
	}
	src = src[:len(dst)]
	for ; j < len(dst); j++ {
		dst[j] = float64(src[j])
	}
}
