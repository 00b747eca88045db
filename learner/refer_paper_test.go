package learner

// Tests tied to the equations of Novati & Koumoutsakos 2019 (arXiv
// 1807.05827): the controller of Eq. 12–13 and the far counter of §3, and
// V-RACER's Retrace targets (Eq. 6–8), run on a REFER stage and its
// REFERController. See also refer.md §6.

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// oneEpisodeStage returns a stage holding one terminal episode of T steps,
// with its controller.
func oneEpisodeStage(t *testing.T, T int, cfg sampler.REFERConfig) (*referPair, *buffer.Buffer) {
	t.Helper()
	buf := samplertest.REFERBuffer(t, 4*T, 1)
	r := newReferPair(t, buf, cfg)
	ep := samplertest.Episode{ID: 1, Reward: make([]float32, T), End: buffer.FlagTerminal, Gamma: 0.9}
	for i := range ep.Reward {
		ep.Reward[i] = float32(i%3) - 1
	}
	ep.Insert(t, buf, 0, T)
	r.poll(t, buf)
	return r, buf
}

// stepAll samples every stored step, refreshes each with rho and ends
// learner step k.
func stepAll(t *testing.T, r *referPair, buf *buffer.Buffer, rho func(i int) float64, k uint64) {
	t.Helper()
	n := r.Stats().Steps
	dst := samplertest.NewBatch(t, buf, n)
	if err := r.stage.Sample(rand.New(rand.NewPCG(k, 1)), dst); err != nil {
		t.Fatal(err)
	}
	rs, v, kl := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range rs {
		rs[i] = rho(int(dst.EpisodeStep[i]))
	}
	if err := r.Refresh(rs, v, kl); err != nil {
		t.Fatal(err)
	}
	r.AfterStep(k)
}

// TestREFERBetaFixedPoints: Eq. 12. While n_far/N > D, beta ← (1−η)·beta
// (fixed point 0); otherwise beta ← (1−η)·beta + η (fixed point 1); the
// boundary n_far/N = D counts as "otherwise".
func TestREFERBetaFixedPoints(t *testing.T) {
	const T, eta = 100, 0.05
	r, buf := oneEpisodeStage(t, T, sampler.REFERConfig{BetaRate: eta, Beta0: 0.3, A: 1e-12, RecountEvery: 1 << 30})
	beta := 0.3
	k := uint64(0)
	far := func(int) float64 { return 100 } // c_max = 5: all far
	for range 300 {
		k++
		stepAll(t, r, buf, far, k)
		beta *= 1 - eta
		if math.Abs(r.Beta()-beta) > 1e-12 {
			t.Fatalf("step %d, all far: beta %v, want %v", k, r.Beta(), beta)
		}
	}
	if r.Beta() > 1e-6 || r.Stats().FarFraction != 1 {
		t.Fatalf("beta %v after 300 far steps (far fraction %v)", r.Beta(), r.Stats().FarFraction)
	}
	tenth := func(i int) float64 { // exactly D·N far: the "otherwise" branch
		if i < T/10 {
			return 1e-3
		}
		return 1
	}
	for range 400 {
		k++
		stepAll(t, r, buf, tenth, k)
		beta = (1-eta)*beta + eta
		if math.Abs(r.Beta()-beta) > 1e-12 {
			t.Fatalf("step %d, far fraction D: beta %v, want %v", k, r.Beta(), beta)
		}
	}
	if 1-r.Beta() > 1e-8 || r.Stats().FarFraction != 0.1 {
		t.Fatalf("beta %v after 400 near steps (far fraction %v)", r.Beta(), r.Stats().FarFraction)
	}
	w, kw := make([]float64, 2), make([]float64, 2)
	if err := r.RowWeights([]float64{1, 100}, w, kw); err != nil {
		t.Fatal(err)
	}
	if err := r.RowWeights([]float64{1, 100, 1}, w, kw); !errors.Is(err, buffer.ErrShape) {
		t.Fatalf("RowWeights of 3 rows into 2 weights: %v, want ErrShape", err)
	}
	if w[0] != r.Beta() || w[1] != 0 || kw[0] != 1-r.Beta() || kw[1] != 1-r.Beta() {
		t.Fatalf("weights %v %v at beta %v", w, kw, r.Beta())
	}
}

// TestREFERDefaultBetaRate: eta_b = 0.1·B/N_max (refer.md §6).
func TestREFERDefaultBetaRate(t *testing.T) {
	r, buf := oneEpisodeStage(t, 50, sampler.REFERConfig{MaxSteps: 200, A: 1e-12})
	stepAll(t, r, buf, func(int) float64 { return 1 }, 1) // B = 50, beta0 = 0
	if want := 0.1 * 50 / 200.0; math.Abs(r.Beta()-want) > 1e-15 {
		t.Fatalf("beta after one near step %v, want eta_b = %v", r.Beta(), want)
	}
}

// TestREFERVariants: beta is fixed at 1 for ReF-ER-1 and plain ER, and
// each variant weights rows as Eq. 10 and its ablations say.
func TestREFERVariants(t *testing.T) {
	rho := []float64{1, 10, 0.01}
	for _, c := range []struct {
		v          sampler.REFERVariant
		algW, klW  [3]float64
		fixed      bool
		name       string
		beta0      float64
		rhoClipInf bool
	}{
		{sampler.REFERFull, [3]float64{0.25, 0, 0}, [3]float64{0.75, 0.75, 0.75}, false, "refer", 0.25, true},
		{sampler.REFERSkipOnly, [3]float64{1, 0, 0}, [3]float64{0, 0, 0}, true, "refer-1", 0.25, true},
		{sampler.REFERPenaltyOnly, [3]float64{0.25, 0.25, 0.25}, [3]float64{0.75, 0.75, 0.75}, false, "refer-2", 0.25, false},
		{sampler.REFERNone, [3]float64{1, 1, 1}, [3]float64{0, 0, 0}, true, "er", 0.25, true},
	} {
		r, buf := oneEpisodeStage(t, 20, sampler.REFERConfig{Variant: c.v, Beta0: c.beta0, BetaRate: 0.5, A: 1e-12})
		if c.v.String() != c.name || math.IsInf(r.RhoClip(), 1) != c.rhoClipInf {
			t.Errorf("%v: name %q, rho clip %v", c.v, c.v.String(), r.RhoClip())
		}
		algW, klW := make([]float64, 3), make([]float64, 3)
		if err := r.RowWeights(rho, algW, klW); err != nil {
			t.Fatal(err)
		}
		if [3]float64(algW) != c.algW || [3]float64(klW) != c.klW {
			t.Errorf("%v: algW %v klW %v, want %v %v", c.v, algW, klW, c.algW, c.klW)
		}
		stepAll(t, r, buf, func(int) float64 { return 100 }, 1)
		if c.fixed != (r.Beta() == 1) {
			t.Errorf("%v: beta %v after a far step", c.v, r.Beta())
		}
	}
}

// TestREFERAnnealingEq13: c_max(k) = 1 + C/(1 + A·k) and the learning
// rate's scale 1/(1 + A·k), with A = 5/T_total by default (refer.md
// §7.12): at k = T_total c_max = 1 + C/6 and the rate is 1/6 of eta0.
func TestREFERAnnealingEq13(t *testing.T) {
	buf := samplertest.REFERBuffer(t, 64, 1)
	for _, c := range []struct {
		cfg sampler.REFERConfig
		A   float64
	}{
		{sampler.REFERConfig{TotalSteps: 1000}, 0.005},
		{sampler.REFERConfig{C: 2, A: 1e-3, TotalSteps: 1000}, 1e-3},
		{sampler.REFERConfig{}, 5e-7},
	} {
		r := newReferPair(t, buf, c.cfg)
		C := r.Config().C
		for _, k := range []uint64{1, 10, 500, 1000, 1e6} {
			r.AfterStep(k)
			x := 1 + c.A*float64(k)
			if math.Abs(r.CMax()-(1+C/x)) > 1e-12 || math.Abs(r.LRScale()-1/x) > 1e-12 || r.Step() != k {
				t.Errorf("%+v k=%d: c_max %v lr scale %v, want %v %v", c.cfg, k, r.CMax(), r.LRScale(), 1+C/x, 1/x)
			}
		}
	}
	r := newReferPair(t, buf, sampler.REFERConfig{TotalSteps: 1000})
	r.AfterStep(1000)
	if math.Abs(r.CMax()-(1+4.0/6)) > 1e-12 || math.Abs(r.LRScale()-1.0/6) > 1e-12 {
		t.Errorf("end of run: c_max %v, lr scale %v", r.CMax(), r.LRScale())
	}
	if err := r.SetController(500, 0.4); err != nil {
		t.Fatal(err)
	}
	if r.Step() != 500 || r.Beta() != 0.4 || math.Abs(r.CMax()-(1+4/3.5)) > 1e-12 {
		t.Errorf("SetController: k %d beta %v c_max %v", r.Step(), r.Beta(), r.CMax())
	}
	for _, bad := range []float64{-0.1, 1.5, math.NaN()} {
		if err := r.SetController(7, bad); !errors.Is(err, buffer.ErrConfig) {
			t.Errorf("SetController beta %v: %v, want ErrConfig", bad, err)
		}
	}
	if r.Step() != 500 || r.Beta() != 0.4 {
		t.Errorf("a refused SetController changed the controller: k %d beta %v", r.Step(), r.Beta())
	}
}

// TestREFERFarCounter: n_far follows the refreshes by deltas while c_max
// stands still, drifts while c_max anneals, and equals the count of
// stored rho outside (1/c_max, c_max) after every recount.
func TestREFERFarCounter(t *testing.T) {
	count := func(r *referPair) int {
		n := 0
		for _, rho := range r.storedRhos() {
			if !(rho > 1/r.CMax() && rho < r.CMax()) {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		name   string
		A      float64
		exact  bool
		period int
	}{{"fixed c_max", 1e-12, true, 1 << 30}, {"annealed c_max", 0.05, false, 25}} {
		buf := samplertest.REFERBuffer(t, 2048, 4)
		r := newReferPair(t, buf, sampler.REFERConfig{A: c.A, RecountEvery: c.period, MaxSteps: 600})
		rng := rand.New(rand.NewPCG(9, 9))
		dst := samplertest.NewBatch(t, buf, 32)
		rho, v, kl := make([]float64, 32), make([]float64, 32), make([]float64, 32)
		id, drifted := 0, false
		for k := uint64(1); k <= 200; k++ {
			if k%3 == 1 { // new episodes keep arriving and the oldest are evicted
				ep := samplertest.RandEpisode(rng, uint64(id), 40, 0.9)
				id++
				ep.Insert(t, buf, 0, ep.Len())
			}
			if err := r.stage.Sample(rng, dst); err != nil {
				if r.Stats().Steps < 32 {
					ep := samplertest.RandEpisode(rng, uint64(id), 40, 0.9)
					id++
					ep.Insert(t, buf, 0, ep.Len())
					continue
				}
				t.Fatal(err)
			}
			for i := range rho {
				rho[i] = math.Exp(3 * (2*rng.Float64() - 1))
			}
			if err := r.Refresh(rho, v, kl); err != nil {
				t.Fatal(err)
			}
			if c.exact && r.nFar != count(r) {
				t.Fatalf("%s step %d: n_far %d after refresh, count %d", c.name, k, r.nFar, count(r))
			}
			r.AfterStep(k)
			got, want := r.nFar, count(r)
			if k%uint64(c.period) == 0 && got != want {
				t.Fatalf("%s step %d: n_far %d after the recount, count %d", c.name, k, got, want)
			}
			drifted = drifted || got != want
			if c.exact && got != want {
				t.Fatalf("%s step %d: n_far %d, count %d", c.name, k, got, want)
			}
		}
		if !c.exact && !drifted {
			t.Errorf("%s: the counter never drifted: the test does not exercise the recount", c.name)
		}
		if st, ss := r.Stats(), r.stage.Stats(); ss.Evicted == 0 || (!c.exact && st.Recounts < 8) {
			t.Errorf("%s: stats %+v, stage %+v", c.name, st, ss)
		}
	}
}

// TestREFERQretIsDiscountedReturn: with rho = 1 everywhere (new episodes),
// Qret_t is the discounted return Σ_k γ^(k−t) r̂_k, plus γ^(T−t)·V(s_T)
// only when the episode was cut by a time limit; r̂ = r/(sigma_r + 1e-7)
// with sigma_r = sqrt(mean r²) over the stored steps.
func TestREFERQretIsDiscountedReturn(t *testing.T) {
	for _, noScale := range []bool{true, false} {
		buf := samplertest.REFERBuffer(t, 1024, 4)
		r := newReferPair(t, buf, sampler.REFERConfig{NoRewardScale: noScale, MaxSteps: 1024})
		rng := rand.New(rand.NewPCG(10, 10))
		var ss float64
		n := 0
		for i := range 20 {
			ep := samplertest.RandEpisode(rng, uint64(i), 30, 0.97)
			ep.Insert(t, buf, 0, ep.Len())
			for _, x := range ep.Reward {
				ss += float64(x) * float64(x)
				n++
			}
		}
		r.poll(t, buf)
		scale := 1.0
		if !noScale {
			scale = 1 / (math.Sqrt(ss/float64(n)) + 1e-7)
			if got := r.rscale; math.Abs(got-scale) > 1e-9*scale {
				t.Fatalf("reward scale %v, want %v", got, scale)
			}
		}
		for _, ep := range r.episodes() {
			T := len(ep.Steps)
			for i, s := range ep.Steps {
				var want float64
				g := 1.0
				for k := i; k < T; k++ {
					want += g * ep.Steps[k].Reward * scale
					g *= float64(float32(0.97))
				}
				if ep.Truncated {
					want += g * ep.VBoot
				}
				if math.Abs(s.Qret-want) > 1e-9*max(1, math.Abs(want)) {
					t.Fatalf("noScale=%v episode %d (truncated %v) step %d/%d: Qret %v, discounted return %v", noScale, ep.ID, ep.Truncated, i, T, s.Qret, want)
				}
			}
		}
	}
}

// TestREFERSweepEqualsDirectRecursion: the stage's backward sweep (Eq. 8)
// gives every step the Qret of the recursion written as a sum, for random
// rho (both sides of 1, so the truncation at 1 matters) and V.
func TestREFERSweepEqualsDirectRecursion(t *testing.T) {
	buf := samplertest.REFERBuffer(t, 1024, 4)
	r := newReferPair(t, buf, sampler.REFERConfig{MaxSteps: 1024})
	rng := rand.New(rand.NewPCG(11, 11))
	for i := range 15 {
		ep := samplertest.RandEpisode(rng, uint64(i), 40, 0.95)
		ep.Insert(t, buf, 0, ep.Len())
	}
	r.poll(t, buf)
	for _, ep := range r.episodes() {
		for _, s := range ep.Steps {
			r.rho[s.Slot], r.v[s.Slot] = math.Exp(2*rng.NormFloat64()), 3*rng.NormFloat64()
		}
	}
	r.sweepAll()
	checkQret(t, r, 1e-9)
}

// TestREFERIncrementalSweeps: after any sequence of Sample, Refresh,
// RefreshBootstrap and AfterStep, the targets AfterStep keeps by sweeping
// only the touched episodes from their latest sampled step equal the
// direct recursion over the stored values, which AfterStep's sweep alone
// maintains. The rows' Targets are the Qret stored when drawn.
func TestREFERIncrementalSweeps(t *testing.T) {
	buf := samplertest.REFERBuffer(t, 512, 2)
	r := newReferPair(t, buf, sampler.REFERConfig{MaxSteps: 512, RecountEvery: 1 << 30})
	rng := rand.New(rand.NewPCG(12, 12))
	for i := range 12 {
		ep := samplertest.RandEpisode(rng, uint64(i), 25, 0.9)
		ep.Insert(t, buf, 0, ep.Len())
	}
	r.poll(t, buf)
	dst := samplertest.NewBatch(t, buf, 6)
	rho, v, kl := make([]float64, 6), make([]float64, 6), make([]float64, 6)
	boots := 0
	for k := uint64(1); k <= 300; k++ {
		if err := r.stage.Sample(rng, dst); err != nil {
			t.Fatal(err)
		}
		before := map[uint32]float64{}
		for _, ep := range r.episodes() {
			for _, s := range ep.Steps {
				before[s.Slot] = s.Qret
			}
		}
		for i, q := range r.Targets() {
			if before[dst.Refs[i].Slot] != q {
				t.Fatalf("row %d: target %v, stored %v", i, q, before[dst.Refs[i].Slot])
			}
		}
		for i := range rho {
			rho[i], v[i], kl[i] = math.Exp(rng.NormFloat64()), 2*rng.NormFloat64(), rng.Float64()
		}
		if err := r.Refresh(rho, v, kl); err != nil {
			t.Fatal(err)
		}
		for i := range rho {
			if dst.Flags[i]&buffer.FlagTruncated != 0 {
				if ok, err := r.RefreshBootstrap(i, rng.NormFloat64()); !ok || err != nil {
					t.Fatalf("row %d: truncated last step, bootstrap not applied (%v)", i, err)
				}
				boots++
			} else if ok, err := r.RefreshBootstrap(i, 1); ok || err != nil {
				t.Fatalf("row %d: bootstrap applied to a step that is not a truncated end (%v)", i, err)
			}
		}
		if _, err := r.RefreshBootstrap(len(rho), 1); !errors.Is(err, buffer.ErrShape) {
			t.Fatalf("RefreshBootstrap of row %d of %d: %v, want ErrShape", len(rho), len(rho), err)
		}
		if _, err := r.RefreshBootstrap(0, math.NaN()); !errors.Is(err, buffer.ErrPriority) {
			t.Fatalf("RefreshBootstrap with a NaN V: %v, want ErrPriority", err)
		}
		r.AfterStep(k)
		checkQret(t, r, 1e-9)
	}
	if boots == 0 {
		t.Fatal("no truncated last step was sampled")
	}
}

// TestREFERNoRetrace: with NoRetrace (TD3 under ReF-ER) AfterStep leaves
// every Qret at the unscaled discounted return set when its episode
// finished, recounts included, while rho and the far counter still follow
// the refreshed values.
func TestREFERNoRetrace(t *testing.T) {
	buf := samplertest.REFERBuffer(t, 512, 2)
	r := newReferPair(t, buf, sampler.REFERConfig{MaxSteps: 512, RecountEvery: 1, NoRetrace: true})
	rng := rand.New(rand.NewPCG(13, 13))
	for i := range 12 {
		ep := samplertest.RandEpisode(rng, uint64(i), 25, 0.9)
		ep.Insert(t, buf, 0, ep.Len())
	}
	r.poll(t, buf)
	initial := map[uint32]float64{}
	for _, ep := range r.episodes() {
		for _, s := range ep.Steps {
			initial[s.Slot] = s.Qret
		}
	}
	if got := r.rscale; got != 1 {
		t.Fatalf("reward scale %v with NoRetrace, want 1", got)
	}
	checkQret(t, r, 1e-9) // rho = 1, V = 0: the unscaled discounted return
	dst := samplertest.NewBatch(t, buf, 8)
	rho, v, kl := make([]float64, 8), make([]float64, 8), make([]float64, 8)
	for k := uint64(1); k <= 50; k++ {
		if err := r.stage.Sample(rng, dst); err != nil {
			t.Fatal(err)
		}
		for i := range rho {
			rho[i], v[i], kl[i] = math.Exp(3*rng.NormFloat64()), 2*rng.NormFloat64(), rng.Float64()
		}
		if err := r.Refresh(rho, v, kl); err != nil {
			t.Fatal(err)
		}
		r.AfterStep(k)
	}
	far, refreshed := 0, 0
	for _, ep := range r.episodes() {
		for _, s := range ep.Steps {
			if s.Qret != initial[s.Slot] {
				t.Fatalf("episode %d slot %d: Qret moved from %v to %v with NoRetrace", ep.ID, s.Slot, initial[s.Slot], s.Qret)
			}
			if s.Rho != 1 {
				refreshed++
			}
			if !r.Near(s.Rho) {
				far++
			}
		}
	}
	if refreshed == 0 {
		t.Fatal("no stored rho was refreshed")
	}
	if st := r.Stats(); st.NFar != far {
		t.Fatalf("far counter %d after a recount, stored far steps %d", st.NFar, far)
	}
}
