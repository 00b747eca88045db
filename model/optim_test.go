package model

import (
	"errors"
	"math"
	"testing"
)

// TestAdamByHand checks three Adam steps against Algorithm 1 of Kingma & Ba
// written out in full: the first step by hand (m̂ = g and v̂ = g², so each
// parameter moves by lr·g/(|g| + ε)), the next ones by the textbook formula.
func TestAdamByHand(t *testing.T) {
	const lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-8
	adam, err := NewAdam(3, AdamConfig{LR: lr})
	if err != nil {
		t.Fatal(err)
	}
	if c := adam.Config(); c.Beta1 != b1 || c.Beta2 != b2 || c.Eps != eps || c.ClipNorm != 0 {
		t.Fatalf("defaults %+v", c)
	}
	params := []float64{1, -2, 0.5}
	g1 := []float64{0.5, -0.1, 0}
	norm, err := adam.Step(params, append([]float64(nil), g1...))
	if err != nil {
		t.Fatal(err)
	}
	if want := math.Sqrt(0.25 + 0.01); math.Abs(norm-want) > 1e-15 {
		t.Errorf("norm %g, want %g", norm, want)
	}
	// Step 1 by hand: 1 − 0.1·0.5/(0.5+1e-8), −2 + 0.1·0.1/(0.1+1e-8), 0.5.
	want1 := []float64{1 - 0.1*0.5/(0.5+1e-8), -2 + 0.1*0.1/(0.1+1e-8), 0.5}
	for i := range params {
		if math.Abs(params[i]-want1[i]) > 1e-15 {
			t.Errorf("step 1: params[%d] = %.17g, want %.17g", i, params[i], want1[i])
		}
	}
	if math.Abs(params[0]-0.900000002) > 1e-9 || math.Abs(params[1]-(-1.90000001)) > 1e-8 {
		t.Errorf("step 1: params %v, want about [0.9 -1.9 0.5]", params)
	}

	// Steps 2 and 3 by the textbook formula.
	m, v := make([]float64, 3), make([]float64, 3)
	ref := []float64{1, -2, 0.5}
	grads := [][]float64{g1, {-0.3, 0.2, 1e-3}, {0.05, 0.4, -2}}
	for step, g := range grads {
		tt := float64(step + 1)
		for i := range ref {
			m[i] = b1*m[i] + (1-b1)*g[i]
			v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
			mhat := m[i] / (1 - math.Pow(b1, tt))
			vhat := v[i] / (1 - math.Pow(b2, tt))
			ref[i] -= lr * mhat / (math.Sqrt(vhat) + eps)
		}
		if step == 0 {
			continue // applied above
		}
		if _, err := adam.Step(params, append([]float64(nil), g...)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range params {
		if math.Abs(params[i]-ref[i]) > 1e-14 {
			t.Errorf("step 3: params[%d] = %.17g, want %.17g", i, params[i], ref[i])
		}
	}
	if adam.Steps() != 3 {
		t.Errorf("Steps = %d", adam.Steps())
	}
}

func TestAdamClip(t *testing.T) {
	a, _ := NewAdam(2, AdamConfig{LR: 1, ClipNorm: 1})
	b, _ := NewAdam(2, AdamConfig{LR: 1})
	pa, pb := []float64{0, 0}, []float64{0, 0}
	g := []float64{3, 4}
	norm, err := a.Step(pa, g)
	if err != nil || norm != 5 {
		t.Fatalf("norm %g, %v", norm, err)
	}
	if math.Abs(g[0]-0.6) > 1e-15 || math.Abs(g[1]-0.8) > 1e-15 {
		t.Errorf("clipped grads %v, want [0.6 0.8]", g)
	}
	if _, err := b.Step(pb, []float64{3.0 / 5, 4.0 / 5}); err != nil {
		t.Fatal(err)
	}
	if pa[0] != pb[0] || pa[1] != pb[1] {
		t.Errorf("clipped step %v, step on the clipped gradient %v", pa, pb)
	}
	// Below the threshold nothing changes.
	g = []float64{0.3, 0.4}
	if n, _ := ClipGradNorm(g, 1); n != 0.5 || g[0] != 0.3 {
		t.Errorf("ClipGradNorm below max: %g %v", n, g)
	}
	// A norm that overflows Σg² is still computed.
	if n, err := GradNorm([]float64{3e200, 4e200}); err != nil || math.Abs(n/5e200-1) > 1e-15 {
		t.Errorf("GradNorm(huge) = %g, %v", n, err)
	}
}

// TestOptimizerRefusesNonFinite: a NaN or Inf gradient is an error naming
// the index, and neither the parameters nor Adam's state change.
func TestOptimizerRefusesNonFinite(t *testing.T) {
	a, _ := NewAdam(3, AdamConfig{})
	params := []float64{1, 2, 3}
	if _, err := a.Step(params, []float64{0.1, 0.2, 0.3}); err != nil {
		t.Fatal(err)
	}
	before := append([]float64(nil), params...)
	m0 := append([]float64(nil), a.m...)
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := a.Step(params, []float64{0.1, bad, 0.3})
		var nf *NonFiniteError
		if !errors.As(err, &nf) || !errors.Is(err, ErrNonFinite) || nf.Index != 1 || nf.What != "gradient" {
			t.Fatalf("Step with %g: %v", bad, err)
		}
		for i := range params {
			if params[i] != before[i] || a.m[i] != m0[i] {
				t.Fatalf("Step with %g changed params or moments", bad)
			}
		}
		if a.Steps() != 1 {
			t.Fatalf("Steps = %d after a refused step", a.Steps())
		}
		if _, err := (SGD{LR: 0.1}).Step(params, []float64{bad, 0, 0}); !errors.Is(err, ErrNonFinite) {
			t.Fatalf("SGD with %g: %v", bad, err)
		}
	}
}

func TestSGD(t *testing.T) {
	p := []float64{1, 2}
	n, err := SGD{LR: 0.5}.Step(p, []float64{2, -4})
	if err != nil || p[0] != 0 || p[1] != 4 || math.Abs(n-math.Sqrt(20)) > 1e-15 {
		t.Errorf("SGD: %v %g %v", p, n, err)
	}
	p = []float64{0, 0}
	SGD{LR: 1, ClipNorm: 1}.Step(p, []float64{3, 4})
	if math.Abs(p[0]+0.6) > 1e-15 || math.Abs(p[1]+0.8) > 1e-15 {
		t.Errorf("clipped SGD: %v", p)
	}
}

func TestAdamConfigErrors(t *testing.T) {
	for _, c := range []AdamConfig{
		{LR: -1}, {LR: math.Inf(1)}, {Beta1: 1}, {Beta2: -0.5}, {Eps: -1}, {ClipNorm: -1}, {ClipNorm: math.NaN()},
	} {
		if _, err := NewAdam(3, c); !errors.Is(err, ErrConfig) {
			t.Errorf("NewAdam(%+v): %v", c, err)
		}
	}
	if _, err := NewAdam(0, AdamConfig{}); !errors.Is(err, ErrConfig) {
		t.Errorf("NewAdam(0): %v", err)
	}
	a, _ := NewAdam(1, AdamConfig{})
	a.SetLR(0.5)
	if a.Config().LR != 0.5 {
		t.Error("SetLR")
	}
	p := []float64{1}
	a.Step(p, []float64{1})
	a.Reset()
	if a.Steps() != 0 || a.m[0] != 0 || a.v[0] != 0 {
		t.Error("Reset")
	}
}
