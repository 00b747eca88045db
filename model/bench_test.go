package model

import (
	"fmt"
	"math/rand/v2"
	"testing"
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
// actions with importance weights + backward + Adam (clipping on).
func BenchmarkTrainStep(b *testing.B) {
	for _, bsz := range []int{64, 256} {
		b.Run(fmt.Sprintf("B=%d", bsz), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			net, _ := NewNet(benchCfg, rng)
			adam, _ := NewAdam(net.NumParams(), AdamConfig{LR: 1e-4, ClipNorm: 40})
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
