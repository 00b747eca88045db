package learner

import (
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// The learners' step benchmarks with float32 networks (model.Config's
// Float32: batch forwards and backwards on model/internal/f32's kernels).
// The learners' Adam follows their networks' precision, so these steps
// run Adam in float32 too. Run them beside the float64 ones: go test -run '^$' -bench 'Step' ./learner.

// float32Net returns a copy of n with Config.Float32 set.
func float32Net(b testing.TB, n *model.Net) *model.Net {
	b.Helper()
	c := n.Config()
	c.Float32 = true
	m, err := model.NewNet(c, nil)
	if err != nil {
		b.Fatal(err)
	}
	m.CopyFrom(n)
	return m
}

// BenchmarkStepFloat32: BenchmarkStep's B=64 and B=256 cases on a float32
// 4→64→64→2 network.
func BenchmarkStepFloat32(b *testing.B) {
	for _, bc := range []struct {
		name  string
		batch int
	}{{"B=64", 64}, {"B=256", 256}} {
		b.Run(bc.name, func(b *testing.B) {
			nc := benchCfg
			nc.Float32 = true
			r := newRig(b, DQNConfig{Batch: bc.batch}, nc, 1<<16)
			if !r.l.Net().Config().Float32 || !r.l.Target().Config().Float32 {
				b.Fatal("the learner's networks are not float32")
			}
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

// BenchmarkTD3StepFloat32: BenchmarkTD3Step with float32 actor and critics
// (the twin critic and the targets follow the given critic's Config).
func BenchmarkTD3StepFloat32(b *testing.B) {
	benchContinuousStep(b, func(b *testing.B, batch int, m sampler.Method, buf *buffer.Buffer) stepper {
		actor, critic := td3Nets(b, 3, 1, []int{64, 64}, model.ReLU, 1)
		l, err := NewTD3(TD3Config{Batch: batch, MaxAction: 2}, float32Net(b, actor), float32Net(b, critic), buf, m, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, ts := l.Targets(); !ts[1].Config().Float32 {
			b.Fatal("the twin target critic is not float32")
		}
		td3Steps(b, l, 2)
		return l
	})
}

// BenchmarkSACStepFloat32: BenchmarkSACStep with float32 policy and
// critics.
func BenchmarkSACStepFloat32(b *testing.B) {
	benchContinuousStep(b, func(b *testing.B, batch int, m sampler.Method, buf *buffer.Buffer) stepper {
		policy, critic := sacNets(b, 3, 1, []int{64, 64}, model.ReLU, 1)
		l, err := NewSAC(SACConfig{Batch: batch, MaxAction: 2}, float32Net(b, policy), float32Net(b, critic), buf, m, nil)
		if err != nil {
			b.Fatal(err)
		}
		sacSteps(b, l, 2)
		return l
	})
}
