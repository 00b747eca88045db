package runtime

import (
	"context"
	"errors"
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
// runtime drives it, and how its actors are built. newAgent assembles it
// (this file: per-algorithm configuration, networks, actor factory); the
// engine (Pipeline, Trainer.Run) only drives what it holds.
type agent struct {
	Stepper
	impl   any                   // the *learner.DQN, *learner.TD3, *learner.SAC or *learner.VRACER itself
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
	// workers is the learner's data-parallel worker pool (LearnerWorkers
	// > 1), nil for the serial step; Trainer.Run starts and stops it.
	workers *WorkerPool
}

// MaxLearnerWorkers bounds TrainConfig.LearnerWorkers.
const MaxLearnerWorkers = 1024

// learnerWorkers returns the worker pool cfg asks for (nil: the serial
// step) and hands it to the learner through setWorkers.
func learnerWorkers(cfg TrainConfig, setWorkers func(learner.Workers) error) (*WorkerPool, error) {
	if cfg.LearnerWorkers <= 1 {
		return nil, nil
	}
	p := NewWorkerPool(cfg.LearnerWorkers)
	if err := setWorkers(p); err != nil {
		return nil, err
	}
	return p, nil
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
		{c.LearnerWorkers > 1, "LearnerWorkers (-learner-workers) above 1", algo != "vracer", "the data-parallel learner step, which the dqn, td3 and sac learners have (vracer not yet)", func(c *TrainConfig) { c.LearnerWorkers = 0 }},
		{c.Sigma != 0, "Sigma (-sigma)", algo == "td3", "the td3 learner's actors (vracer's actors draw from the policy's own std)", func(c *TrainConfig) { c.Sigma = 0 }},
		{c.OUTheta != 0, "OUTheta (-ou-theta)", algo == "td3", "the td3 learner's actors", func(c *TrainConfig) { c.OUTheta = 0 }},
		{c.RandomSteps != 0, "RandomSteps (-random-steps)", algo == "td3" || algo == "sac", "the td3 and sac learners' actors", func(c *TrainConfig) { c.RandomSteps = 0 }},
		{c.Tau != 0, "Tau (-tau)", algo != "vracer", "target networks (dqn, td3, sac); vracer has none", func(c *TrainConfig) { c.Tau = 0 }},
		{c.NStep > 1, "NStep (-n-step) above 1", algo != "vracer", "n-step returns (dqn, td3, sac); vracer's Retrace uses whole episodes of single steps", func(c *TrainConfig) { c.NStep = 1 }},
	}
}

// Seeds of the networks an agent builds, each drawn from the run's Seed:
// the first network (dqn's Q-network, td3's and sac's policy, vracer's
// net) and the critic template of td3 and sac.
const (
	netSeed    = 0x5eed
	criticSeed = 0xc817
)

// newAgent builds the learner cfg.Algo names (dqn for a discrete action
// space) and its actors' factory: the agent assembly the engine is handed.
func newAgent(cfg TrainConfig, buf *buffer.Buffer, m sampler.Method, store *model.Store, obsDim int, space envs.Space) (agent, error) {
	switch s := space.(type) {
	case envs.Discrete:
		return newDQNAgent(cfg, buf, m, store, obsDim, s)
	case envs.Box:
		switch cfg.Algo {
		case "vracer":
			return newVRACERAgent(cfg, buf, m, store, obsDim, s)
		case "sac":
			return newSACAgent(cfg, buf, m, store, obsDim, s)
		default:
			return newTD3Agent(cfg, buf, m, store, obsDim, s)
		}
	}
	return agent{}, fmt.Errorf("runtime: train: %s: unsupported action space %T", cfg.Env, space)
}

// replayLearner is what the runtime drives of every learner.
type replayLearner interface {
	Stepper
	Steps() uint64
	Save(io.Writer) error
	Load(io.Reader) error
}

// learnerAgent fills the fields every agent fills alike from its learner
// l: batch and lr are its effective settings, first returns the policy
// network it owns (its initial snapshot is evaluated when learning never
// started), policy is that network's Config.
func learnerAgent(l replayLearner, batch int, lr float64, first func() *model.Net, policy model.Config, m sampler.Method) agent {
	return agent{
		Stepper: l,
		impl:    l,
		batch:   batch,
		lr:      lr,
		steps:   l.Steps,
		save:    l.Save,
		load:    l.Load,
		first:   func() *model.Params { return first().Snapshot(0) },
		policy:  policy,
		method:  m,
	}
}

// learnerNet returns net as the learner's network: net itself, or with
// cfg.Float32 a float32 copy (model.Config.Float32) holding the same
// parameters, so a float32 run starts where the float64 one does.
func learnerNet(cfg TrainConfig, net *model.Net) (*model.Net, error) {
	if !cfg.Float32 {
		return net, nil
	}
	c := net.Config()
	c.Float32 = true
	n, err := model.NewNet(c, nil)
	if err != nil {
		return nil, err
	}
	n.CopyFrom(net)
	return n, nil
}

// actorSeed seeds actor i's stream family: fresh episodes on each resume.
func actorSeed(cfg TrainConfig) uint64 { return cfg.Seed + cfg.Resumes<<40 }

// newDQNAgent builds the Double DQN learner and its epsilon-greedy actors.
func newDQNAgent(cfg TrainConfig, buf *buffer.Buffer, m sampler.Method, store *model.Store, obsDim int, space envs.Discrete) (agent, error) {
	netCfg := model.Config{In: obsDim, Hidden: cfg.Hidden, Out: space.N, Dueling: cfg.Dueling}
	net, err := model.NewNet(netCfg, rand.New(rand.NewPCG(cfg.Seed, netSeed)))
	if err == nil {
		net, err = learnerNet(cfg, net)
	}
	if err != nil {
		return agent{}, err
	}
	dqn, err := learner.NewDQN(learner.DQNConfig{Batch: cfg.Batch, LR: cfg.LR, Tau: cfg.Tau, Seed: cfg.Seed}, net, buf, m, store)
	if err != nil {
		return agent{}, err
	}
	pool, err := learnerWorkers(cfg, dqn.SetWorkers)
	if err != nil {
		return agent{}, fmt.Errorf("runtime: train: %s: %w", fieldName("LearnerWorkers"), err)
	}
	ag := learnerAgent(dqn, dqn.Config().Batch, dqn.Config().LR, dqn.Net, netCfg, m)
	ag.stats = func() LearnerStats {
		s := dqn.Stats()
		return withMethodStats(LearnerStats{Steps: s.Steps, Loss: s.Loss, MeanAbsTD: s.MeanAbsTD, MeanQ: s.MeanQ, GradNorm: s.GradNorm,
			WriteBacks: s.WriteBacks, StaleWriteBacks: s.StaleWriteBacks, Publishes: s.Publishes, Version: s.Version,
			TargetUpdates: s.TargetUpdates, Timing: s.Timing, Sampled: s.Sampled}, m)
	}
	ag.workers = pool
	return ag, nil
}

// actorCritic is what the td3 and sac agents share: the one bound of a
// symmetric action box (both scale their policy's [−1, 1] by it), the
// policy network and the critic template (the learner clones its twin and
// targets).
type actorCritic struct {
	maxAction      float64
	policy, critic *model.Net
}

// newActorCritic builds cfg.Algo's actorCritic with the policy network
// polCfg; the action box must be symmetric with the same bound on every
// dimension.
func newActorCritic(cfg TrainConfig, obsDim int, space envs.Box, polCfg model.Config) (actorCritic, error) {
	maxAction, err := symmetricBound(cfg, space)
	if err != nil {
		return actorCritic{}, err
	}
	pol, err := model.NewNet(polCfg, rand.New(rand.NewPCG(cfg.Seed, netSeed)))
	if err != nil {
		return actorCritic{}, err
	}
	critic, err := model.NewNet(model.Config{In: obsDim + space.Dim(), Hidden: cfg.Hidden, Out: 1}, rand.New(rand.NewPCG(cfg.Seed, criticSeed)))
	if err != nil {
		return actorCritic{}, err
	}
	if pol, err = learnerNet(cfg, pol); err != nil {
		return actorCritic{}, err
	}
	if critic, err = learnerNet(cfg, critic); err != nil {
		return actorCritic{}, err
	}
	return actorCritic{maxAction: maxAction, policy: pol, critic: critic}, nil
}

// symmetricBound is the one bound of space, a box symmetric about 0 with
// the same bound on every dimension (td3 and sac scale their policy's
// [−1, 1] by it); another box is an error.
func symmetricBound(cfg TrainConfig, space envs.Box) (float64, error) {
	maxAction := space.High[0]
	for i := range space.Low {
		if space.Low[i] != -maxAction || space.High[i] != maxAction {
			return 0, fmt.Errorf("runtime: train: %s: %s needs a symmetric action box with one bound on every dimension, got [%v, %v]",
				cfg.Env, cfg.Algo, space.Low, space.High)
		}
	}
	return maxAction, nil
}

// randomShare is each actor's share of the uniform warm-up (TD3's
// start_timesteps, SAC's start_steps; none on resume: the replay holds it
// already).
func randomShare(cfg TrainConfig) int {
	if cfg.Resumes != 0 {
		return 0
	}
	return (cfg.RandomSteps + cfg.Actors - 1) / cfg.Actors
}

// newTD3Agent builds the TD3 learner and its Gaussian-noise actors.
func newTD3Agent(cfg TrainConfig, buf *buffer.Buffer, m sampler.Method, store *model.Store, obsDim int, space envs.Box) (agent, error) {
	polCfg := model.Config{In: obsDim, Hidden: cfg.Hidden, Out: space.Dim(), OutAct: model.Tanh}
	ac, err := newActorCritic(cfg, obsDim, space, polCfg)
	if err != nil {
		return agent{}, err
	}
	td3, err := learner.NewTD3(learner.TD3Config{Batch: cfg.Batch, ActorLR: cfg.LR, CriticLR: cfg.LR, Tau: cfg.Tau,
		MaxAction: ac.maxAction, Seed: cfg.Seed}, ac.policy, ac.critic, buf, m, store)
	if err != nil {
		return agent{}, err
	}
	pool, err := learnerWorkers(cfg, td3.SetWorkers)
	if err != nil {
		return agent{}, fmt.Errorf("runtime: train: %s: %w", fieldName("LearnerWorkers"), err)
	}
	ag := learnerAgent(td3, td3.Config().Batch, td3.Config().ActorLR, td3.Actor, polCfg, m)
	ag.stats = func() LearnerStats {
		s := td3.Stats()
		ls := LearnerStats{Steps: s.Steps, Loss: s.CriticLoss, ActorLoss: s.ActorLoss, MeanAbsTD: s.MeanAbsTD, MeanQ: s.MeanQ,
			GradNorm: s.CriticGradNorm, WriteBacks: s.WriteBacks, StaleWriteBacks: s.StaleWriteBacks, Publishes: s.Publishes,
			Version: s.Version, TargetUpdates: s.TargetUpdates, ActorUpdates: s.ActorUpdates, Timing: s.Timing, Sampled: s.Sampled}
		if c := td3.REFER(); c != nil {
			r := c.Stats()
			ls.FarFraction, ls.MeanKL, ls.Beta = r.FarFraction, r.SampledKL, r.Beta
		}
		return withMethodStats(ls, m)
	}
	ag.workers = pool
	return ag, nil
}

// newSACAgent builds the SAC learner and its squashed-Gaussian actors.
func newSACAgent(cfg TrainConfig, buf *buffer.Buffer, m sampler.Method, store *model.Store, obsDim int, space envs.Box) (agent, error) {
	polCfg := learner.SACPolicyConfig(obsDim, space.Dim(), cfg.Hidden)
	ac, err := newActorCritic(cfg, obsDim, space, polCfg)
	if err != nil {
		return agent{}, err
	}
	sac, err := learner.NewSAC(learner.SACConfig{Batch: cfg.Batch, PolicyLR: cfg.LR, CriticLR: cfg.LR, AlphaLR: cfg.LR, Tau: cfg.Tau,
		MaxAction: ac.maxAction, Seed: cfg.Seed}, ac.policy, ac.critic, buf, m, store)
	if err != nil {
		return agent{}, err
	}
	pool, err := learnerWorkers(cfg, sac.SetWorkers)
	if err != nil {
		return agent{}, fmt.Errorf("runtime: train: %s: %w", fieldName("LearnerWorkers"), err)
	}
	ag := learnerAgent(sac, sac.Config().Batch, sac.Config().PolicyLR, sac.Policy, polCfg, m)
	ag.evaluate = actor.EvaluateSquashed
	ag.stats = func() LearnerStats {
		s := sac.Stats()
		return withMethodStats(LearnerStats{Steps: s.Steps, Loss: s.CriticLoss, ActorLoss: s.PolicyLoss, MeanAbsTD: s.MeanAbsTD, MeanQ: s.MeanQ,
			GradNorm: s.CriticGradNorm, WriteBacks: s.WriteBacks, StaleWriteBacks: s.StaleWriteBacks, Publishes: s.Publishes,
			Version: s.Version, TargetUpdates: s.TargetUpdates, ActorUpdates: s.Steps, Entropy: s.Entropy, Alpha: s.Alpha,
			Timing: s.Timing, Sampled: s.Sampled}, m)
	}
	ag.workers = pool
	return ag, nil
}

// newVRACERAgent builds the V-RACER learner and its Gaussian-policy actors
// (ReF-ER, Novati & Koumoutsakos 2019).
func newVRACERAgent(cfg TrainConfig, buf *buffer.Buffer, m sampler.Method, store *model.Store, obsDim int, space envs.Box) (agent, error) {
	net, err := learner.NewVRACERNet(obsDim, space.Dim(), cfg.Hidden, rand.New(rand.NewPCG(cfg.Seed, netSeed)))
	if err != nil {
		return agent{}, err
	}
	policy := net.Config() // the actors' networks stay float64
	if net, err = learnerNet(cfg, net); err != nil {
		return agent{}, err
	}
	vr, err := learner.NewVRACER(learner.VRACERConfig{Batch: cfg.Batch, LR: cfg.LR, Seed: cfg.Seed}, net, buf, m, store)
	if err != nil {
		return agent{}, err
	}
	ag := learnerAgent(vr, vr.Config().Batch, vr.Config().LR, vr.Net, policy, m)
	ag.evaluate = actor.EvaluateGaussian
	ag.stats = func() LearnerStats {
		s := vr.Stats()
		return withMethodStats(LearnerStats{Steps: s.Steps, Loss: s.Loss, ActorLoss: s.PolicyLoss, MeanAbsTD: s.MeanAbsAdv, MeanQ: s.MeanV,
			GradNorm: s.GradNorm, Publishes: s.Publishes, Version: s.Version, Timing: s.Timing,
			FarFraction: s.FarFraction, MeanKL: s.MeanKL, Beta: s.Beta}, m)
	}
	return ag, nil
}

// behaviourColumns are the replay's columns where ReF-ER's actors record
// their behaviour policy (its mean and std, V(s_T)).
func behaviourColumns(layout buffer.Config) (*actor.Behaviour, error) {
	mc, sc, bc, err := sampler.REFERColumnIndex(layout)
	if err != nil {
		return nil, err
	}
	return &actor.Behaviour{Mean: mc, Std: sc, Boot: bc}, nil
}

// actorFactory returns what builds actor i of a run (ids in [0,
// cfg.Actors)) on env: the actors exactly as every run builds them,
// whichever process they run in. layout is the replay's layout (the
// columns the actors fill); sel gives the dqn actors their insert
// priorities (sampler.Selector.Priority; unused by the other learners);
// store is where the actors read the learner's parameters. Each actor
// gets a network of its own. cfg is resolved (resolve).
func actorFactory(cfg TrainConfig, spec sampler.Spec, layout buffer.Config, sel sampler.Selector, store *model.Store,
	obsDim int, space envs.Space) (func(i int, env envs.Env) (actorSource, error), error) {
	var policy model.Config
	var spawn func(i int, env envs.Env, net *model.Net) (actorSource, error)
	cols := actor.ColumnsOf(layout)
	switch s := space.(type) {
	case envs.Discrete:
		if sel == nil {
			return nil, errors.New("runtime: the dqn actors need the replay method's Selector for their insert priorities")
		}
		policy = model.Config{In: obsDim, Hidden: cfg.Hidden, Out: s.N, Dueling: cfg.Dueling}
		spawn = func(i int, env envs.Env, net *model.Net) (actorSource, error) {
			ac := actor.Config{ID: i, NumActors: cfg.Actors, NStep: cfg.NStep, Gamma: cfg.Gamma, RefreshEvery: cfg.RefreshEvery,
				Columns: cols, Seed: actorSeed(cfg)}
			if cfg.Epsilon > 0 {
				ac.FixedEpsilon, ac.Epsilon = true, cfg.Epsilon
			}
			if cfg.Resumes == 0 {
				ac.EpsilonDecaySteps = cfg.EpsilonDecaySteps // a resumed run has explored already
			}
			return actor.New(ac, env, net, store, sel)
		}
	case envs.Box:
		if _, err := symmetricBound(cfg, s); err != nil && cfg.Algo != "vracer" {
			return nil, err
		}
		switch cfg.Algo {
		case "vracer":
			net, err := learner.NewVRACERNet(obsDim, s.Dim(), cfg.Hidden, rand.New(rand.NewPCG(0, 0)))
			if err != nil {
				return nil, err
			}
			policy = net.Config()
			behaviour, err := behaviourColumns(layout)
			if err != nil {
				return nil, err
			}
			spawn = func(i int, env envs.Env, net *model.Net) (actorSource, error) {
				return actor.NewGaussian(actor.GaussianConfig{ID: i, NumActors: cfg.Actors, Gamma: cfg.Gamma, RefreshEvery: cfg.RefreshEvery,
					Columns: cols, Floats: layout.Floats, Behaviour: behaviour, Seed: actorSeed(cfg)},
					env, net, store)
			}
		case "sac":
			policy = learner.SACPolicyConfig(obsDim, s.Dim(), cfg.Hidden)
			spawn = func(i int, env envs.Env, net *model.Net) (actorSource, error) {
				return actor.NewSquashed(actor.SquashedConfig{ID: i, NumActors: cfg.Actors, NStep: cfg.NStep, Gamma: cfg.Gamma, RefreshEvery: cfg.RefreshEvery,
					RandomSteps: randomShare(cfg), Columns: cols, Seed: actorSeed(cfg)},
					env, net, store)
			}
		default: // td3
			policy = model.Config{In: obsDim, Hidden: cfg.Hidden, Out: s.Dim(), OutAct: model.Tanh}
			// TD3 with ReF-ER: the actors record their fixed-std Gaussian
			// behaviour (far rows are weighted 0 by the learner).
			var floats []buffer.FloatColumn
			var behaviour *actor.Behaviour
			if spec.Needs.Behaviour {
				floats = layout.Floats
				var err error
				if behaviour, err = behaviourColumns(layout); err != nil {
					return nil, err
				}
			}
			spawn = func(i int, env envs.Env, net *model.Net) (actorSource, error) {
				return actor.NewContinuous(actor.ContinuousConfig{ID: i, NumActors: cfg.Actors, NStep: cfg.NStep, Gamma: cfg.Gamma, RefreshEvery: cfg.RefreshEvery,
					Sigma: cfg.Sigma, OUTheta: cfg.OUTheta, RandomSteps: randomShare(cfg), Columns: cols, Seed: actorSeed(cfg),
					Floats: floats, Behaviour: behaviour},
					env, net, store)
			}
		}
	default:
		return nil, fmt.Errorf("runtime: train: %s: unsupported action space %T", cfg.Env, space)
	}
	return func(i int, env envs.Env) (actorSource, error) {
		net, err := model.NewNet(policy, nil)
		if err != nil {
			return nil, err
		}
		return spawn(i, env, net)
	}, nil
}
