package f32

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchImpls is every implementation this CPU runs, fastest first.
func benchImpls() []Impl {
	var out []Impl
	for _, i := range []Impl{AVX512, AVX2, Portable} {
		if i.Available() {
			out = append(out, i)
		}
	}
	return out
}

// BenchmarkGemm: the products of one 64→64 layer at batch B: forward
// (B×64 · 64×64, bias and ReLU fused), dW (xᵀ·dz, A transposed) and dX
// (dz·Wᵀ with ReLU's derivative fused). GFLOP/s is 2·B·64·64 per op.
func BenchmarkGemm(b *testing.B) {
	const in, out = 64, 64
	for _, impl := range benchImpls() {
		for _, bsz := range []int{64, 256} {
			rng := rand.New(rand.NewPCG(1, 1))
			x, w, bias := randSlice(rng, bsz*in), randSlice(rng, in*out), randSlice(rng, out)
			y, dz := randSlice(rng, bsz*out), randSlice(rng, bsz*out)
			gw, dx := make([]float32, in*out), make([]float32, bsz*in)
			for _, tc := range []struct {
				name string
				f    func()
			}{
				{"forward", func() { impl.Gemm(bsz, out, in, x, in, 1, w, out, y, out, InitBias, bias, PostReLU, nil) }},
				{"dW", func() { impl.Gemm(in, out, bsz, x, 1, in, dz, out, gw, out, InitZero, nil, PostNone, nil) }},
				{"dX", func() { impl.Gemm(bsz, in, out, dz, out, 1, w, in, dx, in, InitZero, nil, PostReLUGrad, x) }},
			} {
				b.Run(fmt.Sprintf("%s/impl=%v/B=%d", tc.name, impl, bsz), func(b *testing.B) {
					for b.Loop() {
						tc.f()
					}
					b.ReportMetric(2*float64(bsz*in*out)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkGemmNarrow: the Q head's forward, B×64 · 64×2 with the bias,
// where only 2 of a vector's lanes are columns.
func BenchmarkGemmNarrow(b *testing.B) {
	const in, out = 64, 2
	for _, impl := range benchImpls() {
		for _, bsz := range []int{64, 256} {
			rng := rand.New(rand.NewPCG(1, 1))
			x, w, bias, y := randSlice(rng, bsz*in), randSlice(rng, in*out), randSlice(rng, out), make([]float32, bsz*out)
			b.Run(fmt.Sprintf("impl=%v/B=%d", impl, bsz), func(b *testing.B) {
				for b.Loop() {
					impl.Gemm(bsz, out, in, x, in, 1, w, out, y, out, InitBias, bias, PostNone, nil)
				}
			})
		}
	}
}

// BenchmarkAdam: one Adam.Step (norm, clipping, fused update) on the
// 4610 parameters of the 4→64→64→2 network; with moments=subnormal half
// the gradients are 0 and their first moments subnormal at every step
// (the state of a dead unit's weights after long training), which costs
// about 30× without the kernels' flush to zero.
func BenchmarkAdam(b *testing.B) {
	const n = 4610
	for _, impl := range benchImpls() {
		for _, sub := range []bool{false, true} {
			name := fmt.Sprintf("impl=%v/moments=normal", impl)
			if sub {
				name = fmt.Sprintf("impl=%v/moments=subnormal", impl)
			}
			b.Run(name, func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 1))
				p, g := randSlice(rng, n), randSlice(rng, n)
				a, _ := NewAdam(n, AdamConfig{LR: 1e-4, ClipNorm: 40}, impl)
				if sub {
					for i := 0; i < n; i += 2 {
						g[i] = 0
					}
				}
				b.ReportAllocs()
				for b.Loop() {
					if sub {
						for i := 0; i < n; i += 2 {
							a.m[i] = 1e-39
						}
					}
					if _, err := a.Step(p, g); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkColSum: the bias gradient of a 64-wide layer at B=256.
func BenchmarkColSum(b *testing.B) {
	for _, impl := range benchImpls() {
		b.Run(fmt.Sprintf("impl=%v", impl), func(b *testing.B) {
			src, dst := randSlice(rand.New(rand.NewPCG(1, 1)), 256*64), make([]float32, 64)
			for b.Loop() {
				impl.ColSum(dst, src, 256, 64, 64)
			}
		})
	}
}

// BenchmarkTrainStep: the whole update of model's BenchmarkTrainStep32
// (forward, weighted Huber on the taken actions, backward, Adam with
// clipping) on the 4→64→64→2 network, without model in the way.
func BenchmarkTrainStep(b *testing.B) {
	layers := []Layer{{4, 64, ReLU}, {64, 64, ReLU}, {64, 2, Identity}}
	for _, impl := range benchImpls() {
		for _, bsz := range []int{64, 256} {
			b.Run(fmt.Sprintf("impl=%v/B=%d", impl, bsz), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 1))
				p := newTestProblem(rng, layers, bsz)
				net, _ := NewMLP(layers, impl)
				for i := range net.Params() {
					net.Params()[i] = p.params[i] * 0.3
				}
				adam, _ := NewAdam(len(net.Params()), AdamConfig{LR: 1e-4, ClipNorm: 40}, impl)
				dq := make([]float32, bsz*2)
				step := func() {
					Loss{}.Selected(dq, net.Forward(p.x), p.actions, p.target, p.weight)
					net.Backward(dq)
					if _, err := adam.Step(net.Params(), net.Grads()); err != nil {
						b.Fatal(err)
					}
				}
				step() // buffers grow to the batch
				b.ReportAllocs()
				for b.Loop() {
					step()
				}
			})
		}
	}
}
