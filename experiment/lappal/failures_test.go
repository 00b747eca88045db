package lappal

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/experiment/control"
	"github.com/apexrl/apex/runtime"
)

// TestFisherExact: two-sided p-values against hand-computed hypergeometric
// sums. [[5, 15], [0, 20]] is the 5 of 20 against 0 of 20: the
// tables x = 0 and x = 5 of P(X = x) = C(20, x)·C(20, 5−x)/C(40, 5) hold
// 15504/658008 each (one of them is the one-sided p ≈ 0.024 the issue
// quotes). [[4, 6], [0, 10]]: C(10, x)·C(10, 4−x) = 210, 1200, 2025, 1200,
// 210 of C(20, 4) = 4845.
func TestFisherExact(t *testing.T) {
	for _, c := range []struct {
		a, b, c, d int
		want       float64
	}{
		{5, 15, 0, 20, 2 * 15504.0 / 658008},
		{0, 20, 5, 15, 2 * 15504.0 / 658008},
		{4, 6, 0, 10, 420.0 / 4845},
		{3, 1, 1, 3, 34.0 / 70}, // Fisher's tea: 1, 16, 36, 16, 1 of 70
		{2, 8, 2, 8, 1},
		{0, 10, 0, 10, 1},
	} {
		if got := FisherExact(c.a, c.b, c.c, c.d); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("FisherExact(%d, %d, %d, %d) = %.15g, want %.15g", c.a, c.b, c.c, c.d, got, c.want)
		}
	}
	if !math.IsNaN(FisherExact(-1, 2, 3, 4)) {
		t.Error("a negative count did not give NaN")
	}
}

// TestQuantile: type-7 quantiles, numpy's default.
func TestQuantile(t *testing.T) {
	xs := []float64{4, 1, 3, 2}
	for _, c := range []struct{ p, want float64 }{{0, 1}, {0.25, 1.75}, {0.5, 2.5}, {0.75, 3.25}, {1, 4}} {
		if got := Quantile(xs, c.p); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("Quantile(%v, %v) = %v, want %v", xs, c.p, got, c.want)
		}
	}
	if !slices.Equal(xs, []float64{4, 1, 3, 2}) {
		t.Errorf("Quantile modified its input: %v", xs)
	}
	if !math.IsNaN(Quantile(nil, 0.5)) || !math.IsNaN(Quantile(xs, 1.5)) {
		t.Error("no values, or p outside [0, 1], did not give NaN")
	}
}

// TestFailureRates: counts, quartiles, late dips and the Fisher test of
// each method against uniform and of the pooled lap+pal against the
// pooled uniform+per, on hand-made runs.
func TestFailureRates(t *testing.T) {
	curve := func(late, final float64) []runtime.EvalPoint {
		// Periodic evaluations at 1000..4000 (the second half: 2000..4000),
		// then the final one.
		return []runtime.EvalPoint{{LearnerSteps: 1000, MeanReturn: -1000}, {LearnerSteps: 2000, MeanReturn: late},
			{LearnerSteps: 3000, MeanReturn: -150}, {LearnerSteps: 4000, MeanReturn: -150}, {LearnerSteps: 4000, MeanReturn: final}}
	}
	var runs []control.Trial
	add := func(m string, finals ...float64) {
		for i, f := range finals {
			late := -150.0
			if i == 0 {
				late = -400 // one dip per method, in its first seed
			}
			runs = append(runs, control.Trial{Sampler: m, Seed: uint64(i + 1), Final: f, Tail: (late - 300) / 2, Curve: curve(late, f)})
		}
	}
	add("uniform", -130, -140, -150, -160, -170)
	add("per", -130, -140, -150, -160, -170)
	add("lap", -300, -260, -150, -140, -130)
	add("pal", -300, -140, -150, -160, -170)
	rows, err := FailureRates(runs, PendulumFailureFloor, "uniform", []string{"lap", "pal"}, []string{"uniform", "per"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rows {
		names = append(names, r.Method)
	}
	if want := []string{"uniform", "per", "lap", "pal", "lap+pal", "uniform+per"}; !slices.Equal(names, want) {
		t.Fatalf("rows %v, want %v", names, want)
	}
	lap, pooled, base := rows[2], rows[4], rows[5]
	if lap.Failures != 2 || lap.Median != -150 || lap.Q1 != -260 || lap.Q3 != -140 || lap.Against != "uniform" {
		t.Errorf("lap row %+v: want 2 failures, median -150, quartiles -260 and -140, against uniform", lap)
	}
	if want := FisherExact(2, 3, 0, 5); lap.FisherP != want {
		t.Errorf("lap p = %v, want %v", lap.FisherP, want)
	}
	// Tails: (−400 − 300)/2 = −350 in the first seed, −225 in the others.
	if lap.TailFailures != 1 || lap.TailP != 1 || pooled.TailFailures != 2 || base.TailFailures != 2 || pooled.TailP != 1 {
		t.Errorf("tail failures lap %d (p %v), pooled %d against %d (p %v): want 1 (p 1), 2 against 2 (p 1)",
			lap.TailFailures, lap.TailP, pooled.TailFailures, base.TailFailures, pooled.TailP)
	}
	if lap.LateBelow != 1 || lap.LateEvals != 15 {
		t.Errorf("lap late evaluations below the floor %d of %d, want 1 of 15", lap.LateBelow, lap.LateEvals)
	}
	if pooled.Failures != 3 || len(pooled.Finals) != 10 || pooled.Against != "uniform+per" || base.Failures != 0 {
		t.Errorf("pooled rows %+v, %+v: want 3 of 10 against uniform+per's 0", pooled, base)
	}
	if want := FisherExact(3, 7, 0, 10); pooled.FisherP != want {
		t.Errorf("pooled p = %v, want %v", pooled.FisherP, want)
	}
	var b strings.Builder
	if err := WriteFailureTable(&b, rows, PendulumFailureFloor); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"lap+pal", "3/10", "1–5", "-150.0"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
	if _, err := FailureRates(runs, PendulumFailureFloor, "rank"); err == nil {
		t.Error("a baseline without runs was accepted")
	}
}

// TestFisherExactLarge: large counts neither overflow nor lose the total.
func TestFisherExactLarge(t *testing.T) {
	if p := FisherExact(500, 500, 500, 500); p != 1 {
		t.Errorf("equal rates of 1000 each: p = %v, want 1", p)
	}
	if p := FisherExact(1000, 0, 0, 1000); !(p >= 0 && p < 1e-300) {
		t.Errorf("all against none of 1000: p = %v, want about 0", p)
	}
}
