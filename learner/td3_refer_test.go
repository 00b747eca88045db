package learner

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// newTestTD3Refer builds TD3 over a buffer of finished episodes (see
// fillEpisodes) replayed through a ReF-ER stage of config rcfg, with
// MaxAction maxA, and samples one batch into the learner's scratch
// (obs, xa) with the ratios computed. It returns the critics' weights.
func newTestTD3Refer(t *testing.T, rcfg sampler.REFERConfig, batch int, maxA float64) (*TD3, []float64) {
	t.Helper()
	const nS, nA = 3, 2
	buf := referBuffer(t, 2048, nS, nA)
	fillEpisodes(t, buf, rand.New(rand.NewPCG(7, 3)), 0, 20, 25)
	actor, critic := td3Nets(t, nS, nA, []int{4}, model.Tanh, 11)
	m := referMethod(t, buf, rcfg)
	m.Loss = model.Loss{Kind: model.MSE}
	l, err := NewTD3(TD3Config{Batch: batch, MaxAction: maxA, Seed: 3}, actor, critic, buf, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.refer == nil {
		t.Fatal("a ReF-ER method gave no ReF-ER state")
	}
	weight, err := sampleWeighted(l.m, l.rng, l.batch, 1)
	if err != nil {
		t.Fatal(err)
	}
	to64(l.obs, l.batch.Obs)
	l.joinRows(l.xa, l.obs, nil, l.batch.ActionVec)
	cw, err := l.refer.ratios(l.batch, l.actor.Forward(l.obs), maxA, weight)
	if err != nil {
		t.Fatal(err)
	}
	return l, cw
}

// TestTD3ReferRatios: with a fixed std s_b shared by μ and π, rho =
// exp(Σ ((a−m_b)² − (a−m)²)/(2 s_b²)) (clamped at e^±7) and KL(μ||π) =
// Σ (m − m_b)²/(2 s_b²), m = MaxAction·μ(s); the critics' weights are
// 1 on near rows and 0 on far ones.
func TestTD3ReferRatios(t *testing.T) {
	const maxA = 1.5
	l, cw := newTestTD3Refer(t, sampler.REFERConfig{C: 0.5}, 64, maxA)
	b, r := l.batch, l.refer
	u := l.actor.Forward(l.obs)
	near, far := 0, 0
	for i := range r.rho {
		var lr, kl float64
		for j := range 2 {
			a := float64(b.ActionVec[i*2+j])
			mb := float64(b.Floats[r.meanCol][i*2+j])
			sb := float64(b.Floats[r.stdCol][i*2+j])
			m := maxA * u[i*2+j]
			lr += ((a-mb)*(a-mb) - (a-m)*(a-m)) / (2 * sb * sb)
			kl += (m - mb) * (m - mb) / (2 * sb * sb)
		}
		rho := math.Exp(max(-7, min(7, lr)))
		if math.Abs(rho-r.rho[i]) > 1e-9*rho || math.Abs(kl-r.kl[i]) > 1e-9*(1+kl) {
			t.Errorf("row %d: rho %v KL %v, want %v %v", i, r.rho[i], r.kl[i], rho, kl)
		}
		if isNear := rho > 1/1.5 && rho < 1.5; isNear {
			near++
			if cw[i] != 1 || r.algW[i] != 0 || r.klW[i] != 1 { // beta0 = 0
				t.Errorf("near row %d: critic weight %v, algW %v, klW %v", i, cw[i], r.algW[i], r.klW[i])
			}
		} else {
			far++
			if cw[i] != 0 {
				t.Errorf("far row %d (rho %v): critic weight %v, want 0", i, rho, cw[i])
			}
		}
	}
	if near == 0 || far == 0 {
		t.Fatalf("the batch should mix near and far rows: %d near, %d far", near, far)
	}
}

// TestTD3ReferFarRowsNoCriticGradient: the critics' loss gradient is 0
// on far rows (whatever their TD error) and nonzero on near ones.
func TestTD3ReferFarRowsNoCriticGradient(t *testing.T) {
	l, cw := newTestTD3Refer(t, sampler.REFERConfig{C: 0.5}, 64, 1.5)
	q := l.critic[0].Forward(l.xa)
	y := make([]float64, len(q))
	for i := range y {
		y[i] = q[i] + 1 // every row has a TD error
	}
	g := make([]float64, len(q))
	l.m.Loss.Value(g, q, y, cw)
	for i, x := range l.refer.rho {
		if l.refer.ctl.Near(x) == (g[i] == 0) {
			t.Errorf("row %d (rho %v, near %v): critic gradient %v", i, x, l.refer.ctl.Near(x), g[i])
		}
	}
}

// TestTD3ReferActorGradient: with weights algW and klW the actor's
// gradient is that of (1/B) Σ_i algW_i·(−Q_1(s_i, m·μ(s_i))) + klW_i·KL_i,
// checked by finite differences on a tiny net.
func TestTD3ReferActorGradient(t *testing.T) {
	const maxA, batch = 1.5, 6
	l, _ := newTestTD3Refer(t, sampler.REFERConfig{}, batch, maxA)
	r := l.refer
	for i := range r.algW { // beta = 0.3, every other row far
		r.algW[i], r.klW[i] = 0.3*float64(i%2), 0.7
	}
	loss := l.actorGrad()
	grad := slices.Clone(l.actor.Grads())
	b := l.batch
	obs := slices.Clone(l.obs)
	a, q := l.actor.Clone(), l.critic[0].Clone()
	const nS, nA = 3, 2
	lossAt := func(p []float64) float64 {
		copy(a.Params(), p)
		u := a.Forward(obs)
		x := make([]float64, 0, batch*(nS+nA))
		for i := range batch {
			x = append(x, obs[i*nS:(i+1)*nS]...)
			for _, v := range u[i*nA : (i+1)*nA] {
				x = append(x, maxA*v)
			}
		}
		qs := q.Forward(x)
		var sum float64
		for i := range batch {
			var kl float64
			for j := range nA {
				mb := float64(b.Floats[r.meanCol][i*nA+j])
				sb := float64(b.Floats[r.stdCol][i*nA+j])
				d := maxA*u[i*nA+j] - mb
				kl += d * d / (2 * sb * sb)
			}
			sum += r.algW[i]*(-qs[i]) + r.klW[i]*kl
		}
		return sum / batch
	}
	p0 := slices.Clone(l.actor.Params())
	if got := lossAt(p0); math.Abs(got-loss) > 1e-10*(1+math.Abs(got)) {
		t.Fatalf("actor loss %v, by definition %v", loss, got)
	}
	checkGradFD(t, l.actor, p0, grad, lossAt)
}

// TestTD3ReferSteps: steps run, refresh the controller (its step count follows
// the learner's) and keep the networks finite.
func TestTD3ReferSteps(t *testing.T) {
	l, _ := newTestTD3Refer(t, sampler.REFERConfig{TotalSteps: 100, BetaRate: 0.1}, 32, 1.5)
	for range 20 {
		if err := l.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	st := l.refer.ctl.Stats()
	if st.K != 20 || l.refer.ctl.Step() != 20 {
		t.Errorf("controller step %d, want 20", st.K)
	}
	if !(st.Beta > 0) || st.SampledKL <= 0 {
		t.Errorf("stats after 20 steps: beta %v, sampled KL %v", st.Beta, st.SampledKL)
	}
	if l.Stats().ActorUpdates != 10 {
		t.Errorf("actor updates %d, want 10", l.Stats().ActorUpdates)
	}
}

// TestTD3ReferCheckpointKeepsController: a TD3 learner under ReF-ER saves
// the controller's beta and step, and Load restores them.
func TestTD3ReferCheckpointKeepsController(t *testing.T) {
	a, _ := newTestTD3Refer(t, sampler.DefaultREFERConfig(100), 16, 1)
	for range 3 {
		if err := a.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.refer.ctl.SetController(a.steps, 0.37); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := a.Save(&buf); err != nil {
		t.Fatal(err)
	}
	b, _ := newTestTD3Refer(t, sampler.DefaultREFERConfig(100), 16, 1)
	if err := b.Load(&buf); err != nil {
		t.Fatal(err)
	}
	if st := b.refer.ctl; st.Beta() != 0.37 || st.Step() != 3 {
		t.Errorf("restored beta %v step %d, want 0.37 and 3", st.Beta(), st.Step())
	}
}

// TestTD3ReferAnnealsLR: under ReF-ER the optimizers' step size follows
// Eq. 13, η = η0/(1 + A·k) with k the controller's step before this one,
// and a checkpoint taken with annealed rates loads into a fresh learner
// with those rates.
func TestTD3ReferAnnealsLR(t *testing.T) {
	l, _ := newTestTD3Refer(t, sampler.DefaultREFERConfig(100), 16, 1) // A = 5/100
	for range 2 {
		if err := l.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	want := l.cfg.ActorLR / (1 + 0.05*1)
	if got := l.actorAdam.Config().LR; math.Abs(got-want) > 1e-12*want {
		t.Errorf("actor step size %v after 2 steps, want η0/(1 + A·1) = %v", got, want)
	}
	if got, want := l.criticAdam[1].Config().LR, l.cfg.CriticLR/(1+0.05); math.Abs(got-want) > 1e-12*want {
		t.Errorf("critic step size %v, want %v", got, want)
	}
	var buf bytes.Buffer
	if err := l.Save(&buf); err != nil {
		t.Fatal(err)
	}
	fresh, _ := newTestTD3Refer(t, sampler.DefaultREFERConfig(100), 16, 1)
	if err := fresh.Load(&buf); err != nil {
		t.Fatalf("a checkpoint taken with an annealed step size does not load: %v", err)
	}
	if got := fresh.actorAdam.Config().LR; got != l.actorAdam.Config().LR {
		t.Errorf("restored actor step size %v, saved %v", got, l.actorAdam.Config().LR)
	}
}
