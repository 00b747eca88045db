package actor_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/actor"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
)

var _ runtime.Source = (*actor.Actor)(nil)

// Example wires one actor of eight to a replay buffer with PER priorities:
// the learner publishes snapshots to the Store, the actor fills local
// batches that the runtime inserts.
func Example() {
	bcfg := buffer.Config{Capacity: 1 << 12, ObsDim: 4, NumActions: 2, Episode: true}
	buf, _ := buffer.New(bcfg)
	per, _ := sampler.NewPER(buf, sampler.DefaultPERConfig(10000))

	ncfg := model.Config{In: 4, Hidden: []int{64, 64}, Out: 2}
	learner, _ := model.NewNet(ncfg, rand.New(rand.NewPCG(1, 2)))
	var store model.Store
	store.Publish(learner.Snapshot(0))

	env, _ := envs.Make("CartPole-v1")
	net, _ := model.NewNet(ncfg, nil) // the actor's copy, loaded from the Store
	a, err := actor.New(actor.Config{ID: 7, NumActors: 8, Seed: 1, Columns: actor.ColumnsOf(bcfg)}, env, net, &store, per)
	if err != nil {
		panic(err)
	}
	var t buffer.Transitions
	if err := a.Fill(context.Background(), &t); err != nil {
		panic(err)
	}
	if err := buf.Insert(&t); err != nil {
		panic(err)
	}
	fmt.Printf("epsilon %.4f, handed over %d transitions with %d priorities, buffer holds %d\n",
		a.Epsilon(), t.Len(), len(t.Priority), buf.Size())
	// Output: epsilon 0.0007, handed over 50 transitions with 50 priorities, buffer holds 50
}

var _ runtime.Source = (*actor.Continuous)(nil)

// ExampleNewContinuous wires one continuous actor (of four) to a replay
// buffer of continuous actions, as a TD3 learner's runtime would: the
// learner publishes its policy's snapshots to the Store; batches carry no
// priorities, so the buffer gives each new item its maximum.
func ExampleNewContinuous() {
	bcfg := buffer.Config{Capacity: 1 << 12, ObsDim: 3, Action: buffer.Continuous, ActionDim: 1, Episode: true}
	buf, _ := buffer.New(bcfg)

	pcfg := model.Config{In: 3, Hidden: []int{64, 64}, Out: 1, OutAct: model.Tanh}
	learner, _ := model.NewNet(pcfg, rand.New(rand.NewPCG(1, 2)))
	var store model.Store
	store.Publish(learner.Snapshot(0))

	env, _ := envs.Make("Pendulum-v1")
	policy, _ := model.NewNet(pcfg, nil) // the actor's copy, loaded from the Store
	a, err := actor.NewContinuous(actor.ContinuousConfig{ID: 3, NumActors: 4, Seed: 1, Columns: actor.ColumnsOf(bcfg)}, env, policy, &store)
	if err != nil {
		panic(err)
	}
	var t buffer.Transitions
	if err := a.Fill(context.Background(), &t); err != nil {
		panic(err)
	}
	if err := buf.Insert(&t); err != nil {
		panic(err)
	}
	// The learner maps its policy's output to the buffer's units the same way.
	act := []float64{0.5}
	actor.ScaleAction(envs.Box{Low: []float64{-2}, High: []float64{2}}, act, act)
	fmt.Printf("sigma %.1f, handed over %d transitions (%d action values, priorities %v), buffer holds %d; π(s) = 0.5 plays %v\n",
		a.Sigma(), t.Len(), len(t.ActionVec), t.Priority, buf.Size(), act[0])
	// Output: sigma 0.1, handed over 50 transitions (50 action values, priorities []), buffer holds 50; π(s) = 0.5 plays 1
}
