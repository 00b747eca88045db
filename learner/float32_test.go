package learner

import (
	"math/rand/v2"
	"testing"
)

// TestFloat32Nets: the learners run on float32 networks (model.Config's
// Float32) as given, build their twins and targets in float32 too, and
// their steps keep the parameters finite and moving.
func TestFloat32Nets(t *testing.T) {
	t.Run("dqn", func(t *testing.T) {
		nc := benchCfg
		nc.Float32 = true
		r := newRig(t, DQNConfig{Batch: 32, TargetEvery: 5}, nc, 4096)
		before := append([]float64(nil), r.l.Net().Params()...)
		for range 20 {
			if err := r.l.Step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if !r.l.Net().Config().Float32 || !r.l.Target().Config().Float32 {
			t.Error("the online or target network is not float32")
		}
		if err := r.l.Net().CheckFinite(); err != nil {
			t.Fatal(err)
		}
		if moved(before, r.l.Net().Params()) == 0 {
			t.Error("20 steps left every parameter unchanged")
		}
	})
	t.Run("td3", func(t *testing.T) {
		buf := contBuffer(t, 4096, 3, 1, 0)
		fillContinuous(t, buf, rand.New(rand.NewPCG(1, 1)), 4096, 2)
		actor, critic := td3Nets(t, 3, 1, []int{32, 32}, 0, 1)
		l, err := NewTD3(TD3Config{Batch: 32, MaxAction: 2}, float32Net(t, actor), float32Net(t, critic), buf, td3Method(t, "uniform", buf, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		before := append([]float64(nil), l.Actor().Params()...)
		td3Steps(t, l, 20)
		at, cs := l.Targets()
		if !at.Config().Float32 || !cs[0].Config().Float32 || !l.Critics()[1].Config().Float32 {
			t.Error("a target or the twin critic is not float32")
		}
		if moved(before, l.Actor().Params()) == 0 {
			t.Error("20 steps left every actor parameter unchanged")
		}
	})
	t.Run("sac", func(t *testing.T) {
		buf := contBuffer(t, 4096, 3, 1, 0)
		fillContinuous(t, buf, rand.New(rand.NewPCG(1, 1)), 4096, 2)
		policy, critic := sacNets(t, 3, 1, []int{32, 32}, 0, 1)
		l, err := NewSAC(SACConfig{Batch: 32, MaxAction: 2}, float32Net(t, policy), float32Net(t, critic), buf, td3Method(t, "uniform", buf, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		before := append([]float64(nil), l.Policy().Params()...)
		sacSteps(t, l, 20)
		if !l.Targets()[1].Config().Float32 {
			t.Error("the twin target critic is not float32")
		}
		if moved(before, l.Policy().Params()) == 0 {
			t.Error("20 steps left every policy parameter unchanged")
		}
	})
}

// moved counts the entries that differ.
func moved(a, b []float64) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}
