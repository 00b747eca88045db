package runtime

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"

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

// referMethods are the replay methods V-RACER needs; TD3 takes them too
// (TD3 with ReF-ER: fixed-std Gaussian exploration, learner.TD3).
var referMethods = sampler.REFERMethods

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
	// NERS is the scorer's state when the method is ners.
	NERS *sampler.NERSStats `json:"ners,omitempty"`
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

// algoFor returns the algorithm for an action space and replay method:
// cfg's if set (checked against both), else dqn for discrete actions,
// vracer for continuous ones under a ReF-ER method, td3 otherwise. td3
// takes every method, the ReF-ER ones included; sac every method but the
// ReF-ER ones (their ratios need a behaviour density its actors do not
// store).
func algoFor(algo, env, method string, space envs.Space) (string, error) {
	_, discrete := space.(envs.Discrete)
	refer := slices.Contains(referMethods, method)
	switch {
	case algo == "" && discrete:
		algo = "dqn"
	case algo == "" && refer:
		algo = "vracer"
	case algo == "":
		algo = "td3"
	case !slices.Contains(Algos, algo):
		return "", fmt.Errorf("runtime: train: unknown algo %q (valid: %v)", algo, Algos)
	}
	switch {
	case refer && discrete: // no learner here both takes discrete actions and replays through ReF-ER
		var others []string
		for _, m := range Samplers {
			if !slices.Contains(referMethods, m) {
				others = append(others, m)
			}
		}
		return "", fmt.Errorf("runtime: train: the %s replay method needs the vracer or td3 learner, and both need continuous actions: "+
			"%s has a discrete action space; use another -sampler (%s) or an environment with continuous actions",
			method, env, strings.Join(others, ", "))
	case algo == "dqn" && !discrete:
		return "", fmt.Errorf("runtime: train: %s has a continuous action space; the dqn learner needs discrete actions (use -algo=td3)", env)
	case algo != "dqn" && discrete:
		return "", fmt.Errorf("runtime: train: %s has a discrete action space; the %s learner needs continuous actions (use -algo=dqn)", env, algo)
	case algo == "vracer" && !refer:
		return "", fmt.Errorf("runtime: train: the vracer learner replays through a ReF-ER method (-sampler one of %v), got %q", referMethods, method)
	case algo == "sac" && refer:
		return "", fmt.Errorf("runtime: train: the sac learner does not replay through the ReF-ER method %s: its importance ratios need each step's behaviour density, which sac's actors do not store (use -algo=td3 or -algo=vracer with -sampler=%s, or another -sampler with sac)", method, method)
	case algo != "vracer" && algo != "td3" && refer:
		return "", fmt.Errorf("runtime: train: the %s replay method needs the vracer or td3 learner (-algo=vracer or -algo=td3)", method)
	}
	return algo, nil
}

// setting is one TrainConfig field that configures only some learners or
// replay methods.
type setting struct {
	set   bool   // the field is not zero
	name  string // "Field (-flag)"
	ok    bool   // the run's learner or method uses it
	what  string // what it configures
	clear func(*TrainConfig)
}

// methodSettings are c's settings that only some replay methods use, with
// ok for method (c.Sampler).
func methodSettings(c *TrainConfig) []setting {
	m := c.Sampler
	lap := m == "lap" || m == "pal"
	refer := slices.Contains(referMethods, m)
	adapts := m == "refer" || m == "refer-2" // refer-1 and er fix beta at 1: D steers nothing
	return []setting{
		// pal's loss is fixed by alpha and k; its zero value (Huber) cannot
		// be told from unset further down, so -loss=huber would be ignored.
		{c.Loss != "", "Loss (-loss)", m != "pal", "the loss of every method but pal (whose loss -lap-alpha and -lap-k fix)", func(c *TrainConfig) { c.Loss = "" }},
		{c.LAPAlpha != 0, "LAPAlpha (-lap-alpha)", lap, "the lap and pal methods", func(c *TrainConfig) { c.LAPAlpha = 0 }},
		{c.LAPK != 0, "LAPK (-lap-k)", lap, "the lap and pal methods", func(c *TrainConfig) { c.LAPK = 0 }},
		{c.REFERC != 0, "REFERC (-refer-c)", refer, "the ReF-ER methods", func(c *TrainConfig) { c.REFERC = 0 }},
		{c.REFERD != 0, "REFERD (-refer-d)", adapts, "refer and refer-2, the ReF-ER methods whose beta adapts", func(c *TrainConfig) { c.REFERD = 0 }},
		{c.REFERA != 0, "REFERA (-refer-a)", refer, "the ReF-ER methods", func(c *TrainConfig) { c.REFERA = 0 }},
		{c.TEREta != 0, "TEREta (-ter-eta)", m == "ter", "the ter method", func(c *TrainConfig) { c.TEREta = 0 }},
		{c.TERRoots != 0, "TERRoots (-ter-roots)", m == "ter", "the ter method", func(c *TrainConfig) { c.TERRoots = 0 }},
		{c.TERPreds != 0, "TERPreds (-ter-preds)", m == "ter", "the ter method", func(c *TrainConfig) { c.TERPreds = 0 }},
		{c.NERSAlpha != 0, "NERSAlpha (-ners-alpha)", m == "ners", "the ners method", func(c *TrainConfig) { c.NERSAlpha = 0 }},
		{c.NERSInterval != 0, "NERSInterval (-ners-interval)", m == "ners", "the ners method", func(c *TrainConfig) { c.NERSInterval = 0 }},
		{c.NERSSample != 0, "NERSSample (-ners-sample)", m == "ners", "the ners method", func(c *TrainConfig) { c.NERSSample = 0 }},
	}
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

// checkApplies refuses settings that the run's learner (algo) or replay
// method would ignore, so that a setting never silently does nothing (the
// flag each field comes from is named for the command line's users).
func checkApplies(cfg TrainConfig, algo string) error {
	for _, r := range methodSettings(&cfg) {
		if r.set && !r.ok {
			return fmt.Errorf("runtime: train: %s configures %s; this run's method is %s", r.name, r.what, cfg.Sampler)
		}
	}
	for _, r := range learnerSettings(&cfg, algo) {
		if r.set && !r.ok {
			return fmt.Errorf("runtime: train: %s configures %s; this run's learner is %s", r.name, r.what, algo)
		}
	}
	return nil
}

// dropIgnored clears the settings of c that its learner (c.Algo) or method
// ignores. A checkpoint saved before such settings were refused may carry
// them; they had no effect on that run, and clearing them lets it resume.
func dropIgnored(c TrainConfig) TrainConfig {
	for _, r := range append(methodSettings(&c), learnerSettings(&c, c.Algo)...) {
		if !r.ok {
			r.clear(&c)
		}
	}
	return c
}

// lapConfig is LAP's configuration (lap and pal) from cfg's settings.
func lapConfig(cfg TrainConfig) sampler.LAPConfig {
	l := sampler.DefaultLAPConfig()
	setIf(&l.Alpha, cfg.LAPAlpha)
	setIf(&l.K, cfg.LAPK)
	return l
}

// bufferConfig is the replay layout cfg needs for env's spaces.
func bufferConfig(cfg TrainConfig, obsDim int, space envs.Space) buffer.Config {
	c := buffer.Config{Capacity: cfg.Capacity, ObsDim: obsDim, Episode: true, StateHash: cfg.Sampler == "ter"}
	switch s := space.(type) {
	case envs.Discrete:
		c.NumActions = s.N
	case envs.Box:
		c.Action, c.ActionDim = buffer.Continuous, s.Dim()
		if cfg.Algo == "vracer" || slices.Contains(referMethods, cfg.Sampler) {
			c.Floats = sampler.REFERColumns(s.Dim()) // the behaviour policy's mean and std, V(s_T)
		}
	}
	if cfg.Sampler == "lap" {
		// LAP stores no priority below K^Alpha, new items' included: with
		// K > 1 the running maximum starts at that floor.
		if f := lapConfig(cfg).Floor(); f > 1 {
			c.InitialPriority = f
		}
	}
	return c
}

// methodConfig is the replay method cfg asks for on env's spaces.
func methodConfig(cfg TrainConfig, betaSteps int64, env envs.Env) (sampler.MethodConfig, error) {
	mc := sampler.MethodConfig{BetaSteps: betaSteps, NoIS: cfg.NoIS}
	if cfg.Loss != "" {
		if err := mc.Loss.Kind.UnmarshalText([]byte(cfg.Loss)); err != nil {
			return mc, fmt.Errorf("runtime: train: Loss: %w", err)
		}
	}
	if (cfg.Sampler == "lap" || cfg.Sampler == "pal") && (cfg.LAPAlpha != 0 || cfg.LAPK != 0) {
		l := lapConfig(cfg)
		mc.LAP = &l
		mc.Loss = model.Loss{} // the method derives its own from Alpha and K
	}
	if slices.Contains(referMethods, cfg.Sampler) {
		r := sampler.DefaultREFERConfig(betaSteps)
		setIf(&r.C, cfg.REFERC)
		setIf(&r.D, cfg.REFERD)
		setIf(&r.A, cfg.REFERA)
		if cfg.Algo == "td3" {
			r.NoRetrace = true // TD3's critics keep their own targets
			// The paper's A for DDPG, not 5/Steps: annealing the step size
			// to 1/6 within a short run stops TD3 learning (Pendulum: no
			// progress in 3e4 steps with 5/Steps, about −200 without).
			orDefault(&r.A, sampler.DefaultREFERA)
		}
		mc.REFER = &r
	}
	if cfg.Sampler == "ter" {
		t := sampler.DefaultTERConfig(betaSteps)
		setIf(&t.Eta, cfg.TEREta)
		setIf(&t.Roots, cfg.TERRoots)
		setIf(&t.Preds, cfg.TERPreds)
		mc.TER = &t
	}
	if cfg.Sampler == "ners" {
		n := sampler.DefaultNERSConfig(betaSteps)
		setIf(&n.Alpha, cfg.NERSAlpha)
		setIf(&n.Interval, cfg.NERSInterval)
		setIf(&n.TrainSize, cfg.NERSSample)
		n.Horizon, n.Seed = env.MaxEpisodeSteps(), cfg.Seed
		if box, ok := env.ActionSpace().(envs.Box); ok && len(box.High) > 0 {
			n.ActionScale = box.High[0] // symmetric boxes (the td3 agent refuses others)
		}
		mc.NERS = &n
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
		lr:      dqn.Config().LR,
		steps:   dqn.Steps,
		save:    dqn.Save,
		load:    dqn.Load,
		first:   func() *model.Params { return dqn.Net().Snapshot(0) },
		stats: func() LearnerStats {
			s := dqn.Stats()
			return withNERS(LearnerStats{Steps: s.Steps, Loss: s.Loss, MeanAbsTD: s.MeanAbsTD, MeanQ: s.MeanQ, GradNorm: s.GradNorm,
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
			return withNERS(ls, m)
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
			return withNERS(LearnerStats{Steps: s.Steps, Loss: s.CriticLoss, ActorLoss: s.PolicyLoss, MeanAbsTD: s.MeanAbsTD, MeanQ: s.MeanQ,
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
			return LearnerStats{Steps: s.Steps, Loss: s.Loss, ActorLoss: s.PolicyLoss, MeanAbsTD: s.MeanAbsAdv, MeanQ: s.MeanV,
				GradNorm: s.GradNorm, Publishes: s.Publishes, Version: s.Version, Timing: s.Timing,
				FarFraction: s.FarFraction, MeanKL: s.MeanKL, Beta: s.Beta}
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

// withNERS adds the NERS stage's snapshot to ls when m's stage is one.
func withNERS(ls LearnerStats, m sampler.Method) LearnerStats {
	if n, ok := m.Selector.(*sampler.NERS); ok {
		st := n.Stats()
		ls.NERS = &st
	}
	return ls
}

// setIf sets *p to v when v is set (not the zero value): a TrainConfig
// field overriding a stage's default.
func setIf[T comparable](p *T, v T) {
	var zero T
	if v != zero {
		*p = v
	}
}
