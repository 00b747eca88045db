package actor

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
)

func TestEvaluateCartPoleUntrained(t *testing.T) {
	cfg := model.Config{In: 4, Hidden: []int{64, 64}, Out: 2}
	net, st := glorot(t, cfg, 8)
	env := mustEnv(t, "CartPole-v1")
	mean, returns, err := Evaluate(context.Background(), env, net, st, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(returns) != 5 || math.IsNaN(mean) || math.IsInf(mean, 0) || mean < 1 || mean > 500 {
		t.Fatalf("mean %v returns %v", mean, returns)
	}
	var sum float64
	for _, r := range returns {
		sum += r
	}
	if mean != sum/5 {
		t.Fatalf("mean %v of %v", mean, returns)
	}
	// Greedy and seeded: the same returns again, with or without the Store
	// (net now holds the snapshot).
	if m2, r2, _ := Evaluate(context.Background(), env, net, nil, 5, 1); m2 != mean || !reflect.DeepEqual(r2, returns) {
		t.Fatalf("second evaluation %v %v, first %v %v", m2, r2, mean, returns)
	}
	// With exploration it still ends and stays in range.
	if m3, _, err := EvaluateEpsilon(context.Background(), env, net, st, 3, 2, 0.05); err != nil || m3 < 1 || m3 > 500 {
		t.Fatalf("epsilon 0.05: %v %v", m3, err)
	}
}

func TestEvaluateGreedyPolicy(t *testing.T) {
	const n = 7
	net, st := linear(t, n, 2, nchainWeights(n, func(int) int { return envs.NChainForward }))
	mean, returns, err := Evaluate(context.Background(), mustEnv(t, "NChain", envs.WithSize(n)), net, st, 3, 0)
	if err != nil || mean != 1 || !reflect.DeepEqual(returns, []float64{1, 1, 1}) {
		t.Fatalf("forward policy on NChain: %v %v %v", mean, returns, err)
	}
	// Backward-only never reaches the goal: every episode hits the limit.
	net, st = linear(t, n, 2, nchainWeights(n, func(int) int { return envs.NChainBackward }))
	if mean, _, err := Evaluate(context.Background(), mustEnv(t, "NChain", envs.WithSize(n), envs.WithMaxSteps(20)), net, st, 2, 0); err != nil || mean != 0 {
		t.Fatalf("backward policy: %v %v", mean, err)
	}
}

func TestEvaluateErrors(t *testing.T) {
	net, _ := model.NewNet(model.Config{In: 4, Out: 2}, nil)
	env := mustEnv(t, "CartPole-v1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Evaluate(ctx, env, net, nil, 3, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	for _, c := range []struct {
		env      envs.Env
		episodes int
		eps      float64
	}{{env, 0, 0}, {env, 1, -0.1}, {env, 1, 2}, {mustEnv(t, "Acrobot-v1"), 1, 0}, {nil, 1, 0}} {
		if _, _, err := EvaluateEpsilon(context.Background(), c.env, net, nil, c.episodes, 0, c.eps); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", c, err)
		}
	}
}

// TestEvaluateContinuous: Evaluate dispatches a Box to EvaluateContinuous,
// which plays ScaleAction(π(s)) without noise (rounded to float32 inside
// the box), so a seed gives the same returns every time.
func TestEvaluateContinuous(t *testing.T) {
	net, st := policy(t, 3, 1, []int{16}, 1, 11)
	rec := &actionRecorder{Env: mustEnv(t, "Pendulum-v1")}
	ctx := context.Background()
	mean, returns, err := Evaluate(ctx, rec, net, st, 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(returns) != 3 || len(rec.actions) != 3*200 || mean != (returns[0]+returns[1]+returns[2])/3 || !(mean < 0) {
		t.Fatalf("mean %v returns %v after %d steps", mean, returns, len(rec.actions))
	}
	ref, _ := model.NewNet(net.Config(), nil)
	ref.CopyFrom(net)
	box := envs.Box{Low: []float64{-2}, High: []float64{2}}
	for i, o := range rec.obs {
		a := make([]float64, 1)
		ScaleAction(box, a, ref.Forward32([]float32{float32(o[0]), float32(o[1]), float32(o[2])}))
		intoBox(box, a, nil)
		if rec.actions[i][0] != a[0] {
			t.Fatalf("step %d: played %v, the deterministic policy gives %v", i, rec.actions[i], a)
		}
	}
	m2, r2, err := EvaluateContinuous(ctx, mustEnv(t, "Pendulum-v1"), net, nil, 3, 5)
	if err != nil || m2 != mean || !reflect.DeepEqual(r2, returns) {
		t.Fatalf("again with seed 5: %v %v %v; first %v %v", m2, r2, err, mean, returns)
	}
	if _, r3, _ := EvaluateContinuous(ctx, mustEnv(t, "Pendulum-v1"), net, nil, 3, 6); reflect.DeepEqual(r3, returns) {
		t.Fatal("seeds 5 and 6 gave the same returns")
	}

	ident, _ := model.NewNet(model.Config{In: 3, Out: 1}, nil)
	cart, _ := model.NewNet(model.Config{In: 4, Out: 2, OutAct: model.Tanh}, nil)
	for _, c := range []struct {
		name     string
		env      envs.Env
		net      *model.Net
		episodes int
	}{
		{"no episodes", mustEnv(t, "Pendulum-v1"), net, 0},
		{"unbounded output", mustEnv(t, "Pendulum-v1"), ident, 1},
		{"discrete actions", mustEnv(t, "CartPole-v1"), cart, 1},
		{"nil env", nil, net, 1},
		{"nil net", mustEnv(t, "Pendulum-v1"), nil, 1},
	} {
		if _, _, err := EvaluateContinuous(ctx, c.env, c.net, nil, c.episodes, 0); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", c.name, err)
		}
	}
	w := make([]float64, net.NumParams())
	w[len(w)-1] = math.NaN()
	var bad model.Store
	bad.Publish(model.NewParams(2, w))
	if _, _, err := Evaluate(ctx, mustEnv(t, "Pendulum-v1"), net, &bad, 1, 0); !errors.Is(err, model.ErrNonFinite) {
		t.Errorf("NaN policy: %v, want model.ErrNonFinite", err)
	}
}
