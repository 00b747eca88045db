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
