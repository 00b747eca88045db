package f32

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// testLayers has every activation, widths that are no multiple of the
// vector width (ragged column tails in every Gemm), a narrow layer
// (17→4, computed transposed) and a batch that is no multiple of 4 (the
// SIMD path's leftover rows).
var testLayers = []Layer{{5, 19, ReLU}, {19, 9, Tanh}, {9, 17, Softsign}, {17, 4, ReLU}, {4, 3, Identity}}

const testBatch = 7

type testProblem struct {
	x, target, weight []float32
	actions           []int32
	params            []float32
}

func newTestProblem(rng *rand.Rand, layers []Layer, bsz int) *testProblem {
	p := &testProblem{
		x:       randSlice(rng, bsz*layers[0].In),
		target:  randSlice(rng, bsz),
		weight:  make([]float32, bsz),
		actions: make([]int32, bsz),
		params:  randSlice(rng, NumParams(layers)),
	}
	out := layers[len(layers)-1].Out
	for i := range p.actions {
		p.actions[i] = int32(rng.IntN(out))
		p.weight[i] = float32(0.2 + rng.Float64())
		p.target[i] *= 3 // some |δ| beyond Huber's threshold
	}
	return p
}

// grads runs forward, the weighted Huber loss on the taken actions and
// backward on an MLP of impl, and returns the output and the gradients.
func (p *testProblem) grads(t *testing.T, layers []Layer, impl Impl) (q, g []float32) {
	net, err := NewMLP(layers, impl)
	if err != nil {
		t.Fatal(err)
	}
	copy(net.Params(), p.params)
	q = clone(net.Forward(p.x))
	dq := make([]float32, len(q))
	Loss{}.Selected(dq, q, p.actions, p.target, p.weight)
	net.Backward(dq)
	return q, clone(net.Grads())
}

// loss64 is the same loss computed from scratch in float64 from params
// (the reference the finite differences are taken of).
func (p *testProblem) loss64(layers []Layer, params []float64) float64 {
	bsz := len(p.target)
	x := make([]float64, len(p.x))
	for i, v := range p.x {
		x[i] = float64(v)
	}
	off := 0
	for _, l := range layers {
		w, b := params[off:off+l.In*l.Out], params[off+l.In*l.Out:off+l.In*l.Out+l.Out]
		off += l.In*l.Out + l.Out
		y := make([]float64, bsz*l.Out)
		for r := range bsz {
			for j := range l.Out {
				s := b[j]
				for k := range l.In {
					s += x[r*l.In+k] * w[k*l.Out+j]
				}
				switch l.Act {
				case ReLU:
					s = max(s, 0)
				case Tanh:
					s = math.Tanh(s)
				case Softsign:
					s /= 1 + math.Abs(s)
				}
				y[r*l.Out+j] = s
			}
		}
		x = y
	}
	nA := layers[len(layers)-1].Out
	sum := 0.0
	for i, t := range p.target {
		d := x[i*nA+int(p.actions[i])] - float64(t)
		v := d * d / 2
		if math.Abs(d) > 1 {
			v = math.Abs(d) - 0.5
		}
		sum += float64(p.weight[i]) * v
	}
	return sum / float64(bsz)
}

func TestBackwardMatchesFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 10))
	p := newTestProblem(rng, testLayers, testBatch)
	theta := make([]float64, len(p.params))
	for i, v := range p.params {
		theta[i] = float64(v)
	}
	// Central differences of the float64 reference: truncation O(h²) and
	// rounding O(ε/h) both far below 1e-7 at h = 1e-5.
	const h = 1e-5
	fd := make([]float64, len(theta))
	gmax := 0.0
	for i := range theta {
		old := theta[i]
		theta[i] = old + h
		lp := p.loss64(testLayers, theta)
		theta[i] = old - h
		lm := p.loss64(testLayers, theta)
		theta[i] = old
		fd[i] = (lp - lm) / (2 * h)
		gmax = max(gmax, math.Abs(fd[i]))
	}
	for _, impl := range append(simdImpls(t), Portable) {
		_, g := p.grads(t, testLayers, impl)
		for i := range fd {
			// float32 backpropagation through three layers: a relative
			// error of a few 1e-7 per operation, summed over ≤ 19 terms;
			// 1e-5 of the largest gradient is well above that and far below
			// any wrong term (a missing factor, a wrong index).
			if d := math.Abs(float64(g[i]) - fd[i]); d > 1e-5*gmax+1e-4*math.Abs(fd[i]) {
				t.Fatalf("%v: dL/dθ[%d] = %v, finite difference %v (max |g| %v)", impl, i, g[i], fd[i], gmax)
			}
		}
	}
}

func TestMLPImplsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 11))
	for _, tc := range []struct {
		layers []Layer
		bsz    int
	}{
		{testLayers, testBatch},
		{[]Layer{{4, 64, ReLU}, {64, 64, ReLU}, {64, 2, Identity}}, 64},
		{[]Layer{{3, 64, ReLU}, {64, 64, ReLU}, {64, 1, Tanh}}, 33},
	} {
		p := newTestProblem(rng, tc.layers, tc.bsz)
		q0, g0 := p.grads(t, tc.layers, Portable)
		for _, impl := range simdImpls(t) {
			q, g := p.grads(t, tc.layers, impl)
			for _, pair := range [][2][]float32{{q, q0}, {g, g0}} {
				scale := 0.0
				for _, v := range pair[1] {
					scale = max(scale, math.Abs(float64(v)))
				}
				for i := range pair[0] {
					if d := math.Abs(float64(pair[0][i] - pair[1][i])); d > 1e-5*scale {
						t.Fatalf("%v %v B=%d: entry %d = %v, portable %v", impl, tc.layers, tc.bsz, i, pair[0][i], pair[1][i])
					}
				}
			}
		}
	}
}

func TestNewMLPRefusesBadLayers(t *testing.T) {
	for _, layers := range [][]Layer{
		nil,
		{{0, 3, ReLU}},
		{{4, 3, ReLU}, {4, 2, Identity}},
		{{4, 3, Act(5)}},
		{{4, 3, 0}},
		{{1 << 15, 1 << 15, ReLU}},
	} {
		if _, err := NewMLP(layers, Portable); err == nil {
			t.Errorf("NewMLP(%v): no error", layers)
		}
	}
}

func TestAdamRefusesNonFinite(t *testing.T) {
	for _, impl := range append(simdImpls(t), Portable) {
		a, err := NewAdam(20, AdamConfig{ClipNorm: 1}, impl)
		if err != nil {
			t.Fatal(err)
		}
		p := make([]float32, 20)
		g := make([]float32, 20)
		g[3] = 1
		g[17] = float32(math.Inf(-1))
		if _, err := a.Step(p, g); err == nil || a.t != 0 || p[3] != 0 {
			t.Errorf("%v: Step with -Inf gave err %v, t %d, p[3] %v", impl, err, a.t, p[3])
		}
		g[17] = 0
		norm, err := a.Step(p, g)
		if err != nil || norm != 1 || !(p[3] < 0) {
			t.Errorf("%v: Step = %v, %v; p[3] = %v", impl, norm, err, p[3])
		}
	}
}

func TestAdamClips(t *testing.T) {
	// With a constant gradient, Adam's first step moves every parameter by
	// LR·sign(g) whatever the scale; clipping shows in the norm returned
	// and in the moments, which hold the clipped gradient.
	a, _ := NewAdam(2, AdamConfig{LR: 0.1, ClipNorm: 5}, Auto)
	p := []float32{0, 0}
	norm, err := a.Step(p, []float32{30, 40})
	if err != nil || norm != 50 {
		t.Fatalf("Step = %v, %v; want norm 50", norm, err)
	}
	m, _, _ := a.Moments()
	if math.Abs(float64(m[0])-0.1*3) > 1e-6 || math.Abs(float64(m[1])-0.1*4) > 1e-6 {
		t.Errorf("moments %v, want (1−β₁)·(3, 4)", m)
	}
	if math.Abs(float64(p[0])+0.1) > 1e-5 || math.Abs(float64(p[1])+0.1) > 1e-5 {
		t.Errorf("params %v, want (−0.1, −0.1)", p)
	}
}

func ExampleMLP() {
	// One DQN-style update of a 4→64→64→2 network on a batch of 32.
	layers := []Layer{{4, 64, ReLU}, {64, 64, ReLU}, {64, 2, Identity}}
	net, _ := NewMLP(layers, Auto)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range net.Params() {
		net.Params()[i] = float32(rng.NormFloat64() * 0.1)
	}
	adam, _ := NewAdam(len(net.Params()), AdamConfig{LR: 1e-3, ClipNorm: 10}, Auto)
	const bsz = 32
	x, target := make([]float32, bsz*4), make([]float32, bsz)
	actions := make([]int32, bsz)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	var before, after float64
	for step := range 50 {
		q := net.Forward(x)
		dq := make([]float32, len(q))
		l := Loss{Kind: Huber}.Selected(dq, q, actions, target, nil)
		if step == 0 {
			before = l
		}
		after = l
		net.Backward(dq)
		if _, err := adam.Step(net.Params(), net.Grads()); err != nil {
			panic(err)
		}
	}
	fmt.Println(after < before/2)
	// Output: true
}

func TestTrainStepDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	layers := []Layer{{4, 64, ReLU}, {64, 64, ReLU}, {64, 2, Identity}}
	for _, impl := range append(simdImpls(t), Portable) {
		p := newTestProblem(rand.New(rand.NewPCG(16, 12)), layers, 64)
		net, _ := NewMLP(layers, impl)
		copy(net.Params(), p.params)
		adam, _ := NewAdam(len(net.Params()), AdamConfig{ClipNorm: 1}, impl)
		dq := make([]float32, 64*2)
		step := func() {
			Loss{}.Selected(dq, net.Forward(p.x), p.actions, p.target, p.weight)
			net.BackwardInput(dq)
			if _, err := adam.Step(net.Params(), net.Grads()); err != nil {
				t.Fatal(err)
			}
		}
		step()
		if n := testing.AllocsPerRun(20, step); n != 0 {
			t.Errorf("%v: a train step allocates %v times", impl, n)
		}
	}
}
