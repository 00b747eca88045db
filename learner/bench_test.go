package learner

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
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

// BenchmarkTD3Step: one full TD3 step on Pendulum-sized networks (actor
// 3→64→64→1, critics 4→64→64→1) over 2^16 stored transitions with the
// default cadences (an actor update every second step) and the uniform
// MSE method, and with LAP (its write-back).
func BenchmarkTD3Step(b *testing.B) {
	benchContinuousStep(b, func(b *testing.B, batch int, m sampler.Method, buf *buffer.Buffer) stepper {
		actor, critic := td3Nets(b, 3, 1, []int{64, 64}, model.ReLU, 1)
		l, err := NewTD3(TD3Config{Batch: batch, MaxAction: 2}, actor, critic, buf, m, nil)
		if err != nil {
			b.Fatal(err)
		}
		td3Steps(b, l, 2)
		return l
	})
}

// BenchmarkSACStep: one full SAC step on the same Pendulum-sized networks
// as BenchmarkTD3Step (policy 3→64→64→2, critics 4→64→64→1) over 2^16
// stored transitions, uniform MSE and LAP: targets from the policy, both
// critics, the policy through both critics, the temperature and both
// Polyak updates every step. Run it beside BenchmarkTD3Step (-bench
// 'TD3Step|SACStep') to compare the two on one machine.
func BenchmarkSACStep(b *testing.B) {
	benchContinuousStep(b, func(b *testing.B, batch int, m sampler.Method, buf *buffer.Buffer) stepper {
		policy, critic := sacNets(b, 3, 1, []int{64, 64}, model.ReLU, 1)
		l, err := NewSAC(SACConfig{Batch: batch, MaxAction: 2}, policy, critic, buf, m, nil)
		if err != nil {
			b.Fatal(err)
		}
		sacSteps(b, l, 2)
		return l
	})
}

type stepper interface{ Step(context.Context) error }

// benchContinuousStep times Step of the learner build makes over 2^16
// stored Pendulum-sized transitions, at batch 64 and 256 with uniform MSE
// and at 256 with LAP.
func benchContinuousStep(b *testing.B, build func(b *testing.B, batch int, m sampler.Method, buf *buffer.Buffer) stepper) {
	for _, bc := range []struct {
		name   string
		batch  int
		method string
	}{
		{"B=64/uniform", 64, "uniform"},
		{"B=256/uniform", 256, "uniform"},
		{"B=256/lap", 256, "lap"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			buf := contBuffer(b, 1<<16, 3, 1, 0)
			fillContinuous(b, buf, rand.New(rand.NewPCG(1, 1)), 1<<16, 2)
			l := build(b, bc.batch, td3Method(b, bc.method, buf, nil), buf)
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
