package learner

import (
	"testing"
)

// BenchmarkStep: one full learner step on the reference 4→64→64→2 network
// with proportional PER over 2^16 stored transitions: sample, IS weights,
// three forwards, loss, backward, Adam (clipping on), parameter check,
// priority write-back, and the default target and publish cadences (the
// publish=1 case publishes after every step, for the cost of a publish).
func BenchmarkStep(b *testing.B) {
	for _, bc := range []struct {
		name         string
		batch, every int
	}{
		{"B=64", 64, 0},
		{"B=256", 256, 0},
		{"B=64/publish=1", 64, 1},
		{"B=64/publish=never", 64, 1 << 30},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := newRig(b, DQNConfig{Batch: bc.batch, PublishEvery: bc.every}, benchCfg, 1<<16)
			if err := r.l.Step(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := r.l.Step(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
