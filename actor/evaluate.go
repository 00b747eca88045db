package actor

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
)

// Evaluate runs episodes greedy episodes on env and returns their mean
// undiscounted return and the returns in order. For a discrete action
// space it is EvaluateEpsilon with epsilon 0 (always the argmax of net's Q
// values, the first action on ties); for a Box it is EvaluateContinuous
// (net is a policy, played without noise). Gymnasium-style tasks are
// scored by the greedy policy, and with no exploration a fixed network and
// seed give a fixed score.
func Evaluate(ctx context.Context, env envs.Env, net *model.Net, store *model.Store, episodes int, seed uint64) (float64, []float64, error) {
	if env != nil {
		if _, ok := env.ActionSpace().(envs.Box); ok {
			return EvaluateContinuous(ctx, env, net, store, episodes, seed)
		}
	}
	return EvaluateEpsilon(ctx, env, net, store, episodes, seed, 0)
}

// EvaluateEpsilon is Evaluate with an epsilon-greedy policy (PER and the
// DQN papers evaluate Atari agents with a small epsilon such as 0.001 or
// 0.05, which keeps a deterministic policy from looping forever).
//
// When store holds a snapshot it is copied into net first; otherwise (nil
// or still empty) net is evaluated with the parameters it has. Episode
// seeds and exploration come from a PCG generator seeded with seed, so the
// same (network, seed) gives the same returns. Observations are rounded to
// float32 as an actor's are. The caller owns env and net for the duration
// (neither is safe for concurrent use: an evaluator goroutine needs its
// own). When ctx ends it returns ctx's error with the returns of the
// episodes completed so far. Cost: the episodes' steps, one forward pass
// of one observation each (unless exploring).
func EvaluateEpsilon(ctx context.Context, env envs.Env, net *model.Net, store *model.Store, episodes int, seed uint64, epsilon float64) (float64, []float64, error) {
	switch {
	case env == nil || net == nil:
		return 0, nil, fmt.Errorf("%w: Evaluate needs an environment and a network", ErrConfig)
	case episodes < 1:
		return 0, nil, fmt.Errorf("%w: Evaluate: episodes must be >= 1, got %d", ErrConfig, episodes)
	case !(epsilon >= 0 && epsilon <= 1):
		return 0, nil, fmt.Errorf("%w: Evaluate: epsilon must be in [0, 1], got %v", ErrConfig, epsilon)
	}
	obsDim, actions, err := shapes(env, net)
	if err != nil {
		return 0, nil, err
	}
	if err := loadSnapshot(net, store); err != nil {
		return 0, nil, err
	}
	rng := evalRNG(seed)
	return evaluate(ctx, env, obsDim, episodes, rng, func(obs []float32) (envs.Action, error) {
		if epsilon > 0 && rng.Float64() < epsilon {
			return envs.Action{Index: rng.IntN(actions)}, nil
		}
		return envs.Action{Index: model.Argmax(net.Forward32(obs))}, nil
	})
}

// EvaluateContinuous is Evaluate for a continuous action space: net is a
// deterministic policy, as NewContinuous takes it, and every action is
// ScaleAction(π(s)) with no noise, rounded to float32 inside the box as
// an actor's actions are. The Store, the seeding (episode seeds from a PCG
// seeded with seed: the same network and seed give the same returns), the
// ownership of env and net, the cancellation and the cost are as for
// EvaluateEpsilon. Errors wrap ErrConfig for an env and net that do not
// fit (see NewContinuous), model.ErrNonFinite for a policy that returns
// NaN.
func EvaluateContinuous(ctx context.Context, env envs.Env, net *model.Net, store *model.Store, episodes int, seed uint64) (float64, []float64, error) {
	switch {
	case env == nil || net == nil:
		return 0, nil, fmt.Errorf("%w: Evaluate needs an environment and a network", ErrConfig)
	case episodes < 1:
		return 0, nil, fmt.Errorf("%w: Evaluate: episodes must be >= 1, got %d", ErrConfig, episodes)
	}
	obsDim, box, err := boxShapes(env, net)
	if err != nil {
		return 0, nil, err
	}
	if err := loadSnapshot(net, store); err != nil {
		return 0, nil, err
	}
	act := make([]float64, box.Dim())
	return evaluate(ctx, env, obsDim, episodes, evalRNG(seed), func(obs []float32) (envs.Action, error) {
		ScaleAction(box, act, net.Forward32(obs))
		intoBox(box, act, nil)
		return envs.Action{Vec: act}, model.CheckFinite("policy action", act)
	})
}

// loadSnapshot copies store's snapshot, if any, into net.
func loadSnapshot(net *model.Net, store *model.Store) error {
	if store == nil {
		return nil
	}
	if p := store.Load(); p != nil {
		if err := net.SetParams(p); err != nil {
			return fmt.Errorf("actor: Evaluate: parameters version %d: %w", p.Version(), err)
		}
	}
	return nil
}

// evalRNG is the generator of an evaluation with seed.
func evalRNG(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(splitmix64(seed), splitmix64(seed^0x2545f4914f6cdd1d)))
}

// evaluate runs the episodes with policy, resetting env with seeds from
// rng, and returns their mean return and the returns.
func evaluate(ctx context.Context, env envs.Env, obsDim, episodes int, rng *rand.Rand, policy func(obs []float32) (envs.Action, error)) (float64, []float64, error) {
	obs := make([]float32, obsDim)
	load := func(x []float64) error {
		if len(x) != obsDim {
			return fmt.Errorf("actor: Evaluate: the environment returned %d observation values, want %d", len(x), obsDim)
		}
		for i, v := range x {
			obs[i] = float32(v)
		}
		return nil
	}
	done := ctx.Done()
	returns := make([]float64, 0, min(episodes, 1024)) // episodes may be huge: grow as they complete
	for range episodes {
		if err := load(env.Reset(rng.Uint64())); err != nil {
			return 0, returns, err
		}
		var ret float64
		for {
			select {
			case <-done:
				return mean(returns), returns, ctx.Err()
			default:
			}
			act, err := policy(obs)
			if err != nil {
				return 0, returns, fmt.Errorf("actor: Evaluate: %w", err)
			}
			res, err := env.Step(act)
			if err != nil {
				return 0, returns, fmt.Errorf("actor: Evaluate: %w", err)
			}
			ret += res.Reward
			if res.Done() {
				break
			}
			if err := load(res.Obs); err != nil {
				return 0, returns, err
			}
		}
		returns = append(returns, ret)
	}
	return mean(returns), returns, nil
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
