package sampler_test

// Tests of the identities of Fujimoto, Meger & Precup 2020 (arXiv:2007.06049,
// "An Equivalence between Loss Functions and Non-Uniform Sampling in
// Experience Replay"), each tied to its theorem or equation. The exact identities
// hold on any finite vector of TD errors δ, so they are checked on one fixed
// heavy-tailed vector to 1e-12, relative to the sum of the absolute terms
// the compared quantities are sums of (the scale of their rounding error).
// The Monte Carlo test draws through the real striped buffer and LAP stage.
//
// Notation as the paper: N items, priority pr_i >= 0, P(i) = pr_i/Σ_j pr_j,
// λ = Σ_j pr_j/N (the mean priority), g_L(δ) = dL/dQ.

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

const (
	theoryN    = 1000
	theorySeed = 0x1a9_9a1
	theoryTol  = 1e-12
)

// theoryDeltas is the fixed TD-error vector of these tests: half lognormal
// magnitudes exp(-0.5 + 1.5·Z), half Student-t (2 degrees of freedom, scale
// 0.5) magnitudes, positive with probability 0.65 (so that expected
// gradients are clearly non-zero), plus the thresholds ±1, ±0.01 exactly.
// |δ| spans about 3e-3 to 42: values below and above both k = 0.01 and
// k = 1. No δ is 0 (Eq. 7's η would be 0).
func theoryDeltas(t testing.TB) []float64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(theorySeed, 7))
	d := make([]float64, theoryN)
	for i := range d {
		var m float64
		if i%2 == 0 {
			m = math.Exp(-0.5 + 1.5*rng.NormFloat64())
		} else {
			chi2 := -2 * math.Log(1-rng.Float64()) // χ²(2) = 2·Exp(1)
			m = math.Abs(0.5 * rng.NormFloat64() / math.Sqrt(chi2/2))
		}
		if rng.Float64() >= 0.65 {
			m = -m
		}
		d[i] = m
	}
	copy(d, []float64{1, -1, 0.01, -0.01})
	var below, mid, above int
	for _, x := range d {
		switch a := math.Abs(x); {
		case a == 0:
			t.Fatalf("seed %#x: δ = 0 in the test vector", theorySeed)
		case a < 0.01:
			below++
		case a > 1:
			above++
		default:
			mid++
		}
	}
	if below < 5 || mid < 5 || above < 5 {
		t.Fatalf("seed %#x: |δ| below 0.01: %d, in [0.01, 1]: %d, above 1: %d; want each >= 5", theorySeed, below, mid, above)
	}
	return d
}

// checkClose fails t unless |got - want| <= tol·max(|got|, |want|, scale).
// scale is the sum of the absolute values of the terms the two quantities
// were summed from: the magnitude their rounding error is relative to.
func checkClose(t *testing.T, what string, got, want, scale, tol float64) {
	t.Helper()
	lim := tol * max(math.Abs(got), math.Abs(want), scale)
	if !(math.Abs(got-want) <= lim) {
		t.Errorf("seed %#x: %s: got %.17g, want %.17g (|diff| %.3g > %.3g)", theorySeed, what, got, want, math.Abs(got-want), lim)
	}
}

func sumAbs(xs ...[]float64) float64 {
	var s float64
	for _, x := range xs {
		for _, v := range x {
			s += math.Abs(v)
		}
	}
	return s
}

func sign(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

// lapPriority is Eq. 9, max(|δ|, k)^α.
func lapPriority(d, k, alpha float64) float64 { return math.Pow(math.Max(math.Abs(d), k), alpha) }

// TestTheorem3PER checks Eq. 7 and Eq. 8: PER with P(i) ∝ |δ_i|^a and
// importance weights w_i = (N·P(i))^-b normalised by the global maximum,
// under the loss (1/t)|δ|^t, has the expected gradient of the uniform loss
// η·N/(t+a-ab)·|δ|^(t+a-ab), η = min_j |δ_j|^(ab) / Σ_j |δ_j|^a. The
// weights come from the real path, buffer.Batch.ImportanceWeights with
// NormalizeBuffer, on a batch holding every item once (Prob = P(i), Size =
// N, MinProb = min_j P(j)), which is exactly the global normalisation the
// theorem needs.
func TestTheorem3PER(t *testing.T) {
	d := theoryDeltas(t)
	n := len(d)
	huber := model.Loss{Kind: model.Huber, Delta: 1}.Derivative
	mse := model.Loss{Kind: model.MSE}.Derivative // ρ = δ², the paper's 2·(½δ²)
	for _, ab := range [][2]float64{{0.6, 0.4}, {0.6, 1}, {0.4, 0}, {1, 0.5}, {0.7, 0.5}} {
		a, b := ab[0], ab[1]
		for _, loss := range []struct {
			name string
			tau  func(x float64) float64 // t per sample
			g    func(x float64) float64 // gradient of (1/t)|δ|^t
		}{
			{"MSE (Eq. 7, t = 2)", func(float64) float64 { return 2 }, func(x float64) float64 { return mse(x) / 2 }},
			{"Huber(1) (Eq. 8)", func(x float64) float64 {
				if math.Abs(x) <= 1 {
					return 2
				}
				return 1
			}, huber},
		} {
			batch := &buffer.Batch{Prob: make([]float64, n), Size: n}
			var sumA float64
			minAB := math.Inf(1)
			for _, x := range d {
				sumA += math.Pow(math.Abs(x), a)
				minAB = math.Min(minAB, math.Pow(math.Abs(x), a*b))
			}
			batch.MinProb = math.Inf(1)
			for i, x := range d {
				batch.Prob[i] = math.Pow(math.Abs(x), a) / sumA
				batch.MinProb = math.Min(batch.MinProb, batch.Prob[i])
			}
			if err := batch.ImportanceWeights(b, buffer.NormalizeBuffer); err != nil {
				t.Fatal(err)
			}
			eta := minAB / sumA
			per := make([]float64, n)
			uni := make([]float64, n)
			var gPER, gUni float64
			for i, x := range d {
				per[i] = batch.Prob[i] * batch.Weight[i] * loss.g(x)
				gPER += per[i]
				// d/dδ of η·N/e·|δ|^e, averaged over N items.
				e := loss.tau(x) + a - a*b
				uni[i] = eta * float64(n) * sign(x) * math.Pow(math.Abs(x), e-1) / float64(n)
				gUni += uni[i]
			}
			checkClose(t, loss.name+" a="+ftoa(a)+" b="+ftoa(b), gPER, gUni, sumAbs(per, uni), theoryTol)
		}
	}
}

func ftoa(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// TestLAPEqualsPAL checks Observation 4 exactly: LAP's expected gradient
// Σ_i P_LAP(i)·Huber_k'(δ_i), P_LAP ∝ max(|δ_i|, k)^α, equals PAL's uniform
// mean of PAL_{k,α}'(δ_i)/λ with λ = mean_j max(|δ_j|, k)^α, taken from
// sampler.PAL.Scale over the whole vector, for k ∈ {1, 0.01} and
// α ∈ {0, 0.4, 0.6, 1}. The losses are model.Loss's. A second check
// writes the priorities through sampler.LAP.Update into a real buffer and
// reads them back with SlotPriority: each is within half the buffer's
// fixed-point resolution of Eq. 9, and the identity holds with them up to
// the bound that resolution implies.
func TestLAPEqualsPAL(t *testing.T) {
	d := theoryDeltas(t)
	n := len(d)
	absTD := make([]float64, n)
	for i, x := range d {
		absTD[i] = math.Abs(x)
	}
	for _, k := range []float64{1, 0.01} {
		for _, alpha := range []float64{0, 0.4, 0.6, 1} {
			cfg := sampler.LAPConfig{Alpha: alpha, K: k}
			name := "k=" + ftoa(k) + " alpha=" + ftoa(alpha)
			huber := model.Loss{Kind: model.Huber, Delta: k}.Derivative
			pal := model.Loss{Kind: model.PAL, Delta: k, Alpha: alpha}.Derivative
			palStage, err := sampler.NewPAL(samplertest.NewBuffer(t, 8), cfg)
			if err != nil {
				t.Fatal(err)
			}
			scale, err := palStage.Scale(absTD) // 1/λ
			if err != nil {
				t.Fatal(err)
			}
			pr := make([]float64, n)
			var total float64
			for i, x := range d {
				pr[i] = lapPriority(x, k, alpha)
				total += pr[i]
			}
			lap := make([]float64, n)
			palT := make([]float64, n)
			var gLAP, gPAL float64
			for i, x := range d {
				lap[i] = pr[i] / total * huber(x)
				gLAP += lap[i]
				palT[i] = pal(x) * scale / float64(n)
				gPAL += palT[i]
			}
			checkClose(t, "LAP = PAL, "+name, gLAP, gPAL, sumAbs(lap, palT), theoryTol)

			// The same through the real stage and buffer.
			buf := theoryBuffer(t, n, 8)
			stage, err := sampler.NewLAP(buf, cfg)
			if err != nil {
				t.Fatal(err)
			}
			refs := refsByID(t, buf, n)
			if res, err := stage.Update(refs, absTD); err != nil || res.Applied != n {
				t.Fatalf("%s: LAP.Update: %+v, %v", name, res, err)
			}
			res := buf.Resolution()
			var stored float64
			stPr := make([]float64, n)
			for i, r := range refs {
				ref, p, ok := buf.SlotPriority(int(r.Slot))
				if !ok || ref != r {
					t.Fatalf("%s: slot %d not readable", name, r.Slot)
				}
				if math.Abs(p-pr[i]) > res/2+1e-15*pr[i] {
					t.Fatalf("%s: item %d (δ %v): stored priority %v, want %v within %v", name, i, d[i], p, pr[i], res/2)
				}
				stPr[i] = p
				stored += p
			}
			var gBuf float64
			for i, x := range d {
				gBuf += stPr[i] / stored * huber(x)
			}
			// Each stored priority is pr_i(1+e_i) with |e_i| <= r, r =
			// res/(2·k^α) (every priority is at least k^α), so each P(i)
			// moves by at most a factor (1+r)/(1-r).
			r := res / (2 * cfg.Floor())
			bound := 2*r/(1-r)*sumAbs(lap) + theoryTol*sumAbs(lap, palT)
			if diff := math.Abs(gBuf - gPAL); diff > bound {
				t.Errorf("seed %#x: %s: with the buffer's priorities LAP's gradient is %v, PAL's %v (|diff| %.3g > %.3g)", theorySeed, name, gBuf, gPAL, diff, bound)
			}
		}
	}
}

// TestTheorem2Variance checks Observation 1 / Theorem 2's variances for
// several uniform gradients g1, X = (mean g1)²:
//
//   - uniform sampling of g1: Var = mean g1² − X;
//   - the minimum over pairings (L2, pr) that satisfy Theorem 1, reached by
//     L2 = L1 with pr = |g1|: Var_{i~P}[λ·sign g1] = (mean |g1|)² − X;
//
// each against a direct two-pass computation, and that two other valid
// pairings (uniform itself, and LAP's pr = max(|δ|,k)^α with Huber(k) when
// g1 is PAL's gradient) are not below the minimum.
func TestTheorem2Variance(t *testing.T) {
	d := theoryDeltas(t)
	n := float64(len(d))
	lapCfg := sampler.LAPConfig{Alpha: 0.4, K: 1}
	huber := model.Loss{Kind: model.Huber, Delta: 1}.Derivative
	pal := model.Loss{Kind: model.PAL, Delta: 1, Alpha: 0.4}.Derivative
	for _, c := range []struct {
		name string
		g1   func(float64) float64
	}{
		{"MSE", func(x float64) float64 { return x }},
		{"Huber(1)", huber},
		{"PAL(1, 0.4)", pal},
	} {
		g1 := make([]float64, len(d))
		var mean, meanAbs, meanSq float64
		for i, x := range d {
			g1[i] = c.g1(x)
			mean += g1[i]
			meanAbs += math.Abs(g1[i])
			meanSq += g1[i] * g1[i]
		}
		mean, meanAbs, meanSq = mean/n, meanAbs/n, meanSq/n
		X := mean * mean

		// Uniform: direct two-pass variance.
		var varU float64
		for _, g := range g1 {
			varU += (g - mean) * (g - mean)
		}
		varU /= n
		checkClose(t, c.name+": uniform variance", varU, meanSq-X, meanSq+X, theoryTol)

		// The minimum: i ~ P ∝ |g1|, estimator λ·sign(g1_i), λ = mean |g1|.
		prioVar := func(pr func(i int) float64, g2 func(i int) float64) (mu, v float64) {
			var total float64
			for i := range d {
				total += pr(i)
			}
			lambda := total / n
			for i := range d {
				mu += pr(i) / total * lambda * g2(i)
			}
			for i := range d {
				e := lambda*g2(i) - mu
				v += pr(i) / total * e * e
			}
			return mu, v
		}
		muMin, varMin := prioVar(func(i int) float64 { return math.Abs(g1[i]) }, func(i int) float64 { return sign(g1[i]) })
		checkClose(t, c.name+": E_P[λ·sign g1] = mean g1", muMin, mean, meanAbs, theoryTol)
		checkClose(t, c.name+": minimum variance", varMin, meanAbs*meanAbs-X, meanAbs*meanAbs+X, theoryTol)
		if varU < varMin*(1-theoryTol) {
			t.Errorf("%s: uniform variance %v is below the minimum %v", c.name, varU, varMin)
		}
		t.Logf("%s: uniform variance %.4g, minimum (prioritized λ·L1) %.4g", c.name, varU, varMin)
		if c.name == "PAL(1, 0.4)" {
			mu, v := prioVar(func(i int) float64 { return lapPriority(d[i], lapCfg.K, lapCfg.Alpha) }, func(i int) float64 { return huber(d[i]) })
			checkClose(t, "LAP pairing: E_P[λ·Huber'] = mean PAL'", mu, mean, meanAbs, theoryTol)
			if v < varMin*(1-theoryTol) {
				t.Errorf("LAP pairing variance %v is below the minimum %v", v, varMin)
			}
			t.Logf("PAL(1, 0.4): LAP pairing (λ·Huber prioritized by max(|δ|,1)^0.4) variance %.4g", v)
		}
	}
}

// TestLAPMonteCarloMatchesPAL draws through the real path: N items in a
// striped buffer, priorities set by sampler.LAP.Update from the fixed δ,
// then many stratified batches from LAP.Sample. The average of
// Huber_k'(δ_i) over the draws must be within 5 standard errors of PAL's
// exact uniform expectation, mean_i PAL'(δ_i)/λ. Draws within a batch are
// stratified, hence not independent; the batches are (each uses fresh
// random numbers), so the standard error is that of the mean of the batch
// means.
func TestLAPMonteCarloMatchesPAL(t *testing.T) {
	const (
		stripes = 8
		rows    = 64
		batches = 20000
	)
	d := theoryDeltas(t)
	n := len(d)
	absTD := make([]float64, n)
	for i, x := range d {
		absTD[i] = math.Abs(x)
	}
	for ci, cfg := range []sampler.LAPConfig{{Alpha: 0.4, K: 1}, {Alpha: 0.6, K: 0.01}} {
		seed := uint64(theorySeed + ci)
		buf := theoryBuffer(t, n, stripes)
		m, err := sampler.NewMethod("lap", buf, sampler.MethodConfig{LAP: &cfg})
		if err != nil {
			t.Fatal(err)
		}
		refs := refsByID(t, buf, n)
		if res, err := m.Selector.Update(refs, absTD); err != nil || res.Applied != n {
			t.Fatalf("LAP.Update: %+v, %v", res, err)
		}
		huber := m.Loss.Derivative
		pal := model.Loss{Kind: model.PAL, Delta: cfg.K, Alpha: cfg.Alpha}.Derivative
		var lambda, want, uniformHuber float64
		for _, x := range d {
			lambda += lapPriority(x, cfg.K, cfg.Alpha)
		}
		lambda /= float64(n)
		for _, x := range d {
			want += pal(x) / lambda
			uniformHuber += huber(x)
		}
		want /= float64(n)
		uniformHuber /= float64(n)

		rng := rand.New(rand.NewPCG(seed, 3))
		b := samplertest.NewBatch(t, buf, rows)
		var sum, sumSq float64
		for range batches {
			if err := m.Selector.Sample(rng, b); err != nil {
				t.Fatalf("seed %#x: Sample: %v", seed, err)
			}
			var bm float64
			for j := range rows {
				bm += huber(d[samplertest.ID(b, j)])
			}
			bm /= rows
			sum += bm
			sumSq += bm * bm
		}
		mean := sum / batches
		se := math.Sqrt((sumSq/batches - mean*mean) / (batches - 1))
		if diff := math.Abs(mean - want); !(diff <= 5*se) {
			t.Errorf("seed %#x, %+v: sampled mean Huber' %v, PAL's expectation %v: |diff| %.3g > 5 SE = %.3g", seed, cfg, mean, want, diff, 5*se)
		}
		// The test can tell: the uniform mean of Huber' is far from it.
		if diff := math.Abs(uniformHuber - want); !(diff > 10*se) {
			t.Errorf("seed %#x, %+v: the uniform mean of Huber' %v is within 10 SE (%.3g) of PAL's %v: the test has no power", seed, cfg, uniformHuber, 10*se, want)
		}
		t.Logf("%+v: sampled %.6f ± %.2g (SE), PAL exact %.6f, uniform Huber' %.6f", cfg, mean, se, want, uniformHuber)
	}
}

// theoryBuffer returns a buffer of capacity n with the given stripes,
// holding samplertest.Items(0, n) (item id i has Reward i) at the initial
// priority.
func theoryBuffer(t *testing.T, n, stripes int) *buffer.Buffer {
	t.Helper()
	cfg := samplertest.Config(n)
	cfg.Stripes = stripes
	buf, err := buffer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	samplertest.Insert(t, buf, 0, n, nil)
	if buf.Size() != n {
		t.Fatalf("buffer holds %d items, want %d", buf.Size(), n)
	}
	return buf
}

// refsByID returns the Ref of each item id 0..n-1 of buf.
func refsByID(t *testing.T, buf *buffer.Buffer, n int) []buffer.Ref {
	t.Helper()
	refs := make([]buffer.Ref, n)
	seen := make([]bool, n)
	b := samplertest.NewBatch(t, buf, 1)
	for slot := range buf.Capacity() {
		ref, _, ok := buf.SlotPriority(slot)
		if !ok || !buf.GatherRef(b, 0, ref) {
			t.Fatalf("slot %d is not readable", slot)
		}
		id := samplertest.ID(b, 0)
		if id < 0 || id >= n || seen[id] {
			t.Fatalf("slot %d holds id %d", slot, id)
		}
		refs[id], seen[id] = ref, true
	}
	return refs
}
