package learner

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// referBuffer returns an empty buffer for V-RACER: nS observations, nA
// continuous actions, the episode columns and the REFER float columns.
func referBuffer(t testing.TB, capacity, nS, nA int) *buffer.Buffer {
	t.Helper()
	buf, err := buffer.New(buffer.Config{Capacity: capacity, ObsDim: nS, Action: buffer.Continuous, ActionDim: nA,
		Episode: true, Floats: sampler.REFERColumns(nA)})
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

// fillEpisodes inserts n episodes of T steps (ids first, first+1, ...):
// Gaussian observations, behaviours μ with means in [−0.5, 0.5) and stds
// in [0.3, 0.6) (every fifth episode a far one: mean 0.8, std 0.3), the
// action sampled from μ, rewards −a², γ = 0.99, truncated at T with
// V(s_T) = −1 (every third episode terminated instead).
func fillEpisodes(t testing.TB, buf *buffer.Buffer, rng *rand.Rand, first, n, T int) {
	t.Helper()
	c := buf.Config()
	nS, nA := c.ObsDim, c.ActionDim
	for e := range n {
		id := first + e
		tr := buffer.Transitions{
			Obs: make([]float32, T*nS), NextObs: make([]float32, T*nS), ActionVec: make([]float32, T*nA),
			Reward: make([]float32, T), Discount: make([]float32, T), Flags: make([]uint32, T),
			EpisodeID: make([]uint64, T), EpisodeStep: make([]int32, T),
			Floats: [][]float32{make([]float32, T*nA), make([]float32, T*nA), make([]float32, T)},
		}
		for i := range tr.Obs {
			tr.Obs[i], tr.NextObs[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		for s := range T {
			var r float64
			for j := range nA {
				m, sd := rng.Float64()-0.5, 0.3+0.3*rng.Float64()
				if id%5 == 4 {
					m, sd = 0.8, 0.3
				}
				a := m + sd*rng.NormFloat64()
				tr.ActionVec[s*nA+j], tr.Floats[0][s*nA+j], tr.Floats[1][s*nA+j] = float32(a), float32(m), float32(sd)
				r -= a * a
			}
			tr.Reward[s], tr.Discount[s] = float32(r), 0.99
			tr.EpisodeID[s], tr.EpisodeStep[s] = uint64(id), int32(s)
		}
		if id%3 == 0 {
			tr.Flags[T-1], tr.Discount[T-1] = buffer.FlagTerminal, 0
		} else {
			tr.Flags[T-1], tr.Floats[2][T-1] = buffer.FlagTruncated, -1
		}
		if err := buf.Insert(&tr); err != nil {
			t.Fatal(err)
		}
	}
}

// referMethod builds the ReF-ER method variant over buf.
func referMethod(t testing.TB, buf *buffer.Buffer, cfg sampler.REFERConfig) sampler.Method {
	t.Helper()
	st, err := sampler.NewREFER(buf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sampler.Method{Name: cfg.Variant.String(), Selector: st, Episodes: st}
}

// newTestVRACER builds a learner over a filled buffer.
func newTestVRACER(t testing.TB, cfg VRACERConfig, rcfg sampler.REFERConfig, nS, nA int, hidden []int) *VRACER {
	t.Helper()
	buf := referBuffer(t, 2048, nS, nA)
	fillEpisodes(t, buf, rand.New(rand.NewPCG(cfg.Seed, 3)), 0, 20, 25)
	net, err := NewVRACERNet(nS, nA, hidden, rand.New(rand.NewPCG(cfg.Seed, 4)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewVRACER(cfg, net, buf, referMethod(t, buf, rcfg), &model.Store{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestVRACERConfig(t *testing.T) {
	c, err := VRACERConfig{}.Validate()
	if err != nil || c.Batch != 128 || c.LR != 1e-3 || c.PublishEvery != 10 || c.Adam.Beta1 != 0.9 {
		t.Fatalf("defaults %+v, %v", c, err)
	}
	for _, bad := range []VRACERConfig{{Batch: -1}, {LR: -1}, {LR: math.NaN()}, {Adam: model.AdamConfig{LR: 1}},
		{Adam: model.AdamConfig{ClipNorm: 1}}, {ClipNorm: -1}, {PublishEvery: -1}, {Adam: model.AdamConfig{Beta1: 2}}} {
		if _, err := bad.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", bad, err)
		}
	}

	buf := referBuffer(t, 256, 3, 1)
	m := referMethod(t, buf, sampler.REFERConfig{})
	good, _ := NewVRACERNet(3, 1, []int{8}, rand.New(rand.NewPCG(1, 1)))
	wide, _ := NewVRACERNet(3, 2, []int{8}, rand.New(rand.NewPCG(1, 1)))
	plain, _ := model.NewNet(VRACERNetConfig(3, 1, []int{8}), rand.New(rand.NewPCG(1, 1))) // random std weights
	other := referBuffer(t, 256, 3, 1)
	uni := sampler.Method{Name: "uniform", Selector: sampler.NewUniform(buf)}
	for name, f := range map[string]func() error{
		"nil net":           func() error { _, err := NewVRACER(VRACERConfig{}, nil, buf, m, nil); return err },
		"wrong width":       func() error { _, err := NewVRACER(VRACERConfig{}, wide, buf, m, nil); return err },
		"state-dependent σ": func() error { _, err := NewVRACER(VRACERConfig{}, plain, buf, m, nil); return err },
		"uniform method":    func() error { _, err := NewVRACER(VRACERConfig{}, good, buf, uni, nil); return err },
		"other buffer":      func() error { _, err := NewVRACER(VRACERConfig{}, good, other, m, nil); return err },
		"batch > capacity":  func() error { _, err := NewVRACER(VRACERConfig{Batch: 300}, good, buf, m, nil); return err },
	} {
		if err := f(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	if _, err := NewVRACER(VRACERConfig{}, good, buf, m, nil); err != nil {
		t.Fatal(err)
	}
}

// TestNewVRACERNet: the paper's initialisation. The std is sqrt(0.2) in
// every dimension whatever the state, V and the mean start small.
func TestNewVRACERNet(t *testing.T) {
	const nS, nA = 3, 2
	net, err := NewVRACERNet(nS, nA, nil, rand.New(rand.NewPCG(2, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if c := net.Config(); c.Act != model.Softsign || len(c.Hidden) != 2 || c.Hidden[0] != 64 || c.Out != 1+2*nA {
		t.Fatalf("config %+v", c)
	}
	head := model.GaussianHead{Dim: nA}
	rng := rand.New(rand.NewPCG(3, 3))
	std := make([]float64, nA)
	for range 20 {
		x := make([]float64, nS)
		for i := range x {
			x[i] = 3 * rng.NormFloat64()
		}
		row := net.Forward(x)
		head.Std(std, row)
		for j := range std {
			if math.Abs(std[j]*std[j]-0.2) > 1e-12 {
				t.Fatalf("initial variance %v, want 0.2", std[j]*std[j])
			}
		}
		if math.Abs(head.Value(row)) > 0.5 || math.Abs(head.Mean(row)[0]) > 0.5 {
			t.Fatalf("initial output %v not near 0", row)
		}
	}
	for _, k := range stdWeights(net, nA) {
		if net.Params()[k] != 0 {
			t.Fatalf("std weight %s = %v", net.Where(k), net.Params()[k])
		}
	}
}

// vracerSurrogate is V-RACER's loss at the network's current parameters
// with the step's constants held (A_i, V̂tbc_i, the weights), written from
// the closed forms: L = (1/B) Σ algW·(−ρ(θ)·A + ½(V(θ) − V̂tbc)²) +
// klW·KL(θ).
type vracerSurrogate struct {
	l                 *VRACER
	adv, vtbc, wa, wk []float64
}

func (s vracerSurrogate) loss() float64 {
	l := s.l
	out := l.net.Forward(l.obs)
	w := l.head.Width()
	var sum float64
	for i := range s.adv {
		o := out[i*w : (i+1)*w]
		l.row(i)
		m := l.head.Mean(o)
		l.head.Std(l.s, o)
		rho := math.Exp(model.GaussLogRatio(l.a, m, l.s, l.mb, l.sb))
		kl := model.GaussKL(l.mb, l.sb, m, l.s)
		if l.cfg.KLReverse {
			kl = model.GaussKLReverse(l.mb, l.sb, m, l.s)
		}
		d := l.head.Value(o) - s.vtbc[i]
		sum += s.wa[i]*(-rho*s.adv[i]+0.5*d*d) + s.wk[i]*kl
	}
	return sum / float64(len(s.adv))
}

// TestVRACERGradientFiniteDifference checks every parameter's gradient of
// V-RACER's loss (policy, value and KL terms, through the network and the
// softplus std) against central differences, in both KL directions, with
// near and far rows and beta = 0.4; the std parameters' weights get none.
// It also checks rho and KL against the Gaussian densities written out.
func TestVRACERGradientFiniteDifference(t *testing.T) {
	for _, rev := range []bool{false, true} {
		l := newTestVRACER(t, VRACERConfig{Batch: 16, KLReverse: rev, Seed: 5}, sampler.REFERConfig{}, 3, 2, []int{6, 5})
		if err := l.ctl.SetController(0, 0.4); err != nil {
			t.Fatal(err)
		}
		b := l.batch
		if err := l.m.Selector.Sample(l.rng, b); err != nil {
			t.Fatal(err)
		}
		to64(l.obs, b.Obs)
		out := l.net.Forward(l.obs)
		l.ratios(out)
		if err := l.ctl.RowWeights(l.rho, l.algW, l.klW); err != nil {
			t.Fatal(err)
		}
		qret := l.ctl.Targets()
		p := l.gradient(out, qret)
		l.backward()
		grads := append([]float64(nil), l.net.Grads()...)

		s := vracerSurrogate{l: l}
		far := 0
		for i, rho := range l.rho {
			c := math.Min(1, rho)
			a := qret[i] - l.v[i]
			s.adv = append(s.adv, a)
			s.vtbc = append(s.vtbc, l.v[i]+c*a)
			s.wa, s.wk = append(s.wa, l.algW[i]), append(s.wk, l.klW[i])
			if math.Abs(math.Log(rho)) >= vracerLogRhoClip {
				t.Fatalf("row %d: rho %v is clamped; the test needs unclamped rows", i, rho)
			}
			if !l.ctl.Near(rho) {
				far++
				if l.algW[i] != 0 || l.dOut[i*l.head.Width()] != 0 {
					t.Fatalf("far row %d: algW %v, dL/dV %v", i, l.algW[i], l.dOut[i*l.head.Width()])
				}
			}
			// rho and KL against the densities written out.
			l.row(i)
			o := out[i*l.head.Width():]
			m := l.head.Mean(o)
			l.head.Std(l.s, o)
			want := 1.0
			for j := range l.a {
				want *= math.Exp(-(l.a[j]-m[j])*(l.a[j]-m[j])/(2*l.s[j]*l.s[j])) / l.s[j] /
					(math.Exp(-(l.a[j]-l.mb[j])*(l.a[j]-l.mb[j])/(2*l.sb[j]*l.sb[j])) / l.sb[j])
			}
			if math.Abs(rho-want) > 1e-9*want {
				t.Fatalf("row %d: rho %v, density ratio %v", i, rho, want)
			}
		}
		if far == 0 || far == len(l.rho) {
			t.Fatalf("%d far rows of %d: the test needs both kinds", far, len(l.rho))
		}
		if got, want := (p.policy+p.value+p.kl)/float64(len(l.rho)), s.loss(); math.Abs(got-want) > 1e-12*max(1, math.Abs(want)) {
			t.Fatalf("loss %v, surrogate %v", got, want)
		}
		frozen := map[int]bool{}
		for _, k := range l.stdW {
			frozen[k] = true
			if grads[k] != 0 {
				t.Fatalf("std weight %s has gradient %v", l.net.Where(k), grads[k])
			}
		}
		params := l.net.Params()
		for k := range params {
			if frozen[k] {
				continue
			}
			h := 1e-6 * max(1, math.Abs(params[k]))
			x := params[k]
			params[k] = x + h
			lp := s.loss()
			params[k] = x - h
			lm := s.loss()
			params[k] = x
			num := (lp - lm) / (2 * h)
			if math.Abs(num-grads[k]) > 1e-6*max(1e-2, math.Abs(num)) {
				t.Fatalf("KLReverse %v: %s: gradient %v, finite difference %v", rev, l.net.Where(k), grads[k], num)
			}
		}
	}
}

// TestVRACERStep: steps change the network, refresh the controller (n_far,
// k, the touched episodes' targets) and report finite statistics; step k
// uses the learning rate annealed to k−1; an empty buffer fails without
// counting.
func TestVRACERStep(t *testing.T) {
	buf := referBuffer(t, 512, 3, 1)
	net, _ := NewVRACERNet(3, 1, []int{16, 16}, rand.New(rand.NewPCG(6, 6)))
	store := &model.Store{}
	l, err := NewVRACER(VRACERConfig{Batch: 32, PublishEvery: 5}, net, buf, referMethod(t, buf, sampler.REFERConfig{TotalSteps: 100}), store)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Step(ctx); !errors.Is(err, buffer.ErrEmpty) || l.Steps() != 0 {
		t.Fatalf("empty buffer: %v, steps %d", err, l.Steps())
	}
	fillEpisodes(t, buf, rand.New(rand.NewPCG(7, 7)), 0, 12, 20)
	before := append([]float64(nil), net.Params()...)
	for range 20 {
		if err := l.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st, rs := l.Stats(), l.ctl.Stats()
	if st.Steps != 20 || rs.K != 20 || st.Version != 20 || st.Publishes != 5 || store.Load().Version() != 20 {
		t.Fatalf("stats %+v, controller %+v", st, rs)
	}
	if st.Std <= 0 || st.MeanRho <= 0 || st.LR >= 1e-3 || math.Abs(st.LR-1e-3/(1+0.05*19)) > 1e-15 || st.Timing.Steps <= 0 {
		t.Fatalf("stats %+v", st)
	}
	if rs.SampledKL <= 0 || rs.StoredKL <= 0 || rs.FarFraction <= 0 {
		t.Fatalf("controller stats %+v", rs)
	}
	changed := false
	for i, p := range net.Params() {
		changed = changed || p != before[i]
	}
	for _, k := range l.stdW {
		if net.Params()[k] != 0 {
			t.Fatalf("std weight %s moved to %v", net.Where(k), net.Params()[k])
		}
	}
	if !changed {
		t.Fatal("20 steps did not change the network")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Step(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestVRACERCheckpoint: Save and Load restore the network, the optimizer,
// the step count and the ReF-ER controller; a damaged or foreign
// checkpoint is refused.
func TestVRACERCheckpoint(t *testing.T) {
	cfg := VRACERConfig{Batch: 16, Seed: 8}
	rcfg := sampler.REFERConfig{TotalSteps: 50, BetaRate: 0.2}
	l := newTestVRACER(t, cfg, rcfg, 3, 1, []int{8})
	for range 7 {
		if err := l.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var ck bytes.Buffer
	if err := l.Save(&ck); err != nil {
		t.Fatal(err)
	}
	l2 := newTestVRACER(t, cfg, rcfg, 3, 1, []int{8})
	if err := l2.Load(bytes.NewReader(ck.Bytes())); err != nil {
		t.Fatal(err)
	}
	for i, p := range l.net.Params() {
		if l2.net.Params()[i] != p {
			t.Fatalf("param %d: %v, saved %v", i, l2.net.Params()[i], p)
		}
	}
	if l2.Steps() != 7 || l2.ctl.Step() != 7 || l2.ctl.Beta() != l.ctl.Beta() || l2.ctl.CMax() != l.ctl.CMax() || l2.Stats().Steps != 7 {
		t.Fatalf("restored steps %d, controller k %d beta %v c_max %v", l2.Steps(), l2.ctl.Step(), l2.ctl.Beta(), l2.ctl.CMax())
	}
	if err := l2.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	data := ck.Bytes()
	bad := append([]byte(nil), data...)
	bad[20] ^= 1
	if err := l2.Load(bytes.NewReader(bad)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("flipped header byte: %v", err)
	}
	if err := l2.Load(bytes.NewReader(data[:len(data)-3])); !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated: %v", err)
	}
	l3 := newTestVRACER(t, VRACERConfig{Batch: 8, Seed: 8}, rcfg, 3, 1, []int{8})
	if err := l3.Load(bytes.NewReader(data)); !errors.Is(err, ErrMismatch) {
		t.Errorf("other config: %v", err)
	}
	l4 := newTestVRACER(t, cfg, sampler.REFERConfig{Variant: sampler.REFERNone}, 3, 1, []int{8})
	if err := l4.Load(bytes.NewReader(data)); !errors.Is(err, ErrMismatch) {
		t.Errorf("other method: %v", err)
	}
}

// TestVRACERRefusesALoss: V-RACER's loss is its own; a method carrying a
// critic's loss is refused.
func TestVRACERRefusesALoss(t *testing.T) {
	buf := referBuffer(t, 64, 2, 1)
	m, err := sampler.NewMethod("refer", buf, sampler.MethodConfig{Loss: model.Loss{Kind: model.MSE}})
	if err != nil {
		t.Fatal(err)
	}
	net, err := NewVRACERNet(buf.Config().ObsDim, buf.Config().ActionDim, []int{8}, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewVRACER(VRACERConfig{}, net, buf, m, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("V-RACER with an MSE method: %v, want ErrConfig", err)
	}
}
