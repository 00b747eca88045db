package learner

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apexrl/apex/model"
)

// shardSAC is a SAC learner of 64-64 networks (float32 or not) on random
// transitions under the named method, on the given workers (nil: serial).
func shardSAC(t *testing.T, f32 bool, method string, w Workers) *SAC {
	t.Helper()
	buf := contBuffer(t, 2048, 3, 2, 0)
	fillContinuous(t, buf, rand.New(rand.NewPCG(11, 11)), 2048, rigMaxA)
	policy, critic := sacNets(t, 3, 2, []int{64, 64}, model.ReLU, 5)
	if f32 {
		to32 := func(n *model.Net) *model.Net {
			c := n.Config()
			c.Float32 = true
			m, err := model.NewNet(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			m.CopyFrom(n)
			return m
		}
		policy, critic = to32(policy), to32(critic)
	}
	l, err := NewSAC(SACConfig{MaxAction: rigMaxA, Seed: 9}, policy, critic, buf, td3Method(t, method, buf, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetWorkers(w); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestSACShardsMatchSerial: after one step on W shards, the policy's
// gradient, log π, |δ|, the losses and the critics' updated parameters
// match the serial step's up to the order of the sums over rows
// (tolerances as TestDQNShardsMatchSerial's; the critics' gradients
// themselves are overwritten by the policy phase in the serial step).
func TestSACShardsMatchSerial(t *testing.T) {
	ctx := context.Background()
	for _, f32 := range []bool{false, true} {
		for _, method := range []string{"uniform", "pal"} {
			for _, w := range []int{2, 3} {
				t.Run(fmt.Sprintf("float32=%v/%s/W=%d", f32, method, w), func(t *testing.T) {
					tol := 1e-12
					if f32 {
						tol = 1e-5
					}
					ser, par := shardSAC(t, f32, method, nil), shardSAC(t, f32, method, SerialWorkers(w))
					if err := ser.Step(ctx); err != nil {
						t.Fatal(err)
					}
					if err := par.Step(ctx); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(ser.epsN, par.epsN) || !slices.Equal(ser.epsP, par.epsP) {
						t.Fatal("the noise differs: the sharded step drew the stream differently")
					}
					for _, n := range []struct {
						name string
						a, b []float64
					}{
						{"policy gradient", ser.policy.Grads(), par.policy.Grads()},
						{"critic 1 parameters", ser.critic[0].Params(), par.critic[0].Params()},
						{"critic 2 parameters", ser.critic[1].Params(), par.critic[1].Params()},
						{"policy parameters", ser.policy.Params(), par.policy.Params()},
						{"log π", ser.logp, par.logp},
						{"|δ|", ser.absTD, par.absTD},
					} {
						d, s := maxAbsDiff(n.a, n.b)
						t.Logf("%s: max |serial − sharded| %.3g relative", n.name, d/s)
						if s == 0 || d > tol*s {
							t.Errorf("%s: max |serial − sharded| = %g, max |serial| = %g", n.name, d, s)
						}
					}
					ss, ps := ser.Stats(), par.Stats()
					for _, v := range [][2]float64{{ss.CriticLoss, ps.CriticLoss}, {ss.PolicyLoss, ps.PolicyLoss}, {ss.AlphaLoss, ps.AlphaLoss}} {
						if math.Abs(v[0]-v[1]) > tol*math.Abs(v[0]) {
							t.Errorf("losses: serial %+v, sharded %+v", ss, ps)
						}
					}
				})
			}
		}
	}
}

// TestSACShardsBitIdentical: W = 1 is the serial step bit for bit, and
// W = 3 gives the same bits on one goroutine and on three, twice.
func TestSACShardsBitIdentical(t *testing.T) {
	ctx := context.Background()
	run := func(f32 bool, w Workers) []float64 {
		l := shardSAC(t, f32, "uniform", w)
		for range 6 {
			if err := l.Step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		out := slices.Concat(l.policy.Params(), l.logAlpha)
		for k := range 2 {
			out = slices.Concat(out, l.critic[k].Params(), l.criticTarg[k].Params())
		}
		return out
	}
	for _, f32 := range []bool{false, true} {
		if !slices.Equal(run(f32, nil), run(f32, SerialWorkers(1))) {
			t.Errorf("float32=%v: W = 1 differs from the serial step", f32)
		}
		a, b := run(f32, SerialWorkers(3)), run(f32, goWorkers(3))
		if !slices.Equal(a, b) || !slices.Equal(b, run(f32, goWorkers(3))) {
			t.Errorf("float32=%v: W = 3 runs differ", f32)
		}
	}
}
