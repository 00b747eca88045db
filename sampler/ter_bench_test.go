package sampler_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// BenchmarkTERSample is the cost of one batch (the paper's Table B.1 for
// TER): a 2^16-slot buffer of random walks over 500 states, 8 new items
// indexed per batch (a replay ratio of 0.25 at B = 32), B = 32.
func BenchmarkTERSample(b *testing.B) {
	for _, eta := range []float64{0, 0.5} {
		b.Run(fmt.Sprintf("eta=%v", eta), func(b *testing.B) {
			const capacity, batch, states = 1 << 16, 32, 500
			buf := terBuffer(b, capacity, 16)
			walk := newTERWalk(1, 1, states, 100)
			terInsert(b, buf, 0, walk.steps(capacity))
			cfg := sampler.DefaultTERConfig(1e6)
			cfg.Eta = eta
			s := newTER(b, buf, cfg)
			rng := rand.New(rand.NewPCG(1, 2))
			bt := samplertest.NewBatch(b, buf, batch)
			td := make([]float64, batch)
			ins := make([]*buffer.Transitions, 1024)
			for i := range ins {
				ins[i] = terTransitions(capacity+8*i, walk.steps(8))
			}
			b.ResetTimer()
			for i := range b.N {
				if err := buf.Insert(ins[i%len(ins)]); err != nil {
					b.Fatal(err)
				}
				if err := s.Sample(rng, bt); err != nil {
					b.Fatal(err)
				}
				for k := range td {
					td[k] = rng.Float64()
				}
				if _, err := s.Update(bt.Refs, td); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			st := s.Stats()
			b.ReportMetric(float64(st.Expanded)/float64(b.N), "expanded/op")
		})
	}
}
