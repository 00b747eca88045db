package learner

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apexrl/apex/actor"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// TestVRACERPendulumSmoke runs V-RACER with full ReF-ER on Pendulum-v1
// through a buffer for a few hundred learner steps, one Gaussian actor
// feeding it one environment step per learner step after a 1000-step
// warm-up: no error, no NaN, the controller's far fraction and KL reported,
// the actor following the published policy.
func TestVRACERPendulumSmoke(t *testing.T) {
	steps := 400
	if raceEnabled {
		steps = 200
	}
	env, err := envs.NewPendulum()
	if err != nil {
		t.Fatal(err)
	}
	const nS, nA = 3, 1
	buf, err := buffer.New(buffer.Config{Capacity: 1 << 13, ObsDim: nS, Action: buffer.Continuous, ActionDim: nA,
		Episode: true, Floats: sampler.REFERColumns(nA)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := sampler.NewREFER(buf, sampler.REFERConfig{TotalSteps: int64(steps)})
	if err != nil {
		t.Fatal(err)
	}
	net, err := NewVRACERNet(nS, nA, nil, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	store := &model.Store{}
	l, err := NewVRACER(VRACERConfig{Batch: 64, Seed: 1}, net, buf, sampler.Method{Name: "refer", Selector: m, Episodes: m}, store)
	if err != nil {
		t.Fatal(err)
	}
	actorNet, _ := model.NewNet(VRACERNetConfig(nS, nA, nil), nil)
	mc, sc, bc, err := sampler.REFERColumnIndex(buf.Config())
	if err != nil {
		t.Fatal(err)
	}
	g, err := actor.NewGaussian(actor.GaussianConfig{Columns: actor.Columns{Episode: true}, Floats: buf.Config().Floats,
		Behaviour: &actor.Behaviour{Mean: mc, Std: sc, Boot: bc}, LocalBatch: 10, RefreshEvery: 10, Seed: 1}, env, actorNet, store)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var tr buffer.Transitions
	fill := func() {
		tr = buffer.Transitions{Obs: tr.Obs[:0], NextObs: tr.NextObs[:0], ActionVec: tr.ActionVec[:0], Reward: tr.Reward[:0],
			Discount: tr.Discount[:0], Flags: tr.Flags[:0], EpisodeID: tr.EpisodeID[:0], EpisodeStep: tr.EpisodeStep[:0]}
		if err := g.Fill(ctx, &tr); err != nil {
			t.Fatal(err)
		}
		if err := buf.Insert(&tr); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 { // 1000 steps: five episodes
		fill()
	}
	for k := range steps {
		if k%10 == 0 {
			fill()
		}
		if err := l.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st, rs, ss := l.Stats(), l.REFER().Stats(), m.Stats()
	for name, x := range map[string]float64{"loss": st.Loss, "V": st.MeanV, "KL": st.MeanKL, "std": st.Std, "stored KL": rs.StoredKL} {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			t.Fatalf("%s = %v", name, x)
		}
	}
	if st.Steps != uint64(steps) || ss.Episodes < 5 || rs.SampledKL <= 0 || rs.FarFraction < 0 || rs.FarFraction > 1 || rs.RewardRMS <= 0 {
		t.Fatalf("learner %+v\ncontroller %+v\nstage %+v", st, rs, ss)
	}
	if p := g.Stats(); p.ParamsVersion == 0 || p.Episodes < 6 {
		t.Fatalf("actor %+v", p)
	}
	if err := net.CheckFinite(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d steps: far fraction %.3f, beta %.3f, c_max %.2f, sampled KL %.4f, stored KL %.4f, std %.3f, last return %.0f",
		steps, rs.FarFraction, rs.Beta, rs.CMax, rs.SampledKL, rs.StoredKL, st.Std, g.Stats().LastReturn)
}
