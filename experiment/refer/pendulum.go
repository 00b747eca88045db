package refer

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/apexrl/apex/experiment/control"
	"github.com/apexrl/apex/runtime"
)

// The acceptance for Pendulum (issue 6; refer.md §6's integration
// checks (a)–(d) with the tolerances).
const (
	// ReturnFloor is the least median final return of full ReF-ER at the
	// end of the run (1e5 steps).
	ReturnFloor = -250.0
	// FarTarget ± FarTolerance is where full ReF-ER's far-policy fraction
	// must lie after the warm-up (D = 0.1).
	FarTarget    = 0.1
	FarTolerance = 0.05
	// KLDrop is the most the KL at the end may be of its peak.
	KLDrop = 0.5
	// WorseReturn and WorseKL define "clearly worse" for plain ER and
	// ReF-ER-1: a median final return more than WorseReturn below full
	// ReF-ER's, or a KL at the end more than WorseKL times full ReF-ER's.
	WorseReturn = 300.0
	WorseKL     = 10.0
	// KLWindow is the number of consecutive periodic evaluations averaged
	// into one KL value: each evaluation records the mean KL of one
	// learner batch (128 steps), which is noisy.
	KLWindow = 5
	// WarmUpShare is the share of a run's learner steps counted as warm-up
	// for the far-policy fraction: 20k of 1e5 steps (refer.md §6 (a)).
	WarmUpShare = 0.2
)

// The methods compared (sampler.Methods): full ReF-ER, Rule 1 alone, Rule
// 2 alone, plain experience replay.
var pendulumMethods = []string{"refer", "refer-1", "refer-2", "er"}

// DefaultPendulumConfig is part 1: V-RACER on Pendulum-v1 under full
// ReF-ER, ReF-ER-1, ReF-ER-2 and plain ER, 3 seeds, 2 runs at once, at
// refer.md §6's calibrated 2-core settings: a 2×64 Softsign network
// (V-RACER's), batch 128, Adam 1e-3 (annealed by Eq. 13), gamma 0.99, a
// replay of capacity 2^15 keeping N_max = 2^15 − 2^12 = 28672 steps of
// whole episodes (the stage's default, Capacity − Capacity/8), learning
// from N_start = 2^13 stored steps (MinSizeToSample), C = 4, D = 0.1 and
// A = 5/T_total (REFERA 0: the runtime's 5/Steps). The runtime's default
// replay ratio for V-RACER is the batch size: one learner step per
// environment step (F = 1). 1e5 learner steps, evaluated greedily (the
// policy's mean) every 1000 steps on 5 episodes and at the end on 20.
func DefaultPendulumConfig() control.Config {
	return control.Config{
		Name: "pendulum-vracer",
		Base: runtime.TrainConfig{Env: "Pendulum-v1", Algo: "vracer", Steps: 100_000, Hidden: []int{64, 64}, Batch: 128,
			LR: 1e-3, Gamma: 0.99, Capacity: 1 << 15, MinSizeToSample: 1 << 13, MethodOptions: map[string]float64{"refer-c": 4, "refer-d": 0.1},
			EvalEverySteps: 1000, EvalEpisodes: 5, FinalEpisodes: 20},
		Samplers:  slices.Clone(pendulumMethods),
		Seeds:     []uint64{1, 2, 3},
		Workers:   2,
		TailEvals: 10,
	}
}

// PendulumArm is one method's ReF-ER statistics over the seeds. The
// per-seed slices are in the order of the control.Config's Seeds.
type PendulumArm struct {
	Sampler string `json:"sampler"`
	// Finals are the runs' final returns (the final evaluation's mean
	// over FinalEpisodes greedy episodes); MedianFinal their median.
	Finals      []float64 `json:"finals"`
	MedianFinal float64   `json:"median_final"`
	// Far are the runs' mean far-policy fractions (n_far/N of the stored
	// steps) over their periodic evaluations after the warm-up; FarMean
	// their mean, FarMax the largest single value after the warm-up.
	Far     []float64 `json:"far_after_warm_up"`
	FarMean float64   `json:"far_mean"`
	FarMax  float64   `json:"far_max"`
	// KLPeak is each run's largest KLWindow-evaluation moving average of
	// the batch KL(μ||π); KLEnd the last one (the mean over the last
	// KLWindow evaluations); KLRatio = KLEnd/KLPeak (1 when the peak is
	// 0). The Median fields are their medians over the seeds.
	KLPeak        []float64 `json:"kl_peak"`
	KLEnd         []float64 `json:"kl_end"`
	KLRatio       []float64 `json:"kl_ratio"`
	MedianKLPeak  float64   `json:"median_kl_peak"`
	MedianKLEnd   float64   `json:"median_kl_end"`
	MedianKLRatio float64   `json:"median_kl_ratio"`
	// Steps are the learner steps of the periodic evaluations every run
	// shares; FarCurve the mean over seeds of the far fraction at each,
	// KLCurve the median over seeds of the batch KL (a median: one
	// diverging seed's KL would dominate a mean by orders of magnitude).
	Steps    []int64   `json:"steps"`
	FarCurve []float64 `json:"far_curve"`
	KLCurve  []float64 `json:"kl_curve"`
}

// PendulumResult is part 1's outcome.
type PendulumResult struct {
	// Control holds the runs and control's summary (returns, curves).
	Control *control.Result `json:"control"`
	// WarmUp is the learner steps after which the far fraction is
	// averaged.
	WarmUp int64         `json:"warm_up_steps"`
	Arms   []PendulumArm `json:"arms"`
	// Checks are the acceptance checks (PendulumChecks).
	Checks []control.Check `json:"checks"`
}

// OK reports whether every check held.
func (r *PendulumResult) OK() bool { return control.AllOK(r.Checks) }

// RunPendulum trains cfg's runs through control.Run (onRun as there) and
// summarises them with a warm-up of WarmUpShare of the run.
func RunPendulum(ctx context.Context, cfg control.Config, onRun func(control.Trial)) (*PendulumResult, error) {
	res, err := control.Run(ctx, cfg, onRun)
	if err != nil {
		return nil, err
	}
	return Summarise(res, int64(WarmUpShare*float64(cfg.Base.Steps))), nil
}

// Summarise computes each arm's ReF-ER statistics from res's runs (their
// evaluation points carry the far fraction and the batch KL) and the
// acceptance checks. Far fractions count the periodic evaluations at more
// than warmUp learner steps; a run with none has Far 0.
func Summarise(res *control.Result, warmUp int64) *PendulumResult {
	out := &PendulumResult{Control: res, WarmUp: warmUp, Arms: summariseArms(res, warmUp)}
	out.Checks = PendulumChecks(out.Arms, warmUp, res.Config.Base.FinalEpisodes)
	return out
}

// summariseArms reduces res's runs to one PendulumArm per method, in the
// order of its Config's Samplers.
func summariseArms(res *control.Result, warmUp int64) []PendulumArm {
	var arms []PendulumArm
	for _, name := range res.Config.Samplers {
		var runs []control.Trial
		for _, r := range res.Runs {
			if r.Sampler == name {
				runs = append(runs, r)
			}
		}
		arms = append(arms, summariseArm(name, runs, warmUp))
	}
	return arms
}

// summariseArm reduces one method's runs.
func summariseArm(name string, runs []control.Trial, warmUp int64) PendulumArm {
	a := PendulumArm{Sampler: name}
	n := math.MaxInt
	for _, r := range runs {
		p := periodic(r.Curve)
		n = min(n, len(p))
		a.Finals = append(a.Finals, r.Final)
		far, cnt := 0.0, 0
		kl := make([]float64, len(p))
		for i, pt := range p {
			kl[i] = pt.MeanKL
			if pt.LearnerSteps > warmUp {
				far += pt.FarFraction
				cnt++
				a.FarMax = max(a.FarMax, pt.FarFraction)
			}
		}
		if cnt > 0 {
			far /= float64(cnt)
		}
		a.Far = append(a.Far, far)
		peak, end := klPeakEnd(kl, KLWindow)
		ratio := 1.0
		if peak > 0 {
			ratio = end / peak
		}
		a.KLPeak, a.KLEnd, a.KLRatio = append(a.KLPeak, peak), append(a.KLEnd, end), append(a.KLRatio, ratio)
	}
	if len(runs) == 0 {
		return a
	}
	a.MedianFinal = control.Median(a.Finals)
	a.FarMean = control.Mean(a.Far)
	a.MedianKLPeak, a.MedianKLEnd, a.MedianKLRatio = control.Median(a.KLPeak), control.Median(a.KLEnd), control.Median(a.KLRatio)
	far, kl := make([]float64, len(runs)), make([]float64, len(runs))
	for i := range n {
		for j, r := range runs {
			pt := r.Curve[i]
			far[j], kl[j] = pt.FarFraction, pt.MeanKL
		}
		a.Steps = append(a.Steps, runs[0].Curve[i].LearnerSteps)
		a.FarCurve = append(a.FarCurve, control.Mean(far))
		a.KLCurve = append(a.KLCurve, control.Median(kl))
	}
	return a
}

// periodic is a run's curve without its last point, the final evaluation
// (control.Trial.Curve ends with it, at the same learner step as the last
// periodic one).
func periodic(curve []runtime.EvalPoint) []runtime.EvalPoint {
	return curve[:max(len(curve)-1, 0)]
}

// klPeakEnd returns the largest and the last trailing moving average of
// kl over window values (fewer at the start), 0 and 0 for no values.
func klPeakEnd(kl []float64, window int) (peak, end float64) {
	sum := 0.0
	for i, v := range kl {
		sum += v
		if i >= window {
			sum -= kl[i-window]
		}
		end = sum / float64(min(i+1, window))
		if i == 0 || end > peak {
			peak = end
		}
	}
	return peak, end
}

// PendulumChecks states the acceptance on the arms (those named
// "refer", "refer-1" and "er"; checks whose arms are missing are left
// out): full ReF-ER's median final return (the final evaluation of
// finalEpisodes greedy episodes stands for the paper's "last 20
// episodes") at least ReturnFloor; its far fraction after warmUp steps,
// averaged over the seeds, within FarTarget ± FarTolerance; the median
// over seeds of its KL's end/peak ratio below KLDrop; and plain ER and
// ReF-ER-1 each clearly worse: a median final return more than
// WorseReturn below full ReF-ER's, or a median KL at the end more than
// WorseKL times full ReF-ER's.
func PendulumChecks(arms []PendulumArm, warmUp int64, finalEpisodes int) []control.Check {
	var full *PendulumArm
	for i := range arms {
		if arms[i].Sampler == "refer" {
			full = &arms[i]
		}
	}
	if full == nil {
		return nil
	}
	out := []control.Check{
		{What: fmt.Sprintf("refer: median final return %.1f >= %g (final evaluation of %d greedy episodes, standing for the last 20 episodes; seeds %s)",
			full.MedianFinal, ReturnFloor, finalEpisodes, floats(full.Finals, "%.1f")), OK: full.MedianFinal >= ReturnFloor},
		{What: fmt.Sprintf("refer: far-policy fraction after warm-up %.3f in %g ± %g (mean over seeds of each run's mean over its evaluations after %d learner steps; seeds %s; largest single value %.3f)",
			full.FarMean, FarTarget, FarTolerance, warmUp, floats(full.Far, "%.3f"), full.FarMax),
			OK: math.Abs(full.FarMean-FarTarget) <= FarTolerance},
		{What: fmt.Sprintf("refer: mean KL at the end below %g of its peak: median end/peak %.2f (seeds: end %s, peak %s; end = mean batch KL of the last %d evaluations, peak = the largest such %d-evaluation average)",
			KLDrop, full.MedianKLRatio, floats(full.KLEnd, "%.3g"), floats(full.KLPeak, "%.3g"), KLWindow, KLWindow),
			OK: full.MedianKLRatio < KLDrop},
	}
	for _, name := range []string{"er", "refer-1"} {
		for _, a := range arms {
			if a.Sampler != name {
				continue
			}
			floor := full.MedianFinal - WorseReturn
			ceil := WorseKL * full.MedianKLEnd
			byReturn, byKL := a.MedianFinal < floor, a.MedianKLEnd > ceil
			out = append(out, control.Check{What: fmt.Sprintf("%s clearly worse than refer: median final %.1f < %.1f - %g = %.1f (%s), or median KL at the end %.3g > %g x %.3g = %.3g (%s)",
				name, a.MedianFinal, full.MedianFinal, WorseReturn, floor, yesNo(byReturn), a.MedianKLEnd, WorseKL, full.MedianKLEnd, ceil, yesNo(byKL)),
				OK: byReturn || byKL})
		}
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// floats formats xs with format, space-separated, in brackets.
func floats(xs []float64, format string) string {
	s := "["
	for i, x := range xs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf(format, x)
	}
	return s + "]"
}
