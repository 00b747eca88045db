package f32

import (
	"fmt"
	"math"
)

// LossKind selects a Loss's per-sample function ρ. Its values are
// model.LossKind's.
type LossKind uint8

const (
	// Huber: ρ(δ) = δ²/2 for |δ| ≤ Delta, Delta·(|δ| − Delta/2) beyond.
	Huber LossKind = 0
	// MSE: ρ(δ) = δ².
	MSE LossKind = 1
	// L1: ρ(δ) = |δ|, ρ'(0) = 0.
	L1 LossKind = 2
	// PAL: Fujimoto et al. 2020's prioritized approximation loss (model.PAL)
	// with k = Delta and α = Alpha: ½·k^α·δ² for |δ| ≤ k, k·|δ|^(1+α)/(1+α)
	// beyond; ρ'(δ) = max(|δ|, k)^α · clip(δ, −k, k).
	PAL LossKind = 3
)

// Loss is model.Loss in float32: the per-sample weighted regression loss
//
//	L = (1/B) · Σ_i w_i · ρ(pred_i − target_i)
//
// with importance weights w (all 1 when the slice is nil). The zero value
// is Huber with Delta 1. The loss is O(B) work next to the network's
// O(B·params), so it is plain Go in every implementation; L is summed in
// float64, the gradient w·ρ'(δ)/B written in float32.
type Loss struct {
	Kind  LossKind
	Delta float32 // Huber's and PAL's threshold k (> 0); 0 means 1
	Alpha float32 // PAL's exponent α (finite, >= 0); 0 for the other kinds
}

// Value returns L for pred against target and, when grad is not nil,
// writes dL/dpred into it (grad may alias pred). It panics on mismatched
// lengths, an empty batch or an unknown Kind. Cost O(B), no allocation.
func (l Loss) Value(grad, pred, target, weight []float32) float64 {
	b := len(target)
	l.check(b, len(pred), grad, weight, "len(pred)")
	inv := 1 / float32(b)
	sum := 0.0
	for i, t := range target {
		w := float32(1)
		if weight != nil {
			w = weight[i]
		}
		v, d := l.rho(pred[i] - t)
		sum += float64(w) * v
		if grad != nil {
			grad[i] = w * d * inv
		}
	}
	return sum / float64(b)
}

// Selected is the Q-learning form of Value (model.Loss.Selected): q holds
// B rows of A action values, only Q(s_i, actions[i]) is regressed toward
// target[i], and grad (q's shape, when not nil) receives dL/dq: zero but
// at each row's taken action. It panics on mismatched lengths, an action
// outside [0, A), an empty batch or an unknown Kind. Cost O(B·A) with
// grad (clearing it), no allocation.
func (l Loss) Selected(grad, q []float32, actions []int32, target, weight []float32) float64 {
	b := len(target)
	l.check(b, len(actions), nil, weight, "len(actions)")
	if len(q) == 0 || len(q)%b != 0 {
		panic(fmt.Sprintf("f32: Loss.Selected: len(q) = %d is not a positive multiple of the batch %d", len(q), b))
	}
	nA := len(q) / b
	if grad != nil {
		if len(grad) != len(q) {
			panic(fmt.Sprintf("f32: Loss.Selected: len(grad) = %d, len(q) = %d", len(grad), len(q)))
		}
		clear(grad)
	}
	inv := 1 / float32(b)
	sum := 0.0
	for i, t := range target {
		a := int(actions[i])
		if a < 0 || a >= nA {
			panic(fmt.Sprintf("f32: Loss.Selected: actions[%d] = %d outside [0, %d)", i, a, nA))
		}
		w := float32(1)
		if weight != nil {
			w = weight[i]
		}
		v, d := l.rho(q[i*nA+a] - t)
		sum += float64(w) * v
		if grad != nil {
			grad[i*nA+a] = w * d * inv
		}
	}
	return sum / float64(b)
}

func (l Loss) check(b, n int, grad, weight []float32, name string) {
	switch {
	case l.Kind > PAL:
		panic(fmt.Sprintf("f32: Loss.Kind = %d (valid: Huber, MSE, L1, PAL)", l.Kind))
	case !(l.Delta >= 0) || math.IsInf(float64(l.Delta), 0):
		panic(fmt.Sprintf("f32: Loss.Delta = %g (must be finite and >= 0)", l.Delta))
	case !(l.Alpha >= 0) || math.IsInf(float64(l.Alpha), 0) || (l.Alpha != 0 && l.Kind != PAL):
		panic(fmt.Sprintf("f32: Loss.Alpha = %g for the loss kind %d (finite and >= 0, and only PAL has one)", l.Alpha, l.Kind))
	case b == 0:
		panic("f32: loss of an empty batch")
	case n != b:
		panic(fmt.Sprintf("f32: loss: %s = %d, len(target) = %d", name, n, b))
	case grad != nil && len(grad) != b:
		panic(fmt.Sprintf("f32: loss: len(grad) = %d, len(target) = %d", len(grad), b))
	case weight != nil && len(weight) != b:
		panic(fmt.Sprintf("f32: loss: len(weight) = %d, len(target) = %d", len(weight), b))
	}
}

// rho returns ρ(d) (in float64, for the sum) and ρ'(d).
func (l Loss) rho(d float32) (float64, float32) {
	switch l.Kind {
	case MSE:
		return float64(d) * float64(d), 2 * d
	case L1:
		switch {
		case d > 0:
			return float64(d), 1
		case d < 0:
			return -float64(d), -1
		}
		return 0, 0
	}
	k := l.Delta
	if k == 0 {
		k = 1
	}
	if l.Kind == PAL {
		kk, a, ad := float64(k), float64(l.Alpha), math.Abs(float64(d))
		if ad <= kk {
			ka := math.Pow(kk, a)
			return 0.5 * ka * float64(d) * float64(d), float32(ka * float64(d))
		}
		p := math.Pow(ad, a)
		return kk * p * ad / (1 + a), float32(math.Copysign(kk*p, float64(d)))
	}
	switch {
	case d > k:
		return float64(k) * (float64(d) - float64(k)/2), k
	case d < -k:
		return float64(k) * (-float64(d) - float64(k)/2), -k
	}
	return float64(d) * float64(d) / 2, d
}
