// Package xmath holds the replay path's arithmetic that the standard
// library does more slowly than apex needs.
package xmath

import "math"

// Pow returns x^y. For a finite normal x > 0 and y != 0, the case of every
// priority ((|δ|+ε)^α) and importance weight ((N·P)^-β) on the replay
// path, it is exp(y·ln x): about 2× faster than math.Pow, with a
// relative error within (2·|y·ln x| + 4)·2^-52 (below 1e-13 for
// |y·ln x| < 200). Every other argument (x ≤ 0, subnormal, ±Inf, NaN; y = 0) goes
// through math.Pow, so the special cases are math.Pow's. Pure; safe for
// concurrent use.
func Pow(x, y float64) float64 {
	if x >= 0x1p-1022 && x <= math.MaxFloat64 && y != 0 {
		return math.Exp(y * math.Log(x))
	}
	return math.Pow(x, y)
}
