package buffer_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
)

// Example shows the replay cycle of a prioritized learner: insert with
// priorities, sample a stratified batch, weight it, write priorities back.
func Example() {
	buf, err := buffer.New(buffer.Config{Capacity: 1024, ObsDim: 4})
	if err != nil {
		panic(err)
	}

	// An actor's batch of 3 transitions, columnar, with its own priorities.
	t := &buffer.Transitions{
		Obs:      []float32{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2},
		NextObs:  []float32{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3},
		Action:   []int32{0, 1, 0},
		Reward:   []float32{1, 1, 0},
		Discount: []float32{0.99, 0.99, 0},
		Flags:    []uint32{0, 0, buffer.FlagTerminal},
		Priority: []float64{1, 2, 5},
	}
	if err := buf.Insert(t); err != nil {
		panic(err)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	batch, err := buf.NewBatch(2)
	if err != nil {
		panic(err)
	}
	if err := buf.Sample(rng, batch); err != nil {
		panic(err)
	}
	if err := batch.ImportanceWeights(0.4, buffer.NormalizeBuffer); err != nil {
		panic(err)
	}
	for i := range batch.Len() {
		fmt.Printf("reward %.0f  P=%.3f  w=%.3f\n", batch.Reward[i], batch.Prob[i], batch.Weight[i])
	}

	// The learner's new priorities (e.g. |TD error|) go back by Ref.
	res, err := buf.UpdatePriorities(batch.Refs, []float64{0.5, 0.5})
	if err != nil {
		panic(err)
	}
	fmt.Println("applied", res.Applied, "stale", res.Stale, "total", buf.TotalPriority())

	// Bad input is rejected whole, with the reason.
	t.Priority[1] = -1
	fmt.Println(buf.Insert(t))
	// Output:
	// reward 1  P=0.250  w=0.758
	// reward 0  P=0.625  w=0.525
	// applied 2 stale 0 total 2
	// buffer: invalid priority: Priority[1] = -1 (priorities must be finite and >= 0)
}
