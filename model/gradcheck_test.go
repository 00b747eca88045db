package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/diff/fd"
)

// Finite-difference gradient checks: every analytic gradient of the package
// (each activation through a Dense layer, with respect to parameters and
// inputs; both losses with weights and with the action selection; the
// dueling combination; whole networks) is compared with gonum's central
// differences. Tolerance: relative error below 1e-6 per entry, with
// |a − n| / max(|a|, |n|, gradFloor).

const (
	fdStep    = 1e-5
	gradTol   = 1e-6
	gradFloor = 1e-3
)

// checkGrad compares analytic with the central-difference gradient of f at x.
func checkGrad(t *testing.T, name string, analytic []float64, f func([]float64) float64, x []float64) {
	t.Helper()
	numeric := fd.Gradient(nil, f, x, &fd.Settings{Formula: fd.Central, Step: fdStep})
	worst, at := 0.0, -1
	for i := range numeric {
		a, n := analytic[i], numeric[i]
		den := math.Max(math.Max(math.Abs(a), math.Abs(n)), gradFloor)
		if e := math.Abs(a-n) / den; e > worst || math.IsNaN(e) {
			worst, at = e, i
		}
	}
	if worst > gradTol || math.IsNaN(worst) {
		t.Errorf("%s: relative error %.3g at %d: analytic %.12g, numeric %.12g", name, worst, at, analytic[at], numeric[at])
	} else {
		t.Logf("%s: %d entries, worst relative error %.2g", name, len(x), worst)
	}
}

func randVec(rng *rand.Rand, n int, scale float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = (2*rng.Float64() - 1) * scale
	}
	return v
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// awayFromKinks redraws x until no pre-activation of d is within margin of
// ReLU's kink (0), so finite differences never straddle it.
func awayFromKinks(t *testing.T, rng *rand.Rand, d *Dense, x []float64, margin float64) {
	t.Helper()
	for try := 0; try < 100; try++ {
		ok := true
		for r := 0; r < len(x)/d.in; r++ {
			for j := 0; j < d.out; j++ {
				z := d.b[j] // z = x·W + b
				for i := 0; i < d.in; i++ {
					z += x[r*d.in+i] * d.w[i*d.out+j]
				}
				ok = ok && math.Abs(z) >= margin
			}
		}
		if ok {
			return
		}
		copy(x, randVec(rng, len(x), 1))
	}
	t.Fatal("could not draw inputs away from ReLU's kink")
}

// TestGradDense covers every activation, one row and several, and both
// product layouts (4→5 multiplies by W, 12→3 is narrow and goes through Wᵀ).
func TestGradDense(t *testing.T) {
	for _, act := range []Activation{Identity, ReLU, Tanh, Softsign} {
		for _, shape := range [][3]int{{4, 5, 1}, {4, 5, 3}, {12, 3, 1}, {12, 3, 4}} {
			in, out, batch := shape[0], shape[1], shape[2]
			t.Run(fmt.Sprintf("%v/%dx%d/B=%d", act, in, out, batch), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(act), uint64(batch)))
				if d := mustDense(t, in, out, act, make([]float64, DenseParams(in, out)), make([]float64, DenseParams(in, out))); d.narrow != (in == 12) {
					t.Fatalf("narrow = %v", d.narrow)
				}
				n := DenseParams(in, out)
				params, grads := make([]float64, n), make([]float64, n)
				d := mustDense(t, in, out, act, params, grads)
				d.InitGlorot(rng)
				copy(d.b, randVec(rng, out, 0.5)) // nonzero biases, so db is tested
				x := randVec(rng, batch*in, 1)
				if act == ReLU {
					awayFromKinks(t, rng, d, x, 1e-3)
				}
				c := randVec(rng, batch*out, 1) // L = Σ c ⊙ y

				d.Forward(x)
				dx := append([]float64(nil), d.Backward(c, true)...)

				// With respect to the parameters.
				fp := func(p []float64) float64 {
					q := mustDense(t, in, out, act, p, make([]float64, n))
					return dot(c, q.Forward(x))
				}
				checkGrad(t, "params", grads, fp, params)

				// With respect to the input.
				fx := func(xx []float64) float64 {
					q := mustDense(t, in, out, act, params, make([]float64, n))
					return dot(c, q.Forward(xx))
				}
				checkGrad(t, "input", dx, fx, x)

				// wantDX false leaves the parameter gradients as they were.
				before := append([]float64(nil), grads...)
				clear(grads)
				if got := d.Backward(c, false); got != nil {
					t.Errorf("Backward(dy, false) = %v, want nil", got)
				}
				for i := range grads {
					if grads[i] != before[i] {
						t.Fatalf("grads[%d] = %g without dx, %g with", i, grads[i], before[i])
					}
				}
			})
		}
	}
}

// lossCase draws predictions and targets whose differences stay at least
// 1e-3 away from Huber's kinks at ±delta.
func lossData(rng *rand.Rand, n int, delta float64) (pred, target, weight []float64) {
	pred, target, weight = make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range pred {
		for {
			pred[i] = 3 * (2*rng.Float64() - 1)
			target[i] = 3 * (2*rng.Float64() - 1)
			if math.Abs(math.Abs(pred[i]-target[i])-delta) > 1e-3 {
				break
			}
		}
		weight[i] = 0.1 + rng.Float64()
	}
	return pred, target, weight
}

func TestGradLoss(t *testing.T) {
	losses := []Loss{{Kind: Huber}, {Kind: Huber, Delta: 0.5}, {Kind: Huber, Delta: 2}, {Kind: MSE}}
	for _, l := range losses {
		delta := l.Delta
		if delta == 0 {
			delta = 1
		}
		for _, weighted := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/delta=%g/weighted=%v", l.Kind, l.Delta, weighted), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(7, uint64(l.Kind)))
				const b, nA = 16, 3
				pred, target, weight := lossData(rng, b, delta)
				if !weighted {
					weight = nil
				}
				grad := make([]float64, b)
				l.Value(grad, pred, target, weight)
				checkGrad(t, "Value", grad, func(p []float64) float64 { return l.Value(nil, p, target, weight) }, pred)

				// Selected: only Q(s, a_taken) is regressed.
				q := randVec(rng, b*nA, 3)
				actions := make([]int32, b)
				for i := range actions {
					actions[i] = int32(rng.IntN(nA))
					// keep the selected difference off Huber's kinks
					q[i*nA+int(actions[i])] = pred[i]
				}
				gq := make([]float64, b*nA)
				for i := range gq {
					gq[i] = math.NaN() // Selected must overwrite every entry
				}
				lv := l.Selected(gq, q, actions, target, weight)
				if want := l.Value(nil, pred, target, weight); lv != want {
					t.Errorf("Selected = %g, Value on the gathered Q = %g", lv, want)
				}
				for i := range b {
					for a := range nA {
						if a != int(actions[i]) && gq[i*nA+a] != 0 {
							t.Fatalf("dL/dq[%d,%d] = %g for an action not taken", i, a, gq[i*nA+a])
						}
					}
				}
				checkGrad(t, "Selected", gq, func(qq []float64) float64 { return l.Selected(nil, qq, actions, target, weight) }, q)
			})
		}
	}
}

func TestGradDueling(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const b, nA = 4, 3
	v, adv := randVec(rng, b, 1), randVec(rng, b*nA, 1)
	c := randVec(rng, b*nA, 1)
	dv, da := make([]float64, b), make([]float64, b*nA)
	DuelingBackward(dv, da, c)
	q := make([]float64, b*nA)
	checkGrad(t, "value", dv, func(vv []float64) float64 { DuelingCombine(q, vv, adv); return dot(c, q) }, v)
	checkGrad(t, "advantage", da, func(aa []float64) float64 { DuelingCombine(q, v, aa); return dot(c, q) }, adv)

	// The combination itself: mean advantage is zero, so mean Q = V.
	DuelingCombine(q, v, adv)
	for i := range b {
		var s float64
		for a := range nA {
			s += q[i*nA+a]
		}
		if got := s / nA; math.Abs(got-v[i]) > 1e-12 {
			t.Errorf("row %d: mean Q = %g, V = %g", i, got, v[i])
		}
	}
}

// TestGradNet checks whole networks: the selected-action Huber loss with
// importance weights, backpropagated through every layer (and the dueling
// head), against central differences over all parameters and the input.
func TestGradNet(t *testing.T) {
	cases := []Config{
		{In: 3, Hidden: []int{6, 5}, Out: 2, Act: Tanh},
		{In: 3, Hidden: []int{6, 5}, Out: 2, Act: Softsign, OutAct: Tanh},
		{In: 3, Hidden: []int{6, 5}, Out: 3, Act: ReLU},
		{In: 3, Hidden: []int{9, 12}, Out: 3, Act: ReLU},            // narrow output layer
		{In: 3, Hidden: []int{8}, Out: 2, Act: Tanh, Dueling: true}, // narrow streams
		{In: 3, Hidden: []int{7}, Out: 2, Act: Tanh, OutAct: Softsign},
		{In: 3, Out: 2}, // linear
		{In: 3, Hidden: []int{6}, Out: 3, Act: Tanh, Dueling: true},
		{In: 3, Hidden: []int{6}, Out: 3, Act: Softsign, Dueling: true, StreamHidden: []int{4}},
		{In: 3, Hidden: []int{6, 5}, Out: 4, Act: ReLU, Dueling: true, StreamHidden: []int{4, 3}},
		{In: 3, Out: 2, Act: Tanh, Dueling: true, StreamHidden: []int{4}}, // streams on the input
	}
	for ci, cfg := range cases {
		t.Run(fmt.Sprintf("%d:%v/dueling=%v", ci, cfg.Act, cfg.Dueling), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(ci)))
			net, err := NewNet(cfg, rng)
			if err != nil {
				t.Fatal(err)
			}
			for i := range net.params { // nonzero biases too
				net.params[i] += 0.1 * (2*rng.Float64() - 1)
			}
			const b = 5
			x := randVec(rng, b*cfg.In, 1)
			actions := make([]int32, b)
			for i := range actions {
				actions[i] = int32(rng.IntN(cfg.Out))
			}
			target, weight := randVec(rng, b, 2), randVec(rng, b, 1)
			for i := range weight {
				weight[i] = math.Abs(weight[i]) + 0.1
			}
			loss := Loss{Kind: Huber, Delta: 0.3}
			lossAt := func(n *Net, xx []float64) float64 {
				return loss.Selected(nil, n.Forward(xx), actions, target, weight)
			}
			q := net.Forward(x)
			dq := make([]float64, len(q))
			loss.Selected(dq, q, actions, target, weight)
			dx := append([]float64(nil), net.BackwardInput(dq)...)
			grads := append([]float64(nil), net.Grads()...)

			probe := net.Clone()
			checkGrad(t, "params", grads, func(p []float64) float64 {
				copy(probe.params, p)
				return lossAt(probe, x)
			}, net.Params())
			checkGrad(t, "input", dx, func(xx []float64) float64 { return lossAt(net, xx) }, x)

			// Backward gives the same parameter gradients as BackwardInput.
			net.Forward(x)
			net.Backward(dq)
			for i, g := range net.Grads() {
				if g != grads[i] {
					t.Fatalf("Backward grads[%d] = %g, BackwardInput %g", i, g, grads[i])
				}
			}
		})
	}
}
