package runtime

import (
	"context"
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
// actions, TD3, SAC and V-RACER (with a ReF-ER method) for continuous ones.
var Algos = []string{"dqn", "td3", "sac", "vracer"}

// LearnerStats is a learner's counters as the runtime reports them, the
// same fields for every algorithm (those an algorithm lacks stay 0).
type LearnerStats struct {
	Steps uint64 `json:"steps"`
	// Loss is the last step's loss (TD3: the twin critics' loss).
	Loss float64 `json:"loss"`
	// ActorLoss is TD3's last policy loss, −mean Q1(s, π(s)) (SAC's:
	// mean α·log π(ã|s) − min Q(s, ã)).
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
	// FarFraction, MeanKL and Beta are the ReF-ER state (V-RACER, or TD3
	// under a ReF-ER method): the share
	// of stored steps whose importance ratio is outside [1/c_max, c_max],
	// the mean KL(μ||π) of the last batch, and the penalty's weight
	// complement beta.
	FarFraction float64 `json:"far_fraction,omitempty"`
	// Entropy and Alpha are SAC's: the last batch's policy entropy
	// estimate −mean log π(ã|s) (nats, in the policy's [−1, 1] units) and
	// the temperature α.
	Entropy float64 `json:"entropy,omitempty"`
	Alpha   float64 `json:"alpha,omitempty"`
	MeanKL  float64 `json:"mean_kl,omitempty"`
	Beta    float64 `json:"beta,omitempty"`
	// Timing is the learner's cumulative time in steps and in the replay's
	// phases (sample, write-back).
	Timing learner.Timing `json:"timing"`
	// Sampled sums |δ| and Q(s, a) over every sampled row (dqn and td3).
	Sampled learner.Moments `json:"sampled"`
	// Method is the replay method's own counters (sampler.Method.Stats,
	// keyed by the names of its Spec's Stats; NERS's scorer), nil for a
	// method without any.
	Method map[string]float64 `json:"method,omitempty"`
}

// agent is the algorithm-specific part of a run: the learner as the
// runtime drives it, and how its actors are built.
type agent struct {
	Stepper
	impl   any                   // the *learner.DQN, *learner.TD3 or *learner.VRACER itself
	batch  int                   // sampled items per learner step
	lr     float64               // the learner's effective learning rate
	steps  func() uint64         // completed learner steps
	save   func(io.Writer) error // the learner's checkpoint
	load   func(io.Reader) error // restore it
	first  func() *model.Params  // the policy as it starts (evaluated when learning never started)
	stats  func() LearnerStats   // counters
	policy model.Config          // the network actors and the evaluator run
	method sampler.Method        // the replay method the learner uses
	// evaluate plays the greedy policy (nil: actor.Evaluate).
	evaluate func(ctx context.Context, env envs.Env, net *model.Net, store *model.Store, episodes int, seed uint64) (float64, []float64, error)
	actor    func(i int, env envs.Env) (actorSource, error) // builds actor i
}

// actorSource is an actor as the runtime uses it: a Source with counters.
type actorSource interface {
	Source
	Stats() actor.Stats
}

// learnerSettings are c's settings that only some learners use, with ok for
// algo.
func learnerSettings(c *TrainConfig, algo string) []setting {
	return []setting{
		{c.Epsilon != 0, "Epsilon (-epsilon)", algo == "dqn", "the dqn learner's actors", func(c *TrainConfig) { c.Epsilon = 0 }},
		{c.EpsilonDecaySteps != 0, "EpsilonDecaySteps (-epsilon-decay)", algo == "dqn", "the dqn learner's actors", func(c *TrainConfig) { c.EpsilonDecaySteps = 0 }},
		{c.Dueling, "Dueling (-dueling)", algo == "dqn", "the dqn learner's network", func(c *TrainConfig) { c.Dueling = false }},
		{c.Sigma != 0, "Sigma (-sigma)", algo == "td3", "the td3 learner's actors (vracer's actors draw from the policy's own std)", func(c *TrainConfig) { c.Sigma = 0 }},
		{c.OUTheta != 0, "OUTheta (-ou-theta)", algo == "td3", "the td3 learner's actors", func(c *TrainConfig) { c.OUTheta = 0 }},
		{c.RandomSteps != 0, "RandomSteps (-random-steps)", algo == "td3" || algo == "sac", "the td3 and sac learners' actors", func(c *TrainConfig) { c.RandomSteps = 0 }},
		{c.Tau != 0, "Tau (-tau)", algo != "vracer", "target networks (dqn, td3, sac); vracer has none", func(c *TrainConfig) { c.Tau = 0 }},
		{c.NStep > 1, "NStep (-n-step) above 1", algo != "vracer", "n-step returns (dqn, td3, sac); vracer's Retrace uses whole episodes of single steps", func(c *TrainConfig) { c.NStep = 1 }},
	}
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
		lr:      dqn.Config().LR,
		steps:   dqn.Steps,
		save:    dqn.Save,
		load:    dqn.Load,
		first:   func() *model.Params { return dqn.Net().Snapshot(0) },
		stats: func() LearnerStats {
			s := dqn.Stats()
			return withMethodStats(LearnerStats{Steps: s.Steps, Loss: s.Loss, MeanAbsTD: s.MeanAbsTD, MeanQ: s.MeanQ, GradNorm: s.GradNorm,
				WriteBacks: s.WriteBacks, StaleWriteBacks: s.StaleWriteBacks, Publishes: s.Publishes, Version: s.Version,
				TargetUpdates: s.TargetUpdates, Timing: s.Timing, Sampled: s.Sampled}, m)
		},
		policy: netCfg,
		method: m,
		actor: func(i int, env envs.Env) (actorSource, error) {
			anet, err := model.NewNet(netCfg, nil)
			if err != nil {
				return nil, err
			}
			ac := actor.Config{ID: i, NumActors: cfg.Actors, NStep: cfg.NStep, Gamma: cfg.Gamma, RefreshEvery: cfg.RefreshEvery,
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
	// TD3 with ReF-ER: far rows weighted 0 by the learner; the actors
	// record their fixed-std Gaussian behaviour.
	refer := m.Episodes != nil
	td3, err := learner.NewTD3(learner.TD3Config{Batch: cfg.Batch, ActorLR: cfg.LR, CriticLR: cfg.LR, Tau: cfg.Tau,
		MaxAction: maxAction, Seed: cfg.Seed}, pol, critic, buf, m, store)
	if err != nil {
		return agent{}, err
	}
	// Uniform warm-up steps (TD3's start_timesteps), shared by the actors.
	random := (cfg.RandomSteps + cfg.Actors - 1) / cfg.Actors
	var floats []buffer.FloatColumn
	var behaviour *actor.Behaviour
	if refer {
		floats = buf.Config().Floats
		mc, sc, bc, err := sampler.REFERColumnIndex(buf.Config())
		if err != nil {
			return agent{}, err
		}
		behaviour = &actor.Behaviour{Mean: mc, Std: sc, Boot: bc}
	}
	return agent{
		Stepper: td3,
		impl:    td3,
		batch:   td3.Config().Batch,
		lr:      td3.Config().ActorLR,
		steps:   td3.Steps,
		save:    td3.Save,
		load:    td3.Load,
		first:   func() *model.Params { return td3.Actor().Snapshot(0) },
		stats: func() LearnerStats {
			s := td3.Stats()
			ls := LearnerStats{Steps: s.Steps, Loss: s.CriticLoss, ActorLoss: s.ActorLoss, MeanAbsTD: s.MeanAbsTD, MeanQ: s.MeanQ,
				GradNorm: s.CriticGradNorm, WriteBacks: s.WriteBacks, StaleWriteBacks: s.StaleWriteBacks, Publishes: s.Publishes,
				Version: s.Version, TargetUpdates: s.TargetUpdates, ActorUpdates: s.ActorUpdates, Timing: s.Timing, Sampled: s.Sampled}
			if c := td3.REFER(); c != nil {
				r := c.Stats()
				ls.FarFraction, ls.MeanKL, ls.Beta = r.FarFraction, r.SampledKL, r.Beta
			}
			return withMethodStats(ls, m)
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
			return actor.NewContinuous(actor.ContinuousConfig{ID: i, NumActors: cfg.Actors, NStep: cfg.NStep, Gamma: cfg.Gamma, RefreshEvery: cfg.RefreshEvery,
				Sigma: cfg.Sigma, OUTheta: cfg.OUTheta, RandomSteps: random, Columns: actor.ColumnsOf(buf.Config()), Seed: cfg.Seed + cfg.Resumes<<40,
				Floats: floats, Behaviour: behaviour},
				env, anet, store)
		},
	}, nil
}

// newSACAgent builds the SAC learner and its squashed-Gaussian actors. As
// for TD3, the action box must be symmetric with the same bound on every
// dimension.
func newSACAgent(cfg TrainConfig, buf *buffer.Buffer, m sampler.Method, store *model.Store, obsDim int, space envs.Box) (agent, error) {
	maxAction := space.High[0]
	for i := range space.Low {
		if space.Low[i] != -maxAction || space.High[i] != maxAction {
			return agent{}, fmt.Errorf("runtime: train: %s: sac needs a symmetric action box with one bound on every dimension, got [%v, %v]",
				cfg.Env, space.Low, space.High)
		}
	}
	polCfg := learner.SACPolicyConfig(obsDim, space.Dim(), cfg.Hidden)
	pol, err := model.NewNet(polCfg, rand.New(rand.NewPCG(cfg.Seed, 0x5eed)))
	if err != nil {
		return agent{}, err
	}
	critic, err := model.NewNet(model.Config{In: obsDim + space.Dim(), Hidden: cfg.Hidden, Out: 1}, rand.New(rand.NewPCG(cfg.Seed, 0xc817)))
	if err != nil {
		return agent{}, err
	}
	sac, err := learner.NewSAC(learner.SACConfig{Batch: cfg.Batch, PolicyLR: cfg.LR, CriticLR: cfg.LR, AlphaLR: cfg.LR, Tau: cfg.Tau,
		MaxAction: maxAction, Seed: cfg.Seed}, pol, critic, buf, m, store)
	if err != nil {
		return agent{}, err
	}
	// Uniform warm-up steps (SAC's start_steps), shared by the actors.
	random := (cfg.RandomSteps + cfg.Actors - 1) / cfg.Actors
	return agent{
		Stepper: sac,
		impl:    sac,
		batch:   sac.Config().Batch,
		lr:      sac.Config().PolicyLR,
		steps:   sac.Steps,
		save:    sac.Save,
		load:    sac.Load,
		first:   func() *model.Params { return sac.Policy().Snapshot(0) },
		stats: func() LearnerStats {
			s := sac.Stats()
			return withMethodStats(LearnerStats{Steps: s.Steps, Loss: s.CriticLoss, ActorLoss: s.PolicyLoss, MeanAbsTD: s.MeanAbsTD, MeanQ: s.MeanQ,
				GradNorm: s.CriticGradNorm, WriteBacks: s.WriteBacks, StaleWriteBacks: s.StaleWriteBacks, Publishes: s.Publishes,
				Version: s.Version, TargetUpdates: s.TargetUpdates, ActorUpdates: s.Steps, Entropy: s.Entropy, Alpha: s.Alpha,
				Timing: s.Timing, Sampled: s.Sampled}, m)
		},
		policy:   polCfg,
		method:   m,
		evaluate: actor.EvaluateSquashed,
		actor: func(i int, env envs.Env) (actorSource, error) {
			anet, err := model.NewNet(polCfg, nil)
			if err != nil {
				return nil, err
			}
			if cfg.Resumes > 0 {
				random = 0 // the replay already holds the warm-up
			}
			return actor.NewSquashed(actor.SquashedConfig{ID: i, NumActors: cfg.Actors, NStep: cfg.NStep, Gamma: cfg.Gamma, RefreshEvery: cfg.RefreshEvery,
				RandomSteps: random, Columns: actor.ColumnsOf(buf.Config()), Seed: cfg.Seed + cfg.Resumes<<40},
				env, anet, store)
		},
	}, nil
}

// newVRACERAgent builds the V-RACER learner and its Gaussian-policy actors
// (ReF-ER, Novati & Koumoutsakos 2019).
func newVRACERAgent(cfg TrainConfig, buf *buffer.Buffer, m sampler.Method, store *model.Store, obsDim int, space envs.Box) (agent, error) {
	net, err := learner.NewVRACERNet(obsDim, space.Dim(), cfg.Hidden, rand.New(rand.NewPCG(cfg.Seed, 0x5eed)))
	if err != nil {
		return agent{}, err
	}
	vr, err := learner.NewVRACER(learner.VRACERConfig{Batch: cfg.Batch, LR: cfg.LR, Seed: cfg.Seed}, net, buf, m, store)
	if err != nil {
		return agent{}, err
	}
	mc, sc, bc, err := sampler.REFERColumnIndex(buf.Config())
	if err != nil {
		return agent{}, err
	}
	behaviour := &actor.Behaviour{Mean: mc, Std: sc, Boot: bc}
	polCfg := net.Config()
	return agent{
		Stepper: vr,
		impl:    vr,
		batch:   vr.Config().Batch,
		lr:      vr.Config().LR,
		steps:   vr.Steps,
		save:    vr.Save,
		load:    vr.Load,
		first:   func() *model.Params { return vr.Net().Snapshot(0) },
		stats: func() LearnerStats {
			s := vr.Stats()
			return withMethodStats(LearnerStats{Steps: s.Steps, Loss: s.Loss, ActorLoss: s.PolicyLoss, MeanAbsTD: s.MeanAbsAdv, MeanQ: s.MeanV,
				GradNorm: s.GradNorm, Publishes: s.Publishes, Version: s.Version, Timing: s.Timing,
				FarFraction: s.FarFraction, MeanKL: s.MeanKL, Beta: s.Beta}, m)
		},
		policy:   polCfg,
		method:   m,
		evaluate: actor.EvaluateGaussian,
		actor: func(i int, env envs.Env) (actorSource, error) {
			anet, err := model.NewNet(polCfg, nil)
			if err != nil {
				return nil, err
			}
			return actor.NewGaussian(actor.GaussianConfig{ID: i, NumActors: cfg.Actors, Gamma: cfg.Gamma, RefreshEvery: cfg.RefreshEvery,
				Columns: actor.ColumnsOf(buf.Config()), Floats: buf.Config().Floats, Behaviour: behaviour, Seed: cfg.Seed + cfg.Resumes<<40},
				env, anet, store)
		},
	}, nil
}
