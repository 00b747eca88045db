package sampler_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// newNERSNetForTest builds a scorer from cfg with a PCG seeded by seed.
func newNERSNetForTest(t testing.TB, cfg sampler.NERSNetConfig, seed uint64) *sampler.NERSNet {
	t.Helper()
	n, err := sampler.NewNERSNet(cfg, rand.New(rand.NewPCG(seed, 1)))
	if err != nil {
		t.Fatalf("seed %d: NewNERSNet(%+v): %v", seed, cfg, err)
	}
	return n
}

// nersNetRows returns m rows of width in with N(0, 1) entries.
func nersNetRows(rng *rand.Rand, m, in int) []float64 {
	x := make([]float64, m*in)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	return x
}

// nersNetJitter sets every parameter that is 0 (the biases after Glorot
// initialization) to a small random value, so that bias gradients and
// ReLU kinks are exercised away from the symmetric start.
func nersNetJitter(n *sampler.NERSNet, rng *rand.Rand) {
	for _, p := range n.Params() {
		for i, v := range p {
			if v == 0 {
				p[i] = 0.1 * rng.NormFloat64()
			}
		}
	}
}

// TestNERSNetPermutationEquivariance: f(perm(D)) = perm(f(D)) (Eq. 4; the
// mean is the only coupling, and it is order-free).
func TestNERSNetPermutationEquivariance(t *testing.T) {
	const seed, in, m = 11, 6, 17
	for _, noGlobal := range []bool{false, true} {
		cfg := sampler.NERSNetConfig{In: in, Local: []int{16, 8}, Global: []int{16, 8}, Score: []int{16}, NoGlobal: noGlobal}
		n := newNERSNetForTest(t, cfg, seed)
		rng := rand.New(rand.NewPCG(seed, 2))
		nersNetJitter(n, rng)
		x := nersNetRows(rng, m, in)
		s := slices.Clone(n.Scores(x))
		xp := make([]float64, len(x))
		for trial := range 4 {
			perm := rng.Perm(m)
			for k, p := range perm {
				copy(xp[k*in:(k+1)*in], x[p*in:(p+1)*in])
			}
			sp := n.Scores(xp)
			for k, p := range perm {
				if d := math.Abs(sp[k] - s[p]); d > 1e-12 {
					t.Fatalf("seed %d NoGlobal=%v trial %d perm %v: score of permuted row %d = %v, original row %d = %v (diff %g)",
						seed, noGlobal, trial, perm, k, sp[k], p, s[p], d)
				}
			}
		}
	}
}

// TestNERSNetCoupling: changing item j moves every other item's score
// through the global mean, and moves none of them without f_g.
func TestNERSNetCoupling(t *testing.T) {
	const seed, in, m, j = 12, 5, 8, 3
	for _, noGlobal := range []bool{false, true} {
		cfg := sampler.NERSNetConfig{In: in, NoGlobal: noGlobal}
		n := newNERSNetForTest(t, cfg, seed)
		rng := rand.New(rand.NewPCG(seed, 2))
		x := nersNetRows(rng, m, in)
		s0 := slices.Clone(n.Scores(x))
		for k := range in {
			x[j*in+k] += 1 + rng.Float64()
		}
		s1 := n.Scores(x)
		if s1[j] == s0[j] {
			t.Errorf("seed %d NoGlobal=%v: the changed row %d kept its score %v", seed, noGlobal, j, s0[j])
		}
		for i := range m {
			if i == j {
				continue
			}
			d := math.Abs(s1[i] - s0[i])
			if noGlobal && s1[i] != s0[i] {
				t.Errorf("seed %d NoGlobal: row %d's score moved from %v to %v when row %d changed", seed, i, s0[i], s1[i], j)
			}
			if !noGlobal && !(d > 1e-9) {
				t.Errorf("seed %d: row %d's score moved by only %g (%v → %v) when row %d changed", seed, i, d, s0[i], s1[i], j)
			}
		}
	}
}

// TestNERSNetScoreRange: every score is in (0, 1] and at least Floor, for
// ordinary and huge inputs, and at both saturations of the sigmoid.
func TestNERSNetScoreRange(t *testing.T) {
	const seed, in = 13, 4
	check := func(what string, floor float64, s []float64) {
		t.Helper()
		for i, v := range s {
			if !(v > 0 && v <= 1 && v >= floor) {
				t.Fatalf("seed %d %s: score[%d] = %v, outside [Floor=%v, 1]", seed, what, i, v, floor)
			}
		}
	}
	for _, noGlobal := range []bool{false, true} {
		n := newNERSNetForTest(t, sampler.NERSNetConfig{In: in, NoGlobal: noGlobal}, seed)
		floor := n.Config().Floor
		rng := rand.New(rand.NewPCG(seed, 2))
		check("normal rows", floor, n.Scores(nersNetRows(rng, 64, in)))

		// Huge rows, one batch of one each: the ReLU nets are positively
		// homogeneous at zero biases, so f_s's output is ~1e6 in size and
		// the sigmoid saturates. Random sign patterns give both signs.
		lo, hi := 0, 0
		row := make([]float64, in)
		for range 64 {
			for k := range row {
				row[k] = 1e6
				if rng.IntN(2) == 0 {
					row[k] = -1e6
				}
			}
			s := n.Scores(row)
			check("huge row", floor, s)
			if s[0] == floor {
				lo++
			}
			if s[0] == 1 {
				hi++
			}
		}
		if lo == 0 || hi == 0 {
			t.Errorf("seed %d NoGlobal=%v: of 64 rows of ±1e6, %d saturate at Floor and %d at 1 (want both > 0)", seed, noGlobal, lo, hi)
		}
		batch := make([]float64, 32*in)
		for i := range batch {
			batch[i] = 1e6 * float64(1-2*rng.IntN(2))
		}
		check("huge batch", floor, n.Scores(batch))

		// Force f_s's output bias to ±1e9: every score is exactly Floor or 1.
		fs := n.Params()[len(n.Params())-1]
		x := nersNetRows(rng, 16, in)
		for _, b := range []float64{-1e9, 1e9} {
			fs[len(fs)-1] = b
			s := n.Scores(x)
			check("saturated", floor, s)
			want := floor
			if b > 0 {
				want = 1
			}
			for i, v := range s {
				if v != want {
					t.Errorf("seed %d NoGlobal=%v bias %g: score[%d] = %v, want %v", seed, noGlobal, b, i, v, want)
				}
			}
		}
	}
}

// TestNERSNetGradCheck compares Backward's gradients, f_g's included (they
// pass through the mean), with central differences of L = Σ_i c_i·σ_i.
func TestNERSNetGradCheck(t *testing.T) {
	const seed, in, m, h = 14, 4, 5, 1e-6
	for _, noGlobal := range []bool{false, true} {
		cfg := sampler.NERSNetConfig{In: in, Local: []int{7, 5}, Global: []int{6, 3}, Score: []int{8}, NoGlobal: noGlobal}
		n := newNERSNetForTest(t, cfg, seed)
		rng := rand.New(rand.NewPCG(seed, 2))
		nersNetJitter(n, rng)
		x := nersNetRows(rng, m, in)
		c := make([]float64, m)
		for i := range c {
			c[i] = 2*rng.Float64() - 1
		}
		loss := func() float64 {
			var l float64
			for i, s := range n.Scores(x) {
				l += c[i] * s
			}
			return l
		}
		loss()
		n.Backward(c)
		names := []string{"f_l", "f_g", "f_s"}
		if noGlobal {
			names = []string{"f_l", "f_s"}
		}
		if len(n.Params()) != len(names) || len(n.Grads()) != len(names) {
			t.Fatalf("NoGlobal=%v: %d parameter vectors and %d gradient vectors, want %d", noGlobal, len(n.Params()), len(n.Grads()), len(names))
		}
		grads := make([][]float64, len(names))
		for k, g := range n.Grads() {
			grads[k] = slices.Clone(g)
		}
		for k, p := range n.Params() {
			var maxAbs, maxErr float64
			bad := 0
			for i := range p {
				orig := p[i]
				p[i] = orig + h
				lp := loss()
				p[i] = orig - h
				lm := loss()
				p[i] = orig
				num := (lp - lm) / (2 * h)
				ana := grads[k][i]
				err := math.Abs(num - ana)
				maxAbs = max(maxAbs, math.Abs(ana))
				maxErr = max(maxErr, err)
				if err > 1e-5*max(math.Abs(num), math.Abs(ana))+1e-9 {
					if bad++; bad > 5 {
						continue
					}
					t.Errorf("seed %d NoGlobal=%v %s param %d: analytic %v, numeric %v (diff %g)", seed, noGlobal, names[k], i, ana, num, err)
				}
			}
			if bad > 5 {
				t.Errorf("seed %d NoGlobal=%v %s: %d parameters fail in all", seed, noGlobal, names[k], bad)
			}
			if maxAbs < 1e-4 {
				t.Errorf("seed %d NoGlobal=%v %s: largest gradient %g, the check is vacuous", seed, noGlobal, names[k], maxAbs)
			}
			t.Logf("NoGlobal=%v %s: %d parameters, largest |grad| %.3g, largest error %.3g", noGlobal, names[k], len(p), maxAbs, maxErr)
		}
	}
}

// TestNERSNetReinforceSign: when the replay reward rises with the share of
// b=1 items in the sampled batch, REINFORCE (Eq. 7) raises the scores of
// b=1 items, above those of b=0 items.
//
// The reward is the batch's share of b=1 items minus a running average of
// the recent shares, the analogue of r_re = (return now) − (return at the
// previous evaluation), which is positive while sampling improves. A fixed
// baseline (share − 0.5) is not used: Eq. 7 has no baseline of its own, so
// while the net starts with fewer b=1 samples than 0.5 every reward is
// negative on average and all scores fall to Floor together, where the
// sigmoid's gradient vanishes (seed 15 did so in 400 steps).
func TestNERSNetReinforceSign(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		nersNetReinforceSign(t, seed, 1)
	}
}

// nersNetReinforceSign trains a scorer for seed on the b ∈ {0, 1} pool with the
// reward sign·(share − running share) and checks the b=1 items won. It
// returns the final gap of mean scores, b=1 minus b=0.
func nersNetReinforceSign(t *testing.T, seed uint64, sign float64) float64 {
	t.Helper()
	const in, pool, batch, iters = 3, 128, 32, 400
	cfg := sampler.NERSNetConfig{In: in, Local: []int{16, 8}, Global: []int{16, 8}, Score: []int{16}, LR: 1e-3}
	n := newNERSNetForTest(t, cfg, seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	x := make([]float64, pool*in) // rows (b, noise, noise), b = 1 for odd rows
	for i := range pool {
		x[i*in] = float64(i % 2)
		for k := 1; k < in; k++ {
			x[i*in+k] = rng.NormFloat64()
		}
	}
	// stats scores the pool as one batch: the mean score of b=0 and of
	// b=1 items, and the b=1 items' share of the sampling probability.
	stats := func() (m0, m1, p1 float64) {
		for i, s := range n.Scores(x) {
			if i%2 == 1 {
				m1 += s
			} else {
				m0 += s
			}
		}
		return m0 / (pool / 2), m1 / (pool / 2), m1 / (m0 + m1)
	}
	start0, start1, startP := stats()
	cum := make([]float64, pool)
	bx := make([]float64, batch*in)
	baseline := 0.5
	for it := range iters {
		var acc float64
		for i, s := range n.Scores(x) {
			acc += s
			cum[i] = acc
		}
		ones := 0
		for j := range batch {
			i := min(sort.SearchFloat64s(cum, rng.Float64()*acc), pool-1)
			copy(bx[j*in:(j+1)*in], x[i*in:(i+1)*in])
			ones += i % 2
		}
		share := float64(ones) / batch
		r := sign * (share - baseline)
		baseline = 0.9*baseline + 0.1*share
		if _, err := n.Reinforce(bx, r); err != nil {
			t.Fatalf("seed %d iteration %d: Reinforce(r=%v): %v", seed, it, r, err)
		}
	}
	end0, end1, endP := stats()
	t.Logf("seed %d sign %+g: mean score b=0 %.4f → %.4f, b=1 %.4f → %.4f, b=1 share of probability %.4f → %.4f",
		seed, sign, start0, end0, start1, end1, startP, endP)
	if sign > 0 {
		if !(end1-end0 > 0.05) {
			t.Errorf("seed %d: after %d steps mean score b=1 %.4f, b=0 %.4f (want b=1 ahead by > 0.05)", seed, iters, end1, end0)
		}
		if !(end1 > start1+0.02) {
			t.Errorf("seed %d: mean score of b=1 went from %.4f to %.4f (want a rise > 0.02)", seed, start1, end1)
		}
		if !(endP > startP+0.02) {
			t.Errorf("seed %d: b=1 share of the sampling probability went from %.4f to %.4f (want a rise > 0.02)", seed, startP, endP)
		}
	}
	return end1 - end0
}

// TestNERSNetReinforceSignFlipped: the same task with the reward negated
// favours the b=0 items, so the check above is not satisfied by any
// training at all.
func TestNERSNetReinforceSignFlipped(t *testing.T) {
	const seed = 1
	if gap := nersNetReinforceSign(t, seed, -1); !(gap < -0.05) {
		t.Errorf("seed %d: with the reward negated the b=1 items still lead by %.4f (want b=0 ahead by > 0.05)", seed, gap)
	}
}

// TestNERSNetConfig checks the defaults and that every bad field is refused
// with an error wrapping buffer.ErrConfig that names it.
func TestNERSNetConfig(t *testing.T) {
	def := sampler.DefaultNERSNetConfig(7)
	if def.In != 7 || !slices.Equal(def.Local, []int{64, 32}) || !slices.Equal(def.Global, []int{64, 32}) ||
		!slices.Equal(def.Score, []int{64}) || def.NoGlobal || def.Floor != 1e-3 || def.LR != 1e-4 {
		t.Errorf("DefaultNERSNetConfig(7) = %+v", def)
	}
	if err := def.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	n := newNERSNetForTest(t, sampler.NERSNetConfig{In: 7}, 16)
	got := n.Config()
	if got.In != 7 || !slices.Equal(got.Local, def.Local) || !slices.Equal(got.Global, def.Global) ||
		!slices.Equal(got.Score, def.Score) || got.Floor != def.Floor || got.LR != def.LR {
		t.Errorf("zero fields: Config() = %+v, want the defaults %+v", got, def)
	}
	want := (7*64 + 64 + 64*32 + 32) * 2 // f_l and f_g
	want += 64*64 + 64 + 64 + 1          // f_s: 64 → 64 → 1
	if n.NumParams() != want {
		t.Errorf("NumParams = %d, want %d", n.NumParams(), want)
	}
	got.Local[0] = 99 // Config returns a copy
	if n.Config().Local[0] != 64 {
		t.Error("Config shares its Local slice with the network")
	}
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		field string
		cfg   sampler.NERSNetConfig
	}{
		{"In", sampler.NERSNetConfig{}},
		{"In", sampler.NERSNetConfig{In: -3}},
		{"Local[1]", sampler.NERSNetConfig{In: 2, Local: []int{4, 0}}},
		{"Local[0]", sampler.NERSNetConfig{In: 2, Local: []int{-1}}},
		{"Global[0]", sampler.NERSNetConfig{In: 2, Global: []int{0, 4}}},
		{"Score[2]", sampler.NERSNetConfig{In: 2, Score: []int{4, 4, -2}}},
		{"Floor", sampler.NERSNetConfig{In: 2, Floor: -0.1}},
		{"Floor", sampler.NERSNetConfig{In: 2, Floor: 1}},
		{"Floor", sampler.NERSNetConfig{In: 2, Floor: 1.5}},
		{"Floor", sampler.NERSNetConfig{In: 2, Floor: nan}},
		{"LR", sampler.NERSNetConfig{In: 2, LR: -1e-4}},
		{"LR", sampler.NERSNetConfig{In: 2, LR: nan}},
		{"LR", sampler.NERSNetConfig{In: 2, LR: inf}},
	} {
		err := tc.cfg.Validate()
		if !errors.Is(err, buffer.ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: Validate() = %v, want an ErrConfig naming %s", tc.cfg, err, tc.field)
		}
		if _, err := sampler.NewNERSNet(tc.cfg, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, buffer.ErrConfig) {
			t.Errorf("%+v: NewNERSNet error %v, want ErrConfig", tc.cfg, err)
		}
	}
	// f_g's widths do not matter without f_g.
	if err := (sampler.NERSNetConfig{In: 2, Global: []int{0}, NoGlobal: true}).Validate(); err != nil {
		t.Errorf("NoGlobal with a bad Global: %v", err)
	}
}

// TestNERSNetReinforceNonFinite: a NaN or infinite reward, or NaN
// features, is refused with model.ErrNonFinite and changes no parameter.
func TestNERSNetReinforceNonFinite(t *testing.T) {
	const seed, in, m = 17, 3, 8
	n := newNERSNetForTest(t, sampler.NERSNetConfig{In: in, Local: []int{8, 4}, Global: []int{8, 4}, Score: []int{8}}, seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	x := nersNetRows(rng, m, in)
	if _, err := n.Reinforce(x, 0.5); err != nil { // a good step first, so Adam has state
		t.Fatal(err)
	}
	snapshot := func() [][]float64 {
		var out [][]float64
		for _, p := range n.Params() {
			out = append(out, slices.Clone(p))
		}
		return out
	}
	before := snapshot()
	bad := slices.Clone(x)
	bad[4] = math.NaN()
	for _, tc := range []struct {
		name   string
		x      []float64
		reward float64
	}{
		{"NaN reward", x, math.NaN()},
		{"+Inf reward", x, math.Inf(1)},
		{"-Inf reward", x, math.Inf(-1)},
		{"NaN feature", bad, 1},
	} {
		_, err := n.Reinforce(tc.x, tc.reward)
		if !errors.Is(err, model.ErrNonFinite) {
			t.Errorf("%s: Reinforce error %v, want model.ErrNonFinite", tc.name, err)
		}
		for k, p := range n.Params() {
			if !slices.Equal(p, before[k]) {
				t.Fatalf("%s: parameter vector %d changed", tc.name, k)
			}
		}
	}
	// The next good step still works and moves the parameters.
	if _, err := n.Reinforce(x, 0.5); err != nil {
		t.Fatal(err)
	}
	if slices.Equal(n.Params()[0], before[0]) {
		t.Error("a good Reinforce after the refused ones changed nothing")
	}
}

// TestNERSNetLossAndNoAlloc: Reinforce returns −r·mean log(σ+1e-6), and
// Scores and Reinforce do not allocate after warm-up.
func TestNERSNetLossAndNoAlloc(t *testing.T) {
	const seed, in, m = 18, 5, 32
	n := newNERSNetForTest(t, sampler.NERSNetConfig{In: in}, seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	x := nersNetRows(rng, m, in)
	s := n.Scores(x)
	var want float64
	for _, v := range s {
		want -= 0.7 * math.Log(v+1e-6) / m
	}
	got, err := n.Reinforce(x, 0.7)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-want) > 1e-12 {
		t.Errorf("seed %d: Reinforce loss %v, want %v", seed, got, want)
	}
	small := x[:3*in]
	if a := testing.AllocsPerRun(20, func() {
		n.Scores(small)
		n.Scores(x)
		if _, err := n.Reinforce(x, 0.1); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("Scores+Reinforce allocate %v times after warm-up", a)
	}
}

func BenchmarkNERSNetScores(b *testing.B) {
	const in, m = 10, 256
	n := newNERSNetForTest(b, sampler.DefaultNERSNetConfig(in), 1)
	x := nersNetRows(rand.New(rand.NewPCG(1, 2)), m, in)
	n.Scores(x)
	b.ReportAllocs()
	for b.Loop() {
		n.Scores(x)
	}
}

// TestNERSReinforceNormalizedRefuses: a bad alpha or reward is refused and
// nothing is applied.
func TestNERSReinforceNormalizedRefuses(t *testing.T) {
	n, err := sampler.NewNERSNet(sampler.NERSNetConfig{In: 3}, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	before := slices.Clone(n.Params()[0])
	x := []float64{1, 2, 3, 4, 5, 6}
	for _, c := range []struct{ r, a float64 }{{1, 0}, {1, -1}, {1, math.Inf(1)}, {math.NaN(), 0.5}} {
		if _, err := n.ReinforceNormalized(x, c.r, c.a); err == nil {
			t.Errorf("reward %v alpha %v accepted", c.r, c.a)
		}
	}
	if !slices.Equal(before, n.Params()[0]) {
		t.Error("a refused call changed the scorer")
	}
	if _, err := n.ReinforceNormalized(x, 1, 0.5); err != nil {
		t.Fatal(err)
	}
	if slices.Equal(before, n.Params()[0]) {
		t.Error("a valid call left the scorer unchanged")
	}
}
