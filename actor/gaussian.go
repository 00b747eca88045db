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

// DefaultGaussianRefreshEvery is the number of environment steps between
// two reads of the Store by a Gaussian actor when GaussianConfig's
// RefreshEvery is 0. ReF-ER stores each step's behaviour, so a stale
// policy is never wrong, but the far-policy fraction the learner steers
// (and its KL) grow with the actors' lag behind the learner: 20 steps
// keeps the lag at a few learner updates at F = 1 while a read that finds
// no new version costs one atomic load.
const DefaultGaussianRefreshEvery = 20

// GaussianTruncation is the truncation of the actor's standard normal
// draws: |z| ≤ 3 (the paper's "truncated normal distributions with
// symmetric bounds at three standard deviations", App. A).
const GaussianTruncation = 3

// GaussianConfig configures a Gaussian-policy actor (NewGaussian), the
// actor of V-RACER with ReF-ER. The zero value of each field selects its
// documented default, except Columns, Floats and Behaviour, which must
// describe the buffer.
type GaussianConfig struct {
	// ID and NumActors are as in Config: 0 <= ID < NumActors (0 means 1).
	// ID seeds the actor's generator with Seed and makes its EpisodeIDs
	// unique across actors.
	ID        int
	NumActors int
	// Gamma is the discount stored in each step's Discount column (0 at a
	// termination), in (0, 1]. 0 means 0.99. ReF-ER's Retrace targets
	// (the learner's controller) use it; transitions are single steps
	// (n = 1).
	Gamma float64
	// LocalBatch, RefreshEvery and StatsWindow are as in Config; 0 means
	// 50, DefaultGaussianRefreshEvery (20) and 100.
	LocalBatch   int
	RefreshEvery int
	StatsWindow  int
	// Columns selects the optional buffer columns (ColumnsOf the
	// buffer's Config); Episode is required (ReF-ER keeps whole
	// episodes).
	Columns Columns
	// Floats are the buffer's float columns (buffer.Config.Floats), in
	// order. The actor fills the three Behaviour names and stores zeros
	// in any other.
	Floats []buffer.FloatColumn
	// Behaviour indexes, in Floats, the columns of the behaviour's mean
	// and std (A values each) and of V(s_T) (1 value). Required; for
	// ReF-ER, sampler.REFERColumnIndex of the buffer's Config gives them.
	Behaviour *Behaviour
	// Seed seeds the actor's generator (episode seeds and the policy's
	// noise) together with ID.
	Seed uint64
}

// validated fills the defaults and checks the fields; it returns the
// common part as a validated Config (n = 1).
func (c GaussianConfig) validated() (GaussianConfig, Config, error) {
	if c.RefreshEvery == 0 {
		c.RefreshEvery = DefaultGaussianRefreshEvery
	}
	common, err := Config{ID: c.ID, NumActors: c.NumActors, NStep: 1, Gamma: c.Gamma, LocalBatch: c.LocalBatch,
		RefreshEvery: c.RefreshEvery, StatsWindow: c.StatsWindow, Columns: c.Columns, Seed: c.Seed}.validated()
	if err != nil {
		return c, common, err
	}
	c.NumActors, c.Gamma, c.LocalBatch, c.StatsWindow = common.NumActors, common.Gamma, common.LocalBatch, common.StatsWindow
	if !c.Columns.Episode {
		return c, common, fmt.Errorf("%w: a Gaussian actor needs the episode columns (Columns.Episode): ReF-ER keeps whole episodes", ErrConfig)
	}
	if c.Behaviour == nil {
		return c, common, fmt.Errorf("%w: a Gaussian actor needs GaussianConfig.Behaviour, the float columns of its behaviour's mean, std and V(s_T) (sampler.REFERColumnIndex gives them)", ErrConfig)
	}
	return c, common, nil
}

// Validate fills in the defaults and reports the first field out of range
// (wrapping ErrConfig). Floats and Behaviour are checked against the
// environment by NewGaussian.
func (c GaussianConfig) Validate() error {
	_, _, err := c.validated()
	return err
}

// Gaussian is the actor of V-RACER with ReF-ER (Novati & Koumoutsakos
// 2019, arXiv 1807.05827, App. A and Algorithm 2): it steps its own
// environment with a Gaussian policy read from its own copy of V-RACER's
// network, and stores per step everything ReF-ER needs: the unclipped
// sample and the behaviour μ_t = (mean, std) that drew it. It implements
// the runtime's Source (Fill).
//
// # Policy
//
// The network maps an observation to a row laid out as
// model.GaussianHead{Dim: A} reads it: V(s), the mean m(s) and the std
// parameters (std = model.GaussStd). The actor draws
//
//	a = m(s) + std·z,  z_j ~ N(0, 1) truncated to |z_j| ≤ 3 (redrawn until inside)
//
// in the policy's units, sends ScaleAction(box, a) clipped to the box to
// the environment (a_env = a·(high − low)/2 on a symmetric box, App. B),
// and stores a itself, unclipped and rounded to float32, in ActionVec,
// with the mean and std (float32) in the REFER float columns. The stored
// values are the behaviour: the learner's rho uses exactly them. (The
// paper's code redraws out-of-bounds z from U[−3, 3]; the truncated normal
// here differs from it in 0.27% of draws. Both use the untruncated density
// for rho.)
//
// The actor acts with whatever parameters its network holds, also before
// the first snapshot: a Gaussian of any parameters is a valid behaviour
// once stored, so there is no uniform warm-up.
//
// # Steps and episodes
//
// Transitions are single steps (n = 1): Reward r_{t+1}, Discount gamma (0
// at a termination), Flags, EpisodeID and EpisodeStep. When a time limit
// cuts an episode, the actor forwards its network on the last state s_T
// and stores V(s_T) in the bootstrap column of the last step, for the
// stage's Retrace targets until the learner refreshes it. Parameters come
// from the Store every RefreshEvery steps as for the other actors;
// episodes are seeded from the actor's PCG (Seed, ID).
//
// Concurrency: Fill, SelectAction and Update are called from one goroutine
// (the actor's); Stats may be called from any goroutine at any time. A
// Gaussian must not be copied after first use.
type Gaussian struct {
	runner

	gcfg                     GaussianConfig
	head                     model.GaussianHead
	box                      envs.Box
	meanCol, stdCol, bootCol int

	mean, std []float64 // μ of the last SelectAction
	a         []float64 // its unclipped sample
	sent      []float64 // the action sent: ScaleAction(a) clipped to the box
	a32       []float32 // a as stored

	// Float rows of the transitions in the adder's output, in the same
	// order (one per transition, n = 1).
	pMean, pStd, pBoot []float32
}

// NewGaussian returns a Gaussian actor for cfg that steps env with its own
// network net, refreshed from store (nil: keep net's parameters). The
// actor owns env and net from now on. env's action space must be a
// bounded Box of A dimensions; net must map env's observations (net.In())
// to 1 + 2·A outputs (learner.VRACERNetConfig; model.NewNet(cfg, nil) for
// an actor's copy); cfg.Behaviour must index columns of cfg.Floats of
// widths A, A and 1. Errors
// wrap ErrConfig, or model.ErrShape for a snapshot of the wrong length.
func NewGaussian(cfg GaussianConfig, env envs.Env, net *model.Net, store *model.Store) (*Gaussian, error) {
	gcfg, common, err := cfg.validated()
	if err != nil {
		return nil, err
	}
	if env == nil || net == nil {
		return nil, fmt.Errorf("%w: NewGaussian needs an environment and a network", ErrConfig)
	}
	box, err := boundedBox(env, "a Gaussian actor")
	if err != nil {
		return nil, err
	}
	A := box.Dim()
	head := model.GaussianHead{Dim: A}
	obsDim := env.ObservationSpace().Dim()
	if net.In() != obsDim || net.Out() != head.Width() {
		return nil, fmt.Errorf("%w: network %d→%d does not fit the environment (%d observations; 1 + 2·%d outputs: V, mean, std parameters)", ErrConfig, net.In(), net.Out(), obsDim, A)
	}
	beh := *gcfg.Behaviour
	if err := beh.check("GaussianConfig.Behaviour", gcfg.Floats, A, true); err != nil {
		return nil, err
	}
	g := &Gaussian{gcfg: gcfg, head: head, box: box, meanCol: beh.Mean, stdCol: beh.Std, bootCol: beh.Boot,
		mean: make([]float64, A), std: make([]float64, A), a: make([]float64, A), sent: make([]float64, A), a32: make([]float32, A)}
	if err := g.init(common, env, net, store, obsDim, A); err != nil {
		return nil, err
	}
	if _, err := g.Update(); err != nil {
		return nil, err
	}
	return g, nil
}

// Config returns the actor's configuration with the defaults filled in.
func (g *Gaussian) Config() GaussianConfig { return g.gcfg }

// Stats returns a snapshot of the actor's counters (Epsilon and Sigma 0:
// the policy's std is the learner's, in its Stats). Safe for concurrent
// use; O(1).
func (g *Gaussian) Stats() Stats { return g.stats() }

// Update reads the Store and copies a new snapshot into the network (see
// Continuous.Update). Fill calls it every RefreshEvery steps.
func (g *Gaussian) Update() (bool, error) {
	return g.lockedUpdate()
}

// SelectAction draws the action for observation obs (float32, as stored)
// from the network's Gaussian policy and returns the action to send to the
// environment, ScaleAction(box, a) clipped to the box. Behaviour returns
// the mean, the std and the unclipped sample a of the same draw. The
// returned slice is the actor's and is overwritten by the next call. It
// panics if len(obs) is not the observation width.
//
// Cost: one forward pass (a gemv per layer) and A truncated-normal draws
// (1.003 normal draws each on average); no allocation.
func (g *Gaussian) SelectAction(obs []float32) []float64 {
	if len(obs) != g.obsDim {
		panic(fmt.Sprintf("actor: SelectAction: %d values, want %d", len(obs), g.obsDim))
	}
	row := g.net.Forward32(obs)
	copy(g.mean, g.head.Mean(row))
	g.head.Std(g.std, row)
	for j := range g.a {
		g.a[j] = g.mean[j] + g.std[j]*TruncatedNormal(g.rng, GaussianTruncation)
		g.a32[j] = float32(g.a[j])
	}
	ScaleAction(g.box, g.sent, g.a)
	intoBox(g.box, g.sent, nil)
	return g.sent
}

// Behaviour returns the last SelectAction's behaviour μ (mean and std)
// and its unclipped sample, in policy units (slices of the actor's,
// overwritten by the next call).
func (g *Gaussian) Behaviour() (mean, std, a []float64) { return g.mean, g.std, g.a }

// TruncatedNormal draws a standard normal value truncated to [−k, k] by
// redrawing (k = 3 redraws 0.27% of draws). Below k = 0.5, where most
// draws would be redrawn (and a tiny k would loop for ever), it inverts
// the normal CDF over [Φ(−k), Φ(k)] instead. A k that is not > 0 (NaN
// included) gives 0. rng must not be nil (a per-step kernel).
func TruncatedNormal(rng *rand.Rand, k float64) float64 {
	if !(k > 0) {
		return 0
	}
	if k < 0.5 {
		hi := math.Erf(k / math.Sqrt2) // 2Φ(k) − 1
		return math.Sqrt2 * math.Erfinv(hi*(2*rng.Float64()-1))
	}
	for {
		if z := rng.NormFloat64(); z >= -k && z <= k {
			return z
		}
	}
}

// Fill implements the runtime's Source: it steps the environment until
// LocalBatch steps are ready and appends exactly LocalBatch of them to t,
// then returns nil; when ctx ends it returns nil at once after appending
// the steps completed so far (a partial batch).
//
// Columns appended: Obs, NextObs, ActionVec (the unclipped sample a, in
// policy units), Reward, Discount (gamma, 0 after a termination), Flags,
// the optional columns Columns selects, and every float column of
// GaussianConfig.Floats: the behaviour's mean and std (Behaviour.Mean,
// Behaviour.Std), V(s_T) on the last step of a truncated episode and 0
// otherwise (Behaviour.Boot), zeros in any other. Priority stays nil. t
// should be empty or hold earlier batches of this actor (with all its
// float columns); a t with priorities is refused, a nil ctx or t is an
// ErrConfig error, and a Fill that overlaps another Fill or Update of the
// same actor an ErrBusy one.
//
// Errors: an environment that fails a step or returns an observation of
// the wrong width, a non-finite reward, a non-finite policy (NaN mean or
// std, wrapping model.ErrNonFinite).
func (g *Gaussian) Fill(ctx context.Context, t *buffer.Transitions) error {
	return g.fillVec(ctx, t, g, "a Gaussian actor", len(g.gcfg.Floats))
}

// hand implements vecPolicy: it appends the first k pending transitions,
// float columns included, to t and drops them.
func (g *Gaussian) hand(t *buffer.Transitions, k int) {
	n0 := t.Len()
	g.appendOut(t, k)
	if len(t.Floats) == 0 {
		t.Floats = make([][]float32, len(g.gcfg.Floats))
	}
	A := g.head.Dim
	for i, f := range g.gcfg.Floats {
		col := t.Floats[i]
		if len(col) < n0*f.Width { // a batch that had none: zeros for the earlier rows
			col = append(col, make([]float32, n0*f.Width-len(col))...)
		}
		switch i {
		case g.meanCol:
			col = append(col, g.pMean[:k*A]...)
		case g.stdCol:
			col = append(col, g.pStd[:k*A]...)
		case g.bootCol:
			col = append(col, g.pBoot[:k]...)
		default:
			col = append(col, make([]float32, k*f.Width)...)
		}
		t.Floats[i] = col
	}
	g.pMean, g.pStd, g.pBoot = dropFront(g.pMean, k*A), dropFront(g.pStd, k*A), dropFront(g.pBoot, k)
}

// choose implements vecPolicy: SelectAction's action (clipped to the box)
// is sent, the unclipped sample stored, and the sample must be finite.
func (g *Gaussian) choose(obs []float32) (send []float64, stored []float32, check []float64, what string) {
	act := g.SelectAction(obs)
	return act, g.a32, g.a, "policy"
}

// record implements vecPolicy: the behaviour's mean and std of the step,
// and V(s_T) when a time limit cut the episode at it.
func (g *Gaussian) record(res envs.StepResult, before int) {
	if g.adder.Out.Len() != before+1 {
		panic("actor: Gaussian: a 1-step adder emitted other than one transition")
	}
	for j := range g.a {
		g.pMean = append(g.pMean, float32(g.mean[j]))
		g.pStd = append(g.pStd, float32(g.std[j]))
	}
	boot := float32(0)
	if res.Truncated && !res.Terminated {
		boot = float32(g.head.Value(g.net.Forward32(g.next)))
	}
	g.pBoot = append(g.pBoot, boot)
}
