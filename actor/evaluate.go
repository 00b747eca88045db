package actor

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
)

// Evaluate runs episodes greedy episodes (epsilon 0: always the argmax of
// net's Q values, the first action on ties) on env and returns their mean
// undiscounted return and the returns in order. It is EvaluateEpsilon with
// epsilon 0: Gymnasium-style tasks are scored by the greedy policy, and
// with no exploration a fixed network and seed give a fixed score.
func Evaluate(ctx context.Context, env envs.Env, net *model.Net, store *model.Store, episodes int, seed uint64) (float64, []float64, error) {
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
	if store != nil {
		if p := store.Load(); p != nil {
			if err := net.SetParams(p); err != nil {
				return 0, nil, fmt.Errorf("actor: Evaluate: parameters version %d: %w", p.Version(), err)
			}
		}
	}
	rng := rand.New(rand.NewPCG(splitmix64(seed), splitmix64(seed^0x2545f4914f6cdd1d)))
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
	returns := make([]float64, 0, episodes)
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
			var act int
			if epsilon > 0 && rng.Float64() < epsilon {
				act = rng.IntN(actions)
			} else {
				act = model.Argmax(net.Forward32(obs))
			}
			res, err := env.Step(envs.Action{Index: act})
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
