// Package control runs control experiments: one environment trained by the
// runtime under several replay methods, several seeds each, in the
// runtime's deterministic mode (a seed always gives the same run), and
// summarises them (final return mean ± 95% CI and median, the mean of the
// last evaluations, environment steps to a return threshold, wall time,
// the replay's share of learner time) with a table and a plot of the mean
// curves. The paper experiments (experiment/lappal, experiment/ter) define
// their configurations on top of it.
package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/apexrl/apex/learner"
	"github.com/apexrl/apex/runtime"
)

// Config is one control experiment: an environment trained by a learner
// under several replay methods, several seeds each. Every run is the runtime's deterministic mode (one
// actor and the learner in lockstep), so a seed always gives the same run.
type Config struct {
	// Name labels the experiment ("pendulum-td3").
	Name string `json:"name"`
	// Base is the training configuration every run starts from (Env, Algo,
	// Steps, network, evaluation); Sampler and Seed are set per run, and
	// Actors = 1 with Deterministic on. It may carry the settings of every
	// compared method: each run keeps only its own method's
	// (runtime.TrainConfig.ForMethod).
	Base runtime.TrainConfig `json:"base"`
	// Samplers are the replay methods compared (sampler.Methods).
	Samplers []string `json:"samplers"`
	// Seeds are the runs' seeds, the same for every method.
	Seeds []uint64 `json:"seeds"`
	// Workers is the number of runs trained at once (>= 1).
	Workers int `json:"workers"`
	// TailEvals is the number of last periodic evaluations averaged into
	// each run's Tail (the paper reports the mean of the last 10
	// evaluations; a single final evaluation of an unstable learner such
	// as DQN on CartPole swings widely).
	TailEvals int `json:"tail_evals"`
	// Threshold, if set, is a return: each run reports the environment
	// steps its periodic evaluations took to first reach it (TER's "steps
	// to a normalised return of 0.9").
	Threshold *float64 `json:"threshold,omitempty"`
	// Floor, if set, is the return the prioritized arms named in
	// FloorArms must reach on their median seed (the issue's −200 for
	// Pendulum's LAP and PAL).
	Floor     float64  `json:"floor,omitempty"`
	FloorArms []string `json:"floor_arms,omitempty"`
}

// Validate reports a config that cannot run.
func (c *Config) Validate() error {
	switch {
	case len(c.Samplers) == 0:
		return errors.New("control: no samplers to compare")
	case len(c.Seeds) < 2:
		return fmt.Errorf("control: %d seeds: a confidence interval needs at least 2", len(c.Seeds))
	case c.Workers < 1:
		return fmt.Errorf("control: Workers must be >= 1, got %d", c.Workers)
	case c.TailEvals < 1:
		return fmt.Errorf("control: TailEvals must be >= 1, got %d", c.TailEvals)
	case c.Base.Steps <= 0:
		return fmt.Errorf("control: Base.Steps must be > 0 (the runs are deterministic), got %d", c.Base.Steps)
	}
	for _, a := range c.FloorArms {
		if !slices.Contains(c.Samplers, a) {
			return fmt.Errorf("control: FloorArms names %q, which is not among the samplers %v", a, c.Samplers)
		}
	}
	return nil
}

// Trial is one training run.
type Trial struct {
	Sampler string  `json:"sampler"`
	Seed    uint64  `json:"seed"`
	Final   float64 `json:"final_return"` // the final evaluation's mean return
	// Tail is the mean of the last TailEvals periodic evaluations (fewer
	// if the run made fewer).
	Tail    float64             `json:"tail_return"`
	Curve   []runtime.EvalPoint `json:"curve"`
	Seconds float64             `json:"seconds"` // wall time of the run
	// SampleShare and WriteBackShare are the fractions of the learner's
	// step time spent in the stage's Sample (with its weights) and in its
	// priority write-back.
	SampleShare    float64 `json:"sample_share"`
	WriteBackShare float64 `json:"write_back_share"`
	// LearnerSeconds is the learner's total step time.
	LearnerSeconds float64 `json:"learner_seconds"`
	// StepsTo is the environment steps at the first periodic evaluation
	// that reached Config.Threshold, or −1 if none did (or no threshold).
	StepsTo int64 `json:"steps_to_threshold"`
	// Steps is the run's learner steps; Sampled the learner's sums of |δ|
	// and Q(s, a) over every sampled row (dqn and td3).
	Steps   int64           `json:"learner_steps"`
	Sampled learner.Moments `json:"sampled"`
}

// Arm summarises one method over the seeds.
type Arm struct {
	Sampler string    `json:"sampler"`
	Finals  []float64 `json:"finals"` // per seed, in Seeds order
	Mean    float64   `json:"mean"`
	// CI95 is the half-width of the 95% confidence interval of the mean
	// (Student's t with len(Finals)−1 degrees of freedom).
	CI95   float64 `json:"ci95"`
	Median float64 `json:"median"`
	// Tails are the runs' Tail returns; TailMean ± TailCI95 their mean and
	// 95% confidence interval.
	Tails    []float64 `json:"tails"`
	TailMean float64   `json:"tail_mean"`
	TailCI95 float64   `json:"tail_ci95"`
	// Seconds is the mean wall time of a run; ReplayShare the mean share of
	// learner time in sampling and write-back, split in SampleShare and
	// WriteBackShare.
	Seconds        float64 `json:"seconds"`
	ReplayShare    float64 `json:"replay_share"`
	SampleShare    float64 `json:"sample_share"`
	WriteBackShare float64 `json:"write_back_share"`
	// StepsTo are the runs' Trial.StepsTo; MedianStepsTo their median with
	// the runs that never reached the threshold counted as infinitely
	// late (+Inf when half or more never did); Reached counts those that
	// did. JSON has no infinity: MarshalJSON leaves a non-finite median
	// out (Reached and StepsTo say the same).
	StepsTo       []int64 `json:"steps_to_threshold,omitempty"`
	MedianStepsTo float64 `json:"median_steps_to_threshold,omitempty"`
	Reached       int     `json:"reached_threshold,omitempty"`
	// Curve is the mean over seeds of the evaluation curve, by learner
	// step.
	Curve []runtime.EvalPoint `json:"curve"`
}

// Result is what Run returns.
type Result struct {
	Config Config  `json:"config"`
	Arms   []Arm   `json:"arms"`
	Runs   []Trial `json:"runs"`
	// Checks lists the acceptance checks and whether each held.
	Checks []Check `json:"checks"`
}

// Check is one acceptance statement and its outcome.
type Check struct {
	What string `json:"what"`
	OK   bool   `json:"ok"`
}

// String is the check as the reports print it: "ok  " or "FAIL", then What.
func (c Check) String() string {
	if c.OK {
		return "ok   " + c.What
	}
	return "FAIL " + c.What
}

// AllOK reports whether every check held. O(len(checks)).
func AllOK(checks []Check) bool {
	for _, c := range checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// WriteChecks writes one line per check (Check.String) to b.
func WriteChecks(b *strings.Builder, checks []Check) {
	for _, ch := range checks {
		b.WriteString(ch.String())
		b.WriteByte('\n')
	}
}

// Run trains every (sampler, seed) pair of cfg, Workers at a time,
// and summarises them. onRun, if not nil, is called after each run (from
// the goroutine that ran it, one call at a time), and only for a run that
// trained all its steps. It stops at ctx's end or the first failed run,
// having waited for the runs in flight; a run that ctx's end cut short is
// not reported to onRun, and Run then returns an error that wraps ctx's.
func Run(ctx context.Context, cfg Config, onRun func(Trial)) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	runs := make([][]Trial, len(cfg.Samplers))
	for i := range runs {
		runs[i] = make([]Trial, len(cfg.Seeds))
	}
	arms := len(cfg.Samplers)
	// Jobs go seed-major, so every arm progresses together.
	err := Pool(ctx, cfg.Workers, arms*len(cfg.Seeds), func(ctx context.Context, i int) error {
		a, s := i%arms, i/arms
		r, err := trainOne(ctx, cfg, cfg.Samplers[a], cfg.Seeds[s])
		runs[a][s] = r
		return err
	}, func(i int) {
		if onRun != nil {
			onRun(runs[i%arms][i/arms])
		}
	})
	if err != nil {
		return nil, err
	}
	res := &Result{Config: cfg}
	for a, name := range cfg.Samplers {
		res.Arms = append(res.Arms, summarise(name, runs[a]))
		res.Runs = append(res.Runs, runs[a]...)
	}
	res.Checks = checks(cfg, res.Arms)
	return res, nil
}

// TrainConfig is the configuration of the run of method sampler with seed:
// Base with only that method's settings (the base may carry every arm's),
// one actor in lockstep with the learner, no wall-time limit, no early stop
// and no checkpoint.
func (c Config) TrainConfig(sampler string, seed uint64) runtime.TrainConfig {
	tc := c.Base.ForMethod(sampler)
	tc.Seed, tc.Actors, tc.Deterministic, tc.Duration = seed, 1, true, 0
	tc.StopWhenSolved, tc.TargetReturn, tc.Checkpoint = false, 0, ""
	return tc
}

// trainOne trains one deterministic run.
func trainOne(ctx context.Context, cfg Config, sampler string, seed uint64) (Trial, error) {
	tc := cfg.TrainConfig(sampler, seed)
	start := time.Now()
	tr, err := runtime.NewTrainer(tc)
	if err != nil {
		return Trial{}, fmt.Errorf("control: %s seed %d: %w", sampler, seed, err)
	}
	out, err := tr.Run(ctx)
	if err != nil {
		return Trial{}, fmt.Errorf("control: %s seed %d: %w", sampler, seed, err)
	}
	if out.StopReason == runtime.StopInterrupted {
		// Cut short: its final evaluation is of a partly trained network,
		// not the run's result.
		return Trial{}, fmt.Errorf("control: %s seed %d: cut short after %d of %d steps: %w", sampler, seed,
			out.LearnerSteps, tc.Steps, context.Cause(ctx))
	}
	ls := tr.Stats().Learner
	tm := ls.Timing
	// The curve ends with the final evaluation; the ones before it are
	// the periodic evaluations.
	periodic := out.Curve[:max(len(out.Curve)-1, 0)]
	tail := periodic[max(len(periodic)-cfg.TailEvals, 0):]
	var tailSum float64
	for _, p := range tail {
		tailSum += p.MeanReturn / float64(len(tail))
	}
	stepsTo := int64(-1)
	if cfg.Threshold != nil {
		for _, p := range periodic {
			if p.MeanReturn >= *cfg.Threshold {
				stepsTo = p.EnvSteps
				break
			}
		}
	}
	r := Trial{Sampler: sampler, Seed: seed, Final: out.FinalReturn, Tail: tailSum, Curve: out.Curve, StepsTo: stepsTo,
		Seconds: time.Since(start).Seconds(), LearnerSeconds: tm.Steps.Seconds(), Steps: out.LearnerSteps, Sampled: ls.Sampled}
	if tm.Steps > 0 {
		r.SampleShare = float64(tm.Sample) / float64(tm.Steps)
		r.WriteBackShare = float64(tm.WriteBack) / float64(tm.Steps)
	}
	return r, nil
}

// summarise reduces one arm's runs.
func summarise(name string, runs []Trial) Arm {
	arm := Arm{Sampler: name}
	for _, r := range runs {
		arm.Finals = append(arm.Finals, r.Final)
		arm.Tails = append(arm.Tails, r.Tail)
		arm.StepsTo = append(arm.StepsTo, r.StepsTo)
		if r.StepsTo >= 0 {
			arm.Reached++
		}
		arm.Seconds += r.Seconds / float64(len(runs))
		arm.SampleShare += r.SampleShare / float64(len(runs))
		arm.WriteBackShare += r.WriteBackShare / float64(len(runs))
	}
	arm.ReplayShare = arm.SampleShare + arm.WriteBackShare
	arm.Mean, arm.CI95 = meanCI(arm.Finals)
	arm.Median = Median(arm.Finals)
	arm.TailMean, arm.TailCI95 = meanCI(arm.Tails)
	late := make([]float64, len(arm.StepsTo))
	for i, s := range arm.StepsTo {
		late[i] = float64(s)
		if s < 0 {
			late[i] = math.Inf(1)
		}
	}
	arm.MedianStepsTo = Median(late)
	// Mean curve over the evaluation points every run shares (the same
	// learner steps: the runs are lockstep with the same schedule).
	n := len(runs[0].Curve)
	for _, r := range runs {
		n = min(n, len(r.Curve))
	}
	for i := range n {
		p := runtime.EvalPoint{LearnerSteps: runs[0].Curve[i].LearnerSteps}
		for _, r := range runs {
			p.MeanReturn += r.Curve[i].MeanReturn / float64(len(runs))
			p.EnvSteps += r.Curve[i].EnvSteps / int64(len(runs))
			p.Seconds += r.Curve[i].Seconds / float64(len(runs))
		}
		arm.Curve = append(arm.Curve, p)
	}
	return arm
}

// meanCI returns the mean of xs and the half-width of its 95% confidence
// interval, t(0.975, n−1)·s/√n.
func meanCI(xs []float64) (m, ci float64) {
	n := float64(len(xs))
	m = Mean(xs)
	var ss float64
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	sd := math.Sqrt(ss / (n - 1))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}.Quantile(0.975)
	return m, t * sd / math.Sqrt(n)
}

// checks states the acceptance for cfg's FloorArms: the floor on
// their median seed, and each not below uniform beyond the confidence
// intervals (its interval's top under uniform's interval's bottom).
func checks(cfg Config, arms []Arm) []Check {
	var out []Check
	byName := map[string]Arm{}
	for _, a := range arms {
		byName[a.Sampler] = a
	}
	for _, name := range cfg.FloorArms {
		a := byName[name]
		out = append(out, Check{What: fmt.Sprintf("%s: median final return %.1f >= %g", name, a.Median, cfg.Floor), OK: a.Median >= cfg.Floor})
	}
	u, ok := byName["uniform"]
	if !ok {
		return out
	}
	for _, name := range cfg.FloorArms {
		a := byName[name]
		hi, lo := a.Mean+a.CI95, u.Mean-u.CI95
		out = append(out, Check{What: fmt.Sprintf("%s not below uniform beyond the CIs: %.1f+%.1f vs %.1f-%.1f", a.Sampler, a.Mean, a.CI95, u.Mean, u.CI95),
			OK: hi >= lo})
	}
	return out
}

// MarshalJSON encodes a as its fields, with MedianStepsTo left out when it
// is not finite (no threshold, or half the runs never reached it).
func (a Arm) MarshalJSON() ([]byte, error) {
	type plain Arm // without this method
	var med *float64
	if v := a.MedianStepsTo; !math.IsInf(v, 0) && !math.IsNaN(v) && v != 0 {
		med = &v
	}
	return json.Marshal(struct {
		plain
		MedianStepsTo *float64 `json:"median_steps_to_threshold,omitempty"`
	}{plain(a), med})
}

// Mean is the mean of xs (NaN for none).
func Mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// Median is the median of xs (NaN for none). O(n log n); xs is not
// modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	c := slices.Clone(xs)
	slices.Sort(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}
