package actor

import (
	"context"
	"fmt"
	"math"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
)

// Continuous is the Ape-X actor for continuous actions: Ape-X DPG's actor
// (Horgan et al. 2018, arXiv 1803.00933, §4.2) with TD3's exploration
// (Fujimoto et al. 2018, arXiv 1802.09477). It steps its own environment,
// whose action space is a bounded envs.Box, with its own copy of a
// deterministic policy network π from observations to [−1, 1]^A, turns the
// steps into n-step transitions (NStep) and hands them over LocalBatch at
// a time. It implements the runtime's Source (Fill), so a TD3 learner can
// be fed by many of them.
//
// # Policy
//
//	a = clip(ScaleAction(π(s)) + ε, low, high),  ε_j ~ N(0, (σ_i·half_j)²)
//
// ScaleAction maps [−1, 1] affinely onto [low, high] (max_action·π(s) on
// a symmetric box), half_j = (high_j − low_j)/2, and σ_i is the actor's
// noise (ContinuousConfig: 0.1 for every actor by default). The action is
// then rounded to float32, staying inside the box: that value is stored in
// the buffer's ActionVec column and the same value is sent to the
// environment, so the learner replays exactly what was played. Before the
// first snapshot, and during the first RandomSteps steps, the action is
// uniform in the box instead (TD3's warm-up). Observations are converted
// to float32 once, as they are stored, and π acts on those values.
//
// # Priorities
//
// A continuous actor has no critic, so it cannot compute Ape-X's initial
// priorities: every batch goes out with Priority nil, and the buffer gives
// each new item the largest priority it has seen
// (buffer.Config.InitialPriority before any), as PER's Algorithm 1 and LAP
// do for new transitions. The learner's first sample of an item sets its
// real priority.
//
// # Parameters and episodes
//
// As for Actor: the Store is read at NewContinuous and then every
// RefreshEvery steps, copying only a new version; a nil Store means a
// fixed policy. Episodes are reset with seeds from the actor's PCG
// generator, seeded from (Seed, ID), which also draws the noise and the
// uniform actions; nothing reads a clock or a global generator, so the
// same seed and snapshots give the same transitions. Terminations store
// discount 0, time-limit truncations bootstrap (NStep).
//
// Concurrency: Fill, SelectAction and Update are called from one goroutine
// (the actor's); Stats may be called from any goroutine at any time. A
// Continuous must not be copied after first use.
type Continuous struct {
	runner // episodes, adder, Store refresh, hand-over, statistics

	ccfg  ContinuousConfig
	sigma float64
	box   envs.Box  // the environment's action space (a copy)
	half  []float64 // (high − low)/2 per dimension, the noise's unit
	ou    []float64 // the Ornstein–Uhlenbeck state per dimension (OUTheta > 0)
	act   []float64 // the last action, as sent: float32 values in the box
	act32 []float32 // the same action, as stored

	// ReF-ER behaviour recording (ContinuousConfig.Floats; refer false
	// without): the float columns' indices, the last SelectAction's
	// unclipped sample (as stored), mean and std, and the float rows of
	// the transitions in the adder's output, in the same order.
	refer           bool
	meanCol, stdCol int
	raw32           []float32
	bMean, bStd     []float64
	pMean, pStd     []float32
}

// NewContinuous returns a continuous actor for cfg that steps env with its
// own policy network policy, refreshed from store (nil: keep policy's
// parameters). The actor owns env and policy from now on. env's action
// space must be a Box of finite bounds (each holding a float32 value);
// policy must map env's observations (policy.In() values) to one value per
// action dimension (policy.Out() = box.Dim()) through a bounded output
// activation (model.Tanh, or model.Softsign), so that its outputs lie in
// [−1, 1]. Errors wrap ErrConfig, or model.ErrShape for a snapshot of the
// wrong length. Cost: O(parameters) when it copies a snapshot.
func NewContinuous(cfg ContinuousConfig, env envs.Env, policy *model.Net, store *model.Store) (*Continuous, error) {
	ccfg, common, err := cfg.validated()
	if err != nil {
		return nil, err
	}
	if env == nil || policy == nil {
		return nil, fmt.Errorf("%w: NewContinuous needs an environment and a policy network", ErrConfig)
	}
	obsDim, box, err := boxShapes(env, policy)
	if err != nil {
		return nil, err
	}
	A := box.Dim()
	c := &Continuous{ccfg: ccfg, sigma: ccfg.sigma(), box: box,
		half: make([]float64, A), act: make([]float64, A), act32: make([]float32, A), ou: make([]float64, A)}
	for j := range A {
		c.half[j] = box.High[j]/2 - box.Low[j]/2
	}
	if len(ccfg.Floats) > 0 {
		b := *ccfg.Behaviour
		if err := b.check("ContinuousConfig.Behaviour", ccfg.Floats, A, false); err != nil {
			return nil, err
		}
		c.refer, c.meanCol, c.stdCol = true, b.Mean, b.Std
		c.raw32, c.bMean, c.bStd = make([]float32, A), make([]float64, A), make([]float64, A)
	}
	if err := c.init(common, env, policy, store, obsDim, A); err != nil {
		return nil, err
	}
	if _, err := c.Update(); err != nil {
		return nil, err
	}
	return c, nil
}

// boxShapes checks that env has a bounded Box action space and that net is
// a policy for it; it returns the observation width and the box.
func boxShapes(env envs.Env, net *model.Net) (obsDim int, box envs.Box, err error) {
	box, err = boundedBox(env, "a continuous actor (New takes a Discrete action space)")
	if err != nil {
		return 0, box, err
	}
	obsDim = env.ObservationSpace().Dim()
	if net.In() != obsDim || net.Out() != box.Dim() {
		return 0, box, fmt.Errorf("%w: policy network %d→%d does not fit the environment (%d observations, %d action dimensions)", ErrConfig, net.In(), net.Out(), obsDim, box.Dim())
	}
	if act := net.Config().OutAct; act != model.Tanh && act != model.Softsign {
		return 0, box, fmt.Errorf("%w: the policy network's output activation is %v; a policy must map into [-1, 1] (model.Tanh)", ErrConfig, act)
	}
	return obsDim, box, nil
}

// Config returns the actor's configuration with the defaults filled in.
func (c *Continuous) Config() ContinuousConfig { return c.ccfg }

// Sigma returns the actor's exploration noise σ_i, in units of the box's
// half-range (0 with NoNoise).
func (c *Continuous) Sigma() float64 { return c.sigma }

// Stats returns a snapshot of the actor's counters (Sigma set, Epsilon 0).
// Safe for concurrent use; O(1).
func (c *Continuous) Stats() Stats {
	s := c.stats()
	s.Sigma = c.sigma
	return s
}

// Update reads the Store and, if it holds a snapshot whose version differs
// from the network's (or the network has none yet), copies it into the
// policy network; it reports whether it did. Fill calls it every
// RefreshEvery environment steps; call it to refresh now. Without a Store it
// does nothing. An error means a snapshot of the wrong length
// (model.ErrShape). A call that overlaps a Fill or Update of the same actor
// is refused with ErrBusy. Cost: one atomic load, plus O(parameters) when it
// copies.
func (c *Continuous) Update() (bool, error) {
	return c.lockedUpdate()
}

// SelectAction returns the action for observation obs (float32, as
// stored): uniform in the box before the first snapshot and during the
// first RandomSteps steps, otherwise ScaleAction(π(obs)) plus the actor's
// Gaussian noise, clipped to the box; either way rounded to float32 values
// inside the box. The returned slice is the actor's and is overwritten by
// the next call. A policy that returns NaN gives NaN actions (Fill reports
// them). It panics if len(obs) is not the observation width.
//
// Cost: one forward pass (a gemv per layer) and A normal draws from the
// actor's generator, or A uniform draws and no forward pass; no
// allocation.
func (c *Continuous) SelectAction(obs []float32) []float64 {
	if len(obs) != c.obsDim {
		panic(fmt.Sprintf("actor: SelectAction: %d values, want %d", len(obs), c.obsDim))
	}
	if !c.loaded || c.steps < int64(c.ccfg.RandomSteps) {
		uniformIn(c.box, c.act, c.rng)
		if c.refer { // no Gaussian drew it: the behaviour is recorded as centred on a
			for j, v := range c.act {
				c.bMean[j], c.bStd[j], c.raw32[j] = v, c.sigma*c.half[j], float32(v)
			}
		}
	} else {
		ScaleAction(c.box, c.act, c.net.Forward32(obs))
		if c.refer {
			copy(c.bMean, c.act)
		}
		switch {
		case c.sigma > 0 && c.ccfg.OUTheta > 0:
			if c.epLen == 0 {
				clear(c.ou) // a new episode: the process restarts at 0
			}
			const dt = 0.01
			for j := range c.act {
				c.ou[j] += -c.ccfg.OUTheta*c.ou[j]*dt + c.sigma*math.Sqrt(dt)*c.rng.NormFloat64()
				c.act[j] += c.ou[j] * c.half[j]
			}
		case c.sigma > 0:
			for j := range c.act {
				c.act[j] += c.sigma * c.half[j] * c.rng.NormFloat64()
			}
		}
		if c.refer {
			for j, v := range c.act {
				c.bStd[j], c.raw32[j] = c.sigma*c.half[j], float32(v)
			}
		}
	}
	intoBox(c.box, c.act, c.act32)
	return c.act
}

// Fill implements the runtime's Source: it steps the environment until
// LocalBatch n-step transitions are ready and appends exactly LocalBatch of
// them to t (transitions completed beyond that, when an episode's end
// flushes several at once, wait for the next Fill), then returns nil.
//
// Columns appended: Obs, NextObs, ActionVec (the action a_t of each
// transition's first step, box.Dim() float32 values, exactly as sent to
// the environment), Reward (the n-step return), Discount (gamma^m, 0 after
// a termination), Flags (FlagTerminal, FlagTruncated), and the optional
// ones ContinuousConfig.Columns selects: EpisodeID and EpisodeStep,
// GlobalStep, ActorID, StateHash and NextStateHash. Priority stays nil (see
// the type's doc). t should be empty (as the pipeline hands it) or hold
// earlier batches of this actor; a t with priorities is refused, and so
// is, when the actor records its behaviour, a t with another number of
// float columns than ContinuousConfig.Floats.
//
// A nil ctx or t is an ErrConfig error (nothing stepped), and a Fill that
// overlaps another Fill or Update of the same actor an ErrBusy one. When ctx
// ends, Fill returns nil at once (within one environment step) after
// appending the transitions completed so far (a partial batch), which the
// pipeline discards and counts. Errors: an environment that fails a step or
// returns an observation of the wrong width, a non-finite reward, a
// non-finite action (a diverged policy, wrapping model.ErrNonFinite).
//
// Cost per environment step: SelectAction, the environment's step, and
// O(n·(observation + action width)) in the adder.
func (c *Continuous) Fill(ctx context.Context, t *buffer.Transitions) error {
	floats := 0
	if c.refer {
		floats = len(c.ccfg.Floats)
	}
	return c.fillVec(ctx, t, c, "a continuous actor", floats)
}

// hand implements vecPolicy: it appends the first k pending transitions
// to t, with the REFER float columns when the actor records its
// behaviour, and drops them.
func (c *Continuous) hand(t *buffer.Transitions, k int) {
	if !c.refer {
		c.appendOut(t, k)
		return
	}
	n0 := t.Len()
	c.appendOut(t, k)
	if len(t.Floats) == 0 {
		t.Floats = make([][]float32, len(c.ccfg.Floats))
	}
	A := len(c.half)
	for i, f := range c.ccfg.Floats {
		col := t.Floats[i]
		if len(col) < n0*f.Width {
			col = append(col, make([]float32, n0*f.Width-len(col))...)
		}
		switch i {
		case c.meanCol:
			col = append(col, c.pMean[:k*A]...)
		case c.stdCol:
			col = append(col, c.pStd[:k*A]...)
		default:
			col = append(col, make([]float32, k*f.Width)...)
		}
		t.Floats[i] = col
	}
	c.pMean, c.pStd = dropFront(c.pMean, k*A), dropFront(c.pStd, k*A)
}

// choose implements vecPolicy: the action SelectAction sends, stored as
// sent or, when the actor records its behaviour, unclipped (the learner's
// ratio uses the density that drew it).
func (c *Continuous) choose(obs []float32) (send []float64, stored []float32, check []float64, what string) {
	act := c.SelectAction(obs)
	stored = c.act32
	if c.refer {
		stored = c.raw32
	}
	return act, stored, act, "policy action"
}

// record implements vecPolicy: the behaviour's mean and std of the step,
// when the actor records them.
func (c *Continuous) record(_ envs.StepResult, before int) {
	if !c.refer {
		return
	}
	if c.adder.Out.Len() != before+1 {
		panic("actor: Continuous: a 1-step adder emitted other than one transition")
	}
	for j := range c.bMean {
		c.pMean = append(c.pMean, float32(c.bMean[j]))
		c.pStd = append(c.pStd, float32(c.bStd[j]))
	}
}
