package actor

import (
	"context"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
)

// BenchmarkActorCartPole measures one actor's environment steps per second
// on CartPole-v1 with a 4→64→64→2 ReLU network, PER priorities and the
// default local batch of 50: eps=0.4 is actor 0's rate (a forward pass on
// 60% of the steps), greedy always runs one, and uniform none (the
// environment, the adder and the priority passes alone). One iteration is
// one environment step.
func BenchmarkActorCartPole(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"eps=0.4", Config{}},
		{"greedy", Config{FixedEpsilon: true}},
		{"uniform", Config{FixedEpsilon: true, Epsilon: 1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			net, st := glorot(b, model.Config{In: 4, Hidden: []int{64, 64}, Out: 2}, 1)
			a, err := New(c.cfg, mustEnv(b, "CartPole-v1"), net, st, newPER(b, 4, 0.6, 1e-6))
			if err != nil {
				b.Fatal(err)
			}
			var t buffer.Transitions
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for a.steps < int64(b.N) {
				t.Obs, t.NextObs, t.Action, t.Reward, t.Discount, t.Flags, t.Priority =
					t.Obs[:0], t.NextObs[:0], t.Action[:0], t.Reward[:0], t.Discount[:0], t.Flags[:0], t.Priority[:0]
				if err := a.Fill(ctx, &t); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(a.steps)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}

// BenchmarkContinuousPendulum measures one continuous actor's environment
// steps per second on Pendulum-v1 with a 3→64→64→1 Tanh policy and the
// default local batch of 50: noise=0.1 is the default (one forward pass and
// one normal draw per step), random the warm-up (RandomSteps: no forward
// pass). One iteration is one environment step.
func BenchmarkContinuousPendulum(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  ContinuousConfig
	}{
		{"noise=0.1", ContinuousConfig{}},
		{"random", ContinuousConfig{RandomSteps: 1 << 62}},
	} {
		b.Run(c.name, func(b *testing.B) {
			net, st := policy(b, 3, 1, []int{64, 64}, 1, 1)
			a, err := NewContinuous(c.cfg, mustEnv(b, "Pendulum-v1"), net, st)
			if err != nil {
				b.Fatal(err)
			}
			var t buffer.Transitions
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for a.steps < int64(b.N) {
				t.Obs, t.NextObs, t.ActionVec, t.Reward, t.Discount, t.Flags =
					t.Obs[:0], t.NextObs[:0], t.ActionVec[:0], t.Reward[:0], t.Discount[:0], t.Flags[:0]
				if err := a.Fill(ctx, &t); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(a.steps)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
