package model

import (
	"fmt"
	"math"
)

// LossKind selects a Loss's per-sample function.
type LossKind uint8

const (
	// Huber: ρ(δ) = δ²/2 for |δ| ≤ Delta, Delta·(|δ| − Delta/2) beyond
	// (the DQN and Ape-X loss; PyTorch's HuberLoss).
	Huber LossKind = iota
	// MSE: ρ(δ) = δ² (PyTorch's MSELoss; twice Huber's quadratic part).
	MSE
	// L1: ρ(δ) = |δ|, ρ'(δ) = sign(δ) (0 at δ = 0). Its fixed point over
	// a set of targets is their median (Fujimoto et al. 2020, Obs. 2).
	L1
	// PAL: the prioritized approximation loss of Fujimoto et al. 2020
	// (arXiv:2007.06049, Eq. 10) with k = Delta and α = Alpha,
	//
	//	ρ(δ) = ½·k^α·δ²              for |δ| ≤ k
	//	ρ(δ) = k·|δ|^(1+α)/(1+α)      beyond,
	//
	// whose derivative max(|δ|, k)^α · clip(δ, −k, k) is LAP's priority
	// times Huber(k)'s derivative. The paper's division by the batch mean
	// of max(|δ|, k)^α is not part of ρ: the learner applies it as a
	// weight (sampler.PAL). The value jumps at |δ| = k unless α = 1 (the
	// gradient is continuous), so use it for logging only.
	PAL
)

var lossNames = [...]string{Huber: "huber", MSE: "mse", L1: "l1", PAL: "pal"}

// String returns the kind's name: "huber", "mse", "l1" or "pal".
func (k LossKind) String() string {
	if int(k) < len(lossNames) {
		return lossNames[k]
	}
	return fmt.Sprintf("LossKind(%d)", uint8(k))
}

// MarshalText encodes k as its name.
func (k LossKind) MarshalText() ([]byte, error) {
	if int(k) >= len(lossNames) {
		return nil, errorf(ErrConfig, "invalid loss kind %d", uint8(k))
	}
	return []byte(lossNames[k]), nil
}

// UnmarshalText decodes a kind's name (see String).
func (k *LossKind) UnmarshalText(b []byte) error {
	for i, n := range lossNames {
		if n == string(b) {
			*k = LossKind(i)
			return nil
		}
	}
	return errorf(ErrConfig, "unknown loss %q (valid: huber, mse, l1, pal)", b)
}

// Loss is a per-sample weighted regression loss over a batch of B samples,
//
//	L = (1/B) · Σ_i w_i · ρ(pred_i − target_i)
//
// with ρ chosen by Kind and w_i the importance weights of prioritized
// replay (all 1 when the weight slice is nil). The zero value is Huber with
// Delta 1. A Loss is a plain value, safe to share.
type Loss struct {
	Kind LossKind `json:"kind"`
	// Delta is Huber's and PAL's threshold k (> 0); 0 means 1. Unused by
	// MSE and L1.
	Delta float64 `json:"delta,omitempty"`
	// Alpha is PAL's exponent α (finite, >= 0; LAP/PAL's default is 0.4).
	// It must be 0 for the other kinds.
	Alpha float64 `json:"alpha,omitempty"`
}

// Validate reports a Loss whose Kind or Delta is invalid (wrapping
// ErrConfig).
func (l Loss) Validate() error {
	if int(l.Kind) >= len(lossNames) {
		return errorf(ErrConfig, "Loss.Kind = %d", uint8(l.Kind))
	}
	if l.Delta < 0 || math.IsNaN(l.Delta) || math.IsInf(l.Delta, 0) {
		return errorf(ErrConfig, "Loss.Delta = %g (must be finite and >= 0; 0 means 1)", l.Delta)
	}
	if !(l.Alpha >= 0) || math.IsInf(l.Alpha, 0) {
		return errorf(ErrConfig, "Loss.Alpha = %g (must be finite and >= 0)", l.Alpha)
	}
	if l.Alpha != 0 && l.Kind != PAL {
		return errorf(ErrConfig, "Loss.Alpha = %g is set for the %v loss (only PAL has an exponent)", l.Alpha, l.Kind)
	}
	return nil
}

// K returns the threshold the loss uses: Delta, or 1 when Delta is 0.
func (l Loss) K() float64 {
	if l.Delta == 0 {
		return 1
	}
	return l.Delta
}

// Derivative returns ρ'(δ), the per-sample gradient before weighting and
// the 1/B of the mean. It panics on an invalid Loss. O(1).
func (l Loss) Derivative(d float64) float64 {
	rho, k := l.fn()
	_, g := rho(d, k, l.Alpha)
	return g
}

// Rho returns ρ(δ), the per-sample value. It panics on an invalid Loss.
// O(1).
func (l Loss) Rho(d float64) float64 {
	rho, k := l.fn()
	v, _ := rho(d, k, l.Alpha)
	return v
}

// Value returns L for pred against target with weights weight (nil: all
// 1) and, when grad is not nil, writes dL/dpred into it. All slices have
// length B (grad may alias pred). It panics on mismatched lengths, B = 0,
// or an invalid Loss.
//
// Cost O(B), no allocation.
func (l Loss) Value(grad, pred, target, weight []float64) float64 {
	inv := 1 / float64(len(target))
	return l.valueSum(grad, pred, target, weight, inv) * inv
}

// ValueSum is Value for a shard of a larger batch, as SelectedSum is
// Selected's: the unscaled sum Σ_i w_i·ρ(δ_i), and dL/dpred scaled by inv
// (1/B of the whole batch) in grad. Panics and cost as Value.
func (l Loss) ValueSum(grad, pred, target, weight []float64, inv float64) float64 {
	return l.valueSum(grad, pred, target, weight, inv)
}

func (l Loss) valueSum(grad, pred, target, weight []float64, inv float64) float64 {
	b := len(target)
	checkLossLens(b, len(pred), len(grad), len(weight), grad != nil, weight != nil, "len(pred)")
	rho, delta := l.fn()
	var sum float64
	for i, t := range target {
		w := 1.0
		if weight != nil {
			w = weight[i]
		}
		v, d := rho(pred[i]-t, delta, l.Alpha)
		sum += w * v
		if grad != nil {
			grad[i] = w * d * inv
		}
	}
	return sum
}

// Selected is the Q-learning form of Value: q holds B rows of A action
// values (B×A, B = len(actions)), and only Q(s_i, actions[i]) is regressed
// toward target[i]. grad, when not nil, has q's shape and receives dL/dq:
// zero everywhere except at each row's taken action, so the gradient flows
// only into Q(s, a_taken). Use Gather for the selected values themselves
// (TD errors for priorities).
//
// It panics on mismatched lengths, an action outside [0, A), B = 0, or an
// invalid Loss. Cost O(B·A) with grad (clearing it), O(B) without; no
// allocation.
func (l Loss) Selected(grad, q []float64, actions []int32, target, weight []float64) float64 {
	inv := 1 / float64(len(target))
	return l.selectedSum(grad, q, actions, target, weight, inv) * inv
}

// SelectedSum is Selected for a shard of a larger batch: it returns the
// unscaled sum Σ_i w_i·ρ(δ_i) over its rows and writes dL/dq scaled by inv
// (1/B of the whole batch) into grad, so that the shards' sums times inv
// and their gradients together are the whole batch's Selected (each
// gradient entry bit for bit; the loss up to the order of the sum). A
// data-parallel learner step calls it once per shard. Panics and cost as
// Selected.
func (l Loss) SelectedSum(grad, q []float64, actions []int32, target, weight []float64, inv float64) float64 {
	return l.selectedSum(grad, q, actions, target, weight, inv)
}

func (l Loss) selectedSum(grad, q []float64, actions []int32, target, weight []float64, inv float64) float64 {
	b := len(target)
	checkLossLens(b, len(actions), len(grad), len(weight), false, weight != nil, "len(actions)")
	nA := selectedWidth(len(q), b)
	if grad != nil {
		if len(grad) != len(q) {
			panic(fmt.Sprintf("model: Loss.Selected: len(grad) = %d, len(q) = %d", len(grad), len(q)))
		}
		clear(grad)
	}
	rho, delta := l.fn()
	var sum float64
	for i, t := range target {
		a := int(actions[i])
		if a < 0 || a >= nA {
			panic(fmt.Sprintf("model: Loss.Selected: actions[%d] = %d outside [0, %d)", i, a, nA))
		}
		w := 1.0
		if weight != nil {
			w = weight[i]
		}
		v, d := rho(q[i*nA+a]-t, delta, l.Alpha)
		sum += w * v
		if grad != nil {
			grad[i*nA+a] = w * d * inv
		}
	}
	return sum
}

// Gather writes dst[i] = q[i·A + actions[i]] for B = len(actions) rows of A
// = len(q)/B values: Q(s_i, a_i). It panics on mismatched lengths or an
// action outside [0, A). Cost O(B), no allocation.
func Gather(dst, q []float64, actions []int32) {
	if len(dst) != len(actions) {
		panic(fmt.Sprintf("model: Gather: len(dst) = %d, len(actions) = %d", len(dst), len(actions)))
	}
	nA := selectedWidth(len(q), len(actions))
	for i, a := range actions {
		if a < 0 || int(a) >= nA {
			panic(fmt.Sprintf("model: Gather: actions[%d] = %d outside [0, %d)", i, a, nA))
		}
		dst[i] = q[i*nA+int(a)]
	}
}

func selectedWidth(nq, b int) int {
	if b == 0 || nq == 0 || nq%b != 0 {
		panic(fmt.Sprintf("model: len(q) = %d is not a positive multiple of the batch %d", nq, b))
	}
	return nq / b
}

func checkLossLens(b, n, ng, nw int, hasGrad, hasWeight bool, name string) {
	switch {
	case b == 0:
		panic("model: loss of an empty batch")
	case n != b:
		panic(fmt.Sprintf("model: loss: %s = %d, len(target) = %d", name, n, b))
	case hasGrad && ng != b:
		panic(fmt.Sprintf("model: loss: len(grad) = %d, len(target) = %d", ng, b))
	case hasWeight && nw != b:
		panic(fmt.Sprintf("model: loss: len(weight) = %d, len(target) = %d", nw, b))
	}
}

// fn returns the per-sample function (value and derivative) and the
// threshold k.
func (l Loss) fn() (func(d, k, alpha float64) (float64, float64), float64) {
	if err := l.Validate(); err != nil {
		panic(err.Error())
	}
	switch l.Kind {
	case MSE:
		return mse, 0
	case L1:
		return l1, 0
	case PAL:
		return pal, l.K()
	}
	return huber, l.K()
}

func huber(d, delta, _ float64) (float64, float64) {
	switch {
	case d > delta:
		return delta * (d - delta/2), delta
	case d < -delta:
		return delta * (-d - delta/2), -delta
	default:
		return d * d / 2, d
	}
}

func mse(d, _, _ float64) (float64, float64) { return d * d, 2 * d }

func l1(d, _, _ float64) (float64, float64) {
	switch {
	case d > 0:
		return d, 1
	case d < 0:
		return -d, -1
	}
	return 0, 0
}

func pal(d, k, alpha float64) (float64, float64) {
	a := math.Abs(d)
	if a <= k {
		ka := math.Pow(k, alpha)
		return 0.5 * ka * d * d, ka * d
	}
	p := math.Pow(a, alpha) // |δ|^α
	return k * p * a / (1 + alpha), math.Copysign(k*p, d)
}
