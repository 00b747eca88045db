package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/apexrl/apex/buffer"
	apexlearner "github.com/apexrl/apex/learner"
	"github.com/apexrl/apex/model"
	apexruntime "github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
)

// The learner-compute mode (apex bench -learner): learner updates/s of
// apex's default DQN, TD3 and SAC learners on a filled buffer, float64 and float32
// (model.Config.Float32, which the learners' Adam follows), at each
// GOMAXPROCS of LearnerConfig.Procs and each learner worker count of
// LearnerConfig.Workers (the data-parallel step on a runtime.WorkerPool:
// learner.Workers). A learner without the data-parallel step would be
// measured at W = 1 only (all three have it).

// LearnerNames are the learners RunLearner measures, in order.
var LearnerNames = []string{"dqn", "td3", "sac"}

// Defaults of LearnerConfig.
const (
	DefaultLearnerDuration = 2 * time.Second
	DefaultLearnerRows     = 1 << 16
)

// LearnerConfig configures RunLearner. The zero value of a field selects
// its default.
type LearnerConfig struct {
	// Duration is the timed length of each cell (learner × precision ×
	// GOMAXPROCS), after a warm-up of a few steps. Default
	// DefaultLearnerDuration (2 s).
	Duration time.Duration `json:"duration_ns"`
	// Procs are the GOMAXPROCS values to measure, each >= 1; nil means 1,
	// 2, ..., runtime.NumCPU().
	Procs []int `json:"procs"`
	// Workers are the learner worker counts W to measure at each
	// GOMAXPROCS, each >= 1, or 0 for W = that GOMAXPROCS (so Procs 1, 2,
	// 4, 8 with Workers [0] is the scaling curve in one run); nil means
	// [1], the serial step.
	Workers []int `json:"workers"`
	// Rows is the number of random transitions each learner's buffer
	// holds (its capacity too). Default DefaultLearnerRows (2^16).
	Rows int `json:"rows"`
	// Seed seeds the networks, the transitions and the learners' sampling.
	Seed uint64 `json:"seed"`
	// Progress, if set, receives a line as each cell starts.
	Progress func(string) `json:"-"`
}

// Validate returns c with the defaults filled in, or an error naming the
// field out of range.
func (c LearnerConfig) Validate() (LearnerConfig, error) {
	if c.Duration == 0 {
		c.Duration = DefaultLearnerDuration
	}
	if c.Procs == nil {
		for p := 1; p <= goruntime.NumCPU(); p++ {
			c.Procs = append(c.Procs, p)
		}
	}
	if c.Rows == 0 {
		c.Rows = DefaultLearnerRows
	}
	if c.Workers == nil {
		c.Workers = []int{1}
	}
	switch {
	case c.Duration < 0:
		return c, fmt.Errorf("bench: learner Duration = %v (must be > 0)", c.Duration)
	case len(c.Procs) == 0:
		return c, errors.New("bench: learner Procs is empty (nil means 1..NumCPU)")
	case c.Rows < apexlearner.DefaultTD3Batch || c.Rows > MaxCapacity:
		return c, fmt.Errorf("bench: learner Rows = %d (must be in %d..%d)", c.Rows, apexlearner.DefaultTD3Batch, MaxCapacity)
	}
	for i, p := range c.Procs {
		if p < 1 || p > 1<<16 {
			return c, fmt.Errorf("bench: learner Procs[%d] = %d (must be in 1..65536)", i, p)
		}
	}
	for i, w := range c.Workers {
		if w < 0 || w > 1<<10 {
			return c, fmt.Errorf("bench: learner Workers[%d] = %d (must be in 0..1024; 0: W = GOMAXPROCS)", i, w)
		}
	}
	if len(c.Workers) == 0 {
		return c, errors.New("bench: learner Workers is empty (nil means [1])")
	}
	return c, nil
}

// LearnerResult is one cell of the learner-compute mode.
type LearnerResult struct {
	// Learner is "dqn" (CartPole: 4→64→64→2, PER, batch 64), "td3"
	// (Pendulum: actor 3→64→64→1, critics 4→64→64→1, uniform MSE, batch
	// 256, an actor update every second step) or "sac" (Pendulum: the
	// default SAC networks, policy 3→64→64→2 (the action's mean and log
	// std, learner.SACPolicyConfig) and twin critics 4→64→64→1, uniform
	// MSE as TD3's row, batch 256, the temperature tuned every step).
	Learner   string `json:"learner"`
	Precision string `json:"precision"` // "float64" or "float32"
	Procs     int    `json:"gomaxprocs"`
	// Workers is W, the learner's data-parallel workers (1: the serial
	// step).
	Workers int `json:"workers"`
	Batch   int `json:"batch"`
	// Steps learner updates took Seconds of wall time.
	Steps   int64   `json:"steps"`
	Seconds float64 `json:"seconds"`
	// UpdatesPerSec is Steps/Seconds; MicrosPerUpdate its inverse in µs.
	UpdatesPerSec   float64 `json:"updates_per_s"`
	MicrosPerUpdate float64 `json:"us_per_update"`
	// Scaling is UpdatesPerSec over the same learner and precision in its
	// first cell (the first GOMAXPROCS and W measured).
	Scaling float64 `json:"scaling"`
}

// LearnerReport is RunLearner's report.
type LearnerReport struct {
	Config    LearnerConfig   `json:"config"`
	GoVersion string          `json:"go_version"`
	GOOS      string          `json:"goos"`
	GOARCH    string          `json:"goarch"`
	NumCPU    int             `json:"num_cpu"`
	CPUModel  string          `json:"cpu_model,omitempty"` // set by the caller (apex bench reads /proc/cpuinfo)
	Results   []LearnerResult `json:"results"`
	// Interrupted says ctx ended the run: Results holds the cells
	// measured so far, the one cut short over the time it ran.
	Interrupted bool `json:"interrupted,omitempty"`
	// Flags are the command line's flags, set by apex bench.
	Flags map[string]string `json:"flags,omitempty"`
}

// RunLearner measures learner updates/s of the default DQN, TD3 and SAC
// learners (LearnerNames) in float64 and float32 at each cfg.Procs and
// cfg.Workers. It
// sets GOMAXPROCS for each cell and restores it when it returns, so
// nothing else of the process should run meanwhile; a cell with W > 1
// runs its learner on a started runtime.WorkerPool of W, stopped after
// the cell. Cost: cfg.Duration per cell (6 cells per GOMAXPROCS and
// Workers value) plus building and filling one
// buffer of cfg.Rows per learner and precision. A ctx that ends stops it
// with the cells so far and Interrupted set (and ctx's error).
func RunLearner(ctx context.Context, cfg LearnerConfig) (*LearnerReport, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	rep := &LearnerReport{Config: cfg, GoVersion: goruntime.Version(), GOOS: goruntime.GOOS, GOARCH: goruntime.GOARCH, NumCPU: goruntime.NumCPU()}
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(0))
	for _, name := range LearnerNames {
		for _, f32 := range []bool{false, true} {
			bl, err := newBenchLearner(name, f32, cfg)
			if err != nil {
				return rep, err
			}
			prec := map[bool]string{false: "float64", true: "float32"}[f32]
			var first float64
			for _, p := range cfg.Procs {
				for _, w := range cfg.Workers {
					if w == 0 {
						w = p
					}
					if w > 1 && bl.setWorkers == nil {
						continue
					}
					if cfg.Progress != nil {
						cfg.Progress(fmt.Sprintf("learner %s %s GOMAXPROCS=%d workers=%d for %v", name, prec, p, w, cfg.Duration))
					}
					goruntime.GOMAXPROCS(p)
					r := LearnerResult{Learner: name, Precision: prec, Procs: p, Workers: w, Batch: bl.batch}
					steps, secs, err := bl.timeAt(ctx, w, cfg.Duration)
					if secs > 0 {
						r.Steps, r.Seconds = steps, secs
						r.UpdatesPerSec = float64(steps) / secs
						if steps > 0 {
							r.MicrosPerUpdate = secs * 1e6 / float64(steps)
						}
						if first == 0 {
							first = r.UpdatesPerSec
						}
						if first > 0 {
							r.Scaling = r.UpdatesPerSec / first
						}
						rep.Results = append(rep.Results, r)
					}
					if err != nil {
						rep.Interrupted = ctx.Err() != nil
						return rep, err
					}
				}
			}
		}
	}
	return rep, nil
}

// benchLearner is a learner under test: its Step, its batch and, for a
// learner with the data-parallel step, its SetWorkers (nil otherwise).
type benchLearner struct {
	impl       any // the *learner.DQN, *learner.TD3 or *learner.SAC
	step       func(context.Context) error
	batch      int
	setWorkers func(apexlearner.Workers) error
}

// timeAt times the learner's steps for d on w workers (a started
// runtime.WorkerPool for w > 1, stopped and detached afterwards).
func (bl *benchLearner) timeAt(ctx context.Context, w int, d time.Duration) (int64, float64, error) {
	if bl.setWorkers != nil {
		var ws apexlearner.Workers
		if w > 1 {
			pool := apexruntime.NewWorkerPool(w)
			pool.Start()
			defer pool.Stop()
			ws = pool
		}
		if err := bl.setWorkers(ws); err != nil {
			return 0, 0, err
		}
		defer bl.setWorkers(nil) //nolint:errcheck // nil never fails while no Step runs
	}
	return timeSteps(ctx, bl.step, d)
}

// timeSteps warms step up (3 steps) and then calls it until d has passed,
// returning the timed steps and seconds. The clock is read every step
// (about 50 ns against a step of tens of µs or more).
func timeSteps(ctx context.Context, step func(context.Context) error, d time.Duration) (int64, float64, error) {
	for range 3 {
		if err := step(ctx); err != nil {
			return 0, 0, err
		}
	}
	start := time.Now()
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, time.Since(start).Seconds(), err
		}
		if err := step(ctx); err != nil {
			return n, time.Since(start).Seconds(), err
		}
		n++
		if el := time.Since(start); el >= d {
			return n, el.Seconds(), nil
		}
	}
}

// newBenchLearner builds the named learner over a buffer of cfg.Rows
// random transitions, its networks in float32 when f32 is set.
func newBenchLearner(name string, f32 bool, cfg LearnerConfig) (*benchLearner, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x1ea))
	net := func(c model.Config) (*model.Net, error) {
		c.Float32 = f32
		return model.NewNet(c, rng)
	}
	hidden := []int{64, 64}
	switch name {
	case "dqn": // CartPole-v1: 4 observations, 2 actions; apex's default method, PER
		const nS, nA = 4, 2
		buf, err := filledBuffer(buffer.Config{Capacity: cfg.Rows, ObsDim: nS}, cfg.Rows, rng, nA, 0)
		if err != nil {
			return nil, err
		}
		q, err := net(model.Config{In: nS, Hidden: hidden, Out: nA})
		if err != nil {
			return nil, err
		}
		m, err := sampler.NewMethod("per", buf, sampler.MethodConfig{})
		if err != nil {
			return nil, err
		}
		l, err := apexlearner.NewDQN(apexlearner.DQNConfig{Seed: cfg.Seed}, q, buf, m, nil)
		if err != nil {
			return nil, err
		}
		return &benchLearner{impl: l, step: l.Step, batch: l.Config().Batch, setWorkers: l.SetWorkers}, nil
	case "td3": // Pendulum-v1: 3 observations, 1 action in [−2, 2]; TD3's uniform MSE
		const nS, nA, maxA = 3, 1, 2.0
		buf, err := filledBuffer(buffer.Config{Capacity: cfg.Rows, ObsDim: nS, Action: buffer.Continuous, ActionDim: nA}, cfg.Rows, rng, 0, maxA)
		if err != nil {
			return nil, err
		}
		actor, err := net(model.Config{In: nS, Hidden: hidden, Out: nA, OutAct: model.Tanh})
		if err != nil {
			return nil, err
		}
		critic, err := net(model.Config{In: nS + nA, Hidden: hidden, Out: 1})
		if err != nil {
			return nil, err
		}
		m, err := sampler.NewMethod("uniform", buf, sampler.MethodConfig{Loss: model.Loss{Kind: model.MSE}})
		if err != nil {
			return nil, err
		}
		l, err := apexlearner.NewTD3(apexlearner.TD3Config{MaxAction: maxA, Seed: cfg.Seed}, actor, critic, buf, m, nil)
		if err != nil {
			return nil, err
		}
		return &benchLearner{impl: l, step: l.Step, batch: l.Config().Batch, setWorkers: l.SetWorkers}, nil
	case "sac": // Pendulum-v1 as td3; SAC's defaults (batch 256, α from 1, target entropy −1), uniform MSE
		const nS, nA, maxA = 3, 1, 2.0
		buf, err := filledBuffer(buffer.Config{Capacity: cfg.Rows, ObsDim: nS, Action: buffer.Continuous, ActionDim: nA}, cfg.Rows, rng, 0, maxA)
		if err != nil {
			return nil, err
		}
		policy, err := net(apexlearner.SACPolicyConfig(nS, nA, hidden))
		if err != nil {
			return nil, err
		}
		critic, err := net(model.Config{In: nS + nA, Hidden: hidden, Out: 1})
		if err != nil {
			return nil, err
		}
		m, err := sampler.NewMethod("uniform", buf, sampler.MethodConfig{Loss: model.Loss{Kind: model.MSE}})
		if err != nil {
			return nil, err
		}
		l, err := apexlearner.NewSAC(apexlearner.SACConfig{MaxAction: maxA, Seed: cfg.Seed}, policy, critic, buf, m, nil)
		if err != nil {
			return nil, err
		}
		return &benchLearner{impl: l, step: l.Step, batch: l.Config().Batch, setWorkers: l.SetWorkers}, nil
	}
	return nil, fmt.Errorf("bench: unknown learner %q", name)
}

// filledBuffer makes a buffer of bc and inserts n random transitions:
// Gaussian observations, actions uniform over nA discrete actions (nA > 0)
// or in [−maxA, maxA], rewards in [−1, 1], one in ten terminal and the
// others with discount 0.99.
func filledBuffer(bc buffer.Config, n int, rng *rand.Rand, nA int, maxA float64) (*buffer.Buffer, error) {
	buf, err := buffer.New(bc)
	if err != nil {
		return nil, err
	}
	for n > 0 {
		k := min(n, 1024)
		tr := buffer.Transitions{Obs: make([]float32, k*bc.ObsDim), NextObs: make([]float32, k*bc.ObsDim),
			Reward: make([]float32, k), Discount: make([]float32, k)}
		for i := range tr.Obs {
			tr.Obs[i], tr.NextObs[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		if nA > 0 {
			tr.Action = make([]int32, k)
			for i := range tr.Action {
				tr.Action[i] = int32(rng.IntN(nA))
			}
		} else {
			tr.ActionVec = make([]float32, k*bc.ActionDim)
			for i := range tr.ActionVec {
				tr.ActionVec[i] = float32(maxA * (2*rng.Float64() - 1))
			}
		}
		for i := range k {
			tr.Reward[i] = float32(2*rng.Float64() - 1)
			if rng.IntN(10) != 0 {
				tr.Discount[i] = 0.99
			}
		}
		if err := buf.Insert(&tr); err != nil {
			return nil, err
		}
		n -= k
	}
	return buf, nil
}

// WriteText writes the report as a table: one row per learner and
// precision, one column of updates/s per GOMAXPROCS, then the float32
// speed-up at each.
func (r *LearnerReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	c := r.Config
	fmt.Fprintf(&sb, "apex bench -learner: %v per cell, %d stored rows, seed %d\n", c.Duration, c.Rows, c.Seed)
	fmt.Fprintf(&sb, "machine: %s %s/%s, %d CPUs", r.GoVersion, r.GOOS, r.GOARCH, r.NumCPU)
	if r.CPUModel != "" {
		fmt.Fprintf(&sb, ", %s", r.CPUModel)
	}
	sb.WriteString("\n")
	if r.Interrupted {
		sb.WriteString("INTERRUPTED: the cells measured so far\n")
	}
	sb.WriteString("learner updates/s (µs per update), one column per GOMAXPROCS P and learner workers W; scaling over the row's first cell\n")
	type key struct{ l, p string }
	var order []key
	cells := map[key][]LearnerResult{}
	for _, res := range r.Results {
		k := key{res.Learner, res.Precision}
		if cells[k] == nil {
			order = append(order, k)
		}
		cells[k] = append(cells[k], res)
	}
	for _, k := range order {
		fmt.Fprintf(&sb, "  %-4s %-7s B=%-4d", k.l, k.p, cells[k][0].Batch)
		for _, res := range cells[k] {
			fmt.Fprintf(&sb, "  P=%d W=%d %7.0f (%6.1f) %.2f×", res.Procs, res.Workers, res.UpdatesPerSec, res.MicrosPerUpdate, res.Scaling)
		}
		sb.WriteString("\n")
	}
	for _, l := range LearnerNames {
		f64, f32 := cells[key{l, "float64"}], cells[key{l, "float32"}]
		if len(f64) == 0 || len(f32) == 0 {
			continue
		}
		fmt.Fprintf(&sb, "  %-4s float32/float64:", l)
		for i := range min(len(f64), len(f32)) {
			if f64[i].UpdatesPerSec > 0 {
				fmt.Fprintf(&sb, "  P=%d W=%d %.2f×", f64[i].Procs, f64[i].Workers, f32[i].UpdatesPerSec/f64[i].UpdatesPerSec)
			}
		}
		sb.WriteString("\n")
	}
	_, err := io.WriteString(w, sb.String())
	return err
}
