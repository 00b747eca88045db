package lappal

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/apexrl/apex/experiment/control"
	"github.com/apexrl/apex/runtime"
)

// PendulumFailureFloor is the final return below which a Pendulum-v1 run
// counts as failed (issue 14: a trained TD3 swings up from every start
// and scores about −150; −250 and below means some starts were not
// solved).
const PendulumFailureFloor = -250.0

// PendulumFailures tabulates the failure rates of a Pendulum-v1 comparison
// (issue 14: how many runs end below PendulumFailureFloor, per method, and
// LAP or PAL pooled against uniform or PER pooled, uniform the baseline).
// ok is false, with no rows, when cfg does not compare all four methods.
func PendulumFailures(cfg control.Config, runs []control.Trial) (rows []FailureRow, ok bool, err error) {
	for _, m := range []string{"uniform", "per", "lap", "pal"} {
		if !slices.Contains(cfg.Samplers, m) {
			return nil, false, nil
		}
	}
	rows, err = FailureRates(runs, PendulumFailureFloor, "uniform", []string{"lap", "pal"}, []string{"uniform", "per"})
	return rows, err == nil, err
}

// FailureRow is one method's (or a pool of methods') failure rate over its
// seeds: the runs whose final evaluation scored below a floor.
type FailureRow struct {
	// Method names the method, or the pooled methods joined by "+".
	Method string    `json:"method"`
	Seeds  []uint64  `json:"seeds"`
	Finals []float64 `json:"finals"` // final returns, in Seeds order
	// Failures counts the Finals below the floor.
	Failures int `json:"failures"`
	// Median, Q1 and Q3 are the Finals' median and quartiles (Quantile).
	Median float64 `json:"median"`
	Q1     float64 `json:"q1"`
	Q3     float64 `json:"q3"`
	// TailFailures counts the runs whose Tail (the mean of the last
	// periodic evaluations, control.Config.TailEvals of them) is below the
	// floor: the paper's measure is such a mean (the last 10 evaluations);
	// TailP is its Fisher test against the baseline's.
	TailFailures int     `json:"tail_failures"`
	TailP        float64 `json:"tail_p"`
	// LateBelow of LateEvals periodic evaluations in the second half of
	// the runs (learner steps >= half the last one) scored below the
	// floor: the dips a run goes through while it trains, of which the
	// final evaluation sees one instant.
	LateBelow int `json:"late_below"`
	LateEvals int `json:"late_evals"`
	// Against names the baseline row FisherP compares with; FisherP is the
	// two-sided Fisher exact test of Failures/len(Finals) against the
	// baseline's (1 for the baseline itself).
	Against string  `json:"against"`
	FisherP float64 `json:"fisher_p"`
}

// FailureRates tabulates the failure rate of each method in runs (in
// order of first appearance), then of the pools: each pool is a list of
// methods whose runs are counted together (the "LAP or PAL"
// against "uniform and PER"). Each single method is compared with
// baseline, and each pool with the pool that contains baseline (or with
// baseline alone when none does). It fails if baseline has no runs.
func FailureRates(runs []control.Trial, floor float64, baseline string, pools ...[]string) ([]FailureRow, error) {
	var order []string
	by := map[string][]control.Trial{}
	for _, r := range runs {
		if !slices.Contains(order, r.Sampler) {
			order = append(order, r.Sampler)
		}
		by[r.Sampler] = append(by[r.Sampler], r)
	}
	if len(by[baseline]) == 0 {
		return nil, fmt.Errorf("lappal: failure rates: no runs of the baseline %q", baseline)
	}
	row := func(name string, rs []control.Trial) FailureRow {
		fr := FailureRow{Method: name}
		for _, r := range rs {
			fr.Seeds = append(fr.Seeds, r.Seed)
			fr.Finals = append(fr.Finals, r.Final)
			if r.Final < floor {
				fr.Failures++
			}
			if r.Tail < floor {
				fr.TailFailures++
			}
			b, n := lateBelow(r.Curve, floor)
			fr.LateBelow += b
			fr.LateEvals += n
		}
		fr.Median = Quantile(fr.Finals, 0.5)
		fr.Q1, fr.Q3 = Quantile(fr.Finals, 0.25), Quantile(fr.Finals, 0.75)
		return fr
	}
	base := row(baseline, by[baseline])
	var out []FailureRow
	for _, name := range order {
		fr := row(name, by[name])
		fr.Against = baseline
		fr.FisherP, fr.TailP = fisherRows(fr, base)
		out = append(out, fr)
	}
	baseRow := base
	for _, p := range pools {
		if slices.Contains(p, baseline) {
			baseRow = row(strings.Join(p, "+"), pool(by, p))
		}
	}
	for _, p := range pools {
		rs := pool(by, p)
		if len(rs) == 0 {
			return nil, fmt.Errorf("lappal: failure rates: no runs of the pool %v", p)
		}
		fr := row(strings.Join(p, "+"), rs)
		fr.Against = baseRow.Method
		fr.FisherP, fr.TailP = fisherRows(fr, baseRow)
		out = append(out, fr)
	}
	return out, nil
}

// fisherRows tests r's final and tail failure counts against base's.
func fisherRows(r, base FailureRow) (final, tail float64) {
	n, m := len(r.Finals), len(base.Finals)
	return FisherExact(r.Failures, n-r.Failures, base.Failures, m-base.Failures),
		FisherExact(r.TailFailures, n-r.TailFailures, base.TailFailures, m-base.TailFailures)
}

func pool(by map[string][]control.Trial, methods []string) []control.Trial {
	var rs []control.Trial
	for _, m := range methods {
		rs = append(rs, by[m]...)
	}
	return rs
}

// lateBelow counts the periodic evaluations of curve (the last point is
// the final evaluation and is left out) at learner steps >= half the last
// periodic one, and those below floor.
func lateBelow(curve []runtime.EvalPoint, floor float64) (below, n int) {
	if len(curve) < 2 {
		return 0, 0
	}
	periodic := curve[:len(curve)-1]
	half := periodic[len(periodic)-1].LearnerSteps / 2
	for _, p := range periodic {
		if p.LearnerSteps >= half {
			n++
			if p.MeanReturn < floor {
				below++
			}
		}
	}
	return below, n
}

// WriteFailureTable writes rows as a text table: method, seeds, failures
// (final < floor), median and interquartile range of the final returns,
// late evaluations below the floor, and the Fisher p-value against the
// row's baseline.
func WriteFailureTable(w io.Writer, rows []FailureRow, floor float64) error {
	if len(rows) == 0 {
		return errors.New("lappal: no failure rows to write")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "failed: final evaluation's mean return < %g (median and IQR of the final returns); tail failed: mean of the last periodic evaluations < %g;\n"+
		"late evals: periodic evaluations in the runs' second half below it; p: two-sided Fisher exact test of the counts against the row named in vs\n", floor, floor)
	tab := [][]string{{"method", "seeds", "failed", "p", "median", "IQR [Q1, Q3]", "tail failed", "p", "late evals < floor", "vs"}}
	for _, r := range rows {
		tab = append(tab, []string{r.Method, seedRange(r.Seeds), fmt.Sprintf("%d/%d", r.Failures, len(r.Finals)), fmt.Sprintf("%.3f", r.FisherP),
			fmt.Sprintf("%.1f", r.Median), fmt.Sprintf("%.1f [%.1f, %.1f]", r.Q3-r.Q1, r.Q1, r.Q3),
			fmt.Sprintf("%d/%d", r.TailFailures, len(r.Finals)), fmt.Sprintf("%.3f", r.TailP),
			fmt.Sprintf("%d/%d", r.LateBelow, r.LateEvals), r.Against})
	}
	width := make([]int, len(tab[0]))
	for _, r := range tab {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for _, r := range tab {
		var line strings.Builder
		for i, c := range r {
			line.WriteString("  " + c + strings.Repeat(" ", width[i]-len([]rune(c))))
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// seedRange writes seeds compactly: runs of consecutive seeds as "a–b".
func seedRange(seeds []uint64) string {
	s := slices.Clone(seeds)
	slices.Sort(s)
	s = slices.Compact(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(s[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d–%d", s[i], s[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// Quantile is the p-quantile of xs by linear interpolation between order
// statistics (position p·(n−1), Hyndman & Fan's type 7, numpy's default);
// NaN for no xs. xs is not modified. O(n log n).
func Quantile(xs []float64, p float64) float64 {
	if len(xs) == 0 || !(p >= 0 && p <= 1) {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	h := p * float64(len(s)-1)
	lo := int(math.Floor(h))
	if lo+1 >= len(s) {
		return s[lo]
	}
	return s[lo] + (h-float64(lo))*(s[lo+1]-s[lo])
}

// FisherExact is the two-sided p-value of Fisher's exact test on the 2×2
// table [[a, b], [c, d]] (rows: the two groups; columns: failed, not
// failed): the probability, under the hypergeometric law with the
// table's margins fixed, of every table at most as likely as the one
// observed (R's fisher.test, with its relative tolerance 1e-7). Negative
// counts give NaN. O(min(a+b, a+c)).
func FisherExact(a, b, c, d int) float64 {
	if a < 0 || b < 0 || c < 0 || d < 0 {
		return math.NaN()
	}
	r1, c1, n := a+b, a+c, a+b+c+d
	lf := func(k int) float64 { v, _ := math.Lgamma(float64(k) + 1); return v }
	// log P(X = x): X failures in the first row.
	logP := func(x int) float64 {
		return lf(r1) + lf(n-r1) + lf(c1) + lf(n-c1) - lf(n) - lf(x) - lf(r1-x) - lf(c1-x) - lf(n-r1-c1+x)
	}
	// The sums are taken relative to the likeliest table's probability and
	// divided by their total, so a p-value over every table is exactly 1.
	lo, hi := max(0, r1+c1-n), min(r1, c1)
	obs, top := logP(a), math.Inf(-1)
	for x := lo; x <= hi; x++ {
		top = max(top, logP(x))
	}
	var p, all float64
	for x := lo; x <= hi; x++ {
		lp := logP(x)
		v := math.Exp(lp - top)
		all += v
		if lp <= obs+1e-7 {
			p += v
		}
	}
	return min(p/all, 1)
}
