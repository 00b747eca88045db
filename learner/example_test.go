package learner_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/learner"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
)

// The runtime drives a DQN through its Stepper interface.
var _ runtime.Stepper = (*learner.DQN)(nil)

// Example wires an Ape-X learner by hand, as an embedder would: the
// network (whose Config the actors share), the replay buffer, the PER
// replay method, the Store the actors read, then a few steps. In a real run the
// runtime calls Step from its learner goroutine while actors insert.
func Example() {
	netCfg := model.Config{In: 4, Hidden: []int{64, 64}, Out: 2} // CartPole-sized
	net, err := model.NewNet(netCfg, rand.New(rand.NewPCG(1, 0)))
	if err != nil {
		panic(err)
	}
	buf, err := buffer.New(buffer.Config{Capacity: 1 << 14, ObsDim: netCfg.In, NumActions: netCfg.Out})
	if err != nil {
		panic(err)
	}
	// PER with its importance weights and Huber(1); beta 0.4 → 1 over 1e5
	// steps.
	per, err := sampler.NewMethod("per", buf, sampler.MethodConfig{BetaSteps: 100_000})
	if err != nil {
		panic(err)
	}
	var store model.Store // actors Load from it
	l, err := learner.NewDQN(learner.DQNConfig{Batch: 32, Seed: 1}, net, buf, per, &store)
	if err != nil {
		panic(err)
	}
	fmt.Println("actors start from version", store.Load().Version())

	// What actors would send: 3-step transitions (Reward the discounted
	// 3-step return, Discount γ³, or 0 where the episode terminated).
	rng := rand.New(rand.NewPCG(2, 0))
	const n = 256
	tr := buffer.Transitions{
		Obs:      make([]float32, n*4),
		NextObs:  make([]float32, n*4),
		Action:   make([]int32, n),
		Reward:   make([]float32, n),
		Discount: make([]float32, n),
	}
	for i := range n {
		for j := range 4 {
			tr.Obs[i*4+j] = float32(rng.NormFloat64())
			tr.NextObs[i*4+j] = float32(rng.NormFloat64())
		}
		tr.Action[i] = int32(rng.IntN(2))
		tr.Reward[i] = 1 + 0.99 + 0.99*0.99
		tr.Discount[i] = 0.99 * 0.99 * 0.99
	}
	if err := buf.Insert(&tr); err != nil { // new items get the maximum priority
		panic(err)
	}

	for range 20 {
		if err := l.Step(context.Background()); err != nil {
			panic(err) // a *model.NonFiniteError names the step and the value
		}
	}
	st := l.Stats()
	fmt.Println("steps", st.Steps, "publishes", st.Publishes, "version", store.Load().Version())
	fmt.Println("priorities written back", st.WriteBacks, "stale", st.StaleWriteBacks)
	// Output:
	// actors start from version 0
	// steps 20 publishes 3 version 20
	// priorities written back 640 stale 0
}

// The runtime drives a TD3 the same way.
var _ runtime.Stepper = (*learner.TD3)(nil)

// ExampleTD3 wires a TD3 learner for a Pendulum-sized task (3
// observations, one action in [−2, 2]): the actor with a tanh output the
// learner scales by MaxAction, the first critic on [observation, action]
// (the learner makes the second), a buffer of continuous actions, TD3's
// own replay method (uniform sampling, MSE) and the Store the actors read.
func ExampleTD3() {
	const obsDim, actDim, maxAction = 3, 1, 2.0
	rng := rand.New(rand.NewPCG(1, 0))
	actor, err := model.NewNet(model.Config{In: obsDim, Hidden: []int{64, 64}, Out: actDim, OutAct: model.Tanh}, rng)
	if err != nil {
		panic(err)
	}
	critic, err := model.NewNet(model.Config{In: obsDim + actDim, Hidden: []int{64, 64}, Out: 1}, rng)
	if err != nil {
		panic(err)
	}
	buf, err := buffer.New(buffer.Config{Capacity: 1 << 14, ObsDim: obsDim, Action: buffer.Continuous, ActionDim: actDim})
	if err != nil {
		panic(err)
	}
	td3, err := sampler.NewMethod("uniform", buf, sampler.MethodConfig{Loss: model.Loss{Kind: model.MSE}})
	if err != nil {
		panic(err)
	}
	var store model.Store
	l, err := learner.NewTD3(learner.TD3Config{Batch: 64, MaxAction: maxAction, Seed: 1}, actor, critic, buf, td3, &store)
	if err != nil {
		panic(err)
	}

	// What actors would send: 1-step transitions with the action they took
	// (in the environment's units, exploration noise included).
	const n = 256
	tr := buffer.Transitions{
		Obs:       make([]float32, n*obsDim),
		NextObs:   make([]float32, n*obsDim),
		ActionVec: make([]float32, n*actDim),
		Reward:    make([]float32, n),
		Discount:  make([]float32, n),
	}
	for i := range n {
		for j := range obsDim {
			tr.Obs[i*obsDim+j] = float32(rng.NormFloat64())
			tr.NextObs[i*obsDim+j] = float32(rng.NormFloat64())
		}
		tr.ActionVec[i] = float32(maxAction * (2*rng.Float64() - 1))
		tr.Reward[i] = float32(-rng.Float64())
		tr.Discount[i] = 0.99
	}
	if err := buf.Insert(&tr); err != nil {
		panic(err)
	}

	for range 10 {
		if err := l.Step(context.Background()); err != nil {
			panic(err)
		}
	}
	st := l.Stats()
	fmt.Println("steps", st.Steps, "actor updates", st.ActorUpdates, "target updates", st.TargetUpdates)
	fmt.Println("publishes", st.Publishes, "version", store.Load().Version())
	// Output:
	// steps 10 actor updates 5 target updates 5
	// publishes 6 version 10
}
