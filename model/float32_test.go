package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Tolerances of the float32 path against the float64 one. float32's unit
// roundoff is u = 2⁻²⁴ ≈ 6e-8; a dot product of k terms is off by at most
// about k·u times the sum of the terms' magnitudes (Higham, Accuracy and
// Stability, §3.1), so a 64-wide layer is within ~4e-6 of the float64
// result relative to its largest entry, and three layers (forward, then
// back) compound that to ~1e-5. f32Tol = 1e-4 leaves a factor 10 of slack
// and is still five orders of magnitude below the O(1) errors of a wrong
// index, transposition or activation derivative.
const f32Tol = 1e-4

// maxRelDiff returns max_i |a_i − b_i| / max(max_i |b_i|, floor): the
// error relative to the reference vector's scale.
func maxRelDiff(a, b []float64, floor float64) (float64, int) {
	scale := floor
	for _, v := range b {
		scale = math.Max(scale, math.Abs(v))
	}
	worst, at := 0.0, -1
	for i := range a {
		if e := math.Abs(a[i]-b[i]) / scale; e > worst || math.IsNaN(e) {
			worst, at = e, i
		}
	}
	return worst, at
}

func checkClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	if e, at := maxRelDiff(got, want, 1e-3); e > tol || math.IsNaN(e) {
		t.Errorf("%s: relative difference %.3g at %d (float32 %.9g, float64 %.9g), tolerance %g", what, e, at, got[at], want[at], tol)
	} else {
		t.Logf("%s: %d values, worst relative difference %.2g", what, len(got), e)
	}
}

// float32Configs are the shapes the learners use: DQN's network, its
// dueling forms with and without a trunk, a TD3/SAC critic and a tanh
// policy, and softsign.
var float32Configs = []struct {
	name string
	cfg  Config
}{
	{"dqn 4-64-64-2", Config{In: 4, Hidden: []int{64, 64}, Out: 2}},
	{"dueling trunk 8-32 streams 16", Config{In: 8, Hidden: []int{32}, Out: 5, Dueling: true, StreamHidden: []int{16}}},
	{"dueling no trunk 4 linear streams", Config{In: 4, Out: 3, Dueling: true}},
	{"critic 4-64-64-1", Config{In: 4, Hidden: []int{64, 64}, Out: 1}},
	{"policy 3-64-64-1 tanh", Config{In: 3, Hidden: []int{64, 64}, Out: 1, OutAct: Tanh}},
	{"softsign 6-17-33-4", Config{In: 6, Hidden: []int{17, 33}, Out: 4, Act: Softsign, OutAct: Softsign}},
	{"tanh hidden 5-9-3", Config{In: 5, Hidden: []int{9}, Out: 3, Act: Tanh}},
}

// twinNets returns a float64 and a float32 Net with the same parameters.
func twinNets(t *testing.T, cfg Config, seed uint64) (n64, n32 *Net) {
	t.Helper()
	n64, err := NewNet(cfg, rand.New(rand.NewPCG(seed, 16)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Float32 = true
	n32, err = NewNet(cfg, rand.New(rand.NewPCG(seed, 16)))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range n64.Params() {
		if n32.Params()[i] != v {
			t.Fatalf("the same seed gave different parameters at %d", i)
		}
	}
	return n64, n32
}

// TestFloat32MatchesFloat64: outputs, parameter gradients and input
// gradients of the float32 path agree with the float64 path within
// f32Tol, for every shape the learners use, through Forward and
// Forward32; a single row goes through the float64 layers bit for bit.
func TestFloat32MatchesFloat64(t *testing.T) {
	for _, tc := range float32Configs {
		t.Run(tc.name, func(t *testing.T) {
			n64, n32 := twinNets(t, tc.cfg, 7)
			rng := rand.New(rand.NewPCG(3, 4))
			const bsz = 37
			x := randVec(rng, bsz*tc.cfg.In, 1.5)
			dOut := randVec(rng, bsz*tc.cfg.Out, 1)
			want := append([]float64(nil), n64.Forward(x)...)
			wantDX := append([]float64(nil), n64.BackwardInput(dOut)...)
			got := n32.Forward(x)
			checkClose(t, "output", got, want, f32Tol)
			checkClose(t, "dL/dx", n32.BackwardInput(dOut), wantDX, f32Tol)
			checkClose(t, "gradients", n32.Grads(), n64.Grads(), f32Tol)
			if err := n32.CheckGrads(); err != nil {
				t.Fatal(err)
			}

			// Forward32 takes float32 rows as they are.
			x32 := make([]float32, len(x))
			round32(x32, x)
			checkClose(t, "Forward32 output", n32.Forward32(x32), want, f32Tol)
			n32.Backward(dOut)
			checkClose(t, "gradients after Forward32", n32.Grads(), n64.Grads(), f32Tol)

			// B = 1: the float64 layers, exactly.
			row := x[:tc.cfg.In]
			w1 := append([]float64(nil), n64.Forward(row)...)
			g1 := append([]float64(nil), n64.BackwardInput(dOut[:tc.cfg.Out])...)
			if got := n32.Forward(row); !equalBits(got, w1) {
				t.Errorf("B=1 output %v, float64 %v", got, w1)
			}
			if got := n32.BackwardInput(dOut[:tc.cfg.Out]); !equalBits(got, g1) {
				t.Errorf("B=1 dL/dx %v, float64 %v", got, g1)
			}
			if !equalBits(n32.Grads(), n64.Grads()) {
				t.Error("B=1 gradients differ from float64's")
			}
		})
	}
}

func equalBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// TestFloat32SeesParamWrites: the float64 parameters are the master copy,
// so writes through Params, SetParams, CopyFrom and SoftUpdate all reach
// the next batch Forward.
func TestFloat32SeesParamWrites(t *testing.T) {
	cfg := Config{In: 4, Hidden: []int{16}, Out: 2, Float32: true}
	n, _ := NewNet(cfg, rand.New(rand.NewPCG(1, 2)))
	other, _ := NewNet(cfg, rand.New(rand.NewPCG(5, 6)))
	ref, _ := NewNet(Config{In: 4, Hidden: []int{16}, Out: 2}, nil)
	x := randVec(rand.New(rand.NewPCG(9, 9)), 8*4, 1)
	check := func(what string) {
		t.Helper()
		ref.CopyFrom(n)
		checkClose(t, what, n.Forward(x), ref.Forward(x), f32Tol)
	}
	check("initial")
	n.Params()[3] += 0.5
	check("after a write through Params")
	n.SoftUpdate(other, 0.3)
	check("after SoftUpdate")
	n.CopyFrom(other)
	check("after CopyFrom")
	if err := n.SetParams(NewParams(1, ref.Params())); err != nil {
		t.Fatal(err)
	}
	check("after SetParams")
	if c := n.Clone(); !c.Config().Float32 {
		t.Error("Clone dropped Float32")
	}
}

// TestFloat32GradientFiniteDifference checks the float32 path's analytic
// gradients (parameters and input) against central differences of its own
// loss L = Σ c·output with smooth activations. The loss is computed in
// float32, so the differences carry rounding noise of about u·|L|/h; with
// h = 1e-2 that is ~1e-5, and the truncation error O(h²) ~1e-4, hence the
// tolerance 2e-3 on |a − n| / max(|a|, |n|, 0.05).
func TestFloat32GradientFiniteDifference(t *testing.T) {
	for _, cfg := range []Config{
		{In: 3, Hidden: []int{24, 24}, Out: 2, Act: Tanh, OutAct: Tanh, Float32: true},
		{In: 5, Hidden: []int{20}, Out: 3, Act: Tanh, Dueling: true, StreamHidden: []int{18}, Float32: true},
	} {
		rng := rand.New(rand.NewPCG(11, 12))
		n, _ := NewNet(cfg, rng)
		const bsz = 6
		x := randVec(rng, bsz*cfg.In, 1)
		c := randVec(rng, bsz*cfg.Out, 1)
		loss := func() float64 { return dot(c, n.Forward(x)) }
		loss()
		dx := append([]float64(nil), n.BackwardInput(c)...)
		grads := append([]float64(nil), n.Grads()...)
		const h, tol, floor = 1e-2, 2e-3, 0.05
		worst := 0.0
		fd := func(what string, v []float64, analytic []float64) {
			for i := range v {
				old := v[i]
				v[i] = old + h
				up := loss()
				v[i] = old - h
				down := loss()
				v[i] = old
				num := (up - down) / (2 * h)
				e := math.Abs(num-analytic[i]) / math.Max(math.Max(math.Abs(num), math.Abs(analytic[i])), floor)
				worst = math.Max(worst, e)
				if e > tol {
					t.Errorf("dueling=%v %s[%d]: analytic %.6g, finite difference %.6g", cfg.Dueling, what, i, analytic[i], num)
				}
			}
		}
		fd("param", n.Params(), grads)
		fd("x", x, dx)
		t.Logf("dueling=%v: worst relative error %.2g", cfg.Dueling, worst)
	}
}

// TestAdamFloat32MatchesFloat64: from the same parameters and gradients,
// float32 Adam steps (with and without clipping) stay within float32
// precision of float64 Adam's: each step moves a parameter by at most
// about LR, computed to relative ~1e-6, and rounds the parameter to
// float32 (half an ulp, at most 6e-8·|θ|), so after k steps
// |Δ| ≤ k·(LR·1e-5 + 1.2e-7·|θ|), a factor 2 of slack on the rounding.
func TestAdamFloat32MatchesFloat64(t *testing.T) {
	for _, clip := range []float64{0, 0.5} {
		rng := rand.New(rand.NewPCG(21, 22))
		const n, steps, lr = 1000, 20, 1e-3
		p64 := randVec(rng, n, 1)
		p32 := append([]float64(nil), p64...)
		a64, err := NewAdam(n, AdamConfig{LR: lr, ClipNorm: clip})
		if err != nil {
			t.Fatal(err)
		}
		a32, err := NewAdam(n, AdamConfig{LR: lr, ClipNorm: clip, Float32: true})
		if err != nil {
			t.Fatal(err)
		}
		for s := range steps {
			g := randVec(rng, n, 0.1)
			g32 := append([]float64(nil), g...)
			n64, err := a64.Step(p64, g)
			if err != nil {
				t.Fatal(err)
			}
			n32, err := a32.Step(p32, g32)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(n32-n64) > 1e-6*n64 {
				t.Fatalf("clip %g step %d: norm %g, float64 %g", clip, s, n32, n64)
			}
			if clip > 0 && n64 <= clip {
				t.Fatalf("the test's gradients (norm %g) do not exercise clipping at %g", n64, clip)
			}
		}
		for i := range p64 {
			if d := math.Abs(p32[i] - p64[i]); d > steps*(lr*1e-5+1.2e-7*math.Abs(p64[i])) {
				t.Fatalf("clip %g: param %d is %.9g, float64 %.9g", clip, i, p32[i], p64[i])
			}
			if float64(float32(p32[i])) != p32[i] {
				t.Fatalf("param %d = %v is not a float32 value", i, p32[i])
			}
		}
		if a32.Steps() != steps {
			t.Errorf("Steps() = %d", a32.Steps())
		}
	}
}

// TestAdamSetFloat32: switching an optimizer's precision keeps its step
// count and moments (rounded to float32 on the way there, widened exactly
// on the way back), and the switched optimizer steps as one built in that
// precision with those moments: bit for bit the same parameters.
func TestAdamSetFloat32(t *testing.T) {
	const n = 300
	rng := rand.New(rand.NewPCG(23, 24))
	grads := make([][]float64, 6)
	for i := range grads {
		grads[i] = randVec(rng, n, 0.1)
	}
	p0 := randVec(rng, n, 1)
	step := func(a *Adam, p []float64, gs [][]float64) {
		for _, g := range gs {
			if _, err := a.Step(p, slices.Clone(g)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// saved returns a copy of a through Save and LoadAdam (the moments in
	// their float64 form, as a checkpoint holds them).
	saved := func(a *Adam) *Adam {
		var b bytes.Buffer
		if err := a.Save(&b); err != nil {
			t.Fatal(err)
		}
		c, err := LoadAdam(&b)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, from32 := range []bool{false, true} {
		a, err := NewAdam(n, AdamConfig{LR: 1e-3, ClipNorm: 0.5, Float32: from32})
		if err != nil {
			t.Fatal(err)
		}
		p := slices.Clone(p0)
		step(a, p, grads[:3])
		m, v := slices.Clone(saved(a).m), slices.Clone(saved(a).v)
		a.SetFloat32(!from32)
		if a.Config().Float32 == from32 || a.Steps() != 3 {
			t.Fatalf("from float32 %t: after SetFloat32 Float32 = %t, Steps = %d", from32, a.Config().Float32, a.Steps())
		}
		b := saved(a)
		for i := range m {
			wm, wv := m[i], v[i]
			if !from32 { // float64 → float32 rounds the moments
				wm, wv = float64(float32(wm)), float64(float32(wv))
			}
			if b.m[i] != wm || b.v[i] != wv {
				t.Fatalf("from float32 %t: moment %d is (%v, %v), want (%v, %v)", from32, i, b.m[i], b.v[i], wm, wv)
			}
		}
		// The switched optimizer and a fresh one of the new precision
		// holding the same moments take the same next steps.
		fresh, err := NewAdam(n, AdamConfig{LR: 1e-3, ClipNorm: 0.5, Float32: !from32})
		if err != nil {
			t.Fatal(err)
		}
		fresh.t = 3
		copy(fresh.m, b.m)
		copy(fresh.v, b.v)
		fresh.syncMoments32()
		q := slices.Clone(p)
		step(a, p, grads[3:])
		step(fresh, q, grads[3:])
		if !slices.Equal(p, q) {
			t.Fatalf("from float32 %t: the switched optimizer's steps differ from a fresh %t one's", from32, !from32)
		}
		if i := slices.IndexFunc(p, func(x float64) bool { return float64(float32(x)) != x }); (i < 0) != !from32 {
			t.Fatalf("from float32 %t: after the switched steps, first non-float32 parameter %d", from32, i)
		}
		a.SetFloat32(!from32) // the mode it is in: nothing changes
		if c := saved(a); !slices.Equal(c.m, saved(fresh).m) || a.Config().Float32 == from32 {
			t.Fatalf("from float32 %t: SetFloat32 to the current mode changed the optimizer", from32)
		}
	}
}

// TestAdamFloat32RefusesNonFinite: a NaN, an infinity or a gradient beyond
// float32's range is refused and changes nothing.
func TestAdamFloat32RefusesNonFinite(t *testing.T) {
	for _, bad := range []float64{math.NaN(), math.Inf(-1), 1e39} {
		a, _ := NewAdam(4, AdamConfig{Float32: true})
		p := []float64{1, 2, 3, 4}
		_, err := a.Step(p, []float64{0.1, bad, 0.1, 0.1})
		var nf *NonFiniteError
		if !errors.As(err, &nf) || nf.Index != 1 {
			t.Fatalf("gradient %g: err = %v, want a NonFiniteError at index 1", bad, err)
		}
		if a.Steps() != 0 || p[0] != 1 || p[1] != 2 {
			t.Errorf("gradient %g: the refused step changed the state", bad)
		}
	}
}

// TestFloat32TrainingConverges trains the same DQN-shaped regression (a
// 4-64-64-2 net fitting both outputs of a fixed smooth target through
// Loss.Selected, Huber, importance weights, Adam with clipping) on the
// float64 and the float32 path from the same start and batches: both must
// cut the loss by 20× and end within 10% of each other.
func TestFloat32TrainingConverges(t *testing.T) {
	final := map[bool]float64{}
	for _, use32 := range []bool{false, true} {
		cfg := Config{In: 4, Hidden: []int{64, 64}, Out: 2, Float32: use32}
		rng := rand.New(rand.NewPCG(31, 32))
		n, _ := NewNet(cfg, rng)
		adam, _ := NewAdam(n.NumParams(), AdamConfig{LR: 3e-3, ClipNorm: 10, Float32: use32})
		const bsz, steps = 64, 400
		x := make([]float64, bsz*4)
		actions := make([]int32, bsz)
		target, weight := make([]float64, bsz), make([]float64, bsz)
		dq := make([]float64, bsz*2)
		data := rand.New(rand.NewPCG(33, 34))
		var first, last float64
		for s := range steps {
			for i := range bsz {
				row := x[i*4 : (i+1)*4]
				for j := range row {
					row[j] = 2*data.Float64() - 1
				}
				actions[i] = int32(data.IntN(2))
				if actions[i] == 0 {
					target[i] = math.Sin(2*row[0]) + row[1]*row[2]
				} else {
					target[i] = math.Cos(row[3]) - row[0]
				}
				weight[i] = 0.5 + data.Float64()
			}
			l := Loss{}.Selected(dq, n.Forward(x), actions, target, weight)
			if s == 0 {
				first = l
			}
			if s >= steps-20 {
				last += l / 20
			}
			n.Backward(dq)
			if _, err := adam.Step(n.Params(), n.Grads()); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("float32=%v: loss %.4g → %.4g", use32, first, last)
		if !(last < first/20) {
			t.Errorf("float32=%v: loss %.4g → %.4g, not cut by 20×", use32, first, last)
		}
		final[use32] = last
	}
	if d := math.Abs(final[true] - final[false]); d > 0.1*final[false] {
		t.Errorf("final loss float32 %.5g, float64 %.5g: more than 10%% apart", final[true], final[false])
	}
}

// TestFloat32Checkpoint: a float32 Net and a float32 Adam round-trip
// through Save and Load in the float64 format, keep their Float32 option,
// and continue bit for bit; a float64 Config's JSON is unchanged (no
// float32 key).
func TestFloat32Checkpoint(t *testing.T) {
	cfg := Config{In: 4, Hidden: []int{32, 32}, Out: 2, Float32: true}
	rng := rand.New(rand.NewPCG(41, 42))
	n, _ := NewNet(cfg, rng)
	adam, _ := NewAdam(n.NumParams(), AdamConfig{ClipNorm: 1, Float32: true})
	x := randVec(rng, 16*4, 1)
	dOut := randVec(rng, 16*2, 1)
	step := func(n *Net, a *Adam) {
		n.Forward(x)
		n.Backward(dOut)
		if _, err := a.Step(n.Params(), n.Grads()); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		step(n, adam)
	}
	var nb, ab bytes.Buffer
	if err := n.Save(&nb); err != nil {
		t.Fatal(err)
	}
	if err := adam.Save(&ab); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(nb.String(), `"float32":true`) {
		t.Error("the Net's header does not record float32")
	}
	n2, err := LoadNet(&nb)
	if err != nil {
		t.Fatal(err)
	}
	adam2, err := LoadAdam(&ab)
	if err != nil {
		t.Fatal(err)
	}
	if !n2.Config().Float32 || !adam2.Config().Float32 {
		t.Fatal("Load dropped Float32")
	}
	if !equalBits(n2.Params(), n.Params()) {
		t.Fatal("loaded parameters differ")
	}
	for range 3 {
		step(n, adam)
		step(n2, adam2)
	}
	if !equalBits(n2.Params(), n.Params()) {
		t.Error("the loaded Net and Adam did not continue bit for bit")
	}

	b, err := json.Marshal(Config{In: 4, Out: 2})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "float32") {
		t.Errorf("a float64 Config's JSON mentions float32: %s", b)
	}
	b, _ = json.Marshal(AdamConfig{})
	if strings.Contains(string(b), "float32") {
		t.Errorf("a float64 AdamConfig's JSON mentions float32: %s", b)
	}
}

// TestFloat32ZeroAllocs: after warm-up the float32 learner step allocates
// nothing.
func TestFloat32ZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	cfg := Config{In: 4, Hidden: []int{64, 64}, Out: 2, Dueling: true, Float32: true}
	rng := rand.New(rand.NewPCG(51, 52))
	n, _ := NewNet(cfg, rng)
	adam, _ := NewAdam(n.NumParams(), AdamConfig{ClipNorm: 1, Float32: true})
	x := randVec(rng, 64*4, 1)
	dOut := randVec(rng, 64*2, 1)
	step := func() {
		n.Forward(x)
		n.BackwardInput(dOut)
		if _, err := adam.Step(n.Params(), n.Grads()); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if a := testing.AllocsPerRun(10, step); a != 0 {
		t.Errorf("%v allocations per float32 step", a)
	}
}

// TestAdam32LargeFiniteGradients: gradients finite in float32 whose sum of
// squares overflows float32 are clipped exactly as by the float64 Adam
// (the norm is then summed in float64), and without clipping a gradient
// whose square float32 cannot hold is refused before anything changes.
func TestAdam32LargeFiniteGradients(t *testing.T) {
	grads := []float64{3e19, -4e19, 1}
	for _, clip := range []float64{0, 1} {
		a64, err := NewAdam(3, AdamConfig{LR: 1e-3, ClipNorm: clip})
		if err != nil {
			t.Fatal(err)
		}
		a32, err := NewAdam(3, AdamConfig{LR: 1e-3, ClipNorm: clip, Float32: true})
		if err != nil {
			t.Fatal(err)
		}
		p64, p32 := []float64{1, 2, 3}, []float64{1, 2, 3}
		n64, err64 := a64.Step(p64, slices.Clone(grads))
		n32, err32 := a32.Step(p32, slices.Clone(grads))
		if clip == 0 {
			if err64 != nil || err32 == nil || !errors.Is(err32, ErrNonFinite) {
				t.Fatalf("no clipping: float64 err %v, float32 err %v; want float64 to step and float32 to refuse with ErrNonFinite", err64, err32)
			}
			if !slices.Equal(p32, []float64{1, 2, 3}) || a32.Steps() != 0 {
				t.Fatalf("a refused float32 step changed the parameters (%v) or the step count (%d)", p32, a32.Steps())
			}
			continue
		}
		if err64 != nil || err32 != nil {
			t.Fatalf("clipped: float64 err %v, float32 err %v", err64, err32)
		}
		if math.Abs(n32-n64) > 1e-6*n64 {
			t.Fatalf("clipped: float32 norm %g, float64 norm %g", n32, n64)
		}
		for i := range p64 {
			if math.Abs(p32[i]-p64[i]) > 1e-6 {
				t.Fatalf("clipped: parameter %d: float32 %g, float64 %g", i, p32[i], p64[i])
			}
		}
	}
}
