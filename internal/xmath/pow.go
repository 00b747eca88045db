// Package xmath holds the replay path's arithmetic that the standard
// library does more slowly than apex needs.
package xmath

import "math"

// Pow returns x^y. For a finite normal x > 0 with |y·ln x| ≤ 707, the case
// of every priority ((|δ|+ε)^α) and importance weight ((N·P)^-β) on the
// replay path, it is exp(y·ln x) with fdlibm's log and exp (package math's
// algorithms), through the AVX2+FMA kernel where the CPU has one: one
// call is about 1.5–2× faster than math.Pow (BenchmarkPow; PowAffine,
// four lanes at a time, about 10×), with a relative error within
// (2·|y·ln x| + 4)·2^-52 (below 1e-13 for |y·ln x| < 200). Every other
// argument (x ≤ 0, subnormal, ±Inf, NaN, or a result near the float64
// range's ends) goes through math.Pow, so the special cases are
// math.Pow's; y = 1 and y = -1 are exact (x and 1/x). Pow(x, y) equals
// PowAffine's result for the same value and y, bit for bit. Pure; safe for
// concurrent use.
func Pow(x, y float64) float64 {
	switch y {
	case 1: // exact, as math.Pow
		return x
	case -1:
		return 1 / x
	}
	if useAVX2 {
		in := [4]float64{x}
		var out [4]float64
		powAffineAVX2(&out[0], &in[0], 4, 1, 0, y)
		if v := out[0]; v == v {
			return v
		}
		return math.Pow(x, y)
	}
	return powGo(x, y)
}

// powGo is Pow without the vector kernel.
func powGo(x, y float64) float64 {
	if x >= 0x1p-1022 && x <= math.MaxFloat64 {
		if t := y * math.Log(x); t >= -707 && t <= 707 {
			return math.Exp(t)
		}
	}
	return math.Pow(x, y)
}

// PowAffine sets dst[i] = Pow(a·x[i] + b, y) for every i, where a·x[i] + b
// is rounded once (math.FMA; with a = 1 or b = 0 it is the plain sum or
// product). dst and x must have the same
// length; dst may be x. Cost: about 2 ns an element with AVX2 and FMA
// (four at a time, in blocks of powBlock copied to the stack), plus
// math.Pow for any element outside Pow's fast range.
func PowAffine(dst, x []float64, a, b, y float64) {
	if len(dst) != len(x) {
		panic("xmath: PowAffine: len(dst) != len(x)")
	}
	if y == 1 || y == -1 || !useAVX2 {
		for i, v := range x {
			dst[i] = Pow(math.FMA(a, v, b), y)
		}
		return
	}
	// The kernel reads a block from a copy, so dst may be x: an element it
	// leaves as NaN (outside its range) is recomputed from the copy.
	var in [powBlock]float64
	n := len(x) &^ 3
	for lo := 0; lo < n; lo += powBlock {
		k := min(powBlock, n-lo)
		copy(in[:k], x[lo:lo+k])
		powAffineAVX2(&dst[lo], &in[0], k, a, b, y)
		for j, v := range dst[lo : lo+k] {
			if v != v {
				dst[lo+j] = math.Pow(math.FMA(a, in[j], b), y)
			}
		}
	}
	for i := n; i < len(x); i++ {
		dst[i] = Pow(math.FMA(a, x[i], b), y)
	}
}

// powBlock is how many elements PowAffine hands the kernel at once (a
// multiple of 4; 1 KiB of stack).
const powBlock = 128
