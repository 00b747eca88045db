package actor

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// gaussNet returns a V-RACER-shaped network (in → 8 → 1+2A, Softsign)
// whose weights are all 0, so that V, the mean and the std are its output
// biases: V = v, mean = mean, std = std, whatever the state. A Store holds
// it as version 1; the actor's own copy starts empty.
func gaussNet(t testing.TB, in int, v float64, mean, std []float64) (*model.Net, *model.Store) {
	t.Helper()
	A := len(mean)
	cfg := model.Config{In: in, Hidden: []int{8}, Out: 1 + 2*A, Act: model.Softsign}
	src, err := model.NewNet(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := src.Params()
	b := p[len(p)-(1+2*A):]
	b[0] = v
	for j := range A {
		b[1+j], b[1+A+j] = mean[j], model.GaussStdParam(std[j])
	}
	net, _ := model.NewNet(cfg, nil)
	var st model.Store
	st.Publish(src.Snapshot(1))
	return net, &st
}

// gaussFloats are the float columns of the tests' buffer: an unrelated
// column first, then ReF-ER's for 2 action dimensions.
func gaussFloats() []buffer.FloatColumn {
	return append([]buffer.FloatColumn{{Name: "other", Width: 3}}, sampler.REFERColumns(2)...)
}

// gaussBehaviour indexes ReF-ER's columns in gaussFloats.
func gaussBehaviour() *Behaviour { return &Behaviour{Mean: 1, Std: 2, Boot: 3} }

func TestGaussianConfig(t *testing.T) {
	env := newBoxEnv()
	net, store := gaussNet(t, 2, 0, []float64{0, 0}, []float64{1, 1})
	good := GaussianConfig{Columns: Columns{Episode: true}, Floats: gaussFloats(), Behaviour: gaussBehaviour()}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := NewGaussian(good, env, net, store)
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Config(); c.RefreshEvery != DefaultGaussianRefreshEvery || c.Gamma != 0.99 || c.LocalBatch != 50 {
		t.Fatalf("defaults %+v", c)
	}
	wide, _ := gaussNet(t, 2, 0, []float64{0, 0, 0}, []float64{1, 1, 1})
	disc := mustEnv(t, "CartPole-v1")
	for name, c := range map[string]struct {
		cfg GaussianConfig
		env envs.Env
		net *model.Net
	}{
		"no episode columns": {GaussianConfig{Floats: gaussFloats(), Behaviour: gaussBehaviour()}, env, net},
		"no REFER columns":   {GaussianConfig{Columns: Columns{Episode: true}}, env, net},
		"no Behaviour":       {GaussianConfig{Columns: Columns{Episode: true}, Floats: gaussFloats()}, env, net},
		"Behaviour outside Floats": {GaussianConfig{Columns: Columns{Episode: true}, Floats: gaussFloats(),
			Behaviour: &Behaviour{Mean: 1, Std: 2, Boot: 4}}, env, net},
		"Behaviour of the wrong width": {GaussianConfig{Columns: Columns{Episode: true}, Floats: gaussFloats(),
			Behaviour: &Behaviour{Mean: 0, Std: 2, Boot: 3}}, env, net},
		"Behaviour on one column twice": {GaussianConfig{Columns: Columns{Episode: true}, Floats: gaussFloats(),
			Behaviour: &Behaviour{Mean: 1, Std: 1, Boot: 3}}, env, net},
		"wrong width":      {good, env, wide},
		"discrete actions": {good, disc, net},
		"bad gamma":        {GaussianConfig{Columns: Columns{Episode: true}, Floats: gaussFloats(), Behaviour: gaussBehaviour(), Gamma: 2}, env, net},
	} {
		if _, err := NewGaussian(c.cfg, c.env, c.net, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// TestGaussianFill: the stored columns are the behaviour (mean and std),
// the unclipped sample within 3 std of the mean, V(s_T) on truncated
// ends only, discount gamma (0 at terminations), single steps in episode
// order; the environment receives the sample scaled onto the box and
// clipped; the batch goes into a buffer as it is.
func TestGaussianFill(t *testing.T) {
	env := newBoxEnv()
	mean, std := []float64{0.5, -0.2}, []float64{0.8, 0.3}
	net, store := gaussNet(t, 2, 1.25, mean, std)
	g, err := NewGaussian(GaussianConfig{Columns: Columns{Episode: true}, Floats: gaussFloats(), Behaviour: gaussBehaviour(), LocalBatch: 7, Gamma: 0.9, Seed: 3}, env, net, store)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := buffer.New(buffer.Config{Capacity: 1024, ObsDim: 2, Action: buffer.Continuous, ActionDim: 2, Episode: true, Floats: gaussFloats()})
	if err != nil {
		t.Fatal(err)
	}
	var all buffer.Transitions
	for range 30 {
		var b buffer.Transitions
		if err := g.Fill(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if b.Len() != 7 || len(b.Floats) != 4 || len(b.Floats[0]) != 21 || len(b.Floats[1]) != 14 || len(b.Floats[3]) != 7 {
			t.Fatalf("batch of %d, floats %d", b.Len(), len(b.Floats))
		}
		if err := buf.Insert(&b); err != nil {
			t.Fatal(err)
		}
		appendAll(&all, &b)
		if all.Floats == nil {
			all.Floats = make([][]float32, 4)
		}
		for i := range b.Floats {
			all.Floats[i] = append(all.Floats[i], b.Floats[i]...)
		}
	}
	n := all.Len()
	if n != 210 || len(env.steps) < n {
		t.Fatalf("%d transitions, %d environment steps", n, len(env.steps))
	}
	box := env.box
	var trunc, term int
	for i := range n {
		st := env.steps[i]
		last := all.Flags[i] != 0
		for j := range 2 {
			a := float64(all.ActionVec[2*i+j])
			if all.Floats[1][2*i+j] != float32(mean[j]) || math.Abs(float64(all.Floats[2][2*i+j])-std[j]) > 1e-6 {
				t.Fatalf("step %d: stored μ (%v, %v), want (%v, %v)", i, all.Floats[1][2*i+j], all.Floats[2][2*i+j], mean[j], std[j])
			}
			if math.Abs(a-mean[j]) > 3*std[j]+1e-6 {
				t.Fatalf("step %d: sample %v beyond 3 std of %v", i, a, mean[j])
			}
			sent := box.Low[j]/2 + box.High[j]/2 + (box.High[j]/2-box.Low[j]/2)*a
			sent = max(box.Low[j], min(box.High[j], sent))
			if math.Abs(st.action[j]-sent) > 1e-5*max(1, math.Abs(sent)) {
				t.Fatalf("step %d: sent %v, want the scaled and clipped sample %v", i, st.action[j], sent)
			}
		}
		if all.Floats[0][3*i] != 0 {
			t.Fatal("other float column not zero")
		}
		boot := all.Floats[3][i]
		switch {
		case all.Flags[i] == buffer.FlagTruncated:
			trunc++
			if boot != 1.25 || all.Discount[i] != 0.9 {
				t.Fatalf("step %d: truncated end with V(s_T) %v, discount %v", i, boot, all.Discount[i])
			}
		case all.Flags[i] == buffer.FlagTerminal:
			term++
			if boot != 0 || all.Discount[i] != 0 {
				t.Fatalf("step %d: terminal end with boot %v, discount %v", i, boot, all.Discount[i])
			}
		case boot != 0 || all.Discount[i] != 0.9:
			t.Fatalf("step %d: boot %v, discount %v", i, boot, all.Discount[i])
		}
		if float64(all.Reward[i]) != float64(float32(st.res.Reward)) || (last != st.res.Done()) {
			t.Fatalf("step %d: reward %v flags %d, environment %+v", i, all.Reward[i], all.Flags[i], st.res)
		}
		if i > 0 && all.EpisodeID[i] == all.EpisodeID[i-1] && all.EpisodeStep[i] != all.EpisodeStep[i-1]+1 {
			t.Fatalf("step %d: episode step %d after %d", i, all.EpisodeStep[i], all.EpisodeStep[i-1])
		}
	}
	if trunc == 0 || term == 0 {
		t.Fatalf("%d truncated and %d terminated episodes", trunc, term)
	}
	// The buffer's REFER stage assembles the episodes.
	r, err := sampler.NewREFER(buf, sampler.REFERConfig{})
	if err != nil {
		t.Fatal(err)
	}
	bt, err := buf.NewBatch(8)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Sample(rand.New(rand.NewPCG(1, 1)), bt); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Episodes < trunc+term-1 || st.Malformed != 0 {
		t.Fatalf("stage %+v after %d episodes", st, trunc+term)
	}
}

// TestGaussianBehaviourDistribution: the samples follow the stored
// behaviour, a normal truncated at 3 std (variance 0.97334·std²).
func TestGaussianBehaviourDistribution(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	const n = 200000
	var s1, s2 float64
	for range n {
		z := TruncatedNormal(rng, 3)
		if z < -3 || z > 3 {
			t.Fatalf("draw %v outside ±3", z)
		}
		s1 += z
		s2 += z * z
	}
	mean, v := s1/n, s2/n-(s1/n)*(s1/n)
	// Var of N(0,1) truncated to ±3: 1 − 2·3·φ(3)/(2Φ(3) − 1).
	want := 1 - 6*math.Exp(-4.5)/math.Sqrt(2*math.Pi)/math.Erf(3/math.Sqrt2)
	if math.Abs(mean) > 0.01 || math.Abs(v-want) > 0.01 {
		t.Fatalf("mean %v, variance %v (want 0, %v)", mean, v, want)
	}

	env := newBoxEnv()
	net, store := gaussNet(t, 2, 0, []float64{0.3, -0.1}, []float64{0.5, 0.2})
	g, err := NewGaussian(GaussianConfig{Columns: Columns{Episode: true}, Floats: gaussFloats(), Behaviour: gaussBehaviour(), Seed: 9}, env, net, store)
	if err != nil {
		t.Fatal(err)
	}
	var m, q [2]float64
	const k = 4000
	for range k {
		g.SelectAction([]float32{1, 2})
		mu, sd, a := g.Behaviour()
		for j := range 2 {
			z := (a[j] - mu[j]) / sd[j]
			m[j] += z
			q[j] += z * z
		}
	}
	for j := range 2 {
		if math.Abs(m[j]/k) > 0.06 || math.Abs(q[j]/k-want) > 0.08 {
			t.Fatalf("dimension %d: standardised sample mean %v, second moment %v", j, m[j]/k, q[j]/k)
		}
	}
}

// TestGaussianRefresh: a new snapshot reaches the behaviour within
// RefreshEvery steps.
func TestGaussianRefresh(t *testing.T) {
	env := newBoxEnv()
	net, store := gaussNet(t, 2, 0, []float64{0, 0}, []float64{0.5, 0.5})
	g, err := NewGaussian(GaussianConfig{Columns: Columns{Episode: true}, Floats: gaussFloats(), Behaviour: gaussBehaviour(), LocalBatch: 5, RefreshEvery: 5}, env, net, store)
	if err != nil {
		t.Fatal(err)
	}
	var b buffer.Transitions
	if err := g.Fill(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	_, st2 := gaussNet(t, 2, 0, []float64{0.7, 0.7}, []float64{0.5, 0.5})
	store.Publish(model.NewParams(2, st2.Load().Weights()))
	for range 2 {
		b = buffer.Transitions{}
		if err := g.Fill(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	if b.Floats[1][0] != 0.7 || g.Stats().ParamLoads != 2 {
		t.Fatalf("stored mean %v after a refresh, loads %d", b.Floats[1][0], g.Stats().ParamLoads)
	}
}

// TestEvaluateGaussian: the evaluation plays the policy's mean, scaled onto
// the box and clipped.
func TestEvaluateGaussian(t *testing.T) {
	env := newBoxEnv()
	net, store := gaussNet(t, 2, 0, []float64{0.25, 3}, []float64{1, 1})
	mean, rets, err := EvaluateGaussian(context.Background(), env, net, store, 4, 7)
	if err != nil {
		t.Fatal(err)
	}
	a0 := 1 + 2*0.25 // mid + half·0.25 on [-1, 3]
	for i, s := range env.steps {
		if s.action[0] != a0 || s.action[1] != 10 { // 5 + 5·3 clipped to 10
			t.Fatalf("step %d: action %v", i, s.action)
		}
	}
	var sum float64
	for _, r := range rets {
		sum += r
	}
	if len(rets) != 4 || math.Abs(mean-sum/4) > 1e-12 {
		t.Fatalf("mean %v of %v", mean, rets)
	}
	if _, _, err := EvaluateGaussian(context.Background(), mustEnv(t, "CartPole-v1"), net, nil, 1, 1); !errors.Is(err, ErrConfig) {
		t.Fatalf("discrete env: %v", err)
	}
}
