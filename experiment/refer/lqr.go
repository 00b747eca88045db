package refer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/apexrl/apex/actor"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/experiment/control"
	"github.com/apexrl/apex/learner"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
)

// LQRConfig is part 2: V-RACER with full ReF-ER on LQR-v0, several seeds,
// then the learned policy mean's slope against the Riccati gain. A zero
// field selects the default noted on it (DefaultLQRConfig holds them all).
//
// The runs are built from the replay, sampler, learner and actor packages
// directly, not through runtime.Trainer (which does not hand out its
// trained network): one goroutine per run steps one actor (one
// environment step per Fill) and the learner in lockstep, NStart
// environment steps first, then one environment step and one learner step
// at a time (F = 1). A seed gives the same run, bit for bit.
type LQRConfig struct {
	// Params are the environment's parameters; the zero value means
	// DefaultLQRParams with X0 = 1 (A = B = Q = R = 1, UMax 2, XMax 3,
	// x_0 in [−1, 1), no noise).
	Params envs.LQRParams `json:"params"`
	// EpisodeSteps, when > 0, replaces LQR-v0's time limit of 200 steps
	// (envs.WithMaxSteps). The environment never terminates, so a
	// shorter limit changes only how often start states are drawn (and
	// bootstraps V(s_T) more often), not the optimal policy.
	EpisodeSteps int `json:"episode_steps,omitempty"`
	// Gamma is the discount of the returns and of the Riccati gain; 0.9.
	Gamma float64 `json:"gamma"`
	// Steps is the learner steps of a run (> 0, no default).
	Steps int64 `json:"steps"`
	// Seeds are the runs' seeds (at least one).
	Seeds []uint64 `json:"seeds"`
	// Workers is the number of runs trained at once (>= 1).
	Workers int `json:"workers"`
	// Hidden, Batch and LR are V-RACER's network, batch and initial Adam
	// step (learner defaults: 2×64 Softsign, 128, 1e-3).
	Hidden []int   `json:"hidden"`
	Batch  int     `json:"batch"`
	LR     float64 `json:"lr"`
	// Capacity is the replay's capacity; the stage keeps N_max = Capacity
	// − Capacity/8 steps of finished episodes. 2^14.
	Capacity int `json:"capacity"`
	// NStart is the environment steps stored before learning starts; 2^12.
	NStart int `json:"n_start"`
	// C, D and A are ReF-ER's (sampler.REFERConfig); 0 means 4, 0.1 and
	// 5/Steps.
	C float64 `json:"c"`
	D float64 `json:"d"`
	A float64 `json:"a"`
	// NoRewardScale feeds the raw rewards to the Retrace targets instead
	// of dividing them by their RMS (sampler.REFERConfig.NoRewardScale).
	NoRewardScale bool `json:"no_reward_scale,omitempty"`
	// EvalEverySteps is the learner steps between greedy evaluations of
	// EvalEpisodes episodes; FinalEpisodes the final one's. 1000, 5, 20.
	EvalEverySteps int64 `json:"eval_every_steps"`
	EvalEpisodes   int   `json:"eval_episodes"`
	FinalEpisodes  int   `json:"final_episodes"`
	// GridPoints is the number of evenly spaced states in [−X0, X0] the
	// slope is fitted over (>= 2); 41.
	GridPoints int `json:"grid_points"`
	// Tolerance is the largest relative error |slope + K*|/K* the check
	// accepts; 0.1.
	Tolerance float64 `json:"tolerance"`
}

// DefaultLQRConfig is part 2's default: 4 seeds of 30k learner steps, 2
// at once, V-RACER at refer.md §6's settings (2×64 Softsign, batch 128,
// Adam 1e-3, C 4, D 0.1, A = 5/T_total, rewards scaled by their RMS) on
// LQR-v0 with start states x_0 in [−1, 1) (X0 = 1; the other parameters
// LQR-v0's defaults: A = B = Q = R = 1, UMax 2, XMax 3) and discount 0.9
// (K* = 0.588403), a replay of 2^14 (N_max = 14336 steps, 72 episodes)
// with N_start 2^12, the slope fitted on 41 states over [−1, 1] and
// accepted within 10% of −K*.
//
// Where the notes were silent, these were measured (2 seeds, 30k steps,
// capacity 2^15 unless said): at gamma 0.99 (and 0.95) the values of the
// first, wall-bound policy (about −75 in RMS-scaled units) drive the
// Softsign trunk into saturation and the policy mean comes out flat in x
// (slope 0) in every run; without the reward scaling the same happens at
// gamma 0.9. At gamma 0.9 with X0 = 2 the mean learns but bends toward
// the edges of [−2, 2] (u(±2) about ∓0.85 against ∓1.18), slope −0.44 to
// −0.50 (15–25% short of −K*) at 30k–60k steps, with N_max 2^15 or 2^14,
// 20- or 50-step episodes, process noise or C = 8 alike: the far-policy
// filter and the penalty hold back the states where the mean moves most
// (the largest |x|). With X0 = 1 the slope reached −0.49 to −0.55 at N_max
// 2^15 (30k–50k steps) and −0.565 at 2^14 (30k steps).
func DefaultLQRConfig() LQRConfig {
	p := envs.DefaultLQRParams()
	p.X0 = 1
	return LQRConfig{Params: p, Gamma: 0.9, Steps: 30_000, Seeds: []uint64{1, 2, 3, 4}, Workers: 2,
		Hidden: []int{64, 64}, Batch: 128, LR: 1e-3, Capacity: 1 << 14, NStart: 1 << 12, C: 4, D: 0.1,
		EvalEverySteps: 1000, EvalEpisodes: 5, FinalEpisodes: 20, GridPoints: 41, Tolerance: 0.1}
}

// withDefaults fills the zero fields.
func (c LQRConfig) withDefaults() LQRConfig {
	d := DefaultLQRConfig()
	if c.Params == (envs.LQRParams{}) {
		c.Params = d.Params
	}
	if c.Hidden == nil {
		c.Hidden = d.Hidden
	}
	def(&c.Gamma, d.Gamma)
	def(&c.Batch, d.Batch)
	def(&c.LR, d.LR)
	def(&c.Capacity, d.Capacity)
	def(&c.NStart, d.NStart)
	def(&c.C, d.C)
	def(&c.D, d.D)
	def(&c.EvalEverySteps, d.EvalEverySteps)
	def(&c.EvalEpisodes, d.EvalEpisodes)
	def(&c.FinalEpisodes, d.FinalEpisodes)
	def(&c.GridPoints, d.GridPoints)
	def(&c.Tolerance, d.Tolerance)
	return c
}

func def[T comparable](p *T, d T) {
	var zero T
	if *p == zero {
		*p = d
	}
}

// Validate reports a config that cannot run (after the defaults).
func (c LQRConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Steps <= 0:
		return fmt.Errorf("refer: lqr: Steps must be > 0, got %d", c.Steps)
	case len(c.Seeds) == 0:
		return errors.New("refer: lqr: no seeds")
	case c.Workers < 1:
		return fmt.Errorf("refer: lqr: Workers must be >= 1, got %d", c.Workers)
	case c.GridPoints < 2:
		return fmt.Errorf("refer: lqr: GridPoints must be >= 2, got %d", c.GridPoints)
	case c.NStart < c.Batch || c.Capacity <= c.NStart:
		return fmt.Errorf("refer: lqr: need Batch <= NStart < Capacity, got %d, %d, %d", c.Batch, c.NStart, c.Capacity)
	case !(c.Tolerance > 0) || !(c.Gamma > 0 && c.Gamma <= 1):
		return fmt.Errorf("refer: lqr: Tolerance must be > 0 and Gamma in (0, 1], got %v and %v", c.Tolerance, c.Gamma)
	case c.EvalEverySteps < 0 || c.EvalEpisodes < 1 || c.FinalEpisodes < 1:
		return fmt.Errorf("refer: lqr: bad evaluation settings (every %d steps, %d and %d episodes)", c.EvalEverySteps, c.EvalEpisodes, c.FinalEpisodes)
	}
	if err := c.Params.Validate(); err != nil {
		return fmt.Errorf("refer: lqr: %w", err)
	}
	if _, _, err := c.Params.Gain(c.Gamma); err != nil {
		return fmt.Errorf("refer: lqr: %w", err)
	}
	return nil
}

// LQRRun is one trained run.
type LQRRun struct {
	Seed uint64 `json:"seed"`
	// Slope and Intercept are the least-squares line u ≈ Intercept +
	// Slope·x through the learned policy mean (in the environment's units,
	// before the action clip) on the grid; Residual the RMS of the misfit.
	Slope     float64 `json:"slope"`
	Intercept float64 `json:"intercept"`
	Residual  float64 `json:"residual_rms"`
	// RelErr is |Slope + K*|/K*; Within says whether it is at most the
	// tolerance.
	RelErr float64 `json:"rel_err"`
	Within bool    `json:"within"`
	// Final is the final greedy evaluation's mean return; Curve the
	// periodic evaluations (with the stage's far fraction and the batch
	// KL), then the final one.
	Final float64             `json:"final_return"`
	Curve []runtime.EvalPoint `json:"curve"`
	// X and U are the grid and the learned mean on it.
	X []float64 `json:"x"`
	U []float64 `json:"u"`
	// Std is the policy's final std (environment units), Beta the stage's
	// final beta.
	Std  float64 `json:"std"`
	Beta float64 `json:"beta"`
	// EnvSteps are the environment steps taken; Seconds the wall time.
	EnvSteps int64   `json:"env_steps"`
	Seconds  float64 `json:"seconds"`
}

// LQRResult is part 2's outcome.
type LQRResult struct {
	Config LQRConfig `json:"config"`
	// K and P are the Riccati gain and value coefficient (Params.Gain): the
	// optimal policy is u = −K·x, its discounted return −P·x_0².
	// OptimalReturn is what the evaluations measure for that policy: the
	// undiscounted return of an endless episode, −(Q + R·K²)·x_0²/(1 −
	// (A − B·K)²), averaged over x_0 uniform in [−X0, X0] (x_0² averages
	// X0²/3); without noise, and 0 if the closed loop does not contract.
	K             float64  `json:"k_star"`
	P             float64  `json:"p_star"`
	OptimalReturn float64  `json:"optimal_return"`
	Runs          []LQRRun `json:"runs"`
	// MedianSlope is the runs' median slope, MedianRelErr its |· + K|/K.
	MedianSlope  float64         `json:"median_slope"`
	MedianRelErr float64         `json:"median_rel_err"`
	Checks       []control.Check `json:"checks"`
}

// OK reports whether every check held.
func (r *LQRResult) OK() bool { return control.AllOK(r.Checks) }

// RunLQR trains cfg's seeds, Workers at a time, fits each learned policy's
// slope and checks the median slope against −K*. onRun, if not nil, is
// called after each run (one call at a time). It stops at ctx's end or
// at the first failed run, having waited for the runs in flight.
func RunLQR(ctx context.Context, cfg LQRConfig, onRun func(LQRRun)) (*LQRResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	k, p, _ := cfg.Params.Gain(cfg.Gamma) // checked by Validate
	res := &LQRResult{Config: cfg, K: k, P: p, Runs: make([]LQRRun, len(cfg.Seeds))}
	pr := cfg.Params
	if f := pr.A - pr.B*k; math.Abs(f) < 1 {
		res.OptimalReturn = -(pr.Q + pr.R*k*k) / (1 - f*f) * pr.X0 * pr.X0 / 3
	}
	err := control.Pool(ctx, cfg.Workers, len(cfg.Seeds), func(ctx context.Context, i int) error {
		r, err := trainLQR(ctx, cfg, cfg.Seeds[i], k)
		if err != nil {
			return fmt.Errorf("refer: lqr seed %d: %w", cfg.Seeds[i], err)
		}
		res.Runs[i] = r
		return nil
	}, func(i int) {
		if onRun != nil {
			onRun(res.Runs[i])
		}
	})
	if err != nil {
		return nil, err
	}
	slopes := make([]float64, len(res.Runs))
	for i, r := range res.Runs {
		slopes[i] = r.Slope
	}
	res.MedianSlope = control.Median(slopes)
	res.MedianRelErr = math.Abs(res.MedianSlope+k) / k
	res.Checks = []control.Check{{What: fmt.Sprintf("lqr: median learned slope du/dx %.4f within %g%% of the Riccati gain -K* = %.4f: relative error %.1f%% (seeds %s)",
		res.MedianSlope, 100*cfg.Tolerance, -k, 100*res.MedianRelErr, floats(slopes, "%.4f")), OK: res.MedianRelErr <= cfg.Tolerance}}
	return res, nil
}

// trainLQR trains one run and fits its slope (k is K*).
func trainLQR(ctx context.Context, cfg LQRConfig, seed uint64, k float64) (LQRRun, error) {
	start := time.Now()
	mkEnv := func() (envs.Env, error) {
		opts := []envs.Option{envs.WithLQR(cfg.Params)}
		if cfg.EpisodeSteps > 0 {
			opts = append(opts, envs.WithMaxSteps(cfg.EpisodeSteps))
		}
		return envs.Make("LQR-v0", opts...)
	}
	env, err := mkEnv()
	if err != nil {
		return LQRRun{}, err
	}
	evalEnv, err := mkEnv()
	if err != nil {
		return LQRRun{}, err
	}
	box := env.ActionSpace().(envs.Box)
	const nS, nA = 1, 1
	buf, err := buffer.New(buffer.Config{Capacity: cfg.Capacity, ObsDim: nS, Action: buffer.Continuous, ActionDim: nA,
		Episode: true, Floats: sampler.REFERColumns(nA)})
	if err != nil {
		return LQRRun{}, err
	}
	rc := sampler.DefaultREFERConfig(cfg.Steps)
	rc.C, rc.D, rc.A, rc.NoRewardScale = cfg.C, cfg.D, cfg.A, cfg.NoRewardScale
	method, err := sampler.NewMethod("refer", buf, sampler.MethodConfig{BetaSteps: cfg.Steps, REFER: &rc})
	if err != nil {
		return LQRRun{}, err
	}
	// The same seeding as the runtime's V-RACER runs.
	net, err := learner.NewVRACERNet(nS, nA, cfg.Hidden, rand.New(rand.NewPCG(seed, 0x5eed)))
	if err != nil {
		return LQRRun{}, err
	}
	store := &model.Store{}
	l, err := learner.NewVRACER(learner.VRACERConfig{Batch: cfg.Batch, LR: cfg.LR, Seed: seed}, net, buf, method, store)
	if err != nil {
		return LQRRun{}, err
	}
	anet, err := model.NewNet(net.Config(), nil)
	if err != nil {
		return LQRRun{}, err
	}
	mc, sc, bc, err := sampler.REFERColumnIndex(buf.Config())
	if err != nil {
		return LQRRun{}, err
	}
	a, err := actor.NewGaussian(actor.GaussianConfig{Gamma: cfg.Gamma, LocalBatch: 1, Columns: actor.ColumnsOf(buf.Config()),
		Floats: buf.Config().Floats, Behaviour: &actor.Behaviour{Mean: mc, Std: sc, Boot: bc}, Seed: seed}, env, anet, store)
	if err != nil {
		return LQRRun{}, err
	}
	enet, err := model.NewNet(net.Config(), nil)
	if err != nil {
		return LQRRun{}, err
	}
	var t buffer.Transitions
	var envSteps int64
	act := func() error {
		if err := ctx.Err(); err != nil {
			return err // Fill would return at once, with nothing
		}
		t.Reset()
		if err := a.Fill(ctx, &t); err != nil {
			return err
		}
		envSteps += int64(t.Len())
		return buf.Insert(&t)
	}
	for envSteps < int64(cfg.NStart) {
		if err := act(); err != nil {
			return LQRRun{}, err
		}
	}
	r := LQRRun{Seed: seed}
	record := func(ret float64) {
		st := l.Stats()
		r.Curve = append(r.Curve, runtime.EvalPoint{Seconds: time.Since(start).Seconds(), LearnerSteps: int64(st.Steps),
			EnvSteps: envSteps, MeanReturn: ret, FarFraction: st.FarFraction, MeanKL: st.MeanKL})
	}
	for step, evals := int64(1), uint64(1); step <= cfg.Steps; step++ {
		if err := act(); err != nil {
			return LQRRun{}, err
		}
		if err := l.Step(ctx); err != nil {
			return LQRRun{}, err
		}
		if cfg.EvalEverySteps == 0 || step%cfg.EvalEverySteps != 0 {
			continue
		}
		ret, _, err := actor.EvaluateGaussian(ctx, evalEnv, enet, store, cfg.EvalEpisodes, seed^evals<<32)
		if err != nil {
			return LQRRun{}, err
		}
		evals++
		record(ret)
	}
	// The final evaluation and the fit use the learner's own network
	// (the Store may lag it by up to PublishEvery − 1 steps).
	enet.CopyFrom(l.Net())
	ret, _, err := actor.EvaluateGaussian(ctx, evalEnv, enet, nil, cfg.FinalEpisodes, seed+0xf1a1)
	if err != nil {
		return LQRRun{}, err
	}
	record(ret)
	r.Final = ret
	x0 := cfg.Params.X0
	r.X, r.U = make([]float64, cfg.GridPoints), make([]float64, cfg.GridPoints)
	head := model.GaussianHead{Dim: nA}
	u := make([]float64, nA)
	for i := range r.X {
		x := -x0 + 2*x0*float64(i)/float64(cfg.GridPoints-1)
		out := l.Net().Forward([]float64{x})
		actor.ScaleAction(box, u, head.Mean(out))
		r.X[i], r.U[i] = x, u[0]
	}
	r.Slope, r.Intercept, r.Residual = FitSlope(r.X, r.U)
	r.RelErr = math.Abs(r.Slope+k) / k
	r.Within = r.RelErr <= cfg.Tolerance
	std := make([]float64, nA)
	head.Std(std, l.Net().Forward([]float64{0}))
	r.Std = std[0] * (box.High[0] - box.Low[0]) / 2
	r.Beta = l.Stats().Beta
	r.EnvSteps = envSteps
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// FitSlope returns the least-squares line y ≈ intercept + slope·x through
// the points (x_i, y_i) and the RMS of the residuals. It needs at least
// two distinct x (else the slope is NaN). O(len(x)).
func FitSlope(x, y []float64) (slope, intercept, residual float64) {
	if len(x) != len(y) {
		panic(fmt.Sprintf("refer: FitSlope: %d x and %d y", len(x), len(y)))
	}
	mx, my := control.Mean(x), control.Mean(y)
	var sxy, sxx float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
	}
	slope = sxy / sxx
	intercept = my - slope*mx
	var ss float64
	for i := range x {
		e := y[i] - intercept - slope*x[i]
		ss += e * e
	}
	return slope, intercept, math.Sqrt(ss / float64(len(x)))
}
