package actor

import (
	"context"
	"fmt"
	"math"

	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
)

// EvaluateGaussian is Evaluate for a Gaussian policy network as
// NewGaussian takes it (V-RACER's: outputs laid out as
// model.GaussianHead): every action is the policy's mean, ScaleAction(
// m(s)) clipped to the box, with no noise, as V-RACER's policy is scored.
// The Store, the seeding (the same network and seed give the same
// returns), the ownership of env and net, the cancellation and the cost
// are as for EvaluateEpsilon. Errors wrap ErrConfig for an env and net
// that do not fit, model.ErrNonFinite for a policy that returns NaN.
func EvaluateGaussian(ctx context.Context, env envs.Env, net *model.Net, store *model.Store, episodes int, seed uint64) (float64, []float64, error) {
	switch {
	case env == nil || net == nil:
		return 0, nil, fmt.Errorf("%w: EvaluateGaussian needs an environment and a network", ErrConfig)
	case episodes < 1:
		return 0, nil, fmt.Errorf("%w: EvaluateGaussian: episodes must be >= 1, got %d", ErrConfig, episodes)
	}
	box, ok := env.ActionSpace().(envs.Box)
	if !ok || box.Dim() < 1 || len(box.High) != box.Dim() {
		return 0, nil, fmt.Errorf("%w: EvaluateGaussian needs a Box action space, got %v", ErrConfig, env.ActionSpace())
	}
	for j := range box.Dim() {
		if math.IsInf(box.Low[j], 0) || math.IsInf(box.High[j], 0) || !(box.Low[j] <= box.High[j]) {
			return 0, nil, fmt.Errorf("%w: the action space %v is not a bounded box", ErrConfig, box)
		}
	}
	head := model.GaussianHead{Dim: box.Dim()}
	obsDim := env.ObservationSpace().Dim()
	if net.In() != obsDim || net.Out() != head.Width() {
		return 0, nil, fmt.Errorf("%w: network %d→%d does not fit the environment (%d observations; 1 + 2·%d outputs)", ErrConfig, net.In(), net.Out(), obsDim, head.Dim)
	}
	if err := loadSnapshot(net, store); err != nil {
		return 0, nil, err
	}
	act := make([]float64, box.Dim())
	return evaluate(ctx, env, obsDim, episodes, evalRNG(seed), func(obs []float32) (envs.Action, error) {
		ScaleAction(box, act, head.Mean(net.Forward32(obs)))
		intoBox(box, act, nil)
		return envs.Action{Vec: act}, model.CheckFinite("policy action", act)
	})
}
