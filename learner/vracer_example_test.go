package learner_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/actor"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/learner"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
)

// The runtime drives V-RACER through its Stepper interface, and its
// actors through Source.
var (
	_ runtime.Stepper = (*learner.VRACER)(nil)
	_ runtime.Source  = (*actor.Gaussian)(nil)
)

// ExampleNewVRACER wires V-RACER with ReF-ER on Pendulum by hand, at
// refer.md §6's scale: a buffer with the episode and REFER columns and room
// beyond N_max = 2^15 for the episodes in flight, the "refer" method (use
// "refer-1", "refer-2" or "er" for the ablations), the network, the
// learner and one Gaussian actor; 2^13 steps before the first update, then
// one environment step per learner step.
func ExampleNewVRACER() {
	const nS, nA, total = 3, 1, 100_000
	buf, err := buffer.New(buffer.Config{Capacity: 1<<15 + 1<<12, ObsDim: nS, Action: buffer.Continuous, ActionDim: nA,
		Episode: true, Floats: sampler.REFERColumns(nA)})
	if err != nil {
		panic(err)
	}
	method, err := sampler.NewMethod("refer", buf, sampler.MethodConfig{
		REFER: &sampler.REFERConfig{TotalSteps: total, MaxSteps: 1 << 15}, // A = 5/T_total
	})
	if err != nil {
		panic(err)
	}
	net, err := learner.NewVRACERNet(nS, nA, nil, rand.New(rand.NewPCG(1, 0)))
	if err != nil {
		panic(err)
	}
	store := &model.Store{}
	l, err := learner.NewVRACER(learner.VRACERConfig{Seed: 1}, net, buf, method, store)
	if err != nil {
		panic(err)
	}
	env, _ := envs.NewPendulum()
	actorNet, _ := model.NewNet(learner.VRACERNetConfig(nS, nA, nil), nil)
	mc, sc, bc, err := sampler.REFERColumnIndex(buf.Config())
	if err != nil {
		panic(err)
	}
	a, err := actor.NewGaussian(actor.GaussianConfig{Columns: actor.ColumnsOf(buf.Config()), Floats: buf.Config().Floats,
		Behaviour: &actor.Behaviour{Mean: mc, Std: sc, Boot: bc}, LocalBatch: 1, Seed: 1}, env, actorNet, store)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	act := func() {
		var t buffer.Transitions
		if err := a.Fill(ctx, &t); err != nil {
			panic(err)
		}
		if err := buf.Insert(&t); err != nil {
			panic(err)
		}
	}
	for range 1 << 13 {
		act()
	}
	for range total {
		act()
		if err := l.Step(ctx); err != nil {
			panic(err)
		}
	}
	st := l.REFER().Stats()
	fmt.Printf("far fraction %.2f, KL %.3f, return %.0f\n", st.FarFraction, st.StoredKL, a.Stats().MeanReturn)
}
