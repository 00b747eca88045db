//go:build !amd64

package xmath

// useAVX2 is false off amd64: Pow and PowAffine use package math.
var useAVX2 = false

func powAffineAVX2(dst, x *float64, n int, a, b, y float64) { panic("xmath: no vector kernel") }
