package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// fitSine trains 1→32→32→1 (tanh) with Adam on y = sin(x), x ∈ [−π, π],
// from a fixed seed, and returns the final full-batch MSE.
func fitSine(t testing.TB, act Activation, steps int) float64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(2024, 1))
	net, err := NewNet(Config{In: 1, Hidden: []int{32, 32}, Out: 1, Act: act}, rng)
	if err != nil {
		t.Fatal(err)
	}
	adam, err := NewAdam(net.NumParams(), AdamConfig{LR: 1e-2})
	if err != nil {
		t.Fatal(err)
	}
	const b = 64
	x, y, grad := make([]float64, b), make([]float64, b), make([]float64, b)
	mse := Loss{Kind: MSE}
	for range steps {
		for i := range x {
			x[i] = (2*rng.Float64() - 1) * math.Pi
			y[i] = math.Sin(x[i])
		}
		l := mse.Value(grad, net.Forward(x), y, nil)
		if err := CheckFiniteValue("loss", l); err != nil {
			t.Fatal(err)
		}
		net.Backward(grad)
		if _, err := adam.Step(net.Params(), net.Grads()); err != nil {
			t.Fatal(err)
		}
	}
	const n = 256
	xs, ys := make([]float64, n), make([]float64, n)
	for i := range xs {
		xs[i] = -math.Pi + 2*math.Pi*float64(i)/(n-1)
		ys[i] = math.Sin(xs[i])
	}
	return mse.Value(nil, net.Forward(xs), ys, nil)
}

// TestFitSine: a deterministic regression that must reach a loss threshold
// (the untrained network's MSE is about 0.5).
func TestFitSine(t *testing.T) {
	steps := 1500
	for _, act := range []Activation{Tanh, ReLU, Softsign} {
		l := fitSine(t, act, steps)
		t.Logf("%v: MSE %.3g after %d steps", act, l, steps)
		if l > 2e-3 {
			t.Errorf("%v: MSE %.3g after %d steps, want < 2e-3", act, l, steps)
		}
	}
	// The same seed gives the same run, bit for bit.
	if a, b := fitSine(t, Tanh, 50), fitSine(t, Tanh, 50); a != b {
		t.Errorf("two runs from one seed: %v and %v", a, b)
	}
}

// TestFitXOR: XOR through a dueling head and the selected-action loss: Q(x, a) regressed toward 1 for the right class and 0 for the other.
func TestFitXOR(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	net, _ := NewNet(Config{In: 2, Hidden: []int{8}, Out: 2, Act: Tanh, Dueling: true}, rng)
	adam, _ := NewAdam(net.NumParams(), AdamConfig{LR: 0.05})
	x := []float64{0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 0, 1, 1, 0, 1, 1}
	actions := []int32{0, 1, 1, 0, 1, 0, 0, 1}
	target := []float64{1, 1, 1, 1, 0, 0, 0, 0}
	dq := make([]float64, 16)
	var l float64
	for range 500 {
		l = Loss{}.Selected(dq, net.Forward(x), actions, target, nil)
		net.Backward(dq)
		adam.Step(net.Params(), net.Grads())
	}
	if l > 1e-4 {
		t.Errorf("XOR loss %g after 500 steps", l)
	}
	for i, want := range []int{0, 1, 1, 0} {
		if got := Argmax(net.Forward(x[2*i : 2*i+2])); got != want {
			t.Errorf("XOR(%v) = %d, want %d", x[2*i:2*i+2], got, want)
		}
	}
}
