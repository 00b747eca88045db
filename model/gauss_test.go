package model_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/model"
)

// normalPDF is the density of N(m, s²) at x, written out.
func normalPDF(x, m, s float64) float64 {
	z := (x - m) / s
	return math.Exp(-z*z/2) / (s * math.Sqrt(2*math.Pi))
}

// randGauss draws dA-dimensional (a, m, s, mb, sb) with stds in
// [0.1, 1.5] and a near both means.
func randGauss(rng *rand.Rand, dA int) (a, m, s, mb, sb []float64) {
	a, m, s, mb, sb = make([]float64, dA), make([]float64, dA), make([]float64, dA), make([]float64, dA), make([]float64, dA)
	for j := range dA {
		m[j], mb[j] = rng.NormFloat64(), rng.NormFloat64()
		s[j], sb[j] = 0.1+1.4*rng.Float64(), 0.1+1.4*rng.Float64()
		a[j] = mb[j] + sb[j]*rng.NormFloat64()
	}
	return
}

// TestGaussRhoClosedForm: ρ = π(a|s)/μ(a|s) from the densities written
// out, per dimension multiplied.
func TestGaussRhoClosedForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		dA := 1 + trial%4
		a, m, s, mb, sb := randGauss(rng, dA)
		want := 1.0
		for j := range dA {
			want *= normalPDF(a[j], m[j], s[j]) / normalPDF(a[j], mb[j], sb[j])
		}
		got := math.Exp(model.GaussLogRatio(a, m, s, mb, sb))
		if math.Abs(got-want) > 1e-9*max(1, want) {
			t.Fatalf("trial %d: rho = %v, closed form %v", trial, got, want)
		}
		if r := model.GaussLogRatio(a, mb, sb, mb, sb); r != 0 {
			t.Fatalf("trial %d: log rho of μ against itself = %v", trial, r)
		}
	}
}

// TestGaussKLClosedForm: KL(μ||π) against a numerical integral of
// μ log(μ/π) in one dimension, and additivity over dimensions.
func TestGaussKLClosedForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 50 {
		_, m, s, mb, sb := randGauss(rng, 1)
		// Simpson's rule over mb ± 12 sb.
		const n = 4000
		lo, hi := mb[0]-12*sb[0], mb[0]+12*sb[0]
		h := (hi - lo) / n
		var sum float64
		for i := 0; i <= n; i++ {
			x := lo + float64(i)*h
			p, q := normalPDF(x, mb[0], sb[0]), normalPDF(x, m[0], s[0])
			f := 0.0
			if p > 0 {
				f = p * math.Log(p/q)
			}
			w := 2.0
			switch {
			case i == 0 || i == n:
				w = 1
			case i%2 == 1:
				w = 4
			}
			sum += w * f
		}
		want := sum * h / 3
		got := model.GaussKL(mb, sb, m, s)
		if math.Abs(got-want) > 1e-6*max(1, want) {
			t.Fatalf("trial %d: KL = %v, integral %v (m %v s %v mb %v sb %v)", trial, got, want, m, s, mb, sb)
		}
		// Reverse direction: the same integral with the roles swapped.
		if r, w := model.GaussKLReverse(mb, sb, m, s), model.GaussKL(m, s, mb, sb); math.Abs(r-w) > 1e-12*max(1, w) {
			t.Fatalf("trial %d: KL(π||μ) = %v, KL with swapped arguments %v", trial, r, w)
		}
	}
	_, m, s, mb, sb := randGauss(rng, 3)
	var sum float64
	for j := range 3 {
		sum += model.GaussKL(mb[j:j+1], sb[j:j+1], m[j:j+1], s[j:j+1])
	}
	if got := model.GaussKL(mb, sb, m, s); math.Abs(got-sum) > 1e-12 {
		t.Fatalf("KL over 3 dims %v, sum of per-dim %v", got, sum)
	}
	if kl := model.GaussKL(mb, sb, mb, sb); kl != 0 {
		t.Fatalf("KL(μ||μ) = %v", kl)
	}
}

// fdCheck compares analytic derivatives with central differences of f
// with respect to each entry of x.
func fdCheck(t *testing.T, what string, f func() float64, x, grad []float64) {
	t.Helper()
	for j := range x {
		h := 1e-6 * max(1, math.Abs(x[j]))
		x0 := x[j]
		x[j] = x0 + h
		fp := f()
		x[j] = x0 - h
		fm := f()
		x[j] = x0
		num := (fp - fm) / (2 * h)
		if math.Abs(num-grad[j]) > 1e-5*max(1, math.Abs(num)) {
			t.Fatalf("%s[%d]: analytic %v, finite difference %v", what, j, grad[j], num)
		}
	}
}

// TestGaussGradientsFiniteDifference checks every gradient of the
// Gaussian policy's maths: log π with respect to m and s, both KL
// directions with respect to m and s, the std map (Softplus) and their
// composition through the std parameter.
func TestGaussGradientsFiniteDifference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 50 {
		dA := 1 + trial%3
		a, m, s, mb, sb := randGauss(rng, dA)
		dm, ds := make([]float64, dA), make([]float64, dA)
		logPi := func() float64 { return model.GaussLogRatio(a, m, s, mb, sb) } // log μ does not depend on (m, s)
		model.GaussLogPiGrad(dm, ds, a, m, s)
		fdCheck(t, "dlogπ/dm", logPi, m, dm)
		fdCheck(t, "dlogπ/ds", logPi, s, ds)

		kl := func() float64 { return model.GaussKL(mb, sb, m, s) }
		model.GaussKLGrad(dm, ds, mb, sb, m, s)
		fdCheck(t, "dKL/dm", kl, m, dm)
		fdCheck(t, "dKL/ds", kl, s, ds)

		rev := func() float64 { return model.GaussKLReverse(mb, sb, m, s) }
		model.GaussKLReverseGrad(dm, ds, mb, sb, m, s)
		fdCheck(t, "dKLrev/dm", rev, m, dm)
		fdCheck(t, "dKLrev/ds", rev, s, ds)

		// Through the std parameter: d/du f(GaussStd(u)) = f'(s)·Sigmoid(u).
		u := make([]float64, dA)
		for j := range u {
			u[j] = model.GaussStdParam(s[j])
			if got := model.GaussStd(u[j]); math.Abs(got-s[j]) > 1e-12 {
				t.Fatalf("GaussStd(GaussStdParam(%v)) = %v", s[j], got)
			}
		}
		su := make([]float64, dA)
		klU := func() float64 {
			for j := range u {
				su[j] = model.GaussStd(u[j])
			}
			return model.GaussKL(mb, sb, m, su)
		}
		model.GaussKLGrad(dm, ds, mb, sb, m, s)
		du := make([]float64, dA)
		for j := range du {
			du[j] = ds[j] * model.Sigmoid(u[j])
		}
		fdCheck(t, "dKL/du", klU, u, du)
	}
}

func TestSoftplus(t *testing.T) {
	for _, x := range []float64{-800, -40, -5, -1e-3, 0, 1e-3, 3, 29, 31, 100, 800} {
		sp := model.Softplus(x)
		want := math.Log1p(math.Exp(x))
		if x > 700 {
			want = x
		}
		if math.IsNaN(sp) || math.IsInf(sp, 0) || math.Abs(sp-want) > 1e-12*max(1, want) {
			t.Errorf("Softplus(%v) = %v, want %v", x, sp, want)
		}
		if sp > 0 && x > -30 {
			if inv := model.SoftplusInv(sp); math.Abs(inv-x) > 1e-9*max(1, math.Abs(x)) {
				t.Errorf("SoftplusInv(Softplus(%v)) = %v", x, inv)
			}
		}
		h := 1e-6
		num := (model.Softplus(x+h) - model.Softplus(x-h)) / (2 * h)
		if g := model.Sigmoid(x); math.Abs(g-num) > 1e-6 {
			t.Errorf("Sigmoid(%v) = %v, finite difference of Softplus %v", x, g, num)
		}
	}
	if s := model.GaussStd(-1e4); !(s >= model.MinStd) {
		t.Errorf("GaussStd(-1e4) = %v, want >= MinStd", s)
	}
	if s := model.GaussStd(model.GaussStdParam(model.InitialStd)); math.Abs(s*s-0.2) > 1e-12 {
		t.Errorf("initial variance %v, want 0.2", s*s)
	}
}

func TestGaussianHead(t *testing.T) {
	h := model.GaussianHead{Dim: 2}
	row := []float64{5, 0.1, -0.2, model.GaussStdParam(0.3), model.GaussStdParam(0.7)}
	if h.Width() != 5 || h.Value(row) != 5 || h.Mean(row)[1] != -0.2 {
		t.Fatalf("layout: width %d, V %v, mean %v", h.Width(), h.Value(row), h.Mean(row))
	}
	std := make([]float64, 2)
	h.Std(std, row)
	if math.Abs(std[0]-0.3) > 1e-12 || math.Abs(std[1]-0.7) > 1e-12 {
		t.Fatalf("std %v", std)
	}
}
