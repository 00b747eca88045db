package model_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/model"
)

// Example shows the parameter flow of Ape-X: the learner trains its network
// and publishes immutable versioned snapshots to a Store; an actor, on its
// own goroutine in a real run, loads the latest snapshot without locks and
// copies it into its own network when the version changed.
func Example() {
	cfg := model.Config{In: 4, Hidden: []int{64, 64}, Out: 2}
	learner, err := model.NewNet(cfg, rand.New(rand.NewPCG(1, 0)))
	if err != nil {
		panic(err)
	}
	adam, err := model.NewAdam(learner.NumParams(), model.AdamConfig{LR: 1e-3, ClipNorm: 40})
	if err != nil {
		panic(err)
	}
	var store model.Store
	store.Publish(learner.Snapshot(0))

	// The actor's copy: zero parameters until the first refresh.
	actor, err := model.NewNet(cfg, nil)
	if err != nil {
		panic(err)
	}
	held := ^uint64(0)
	refresh := func() {
		if p := store.Load(); p != nil && p.Version() != held {
			if err := actor.SetParams(p); err != nil {
				panic(err)
			}
			held = p.Version()
		}
	}
	refresh()

	// One learner step on a batch of 2: Q(s, a) regressed toward targets,
	// importance-weighted, the gradient flowing only into the taken actions.
	obs := []float64{0.1, 0, -0.2, 0.3, 0, 0.5, 0.1, -0.1}
	actions := []int32{1, 0}
	target := []float64{1, 0.5}
	weight := []float64{1, 0.8}
	q := learner.Forward(obs)
	dq := make([]float64, len(q))
	loss := model.Loss{Kind: model.Huber, Delta: 1}.Selected(dq, q, actions, target, weight)
	if err := model.CheckFiniteValue("loss", loss); err != nil {
		panic(err)
	}
	learner.Backward(dq)
	if _, err := adam.Step(learner.Params(), learner.Grads()); err != nil {
		panic(err)
	}
	store.Publish(learner.Snapshot(1))

	before := actor.Forward(obs[:4])[0]
	refresh() // every K environment steps in a real actor
	after := actor.Forward(obs[:4])
	fmt.Println("actor holds version", held)
	fmt.Println("actor changed:", before != after[0])
	fmt.Println("actor agrees with learner:", after[0] == learner.Forward(obs[:4])[0])
	fmt.Println("greedy action:", model.Argmax(after) >= 0)
	// Output:
	// actor holds version 1
	// actor changed: true
	// actor agrees with learner: true
	// greedy action: true
}

// ExampleConfig_dueling builds a dueling Q network: a shared trunk, then a
// value and an advantage stream combined as Q = V + A − mean(A). Forward
// returns Q, so a learner uses it like any other Q network.
func ExampleConfig_dueling() {
	net, err := model.NewNet(model.Config{
		In: 4, Hidden: []int{64}, Out: 3,
		Dueling: true, StreamHidden: []int{32},
	}, rand.New(rand.NewPCG(1, 0)))
	if err != nil {
		panic(err)
	}
	fmt.Println("parameters:", net.NumParams())
	fmt.Println(net.Where(0), "|", net.Where(4*64+64), "|", net.Where(net.NumParams()-1))
	// Output:
	// parameters: 4612
	// trunk 0 W[0,0] | value 0 W[0,0] | advantage 1 b[2]
}

// ExampleConfig_float32 trains on the float32 path: the same calls as the
// float64 learner step, with Float32 set on the network and the optimizer.
// Params stay float64 (snapshots and checkpoints unchanged); after a
// float32 Adam step every parameter is a float32 value.
func ExampleConfig_float32() {
	rng := rand.New(rand.NewPCG(1, 0))
	net, err := model.NewNet(model.Config{In: 4, Hidden: []int{64, 64}, Out: 2, Float32: true}, rng)
	if err != nil {
		panic(err)
	}
	adam, err := model.NewAdam(net.NumParams(), model.AdamConfig{LR: 1e-3, ClipNorm: 40, Float32: true})
	if err != nil {
		panic(err)
	}
	const batch = 32
	obs := make([]float64, batch*4)
	for i := range obs {
		obs[i] = rng.NormFloat64()
	}
	actions := make([]int32, batch)
	target := make([]float64, batch)
	for i := range target {
		target[i] = 1
	}
	dq := make([]float64, batch*2)
	var first, last float64
	for step := range 200 {
		loss := model.Loss{}.Selected(dq, net.Forward(obs), actions, target, nil)
		if step == 0 {
			first = loss
		}
		last = loss
		net.Backward(dq)
		if _, err := adam.Step(net.Params(), net.Grads()); err != nil {
			panic(err)
		}
	}
	p := net.Params()[0]
	fmt.Println("loss fell 100-fold:", last < first/100)
	fmt.Println("parameters are float32 values:", p == float64(float32(p)))
	// Output:
	// loss fell 100-fold: true
	// parameters are float32 values: true
}
