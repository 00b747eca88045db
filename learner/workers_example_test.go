package learner_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/learner"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
)

// ExampleDQN_SetWorkers runs a DQN's steps data parallel on a
// runtime.WorkerPool of two workers, as apex train -learner-workers=2
// does: the embedder owns the pool's goroutines (Start before stepping,
// Stop after). The same learner on SerialWorkers(2), which runs the two
// shards in turn without goroutines, ends with the same parameters bit for
// bit: the result does not depend on the schedule.
func ExampleDQN_SetWorkers() {
	run := func(w learner.Workers) []float64 {
		net, err := model.NewNet(model.Config{In: 4, Hidden: []int{64, 64}, Out: 2}, rand.New(rand.NewPCG(1, 0)))
		if err != nil {
			panic(err)
		}
		buf, err := buffer.New(buffer.Config{Capacity: 1024, ObsDim: 4, NumActions: 2})
		if err != nil {
			panic(err)
		}
		rng := rand.New(rand.NewPCG(2, 0))
		const n = 512
		tr := buffer.Transitions{Obs: make([]float32, n*4), NextObs: make([]float32, n*4), Action: make([]int32, n),
			Reward: make([]float32, n), Discount: make([]float32, n)}
		for i := range n {
			for j := range 4 {
				tr.Obs[i*4+j], tr.NextObs[i*4+j] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
			}
			tr.Action[i], tr.Reward[i], tr.Discount[i] = int32(rng.IntN(2)), float32(rng.Float64()), 0.97
		}
		if err := buf.Insert(&tr); err != nil {
			panic(err)
		}
		per, err := sampler.NewMethod("per", buf, sampler.MethodConfig{})
		if err != nil {
			panic(err)
		}
		l, err := learner.NewDQN(learner.DQNConfig{Batch: 64, Seed: 1}, net, buf, per, nil)
		if err != nil {
			panic(err)
		}
		if err := l.SetWorkers(w); err != nil {
			panic(err)
		}
		for range 20 {
			if err := l.Step(context.Background()); err != nil {
				panic(err)
			}
		}
		return slices.Clone(l.Net().Params())
	}

	pool := runtime.NewWorkerPool(2)
	pool.Start()
	parallel := run(pool)
	pool.Stop()
	fmt.Println("same bits as SerialWorkers(2):", slices.Equal(parallel, run(learner.SerialWorkers(2))))
	// Output:
	// same bits as SerialWorkers(2): true
}
