package learner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// shardTD3 is a TD3 learner of the default 64-64 networks (float32 or
// not) on a buffer of random transitions under the named method (uniform
// MSE or pal), on the given workers (nil: serial), an actor update every
// policyDelay steps.
func shardTD3(t *testing.T, f32 bool, method string, policyDelay int, w Workers) *TD3 {
	t.Helper()
	buf := contBuffer(t, 2048, 3, 2, 0)
	fillContinuous(t, buf, rand.New(rand.NewPCG(11, 11)), 2048, rigMaxA)
	actor, critic := td3Nets(t, 3, 2, []int{64, 64}, model.ReLU, 5)
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
		actor, critic = to32(actor), to32(critic)
	}
	l, err := NewTD3(TD3Config{MaxAction: rigMaxA, PolicyDelay: policyDelay, Seed: 9}, actor, critic, buf, td3Method(t, method, buf, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetWorkers(w); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestTD3ShardsMatchSerial: W shards give the serial step's critic and
// actor gradients, losses and |δ| up to the order of the sums over rows
// (tolerances as TestDQNShardsMatchSerial's). PolicyDelay 1 puts the actor
// update in the first step, through critics both learners updated alike.
func TestTD3ShardsMatchSerial(t *testing.T) {
	ctx := context.Background()
	for _, f32 := range []bool{false, true} {
		for _, method := range []string{"uniform", "pal"} {
			for _, w := range []int{2, 3} {
				t.Run(fmt.Sprintf("float32=%v/%s/W=%d", f32, method, w), func(t *testing.T) {
					tol := 1e-12
					if f32 {
						tol = 1e-5
					}
					// Delay 2: the critics' gradients after step 1; delay 1:
					// the actor's (the serial actorGrad overwrites critic 1's).
					pair := func(delay int) (ser, par *TD3) {
						ser, par = shardTD3(t, f32, method, delay, nil), shardTD3(t, f32, method, delay, SerialWorkers(w))
						if err := ser.Step(ctx); err != nil {
							t.Fatal(err)
						}
						if err := par.Step(ctx); err != nil {
							t.Fatal(err)
						}
						if !slices.Equal(ser.noise, par.noise) {
							t.Fatal("the smoothing noise differs: the sharded step drew the stream differently")
						}
						return ser, par
					}
					cs, cp := pair(2)
					ser, par := pair(1)
					for _, n := range []struct {
						name string
						a, b []float64
					}{
						{"critic 1 gradient", cs.critic[0].Grads(), cp.critic[0].Grads()},
						{"critic 2 gradient", cs.critic[1].Grads(), cp.critic[1].Grads()},
						{"actor gradient", ser.actor.Grads(), par.actor.Grads()},
					} {
						d, s := maxAbsDiff(n.a, n.b)
						t.Logf("%s: max |serial − sharded| %.3g relative", n.name, d/s)
						if s == 0 || d > tol*s {
							t.Errorf("%s: max |serial − sharded| = %g, max |serial| = %g", n.name, d, s)
						}
					}
					if d, s := maxAbsDiff(ser.absTD, par.absTD); d > tol*max(s, 1) {
						t.Errorf("|δ|: max diff %g (scale %g)", d, s)
					}
					ss, ps := ser.Stats(), par.Stats()
					if math.Abs(ss.CriticLoss-ps.CriticLoss) > tol*math.Abs(ss.CriticLoss) || math.Abs(ss.ActorLoss-ps.ActorLoss) > tol*math.Abs(ss.ActorLoss) {
						t.Errorf("losses: serial %v/%v, sharded %v/%v", ss.CriticLoss, ss.ActorLoss, ps.CriticLoss, ps.ActorLoss)
					}
				})
			}
		}
	}
}

// TestTD3ShardsBitIdentical: W = 1 is the serial step bit for bit, and
// W = 3 gives the same bits on one goroutine and on three, twice.
func TestTD3ShardsBitIdentical(t *testing.T) {
	ctx := context.Background()
	run := func(f32 bool, w Workers) []float64 {
		l := shardTD3(t, f32, "uniform", 2, w)
		for range 9 {
			if err := l.Step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		out := slices.Concat(l.actor.Params(), l.actorTarg.Params())
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

// TestTD3SetWorkersRefER: ReF-ER's TD3 refuses W > 1 and accepts 1.
func TestTD3SetWorkersRefER(t *testing.T) {
	l, _ := newTestTD3Refer(t, sampler.REFERConfig{C: 0.5}, 64, 2)
	if err := l.SetWorkers(SerialWorkers(2)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "ReF-ER") {
		t.Fatalf("ReF-ER TD3 with 2 workers: %v, want ErrConfig naming ReF-ER", err)
	}
	if err := l.SetWorkers(SerialWorkers(1)); err != nil {
		t.Fatal(err)
	}
}
