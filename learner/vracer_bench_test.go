package learner

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/sampler"
)

// BenchmarkVRACERStep: one full V-RACER step with full ReF-ER on a
// Pendulum-sized network (3→64→64→3) over 2^14 stored steps of episodes
// of 200 steps: sample, forward, Gaussian maths, loss, backward, Adam,
// the controller's write-back and Retrace sweeps, at batch 128 (refer.md
// §6's) and 32.
func BenchmarkVRACERStep(b *testing.B) {
	for _, batch := range []int{32, 128} {
		b.Run(map[int]string{32: "B=32", 128: "B=128"}[batch], func(b *testing.B) {
			const nS, nA = 3, 1
			buf := referBuffer(b, 1<<15, nS, nA)
			fillEpisodes(b, buf, rand.New(rand.NewPCG(1, 2)), 0, 1<<14/200, 200)
			m, err := sampler.NewMethod("refer", buf, sampler.MethodConfig{BetaSteps: 1 << 20, REFER: &sampler.REFERConfig{TotalSteps: 1 << 20, MaxSteps: 1 << 14}})
			if err != nil {
				b.Fatal(err)
			}
			net, err := NewVRACERNet(nS, nA, []int{64, 64}, rand.New(rand.NewPCG(3, 4)))
			if err != nil {
				b.Fatal(err)
			}
			l, err := NewVRACER(VRACERConfig{Batch: batch, Seed: 5}, net, buf, m, nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := l.Step(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Step(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
