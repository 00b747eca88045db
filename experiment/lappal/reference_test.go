package lappal

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/experiment/control"
)

// TestReferenceClosedForms checks the solvers on an intercept-only model
// (D = 1), where the fixed points have closed forms: OLS and PER with
// a(1−b) = 0 are the mean; LAD, and PAL with alpha 0 and a tiny k (a
// Huber(k) fit), are the median (N odd); PAL with alpha 0 and k above every
// |δ| is the mean again.
func TestReferenceClosedForms(t *testing.T) {
	const seed = 0x1ad
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, n := range []int{1, 5, 101, 1001} {
		y := make([]float64, n)
		for i := range y {
			y[i] = math.Exp(1.5*rng.NormFloat64()) - 1 // skewed
		}
		x := make([]float64, n)
		for i := range x {
			x[i] = 1
		}
		data := Design{X: x, Y: y, D: 1}
		mean, med := control.Mean(y), control.Median(y)
		spread := 1 + math.Abs(mean)
		check := func(name string, w []float64, err error, want, tol float64) {
			t.Helper()
			if err != nil {
				t.Fatalf("seed %#x, n=%d: %s: %v", seed, n, name, err)
			}
			if len(w) != 1 || !(math.Abs(w[0]-want) <= tol) {
				t.Errorf("seed %#x, n=%d: %s = %v, want %v (±%g)", seed, n, name, w, want, tol)
			}
		}
		w, err := SolveOLS(data)
		check("OLS", w, err, mean, 1e-12*spread)
		w, err = SolveNewton(data, PERInfluence(0.6, 1, 1e-6))
		check("PER with beta = 1", w, err, mean, 1e-12*spread)
		w, err = SolveNewton(data, PERInfluence(0, 0.4, 0))
		check("PER with alpha = 0", w, err, mean, 1e-12*spread)
		w, err = SolveNewton(data, PALInfluence(0, 1e6))
		check("PAL(alpha 0, k large)", w, err, mean, 1e-12*spread)
		w, err = SolveLAD(data)
		check("LAD", w, err, med, 1e-12*spread)
		w, err = SolveNewton(data, PALInfluence(0, 1e-9))
		check("PAL(alpha 0, k tiny)", w, err, med, 1e-9)
	}
}

func sign(d float64) float64 {
	switch {
	case d > 0:
		return 1
	case d < 0:
		return -1
	}
	return 0
}
