package f32_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/model/internal/f32"
)

// BenchmarkTD3Math: the network math of one TD3 learner step
// (learner.TD3.Step, BenchmarkTD3Step's Pendulum shapes: actor
// 3→64→64→1 tanh, twin critics 4→64→64→1, batch 256, policy delay 2), in
// float64 on model (impl=float64) and in float32 on this package's
// kernels: the target actor on s', both target critics on [s', a'], both
// critics forward, MSE, backward and Adam; every second step the actor
// through the first critic (BackwardInput), its Adam step and three Polyak
// updates. Sampling, noise draws, priorities and statistics are left out
// on both sides; ns/op is per step, the delayed part averaged in.
func BenchmarkTD3Math(b *testing.B) {
	const bsz, nS, nA, maxA, tau = 256, 3, 1, 2.0, 0.005
	rng := rand.New(rand.NewPCG(3, 3))
	obs, next := randF64(rng, bsz*nS), randF64(rng, bsz*nS)
	act, rew, disc := randF64(rng, bsz*nA), randF64(rng, bsz), randF64(rng, bsz)
	noise := randF64(rng, bsz*nA)
	actorCfg := model.Config{In: nS, Hidden: []int{64, 64}, Out: nA, OutAct: model.Tanh}
	criticCfg := model.Config{In: nS + nA, Hidden: []int{64, 64}, Out: 1}

	b.Run("impl=float64", func(b *testing.B) {
		r := rand.New(rand.NewPCG(1, 1))
		actor, _ := model.NewNet(actorCfg, r)
		actorT := actor.Clone()
		var critic, criticT [2]*model.Net
		var cAdam [2]*model.Adam
		for k := range critic {
			critic[k], _ = model.NewNet(criticCfg, r)
			criticT[k] = critic[k].Clone()
			cAdam[k], _ = model.NewAdam(critic[k].NumParams(), model.AdamConfig{LR: 3e-4})
		}
		aAdam, _ := model.NewAdam(actor.NumParams(), model.AdamConfig{LR: 3e-4})
		xn, xa, xp := make([]float64, bsz*(nS+nA)), make([]float64, bsz*(nS+nA)), make([]float64, bsz*(nS+nA))
		join(xa, obs, act, 1, nS, nA)
		y, grad, dqa, du := make([]float64, bsz), make([][]float64, 2), make([]float64, bsz), make([]float64, bsz*nA)
		grad[0], grad[1] = make([]float64, bsz), make([]float64, bsz)
		for i := range dqa {
			dqa[i] = -1.0 / bsz
		}
		step := 0
		b.ReportAllocs()
		for b.Loop() {
			step++
			u := actorT.Forward(next)
			join(xn, next, u, maxA, nS, nA)
			for i := range bsz {
				p := &xn[i*(nS+nA)+nS]
				*p = max(-maxA, min(maxA, *p+noise[i]))
			}
			copy(y, criticT[0].Forward(xn))
			qt := criticT[1].Forward(xn)
			for i := range y {
				y[i] = rew[i] + disc[i]*min(y[i], qt[i])
			}
			for k, c := range critic {
				model.Loss{Kind: model.MSE}.Value(grad[k], c.Forward(xa), y, nil)
				c.Backward(grad[k])
				if _, err := cAdam[k].Step(c.Params(), c.Grads()); err != nil {
					b.Fatal(err)
				}
			}
			if step%2 == 0 {
				u := actor.Forward(obs)
				join(xp, obs, u, maxA, nS, nA)
				critic[0].Forward(xp)
				dx := critic[0].BackwardInput(dqa)
				for i := range bsz {
					du[i] = maxA * dx[i*(nS+nA)+nS]
				}
				actor.Backward(du)
				if _, err := aAdam.Step(actor.Params(), actor.Grads()); err != nil {
					b.Fatal(err)
				}
				actorT.SoftUpdate(actor, tau)
				for k := range critic {
					criticT[k].SoftUpdate(critic[k], tau)
				}
			}
		}
	})

	for _, impl := range []f32.Impl{f32.AVX512, f32.AVX2, f32.Portable} {
		if !impl.Available() {
			continue
		}
		b.Run(fmt.Sprintf("impl=%v", impl), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			mlp := func(cfg model.Config) (*f32.MLP, *f32.MLP) {
				n64, _ := model.NewNet(cfg, r)
				c, _ := cfg.Validate()
				layers := []f32.Layer{{In: c.In, Out: 64, Act: f32.ReLU}, {In: 64, Out: 64, Act: f32.ReLU}, {In: 64, Out: c.Out, Act: f32.Act(c.OutAct)}}
				n, _ := f32.NewMLP(layers, impl)
				t, _ := f32.NewMLP(layers, impl)
				for i, v := range n64.Params() {
					n.Params()[i] = float32(v)
				}
				copy(t.Params(), n.Params())
				return n, t
			}
			actor, actorT := mlp(actorCfg)
			var critic, criticT [2]*f32.MLP
			var cAdam [2]*f32.Adam
			for k := range critic {
				critic[k], criticT[k] = mlp(criticCfg)
				cAdam[k], _ = f32.NewAdam(len(critic[k].Params()), f32.AdamConfig{LR: 3e-4}, impl)
			}
			aAdam, _ := f32.NewAdam(len(actor.Params()), f32.AdamConfig{LR: 3e-4}, impl)
			obs32, next32, rew32, disc32, noise32 := to32(obs), to32(next), to32(rew), to32(disc), to32(noise)
			xn, xa, xp := make([]float32, bsz*(nS+nA)), make([]float32, bsz*(nS+nA)), make([]float32, bsz*(nS+nA))
			join32(xa, obs32, to32(act), 1, nS, nA)
			y, dqa, du := make([]float32, bsz), make([]float32, bsz), make([]float32, bsz*nA)
			grad := [2][]float32{make([]float32, bsz), make([]float32, bsz)}
			for i := range dqa {
				dqa[i] = -1.0 / bsz
			}
			step := 0
			b.ReportAllocs()
			for b.Loop() {
				step++
				u := actorT.Forward(next32)
				join32(xn, next32, u, maxA, nS, nA)
				for i := range bsz {
					p := &xn[i*(nS+nA)+nS]
					*p = max(-maxA, min(maxA, *p+noise32[i]))
				}
				copy(y, criticT[0].Forward(xn))
				qt := criticT[1].Forward(xn)
				for i := range y {
					y[i] = rew32[i] + disc32[i]*min(y[i], qt[i])
				}
				for k, c := range critic {
					f32.Loss{Kind: f32.MSE}.Value(grad[k], c.Forward(xa), y, nil)
					c.Backward(grad[k])
					if _, err := cAdam[k].Step(c.Params(), c.Grads()); err != nil {
						b.Fatal(err)
					}
				}
				if step%2 == 0 {
					u := actor.Forward(obs32)
					join32(xp, obs32, u, maxA, nS, nA)
					critic[0].Forward(xp)
					dx := critic[0].BackwardInput(dqa)
					for i := range bsz {
						du[i] = maxA * dx[i*(nS+nA)+nS]
					}
					actor.Backward(du)
					if _, err := aAdam.Step(actor.Params(), actor.Grads()); err != nil {
						b.Fatal(err)
					}
					impl.Polyak(actorT.Params(), actor.Params(), tau)
					for k := range critic {
						impl.Polyak(criticT[k].Params(), critic[k].Params(), tau)
					}
				}
			}
		})
	}
}

func randF64(rng *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = 2*rng.Float64() - 1
	}
	return s
}

// join writes rows [s, scale·a] of widths nS and nA into dst.
func join(dst, s, a []float64, scale float64, nS, nA int) {
	for i := range len(s) / nS {
		copy(dst[i*(nS+nA):], s[i*nS:(i+1)*nS])
		for j := range nA {
			dst[i*(nS+nA)+nS+j] = scale * a[i*nA+j]
		}
	}
}

func join32(dst, s, a []float32, scale float32, nS, nA int) {
	for i := range len(s) / nS {
		copy(dst[i*(nS+nA):], s[i*nS:(i+1)*nS])
		for j := range nA {
			dst[i*(nS+nA)+nS+j] = scale * a[i*nA+j]
		}
	}
}
