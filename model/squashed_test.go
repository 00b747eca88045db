package model

import (
	"math"
	"testing"
)

// TestTanhLogDet: log(1 − tanh(u)²) in the stable form equals the direct
// form where that is accurate, its derivative is −2·tanh(u) (finite
// differences), and it stays finite and linear in |u| in the tails.
func TestTanhLogDet(t *testing.T) {
	for _, u := range []float64{-5, -1.3, -0.2, 0, 0.4, 2, 7} {
		th := math.Tanh(u)
		if got, want := TanhLogDet(u), math.Log(1-th*th); math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
			t.Errorf("TanhLogDet(%v) = %v, direct form %v", u, got, want)
		}
		const h = 1e-6
		if fd := (TanhLogDet(u+h) - TanhLogDet(u-h)) / (2 * h); math.Abs(fd+2*th) > 1e-7 {
			t.Errorf("d/du TanhLogDet(%v) = %v by finite differences, want %v", u, fd, -2*th)
		}
	}
	for _, u := range []float64{20, -20, 50, -800, 1e6} {
		if got, want := TanhLogDet(u), 2*math.Ln2-2*math.Abs(u); math.IsInf(got, 0) || math.Abs(got-want) > 1e-12*math.Abs(want) {
			t.Errorf("TanhLogDet(%v) = %v, want %v", u, got, want)
		}
	}
}

func TestSquashedLogStd(t *testing.T) {
	for _, c := range [][2]float64{{-25, SquashedLogStdMin}, {-20, -20}, {-3.5, -3.5}, {2, 2}, {2.5, SquashedLogStdMax}, {math.Inf(1), SquashedLogStdMax}} {
		if got := SquashedLogStd(c[0]); got != c[1] {
			t.Errorf("SquashedLogStd(%v) = %v, want %v", c[0], got, c[1])
		}
	}
	if !math.IsNaN(SquashedLogStd(math.NaN())) {
		t.Error("SquashedLogStd(NaN) is not NaN")
	}
}
