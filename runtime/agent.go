package runtime

import (
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/apexrl/apex/actor"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/learner"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// Algos are the learners TrainConfig.Algo accepts: Double DQN for discrete
// actions, TD3 for continuous ones.
var Algos = []string{"dqn", "td3"}

// LearnerStats is a learner's counters as the runtime reports them, the
// same fields for every algorithm (those an algorithm lacks stay 0).
type LearnerStats struct {
	Steps uint64 `json:"steps"`
	// Loss is the last step's loss (TD3: the twin critics' loss).
	Loss float64 `json:"loss"`
	// ActorLoss is TD3's last policy loss, −mean Q1(s, π(s)).
	ActorLoss float64 `json:"actor_loss"`
	MeanAbsTD float64 `json:"mean_abs_td"`
	MeanQ     float64 `json:"mean_q"`
	// GradNorm is the last gradient norm before clipping (TD3: the larger
	// critic's).
	GradNorm        float64 `json:"grad_norm"`
	WriteBacks      uint64  `json:"write_backs"`
	StaleWriteBacks uint64  `json:"stale_write_backs"`
	Publishes       uint64  `json:"publishes"`
	Version         uint64  `json:"version"`
	TargetUpdates   uint64  `json:"target_updates"`
	ActorUpdates    uint64  `json:"actor_updates"`
	// Timing is the learner's cumulative time in steps and in the replay's
	// phases (sample, write-back).
	Timing learner.Timing `json:"timing"`
}

// agent is the algorithm-specific part of a run: the learner as the
// runtime drives it, and how its actors are built.
type agent struct {
	Stepper
	impl   any                                            // the *learner.DQN or *learner.TD3 itself
	batch  int                                            // sampled items per learner step
	steps  func() uint64                                  // completed learner steps
	save   func(io.Writer) error                          // the learner's checkpoint
	load   func(io.Reader) error                          // restore it
	first  func() *model.Params                           // the policy as it starts (evaluated when learning never started)
	stats  func() LearnerStats                            // counters
	policy model.Config                                   // the network actors and the evaluator run
	method sampler.Method                                 // the replay method the learner uses
	actor  func(i int, env envs.Env) (actorSource, error) // builds actor i
}

// actorSource is an actor as the runtime uses it: a Source with counters.
type actorSource interface {
	Source
	Stats() actor.Stats
}

// algoFor returns the algorithm for an action space: cfg's if set (checked
// against the space), else dqn for discrete and td3 for continuous actions.
func algoFor(algo, env string, space envs.Space) (string, error) {
	_, discrete := space.(envs.Discrete)
	switch {
	case algo == "" && discrete:
		return "dqn", nil
	case algo == "":
		return "td3", nil
	case algo == "dqn" && !discrete:
		return "", fmt.Errorf("runtime: train: %s has a continuous action space; the dqn learner needs discrete actions (use -algo=td3)", env)
	case algo == "td3" && discrete:
		return "", fmt.Errorf("runtime: train: %s has a discrete action space; the td3 learner needs continuous actions (use -algo=dqn)", env)
	case algo != "dqn" && algo != "td3":
		return "", fmt.Errorf("runtime: train: unknown algo %q (valid: %v)", algo, Algos)
	}
	return algo, nil
}

// bufferConfig is the replay layout cfg needs for env's spaces.
func bufferConfig(cfg TrainConfig, obsDim int, space envs.Space) buffer.Config {
	c := buffer.Config{Capacity: cfg.Capacity, ObsDim: obsDim, Episode: true, StateHash: cfg.Sampler == "ter"}
	switch s := space.(type) {
	case envs.Discrete:
		c.NumActions = s.N
	case envs.Box:
		c.Action, c.ActionDim = buffer.Continuous, s.Dim()
	}
	return c
}

// methodConfig is the replay method cfg asks for.
func methodConfig(cfg TrainConfig, betaSteps int64) (sampler.MethodConfig, error) {
	mc := sampler.MethodConfig{BetaSteps: betaSteps, NoIS: cfg.NoIS}
	if cfg.Loss != "" {
		if err := mc.Loss.Kind.UnmarshalText([]byte(cfg.Loss)); err != nil {
			return mc, fmt.Errorf("runtime: train: Loss: %w", err)
		}
	}
	if cfg.LAPAlpha != 0 || cfg.LAPK != 0 {
		l := sampler.DefaultLAPConfig()
		if cfg.LAPAlpha != 0 {
			l.Alpha = cfg.LAPAlpha
		}
		if cfg.LAPK != 0 {
			l.K = cfg.LAPK
		}
		mc.LAP = &l
		if cfg.Sampler == "lap" || cfg.Sampler == "pal" {
			mc.Loss = model.Loss{} // the method derives its own from Alpha and K
		}
	}
	if cfg.Sampler == "ter" {
		t := sampler.DefaultTERConfig(betaSteps)
		if cfg.TEREta != 0 {
			t.Eta = cfg.TEREta
		}
		if cfg.TERRoots != 0 {
			t.Roots = cfg.TERRoots
		}
		if cfg.TERPreds != 0 {
			t.Preds = cfg.TERPreds
		}
		mc.TER = &t
	}
	return mc, nil
}

// newDQNAgent builds the Double DQN learner and its epsilon-greedy actors.
func newDQNAgent(cfg TrainConfig, buf *buffer.Buffer, m sampler.Method, store *model.Store, obsDim int, space envs.Discrete) (agent, error) {
	netCfg := model.Config{In: obsDim, Hidden: cfg.Hidden, Out: space.N, Dueling: cfg.Dueling}
	net, err := model.NewNet(netCfg, rand.New(rand.NewPCG(cfg.Seed, 0x5eed)))
	if err != nil {
		return agent{}, err
	}
	dqn, err := learner.NewDQN(learner.DQNConfig{Batch: cfg.Batch, LR: cfg.LR, Tau: cfg.Tau, Seed: cfg.Seed}, net, buf, m, store)
	if err != nil {
		return agent{}, err
	}
	return agent{
		Stepper: dqn,
		impl:    dqn,
		batch:   dqn.Config().Batch,
		steps:   dqn.Steps,
		save:    dqn.Save,
		load:    dqn.Load,
		first:   func() *model.Params { return dqn.Net().Snapshot(0) },
		stats: func() LearnerStats {
			s := dqn.Stats()
			return LearnerStats{Steps: s.Steps, Loss: s.Loss, MeanAbsTD: s.MeanAbsTD, MeanQ: s.MeanQ, GradNorm: s.GradNorm,
				WriteBacks: s.WriteBacks, StaleWriteBacks: s.StaleWriteBacks, Publishes: s.Publishes, Version: s.Version,
				TargetUpdates: s.TargetUpdates, Timing: s.Timing}
		},
		policy: netCfg,
		method: m,
		actor: func(i int, env envs.Env) (actorSource, error) {
			anet, err := model.NewNet(netCfg, nil)
			if err != nil {
				return nil, err
			}
			ac := actor.Config{ID: i, NumActors: cfg.Actors, NStep: cfg.NStep, Gamma: cfg.Gamma,
				Columns: actor.ColumnsOf(buf.Config()), Seed: cfg.Seed + cfg.Resumes<<40}
			if cfg.Epsilon > 0 {
				ac.FixedEpsilon, ac.Epsilon = true, cfg.Epsilon
			}
			if cfg.Resumes == 0 {
				ac.EpsilonDecaySteps = cfg.EpsilonDecaySteps // a resumed run has explored already
			}
			return actor.New(ac, env, anet, store, m.Selector)
		},
	}, nil
}

// newTD3Agent builds the TD3 learner and its Gaussian-noise actors. TD3
// scales the policy's [−1, 1] by one bound, so the action box must be
// symmetric with the same bound on every dimension.
func newTD3Agent(cfg TrainConfig, buf *buffer.Buffer, m sampler.Method, store *model.Store, obsDim int, space envs.Box) (agent, error) {
	maxAction := space.High[0]
	for i := range space.Low {
		if space.Low[i] != -maxAction || space.High[i] != maxAction {
			return agent{}, fmt.Errorf("runtime: train: %s: td3 needs a symmetric action box with one bound on every dimension, got [%v, %v]",
				cfg.Env, space.Low, space.High)
		}
	}
	polCfg := model.Config{In: obsDim, Hidden: cfg.Hidden, Out: space.Dim(), OutAct: model.Tanh}
	pol, err := model.NewNet(polCfg, rand.New(rand.NewPCG(cfg.Seed, 0x5eed)))
	if err != nil {
		return agent{}, err
	}
	critic, err := model.NewNet(model.Config{In: obsDim + space.Dim(), Hidden: cfg.Hidden, Out: 1}, rand.New(rand.NewPCG(cfg.Seed, 0xc817)))
	if err != nil {
		return agent{}, err
	}
	td3, err := learner.NewTD3(learner.TD3Config{Batch: cfg.Batch, ActorLR: cfg.LR, CriticLR: cfg.LR, Tau: cfg.Tau,
		MaxAction: maxAction, Seed: cfg.Seed}, pol, critic, buf, m, store)
	if err != nil {
		return agent{}, err
	}
	// Uniform warm-up steps (TD3's start_timesteps), shared by the actors.
	random := (cfg.RandomSteps + cfg.Actors - 1) / cfg.Actors
	return agent{
		Stepper: td3,
		impl:    td3,
		batch:   td3.Config().Batch,
		steps:   td3.Steps,
		save:    td3.Save,
		load:    td3.Load,
		first:   func() *model.Params { return td3.Actor().Snapshot(0) },
		stats: func() LearnerStats {
			s := td3.Stats()
			return LearnerStats{Steps: s.Steps, Loss: s.CriticLoss, ActorLoss: s.ActorLoss, MeanAbsTD: s.MeanAbsTD, MeanQ: s.MeanQ,
				GradNorm: s.CriticGradNorm, WriteBacks: s.WriteBacks, StaleWriteBacks: s.StaleWriteBacks, Publishes: s.Publishes,
				Version: s.Version, TargetUpdates: s.TargetUpdates, ActorUpdates: s.ActorUpdates, Timing: s.Timing}
		},
		policy: polCfg,
		method: m,
		actor: func(i int, env envs.Env) (actorSource, error) {
			anet, err := model.NewNet(polCfg, nil)
			if err != nil {
				return nil, err
			}
			if cfg.Resumes > 0 {
				random = 0 // the replay already holds the warm-up
			}
			return actor.NewContinuous(actor.ContinuousConfig{ID: i, NumActors: cfg.Actors, NStep: cfg.NStep, Gamma: cfg.Gamma,
				Sigma: cfg.Sigma, OUTheta: cfg.OUTheta, RandomSteps: random, Columns: actor.ColumnsOf(buf.Config()), Seed: cfg.Seed + cfg.Resumes<<40},
				env, anet, store)
		},
	}, nil
}
