//go:build !amd64 || purego

package f32

// No assembly on this architecture (or with the purego tag): only the
// portable kernels exist.

const (
	hasAVX2   = false
	hasAVX512 = false
)

func gemm4(Impl, int, *float32, int, int, *float32, int, *float32, int, int, *float32, *float32, int) {
	panic("f32: no assembly kernels in this build")
}

func colSumAsm(Impl, *float32, *float32, int, int, int) {
	panic("f32: no assembly kernels in this build")
}

func sumSqAsm(Impl, *float32, int, *[16]float32) {
	panic("f32: no assembly kernels in this build")
}

func adamAsm(Impl, *float32, *float32, *float32, *float32, int, *[8]float32) {
	panic("f32: no assembly kernels in this build")
}

func transpose8(*float32, int, *float32, int) {
	panic("f32: no assembly kernels in this build")
}

func axpbyAsm(Impl, *float32, *float32, int, float32, float32) {
	panic("f32: no assembly kernels in this build")
}

func cvt64to32Asm(*float32, *float64, int) {
	panic("f32: no assembly kernels in this build")
}

func cvt32to64Asm(*float64, *float32, int) {
	panic("f32: no assembly kernels in this build")
}
