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
