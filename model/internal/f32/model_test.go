package f32_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/model/internal/f32"
)

// TestStepMatchesModel runs model's float64 learner step (the one
// BenchmarkTrainStep times) and this package's float32 one from the same
// parameters and batch, and checks that they agree to float32 precision:
// the Q values, every gradient, the input gradient, and the parameters after Adam steps fed
// the same gradients.
func TestStepMatchesModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  model.Config
		bsz  int
	}{
		{"dqn 4-64-64-2", model.Config{In: 4, Hidden: []int{64, 64}, Out: 2}, 64},
		{"policy 3-64-64-1 tanh", model.Config{In: 3, Hidden: []int{64, 64}, Out: 1, OutAct: model.Tanh}, 37},
		{"tanh hidden 5-9-3", model.Config{In: 5, Hidden: []int{9}, Out: 3, Act: model.Tanh}, 10},
		{"softsign 6-17-33-4 softsign out", model.Config{In: 6, Hidden: []int{17, 33}, Out: 4, Act: model.Softsign, OutAct: model.Softsign}, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(16, 20))
			net64, err := model.NewNet(tc.cfg, rng)
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := tc.cfg.Validate()
			var layers []f32.Layer
			in := cfg.In
			for _, h := range cfg.Hidden {
				layers = append(layers, f32.Layer{In: in, Out: h, Act: f32.Act(cfg.Act)})
				in = h
			}
			layers = append(layers, f32.Layer{In: in, Out: cfg.Out, Act: f32.Act(cfg.OutAct)})
			for _, impl := range []f32.Impl{f32.Portable, f32.AVX2, f32.AVX512} {
				if !impl.Available() {
					continue
				}
				net, err := f32.NewMLP(layers, impl)
				if err != nil {
					t.Fatal(err)
				}
				if len(net.Params()) != net64.NumParams() {
					t.Fatalf("%d float32 parameters, model has %d", len(net.Params()), net64.NumParams())
				}
				for i, v := range net64.Params() {
					net.Params()[i] = float32(v)
				}
				x := make([]float64, tc.bsz*cfg.In)
				target, weight := make([]float64, tc.bsz), make([]float64, tc.bsz)
				actions := make([]int32, tc.bsz)
				for i := range x {
					x[i] = float64(float32(rng.NormFloat64())) // exact in float32
				}
				for i := range target {
					target[i] = float64(float32(2 * rng.NormFloat64()))
					weight[i] = float64(float32(rng.Float64()))
					actions[i] = int32(rng.IntN(cfg.Out))
				}
				q64 := net64.Forward(x)
				dq64 := make([]float64, len(q64))
				l64 := model.Loss{}.Selected(dq64, q64, actions, target, weight)
				dx64 := net64.BackwardInput(dq64)

				q := net.Forward(to32(x))
				dq := make([]float32, len(q))
				l := f32.Loss{}.Selected(dq, q, actions, to32(target), to32(weight))
				dx := net.BackwardInput(dq)

				closeTo(t, impl, "Q", q, q64)
				closeTo(t, impl, "input gradient", dx, dx64)
				closeTo(t, impl, "gradient", net.Grads(), net64.Grads())
				if math.Abs(l-l64) > 1e-5*(1+math.Abs(l64)) {
					t.Errorf("%v: loss %v, model %v", impl, l, l64)
				}

				// Adam on the same gradients: the float32 moments and
				// parameters stay within float32 rounding of model's.
				ad64, _ := model.NewAdam(net64.NumParams(), model.AdamConfig{LR: 1e-3, ClipNorm: 0.5})
				ad, _ := f32.NewAdam(len(net.Params()), f32.AdamConfig{LR: 1e-3, ClipNorm: 0.5}, impl)
				p64 := append([]float64(nil), net64.Params()...)
				p32 := append([]float32(nil), net.Params()...)
				for range 3 {
					g := net.Grads()
					g64 := make([]float64, len(g))
					for i, v := range g {
						g64[i] = float64(v)
					}
					n64, _ := ad64.Step(p64, g64)
					n32, err := ad.Step(p32, g)
					if err != nil || math.Abs(n32-n64) > 1e-5*n64 {
						t.Fatalf("%v: Adam norm %v (%v), model %v", impl, n32, err, n64)
					}
				}
				for i := range p32 {
					// Each step moves a parameter by at most about LR; the
					// float32 update is within 1e-3 of that step (roundings
					// of m/sqrt(v), amplified where v is tiny next to ε) plus
					// the rounding of the parameter itself.
					if d := math.Abs(float64(p32[i]) - p64[i]); d > 3*1e-3*1e-3+1e-7*math.Abs(p64[i]) {
						t.Fatalf("%v: parameter %d after 3 Adam steps = %v, model %v", impl, i, p32[i], p64[i])
					}
				}
			}
		})
	}
}

func to32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// closeTo checks got against model's want to 1e-5 of want's largest
// magnitude: float32 arithmetic through a few layers of ≤ 64-term sums
// loses a few parts in 1e7 per layer, far below that, and any wrong term
// (index, factor, missing derivative) is far above it.
func closeTo(t *testing.T, impl f32.Impl, what string, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%v: %s has %d entries, model %d", impl, what, len(got), len(want))
	}
	scale := 0.0
	for _, v := range want {
		scale = max(scale, math.Abs(v))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - want[i]); d > 1e-5*scale {
			t.Fatalf("%v: %s[%d] = %v, model %v (scale %v)", impl, what, i, got[i], want[i], scale)
		}
	}
}

// TestLossMatchesModel compares every loss kind's value and gradient,
// all outputs (Value) and taken actions (Selected), with model.Loss on
// inputs exact in float32.
func TestLossMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 21))
	const bsz, nA = 50, 3
	q := make([]float64, bsz*nA)
	target, weight := make([]float64, bsz), make([]float64, bsz)
	actions := make([]int32, bsz)
	for i := range q {
		q[i] = float64(float32(3 * rng.NormFloat64()))
	}
	for i := range target {
		target[i] = float64(float32(3 * rng.NormFloat64()))
		weight[i] = float64(float32(rng.Float64()))
		actions[i] = int32(rng.IntN(nA))
	}
	target[7] = q[7*nA+int(actions[7])] // δ = 0 (L1's derivative)
	for _, tc := range []struct {
		l64 model.Loss
		l32 f32.Loss
	}{
		{model.Loss{}, f32.Loss{}},
		{model.Loss{Kind: model.Huber, Delta: 2.5}, f32.Loss{Kind: f32.Huber, Delta: 2.5}},
		{model.Loss{Kind: model.MSE}, f32.Loss{Kind: f32.MSE}},
		{model.Loss{Kind: model.L1}, f32.Loss{Kind: f32.L1}},
		{model.Loss{Kind: model.PAL, Delta: 1, Alpha: 0.4}, f32.Loss{Kind: f32.PAL, Delta: 1, Alpha: 0.4}},
	} {
		for _, w := range [][]float64{nil, weight} {
			var w32 []float32
			if w != nil {
				w32 = to32(w)
			}
			g64 := make([]float64, len(q))
			v64 := tc.l64.Selected(g64, q, actions, target, w)
			g32 := make([]float32, len(q))
			v32 := tc.l32.Selected(g32, to32(q), actions, to32(target), w32)
			if math.Abs(v32-v64) > 1e-6*(1+math.Abs(v64)) {
				t.Errorf("%v weights=%v: Selected = %v, model %v", tc.l64.Kind, w != nil, v32, v64)
			}
			closeTo(t, f32.Portable, tc.l64.Kind.String()+" Selected gradient", g32, g64)

			pred := q[:bsz]
			g64 = make([]float64, bsz)
			v64 = tc.l64.Value(g64, pred, target, w)
			g32 = make([]float32, bsz)
			v32 = tc.l32.Value(g32, to32(pred), to32(target), w32)
			if math.Abs(v32-v64) > 1e-6*(1+math.Abs(v64)) {
				t.Errorf("%v weights=%v: Value = %v, model %v", tc.l64.Kind, w != nil, v32, v64)
			}
			closeTo(t, f32.Portable, tc.l64.Kind.String()+" Value gradient", g32, g64)
		}
	}
}
