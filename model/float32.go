package model

import (
	"fmt"
	"math"

	"github.com/apexrl/apex/model/internal/f32"
)

// The float32 path (Config.Float32, AdamConfig.Float32): a Net whose batch
// Forward and Backward, and an Adam whose Step, run on the float32 SIMD
// kernels of model/internal/f32 (AVX-512, AVX2 or the portable Go twin,
// picked from the CPU's features), behind the float64 API.
//
// Precision. The float64 parameters (Params) stay the master copy: every
// batch Forward rounds them to float32 for the kernels, and Adam's float32
// Step rounds params and grads to float32, updates them with float32
// moments and writes the float32 result back, so after a float32 Adam step
// every parameter is a float32 value held in a float64. Outputs, gradients
// and input gradients come back as float64 conversions of float32 results:
// they agree with the float64 path to float32 precision (relative 1e-6
// per operation, some 1e-5 through a 64-wide network; see
// float32_test.go), not bit for bit.
//
// Boundaries and their costs (P parameters, B rows):
//
//   - Forward (B > 1): P conversions float64 → float32 of the parameters,
//     B·In of the input (none through Forward32) and B·Out of the output.
//   - Backward: B·Out conversions of dOut, P of the gradients back into
//     Grads, and B·In of dL/dx for BackwardInput.
//   - Adam.Step: 2P conversions in (params, grads) and P out (params).
//   - B = 1 (an actor's Forward): the float64 layers compute it, exactly as
//     without Float32 (a gemv needs no conversion of P parameters), and so
//     does the Backward that follows it.
//   - Snapshot, SetParams, Save, LoadNet, CopyFrom, SoftUpdate, Clone:
//     nothing beyond the float64 path's cost; the float32 copy is rebuilt
//     from Params at the next batch Forward.
//
// The conversions run on f32's ToFloat32 and ToFloat64 (AVX2, 8 values
// per instruction pair; a scalar Go loop took about 1 ns a value on the
// loaded 2-core development machine), so for the 4→64→64→2 network
// (P = 4,610) the seven P-sized conversions of a DQN step (three Forwards,
// one Backward, Adam's three) cost a few microseconds; bench/BENCHMARKS.md
// has the measured step times.

// net32 is the float32 twin of a Net's layers: one f32.MLP per stream
// (the whole network, or the dueling trunk and its two streams), each over
// a contiguous slice of the Net's flat parameter vector.
type net32 struct {
	trunk, value, adv *f32.MLP // trunk only without Dueling; nil trunk: x feeds the streams
	trunkOff          int      // parameter offsets of the three parts
	valueOff, advOff  int

	on    bool      // the last Forward ran here (B > 1)
	x32   []float32 // Forward's input, converted
	d32   []float32 // dOut, converted
	dv32  []float32 // dueling dL/dV
	da32  []float32 // dueling dL/dA
	dh32  []float32 // dueling dL/dh
	out64 []float64 // the output (non-dueling), or V (dueling)
	a64   []float64 // dueling A
	dx64  []float64 // BackwardInput's result
}

// newNet32 builds the float32 twin of n's layers.
func newNet32(n *Net) *net32 {
	mlp := func(ls []Dense) *f32.MLP {
		if len(ls) == 0 {
			return nil
		}
		layers := make([]f32.Layer, len(ls))
		for i := range ls {
			layers[i] = f32.Layer{In: ls[i].in, Out: ls[i].out, Act: f32.Act(ls[i].act)}
		}
		m, err := f32.NewMLP(layers, f32.Auto)
		if err != nil {
			panic("model: float32 network: " + err.Error()) // not reached: the layers were validated
		}
		return m
	}
	t := &net32{trunk: mlp(n.layers[:n.nTrunk])}
	if n.cfg.Dueling {
		t.value, t.adv = mlp(n.valueLayers()), mlp(n.advantageLayers())
		t.valueOff = n.layers[n.nTrunk].off
		t.advOff = n.layers[n.nTrunk+n.nValue].off
	}
	return t
}

// load rounds the float64 parameters into the MLPs'. O(P).
func (t *net32) load(params []float64) {
	for _, p := range []struct {
		m   *f32.MLP
		off int
	}{{t.trunk, t.trunkOff}, {t.value, t.valueOff}, {t.adv, t.advOff}} {
		if p.m != nil {
			round32(p.m.Params(), params[p.off:])
		}
	}
}

// store writes the MLPs' gradients into the float64 gradient vector. O(P).
func (t *net32) store(grads []float64) {
	for _, p := range []struct {
		m   *f32.MLP
		off int
	}{{t.trunk, t.trunkOff}, {t.value, t.valueOff}, {t.adv, t.advOff}} {
		if p.m != nil {
			widen64(grads[p.off:], p.m.Grads())
		}
	}
}

// forward32 is Net.Forward on the float32 path for x (already float32).
func (n *Net) forward32(x []float32) []float64 {
	t := n.f32
	t.on = true
	t.load(n.params)
	h := x
	if t.trunk != nil {
		h = t.trunk.Forward(x)
	}
	if !n.cfg.Dueling {
		t.out64 = grow(t.out64, len(h))
		widen64(t.out64, h)
		return t.out64
	}
	v, a := t.value.Forward(h), t.adv.Forward(h)
	t.out64 = grow(t.out64, len(v))
	t.a64 = grow(t.a64, len(a))
	widen64(t.out64, v)
	widen64(t.a64, a)
	n.q = grow(n.q, len(a))
	DuelingCombine(n.q, t.out64, t.a64)
	return n.q
}

// backward32 is Net.backward on the float32 path (dOut's length checked).
func (n *Net) backward32(dOut []float64, wantDX bool) []float64 {
	t := n.f32
	var dx []float32
	if !n.cfg.Dueling {
		t.d32 = grow32(t.d32, len(dOut))
		round32(t.d32, dOut)
		if wantDX {
			dx = t.trunk.BackwardInput(t.d32)
		} else {
			t.trunk.Backward(t.d32)
		}
	} else {
		n.dv = grow(n.dv, n.batch)
		n.da = grow(n.da, len(dOut))
		DuelingBackward(n.dv, n.da, dOut)
		t.dv32 = grow32(t.dv32, len(n.dv))
		t.da32 = grow32(t.da32, len(n.da))
		round32(t.dv32, n.dv)
		round32(t.da32, n.da)
		if t.trunk == nil && !wantDX {
			t.value.Backward(t.dv32)
			t.adv.Backward(t.da32)
		} else {
			gv := t.value.BackwardInput(t.dv32)
			ga := t.adv.BackwardInput(t.da32)
			t.dh32 = grow32(t.dh32, len(gv))
			for i, g := range gv {
				t.dh32[i] = g + ga[i]
			}
			dx = t.dh32
			if t.trunk != nil {
				if wantDX {
					dx = t.trunk.BackwardInput(t.dh32)
				} else {
					t.trunk.Backward(t.dh32)
				}
			}
		}
	}
	t.store(n.grads)
	if !wantDX {
		return nil
	}
	t.dx64 = grow(t.dx64, len(dx))
	widen64(t.dx64, dx)
	return t.dx64
}

// round32 rounds src[:len(dst)] into dst (f32's ToFloat32: AVX2, 8 per
// instruction pair).
func round32(dst []float32, src []float64) { f32.Auto.ToFloat32(dst, src[:len(dst)]) }

// widen64 widens src into dst[:len(src)] (f32's ToFloat64).
func widen64(dst []float64, src []float32) { f32.Auto.ToFloat64(dst[:len(src)], src) }

func grow32(s []float32, n int) []float32 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float32, n)
}

// adam32 is a float32 Adam's state: the moments in float32 and scratch for
// the rounded parameters and gradients.
type adam32 struct {
	impl f32.Impl
	m, v []float32
	p, g []float32
}

// step32 is Adam.Step on the float32 path (lengths checked).
func (a *Adam) step32(params, grads []float64) (float64, error) {
	s := a.f32
	round32(s.g, grads)
	ss := s.impl.SumSq(s.g)
	if math.IsNaN(ss) || math.IsInf(ss, 0) {
		if err := CheckFinite("gradient", grads); err != nil {
			return math.NaN(), err
		}
		for i, g := range s.g { // finite in float64, beyond float32's range
			if math.IsInf(float64(g), 0) {
				return math.NaN(), &NonFiniteError{What: "gradient (as float32)", Index: i, Value: math.Inf(int(math.Copysign(1, grads[i])))}
			}
		}
	}
	wide := math.IsInf(ss, 0) // every gradient finite in float32, but the SIMD float32 sum of squares overflowed
	if wide {
		ss = 0
		for _, g := range grads {
			ss += g * g
		}
	}
	norm := math.Sqrt(ss)
	scale := 1.0
	if a.cfg.ClipNorm > 0 && norm > a.cfg.ClipNorm {
		scale = a.cfg.ClipNorm / norm
	}
	if wide { // the second moment holds g²: refuse what float32 cannot, before changing anything
		lim := math.Sqrt(math.MaxFloat32)
		for i, g := range grads {
			if math.Abs(g)*scale >= lim {
				return math.NaN(), fmt.Errorf("%w: gradient %d is %g: its square overflows the float32 Adam's second moment (set ClipNorm, or use float64)", ErrNonFinite, i, g)
			}
		}
	}
	a.t++
	t := float64(a.t)
	round32(s.p, params)
	s.impl.AdamUpdate(s.p, s.g, s.m, s.v, f32.AdamConsts{
		Scale:      float32(scale),
		Beta1:      float32(a.cfg.Beta1),
		Beta2:      float32(a.cfg.Beta2),
		Step:       float32(a.cfg.LR / (1 - math.Pow(a.cfg.Beta1, t))),
		InvSqrtBC2: float32(1 / math.Sqrt(1-math.Pow(a.cfg.Beta2, t))),
		Eps:        float32(a.cfg.Eps),
	})
	widen64(params, s.p)
	return norm, nil
}

// SetFloat32 switches the optimizer's Step to the float32 path (on) or
// back to the float64 one, keeping its step count and moments: the
// conversion a learner makes when a checkpoint of one precision resumes
// in the other. float64 → float32 rounds the moments to float32 (as a
// float32 Adam holds them); float32 → float64 widens them exactly. The
// parameters are not the optimizer's: they stay float64 in both modes, and
// the next float32 Step rounds them. Config().Float32 reports the new
// mode; switching to the mode it is in does nothing. Cost O(n); switching
// on allocates Float32's four float32 vectors. Not safe for concurrent
// use with Step or Save.
func (a *Adam) SetFloat32(on bool) {
	switch {
	case on && a.f32 == nil:
		n := len(a.m)
		a.f32 = &adam32{impl: f32.Auto, m: make([]float32, n), v: make([]float32, n), p: make([]float32, n), g: make([]float32, n)}
		a.syncMoments32()
	case !on && a.f32 != nil:
		a.syncMoments64()
		a.f32 = nil
	}
	a.cfg.Float32 = on
}

// syncMoments64 copies a float32 Adam's moments into m and v (for Save);
// a float64 Adam has nothing to do. O(n).
func (a *Adam) syncMoments64() {
	if a.f32 != nil {
		widen64(a.m, a.f32.m)
		widen64(a.v, a.f32.v)
	}
}

// syncMoments32 rounds m and v into a float32 Adam's moments (after
// LoadAdam). O(n).
func (a *Adam) syncMoments32() {
	if a.f32 != nil {
		round32(a.f32.m, a.m)
		round32(a.f32.v, a.v)
	}
}
