package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/model/internal/f32"
)

// The design notes' reference network: CartPole-sized 4→64→64→2 (ReLU).
var benchCfg = Config{In: 4, Hidden: []int{64, 64}, Out: 2}

// BenchmarkForward: the actor's path (B=1, gemv) and a learner's batch.
func BenchmarkForward(b *testing.B) {
	for _, bsz := range []int{1, 64} {
		b.Run(fmt.Sprintf("B=%d", bsz), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			net, _ := NewNet(benchCfg, rng)
			x := randVec(rng, bsz*benchCfg.In, 1)
			net.Forward(x)
			b.ReportAllocs()
			for b.Loop() {
				net.Forward(x)
			}
		})
	}
}

// BenchmarkTrainStep: one learner update, forward + Huber on the taken
// actions with importance weights + backward + Adam (clipping on), through
// the public float64 API: B=… on the default float64 path, Float32/B=…
// with Config.Float32 and AdamConfig.Float32 (the same step on the f32
// kernels, every float64 boundary conversion included).
func BenchmarkTrainStep(b *testing.B) {
	for _, bc := range []struct {
		name  string
		bsz   int
		use32 bool
	}{{"B=64", 64, false}, {"B=256", 256, false}, {"Float32/B=64", 64, true}, {"Float32/B=256", 256, true}} {
		bsz := bc.bsz
		b.Run(bc.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			cfg := benchCfg
			cfg.Float32 = bc.use32
			net, _ := NewNet(cfg, rng)
			adam, _ := NewAdam(net.NumParams(), AdamConfig{LR: 1e-4, ClipNorm: 40, Float32: bc.use32})
			x := randVec(rng, bsz*benchCfg.In, 1)
			actions := make([]int32, bsz)
			for i := range actions {
				actions[i] = int32(rng.IntN(benchCfg.Out))
			}
			target, weight := randVec(rng, bsz, 1), randVec(rng, bsz, 1)
			dq := make([]float64, bsz*benchCfg.Out)
			step := func() {
				Loss{}.Selected(dq, net.Forward(x), actions, target, weight)
				net.Backward(dq)
				if _, err := adam.Step(net.Params(), net.Grads()); err != nil {
					b.Fatal(err)
				}
			}
			step()
			b.ReportAllocs()
			for b.Loop() {
				step()
			}
		})
	}
}

// BenchmarkSnapshot: publishing (copy of 4.5k parameters) and an actor's
// refresh (load + copy).
func BenchmarkSnapshot(b *testing.B) {
	net, _ := NewNet(benchCfg, rand.New(rand.NewPCG(1, 1)))
	actor := net.Clone()
	var store Store
	b.Run("publish", func(b *testing.B) {
		b.ReportAllocs()
		v := uint64(0)
		for b.Loop() {
			v++
			store.Publish(net.Snapshot(v))
		}
	})
	b.Run("refresh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = actor.SetParams(store.Load())
		}
	})
}

// BenchmarkTrainStep32: BenchmarkTrainStep's update in float32 on the
// kernels of model/internal/f32 (impl=avx512, avx2 where the CPU has them,
// and the portable Go twin): the same network, parameters, batch, weighted
// Huber on the taken actions, backward, and Adam with the same LR and
// clipping. Run it beside BenchmarkTrainStep (-bench 'TrainStep') so the
// ratio comes from one run on one machine.
func BenchmarkTrainStep32(b *testing.B) {
	layers := []f32.Layer{{In: 4, Out: 64, Act: f32.ReLU}, {In: 64, Out: 64, Act: f32.ReLU}, {In: 64, Out: 2, Act: f32.Identity}}
	for _, impl := range []f32.Impl{f32.AVX512, f32.AVX2, f32.Portable} {
		if !impl.Available() {
			continue
		}
		for _, bsz := range []int{64, 256} {
			b.Run(fmt.Sprintf("impl=%v/B=%d", impl, bsz), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 1))
				net64, _ := NewNet(benchCfg, rng)
				net, err := f32.NewMLP(layers, impl)
				if err != nil {
					b.Fatal(err)
				}
				for i, v := range net64.Params() {
					net.Params()[i] = float32(v)
				}
				adam, _ := f32.NewAdam(len(net.Params()), f32.AdamConfig{LR: 1e-4, ClipNorm: 40}, impl)
				x := to32(randVec(rng, bsz*benchCfg.In, 1))
				actions := make([]int32, bsz)
				for i := range actions {
					actions[i] = int32(rng.IntN(benchCfg.Out))
				}
				target, weight := to32(randVec(rng, bsz, 1)), to32(randVec(rng, bsz, 1))
				dq := make([]float32, bsz*benchCfg.Out)
				step := func() {
					f32.Loss{}.Selected(dq, net.Forward(x), actions, target, weight)
					net.Backward(dq)
					if _, err := adam.Step(net.Params(), net.Grads()); err != nil {
						b.Fatal(err)
					}
				}
				step()
				b.ReportAllocs()
				for b.Loop() {
					step()
				}
			})
		}
	}
}

func to32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
