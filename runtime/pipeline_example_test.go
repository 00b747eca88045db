package runtime_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
)

// walker is an actor: it fills each local batch with 10 steps of a
// one-dimensional walk.
type walker struct{ x float32 }

func (w *walker) Fill(ctx context.Context, t *buffer.Transitions) error {
	for range 10 {
		next := w.x + 1
		t.Obs, t.NextObs = append(t.Obs, w.x), append(t.NextObs, next)
		t.Action, t.Reward, t.Discount = append(t.Action, 0), append(t.Reward, 1), append(t.Discount, 0.99)
		w.x = next
	}
	return nil
}

// sampler is a learner step that only samples uniformly.
type sampler struct {
	buf   *buffer.Buffer
	batch *buffer.Batch
	rng   *rand.Rand
}

func (s *sampler) Step(ctx context.Context) error { return s.buf.SampleUniform(s.rng, s.batch) }

// ExamplePipeline drives an actor and a learner with the engine on its
// Lockstep schedule (the Concurrent one takes the same arguments and any
// number of actors): the rate limiter admits 2 sampled items per inserted
// one, and a Task runs every 10 learner steps.
func ExamplePipeline() {
	buf, err := buffer.New(buffer.Config{Capacity: 1000, ObsDim: 1})
	if err != nil {
		panic(err)
	}
	batch, err := buf.NewBatch(16)
	if err != nil {
		panic(err)
	}
	lim, err := runtime.NewRateLimiter(runtime.RateLimiterConfig{SamplesPerInsert: 2, MinSizeToSample: 50, ErrorBuffer: 32})
	if err != nil {
		panic(err)
	}
	var p runtime.Pipeline
	report := runtime.Task{Name: "report", EverySteps: 10, Do: func(context.Context) (bool, error) {
		st := p.Stats()
		fmt.Printf("after %d steps: %d items in %d batches\n", st.LearnerSteps, st.Items, st.Batches)
		return false, nil
	}}
	err = p.Run(context.Background(), buf, []runtime.Source{&walker{}}, &sampler{buf, batch, rand.New(rand.NewPCG(1, 2))},
		runtime.PipelineConfig{Schedule: runtime.Lockstep, LearnerBatch: 16, Limiter: lim, MaxSteps: 30, Tasks: []runtime.Task{report}})
	if err != nil {
		panic(err)
	}
	// Output:
	// after 10 steps: 110 items in 11 batches
	// after 20 steps: 190 items in 19 batches
	// after 30 steps: 270 items in 27 batches
}
