package actor

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
)

// SquashedConfig configures a squashed-Gaussian actor (NewSquashed), the
// actor of SAC. The zero value of each field selects its documented
// default.
type SquashedConfig struct {
	// ID and NumActors are as in Config: 0 <= ID < NumActors (0 means 1).
	ID        int
	NumActors int
	// RandomSteps is the number of environment steps, counted from the
	// actor's first, during which it acts uniformly at random in the box
	// whatever parameters it holds: SAC's start_steps warm-up, per actor.
	// >= 0; 0 means none beyond the steps taken before the first snapshot
	// arrives, which are always uniform.
	RandomSteps int
	// Mean makes the actor play the policy's mean action tanh(μ(s)),
	// scaled to the box, once it has parameters (tests; a greedy actor).
	Mean bool
	// NStep, Gamma, LocalBatch, RefreshEvery, StatsWindow, Columns and
	// Seed mean what they mean in Config, with the same defaults (n = 3,
	// gamma = 0.99, batches of 50, a Store read every 400 steps, a window
	// of 100 episodes). SAC itself learns from 1-step targets: NStep 1
	// reproduces them.
	NStep        int
	Gamma        float64
	LocalBatch   int
	RefreshEvery int
	StatsWindow  int
	Columns      Columns
	Seed         uint64
}

// validated fills the defaults and checks the fields; it returns the
// common part as a validated Config.
func (c SquashedConfig) validated() (SquashedConfig, Config, error) {
	common, err := Config{ID: c.ID, NumActors: c.NumActors, NStep: c.NStep, Gamma: c.Gamma, LocalBatch: c.LocalBatch,
		RefreshEvery: c.RefreshEvery, StatsWindow: c.StatsWindow, Columns: c.Columns, Seed: c.Seed}.validated()
	if err != nil {
		return c, common, err
	}
	c.NumActors, c.NStep, c.Gamma, c.LocalBatch, c.RefreshEvery, c.StatsWindow =
		common.NumActors, common.NStep, common.Gamma, common.LocalBatch, common.RefreshEvery, common.StatsWindow
	if c.RandomSteps < 0 {
		return c, common, fmt.Errorf("%w: RandomSteps must be >= 0, got %d", ErrConfig, c.RandomSteps)
	}
	return c, common, nil
}

// Validate fills in the defaults and reports the first field out of range
// (wrapping ErrConfig).
func (c SquashedConfig) Validate() error {
	_, _, err := c.validated()
	return err
}

// Squashed is the Ape-X actor of SAC (Haarnoja et al. 2018,
// arXiv:1812.05905): it steps its own environment, whose action space is
// a bounded envs.Box, with its own copy of a squashed-Gaussian policy
// network, turns the steps into n-step transitions and hands them over
// LocalBatch at a time. It implements the runtime's Source (Fill).
//
// # Policy
//
// The network maps an observation to 2A outputs, the means μ(s) and the
// raw log standard deviations (model.SquashedLogStd clamps them), as
// learner.SAC trains it (learner.SACPolicyConfig). The actor draws
//
//	u = μ(s) + σ(s)·z,  z ~ N(0, I),   a = ScaleAction(tanh(u))
//
// (m·tanh(u) on a symmetric box [−m, m]), rounds a to float32 inside the
// box, stores that value in ActionVec and sends the same value to the
// environment: SAC's exploration is the policy's own noise. Before the
// first snapshot, and during the first RandomSteps steps, the action is
// uniform in the box instead (SAC's start_steps warm-up). With
// SquashedConfig.Mean it plays ScaleAction(tanh(μ(s))).
//
// Priorities, parameters, episodes, seeding and termination handling are
// as for Continuous: batches carry no priorities (new items get the
// buffer's maximum), the Store is read every RefreshEvery steps, and the
// actor's PCG (Seed, ID) draws the episode seeds, the noise and the
// uniform actions.
//
// Concurrency: Fill, SelectAction and Update are called from one goroutine
// (the actor's); Stats may be called from any goroutine at any time. A
// Squashed must not be copied after first use.
type Squashed struct {
	runner

	scfg  SquashedConfig
	box   envs.Box
	act   []float64 // the last action, as sent
	act32 []float32 // the same action, as stored
}

// NewSquashed returns a squashed-Gaussian actor for cfg that steps env
// with its own policy network net, refreshed from store (nil: keep net's
// parameters). The actor owns env and net from now on. env's action space
// must be a Box of finite bounds; net must map env's observations to
// 2·box.Dim() outputs through a linear output layer
// (learner.SACPolicyConfig; model.NewNet(cfg, nil) for an actor's copy).
// Errors wrap ErrConfig, or model.ErrShape for a snapshot of the wrong
// length. Cost: O(parameters) when it copies a snapshot.
func NewSquashed(cfg SquashedConfig, env envs.Env, net *model.Net, store *model.Store) (*Squashed, error) {
	scfg, common, err := cfg.validated()
	if err != nil {
		return nil, err
	}
	if env == nil || net == nil {
		return nil, fmt.Errorf("%w: NewSquashed needs an environment and a policy network", ErrConfig)
	}
	obsDim, box, err := squashedShapes(env, net)
	if err != nil {
		return nil, err
	}
	A := box.Dim()
	s := &Squashed{scfg: scfg, box: box, act: make([]float64, A), act32: make([]float32, A)}
	if err := s.init(common, env, net, store, obsDim, A); err != nil {
		return nil, err
	}
	if _, err := s.Update(); err != nil {
		return nil, err
	}
	return s, nil
}

// squashedShapes checks that env has a bounded Box action space whose
// bounds hold float32 values and that net is a squashed-Gaussian policy
// for it; it returns the observation width and the box.
func squashedShapes(env envs.Env, net *model.Net) (obsDim int, box envs.Box, err error) {
	box, err = boundedBox(env, "a squashed-Gaussian actor")
	if err != nil {
		return 0, box, err
	}
	obsDim = env.ObservationSpace().Dim()
	if net.In() != obsDim || net.Out() != 2*box.Dim() {
		return 0, box, fmt.Errorf("%w: policy network %d→%d does not fit the environment (%d observations; 2·%d outputs: means, then log stds)", ErrConfig, net.In(), net.Out(), obsDim, box.Dim())
	}
	if c := net.Config(); c.OutAct != model.Identity || c.Dueling {
		return 0, box, fmt.Errorf("%w: a squashed-Gaussian policy's output layer must be linear (got %v, dueling %v)", ErrConfig, c.OutAct, c.Dueling)
	}
	return obsDim, box, nil
}

// Config returns the actor's configuration with the defaults filled in.
func (s *Squashed) Config() SquashedConfig { return s.scfg }

// Stats returns a snapshot of the actor's counters (Epsilon and Sigma 0:
// the policy's std is its own). Safe for concurrent use; O(1).
func (s *Squashed) Stats() Stats { return s.stats() }

// Update reads the Store and copies a new snapshot into the network (see
// Continuous.Update). Fill calls it every RefreshEvery steps. A call that
// overlaps a Fill or Update of the same actor is refused with ErrBusy.
func (s *Squashed) Update() (bool, error) {
	return s.lockedUpdate()
}

// SelectAction returns the action for observation obs (float32, as
// stored): uniform in the box before the first snapshot and during the
// first RandomSteps steps, otherwise ScaleAction(tanh(u)) with u drawn
// from the policy's Gaussian (its mean with SquashedConfig.Mean); either
// way rounded to float32 values inside the box. The returned slice is the
// actor's and is overwritten by the next call. A policy that returns NaN
// gives NaN actions (Fill reports them). It panics if len(obs) is not the
// observation width.
//
// Cost: one forward pass (a gemv per layer) and A normal draws, tanh and
// exp evaluations, or A uniform draws and no forward pass; no allocation.
func (s *Squashed) SelectAction(obs []float32) []float64 {
	if len(obs) != s.obsDim {
		panic(fmt.Sprintf("actor: SelectAction: %d values, want %d", len(obs), s.obsDim))
	}
	if !s.loaded || s.steps < int64(s.scfg.RandomSteps) {
		uniformIn(s.box, s.act, s.rng)
	} else {
		var rng *rand.Rand // nil: the mean
		if !s.scfg.Mean {
			rng = s.rng
		}
		squashedAction(s.act, s.net.Forward32(obs), rng)
		ScaleAction(s.box, s.act, s.act)
	}
	intoBox(s.box, s.act, s.act32)
	return s.act
}

// squashedAction sets dst (A values) to tanh(u) for a policy output row
// (2A values: means, raw log stds): u = μ + σ·z with z ~ N(0, 1) drawn
// from rng, or u = μ when rng is nil.
func squashedAction(dst, row []float64, rng *rand.Rand) {
	A := len(dst)
	for j := range dst {
		u := row[j]
		if rng != nil {
			u += math.Exp(model.SquashedLogStd(row[A+j])) * rng.NormFloat64()
		}
		dst[j] = math.Tanh(u)
	}
}

// Fill implements the runtime's Source with Continuous.Fill's contract
// (LocalBatch n-step transitions per call, a partial batch when ctx ends,
// Priority nil, ErrConfig for a nil ctx or t, ErrBusy for an overlapping
// call, errors for a failing environment, a non-finite reward or a
// non-finite action).
func (s *Squashed) Fill(ctx context.Context, t *buffer.Transitions) error {
	return s.fillVec(ctx, t, s, "a squashed-Gaussian actor", 0)
}

// choose implements vecPolicy: the action SelectAction sends, stored as
// sent.
func (s *Squashed) choose(obs []float32) (send []float64, stored []float32, check []float64, what string) {
	act := s.SelectAction(obs)
	return act, s.act32, act, "policy action"
}

// record implements vecPolicy: nothing beside the transition.
func (s *Squashed) record(envs.StepResult, int) {}

// hand implements vecPolicy: the transitions' columns, no float column.
func (s *Squashed) hand(t *buffer.Transitions, k int) { s.appendOut(t, k) }

// EvaluateSquashed is Evaluate for a squashed-Gaussian policy network as
// NewSquashed takes it (SAC's): every action is the policy's mean,
// ScaleAction(tanh(μ(s))), rounded to float32 inside the box, with no
// noise, as SAC's policy is scored. The Store, the seeding (the same
// network and seed give the same returns), the ownership of env and net,
// the cancellation and the cost are as for EvaluateEpsilon. Errors wrap
// ErrConfig for an env and net that do not fit, model.ErrNonFinite for a
// policy that returns NaN.
func EvaluateSquashed(ctx context.Context, env envs.Env, net *model.Net, store *model.Store, episodes int, seed uint64) (float64, []float64, error) {
	switch {
	case env == nil || net == nil:
		return 0, nil, fmt.Errorf("%w: EvaluateSquashed needs an environment and a network", ErrConfig)
	case episodes < 1:
		return 0, nil, fmt.Errorf("%w: EvaluateSquashed: episodes must be >= 1, got %d", ErrConfig, episodes)
	}
	obsDim, box, err := squashedShapes(env, net)
	if err != nil {
		return 0, nil, err
	}
	if err := loadSnapshot(net, store); err != nil {
		return 0, nil, err
	}
	act := make([]float64, box.Dim())
	return evaluate(ctx, env, obsDim, episodes, evalRNG(seed), func(obs []float32) (envs.Action, error) {
		squashedAction(act, net.Forward32(obs), nil)
		ScaleAction(box, act, act)
		intoBox(box, act, nil)
		return envs.Action{Vec: act}, model.CheckFinite("policy action", act)
	})
}
