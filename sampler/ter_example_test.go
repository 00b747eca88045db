package sampler_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// ExampleTER shows TER over a buffer that stores state hashes: an episode
// 0→1→2→3 that terminates and one 5→1 that is cut by a time limit are
// replayed backwards from the terminal state, after the PER rows; the
// second episode is stitched in at state 1. The learner weights the rows (IS weights on
// the PER rows, 1 on the sweep rows) and writes |δ| back for all of them.
func ExampleTER() {
	buf, err := buffer.New(buffer.Config{Capacity: 64, ObsDim: 1, StateHash: true}) // the actors fill the hash columns
	if err != nil {
		panic(err)
	}
	ep := &buffer.Transitions{
		Obs: []float32{0, 1, 2, 5}, NextObs: []float32{1, 2, 3, 1},
		Action: []int32{0, 0, 0, 0}, Reward: []float32{0, 0, 1, 0}, Discount: []float32{0.99, 0.99, 0, 0.99},
		Flags:     []uint32{0, 0, buffer.FlagTerminal, buffer.FlagTruncated},
		StateHash: []uint64{0, 1, 2, 5}, NextStateHash: []uint64{1, 2, 3, 1},
	}
	if err := buf.Insert(ep); err != nil {
		panic(err)
	}

	cfg := sampler.DefaultTERConfig(100_000) // eta 0.5, K = 8 roots, P_max = 3
	cfg.Eta = 0.25
	ter, err := sampler.NewTER(buf, cfg)
	if err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(1, 2)) // the learner's own stream
	batch, err := buf.NewBatch(4)      // floor(0.25·4) = 1 PER row, then 3 sweep rows
	if err != nil {
		panic(err)
	}
	for step := range int64(2) {
		if err := ter.Sample(rng, batch); err != nil {
			panic(err)
		}
		if err := ter.Weights(batch, step); err != nil { // scale each row's loss by batch.Weight[i]
			panic(err)
		}
		for i := range batch.Len() {
			src := "per"
			if ter.FromSweep(i) {
				src = fmt.Sprintf("sweep %d", ter.Sweep(i))
			}
			fmt.Printf("step %d row %d: %d -> %d, %s, weight %.2f\n", step, i, batch.StateHash[i], batch.NextStateHash[i], src, batch.Weight[i])
		}
		absTD := []float64{0.5, 1, 0.25, 0.1} // |δ| from the learner's forward pass
		if _, err := ter.Update(batch.Refs, absTD); err != nil {
			panic(err)
		}
	}
	st := ter.Stats()
	fmt.Printf("|V| = %d, |V_E| = %d, %d sweep(s), %d vertices expanded\n", st.Vertices, st.Terminals, st.Sweeps, st.Expanded)
	// Output:
	// step 0 row 0: 1 -> 2, per, weight 1.00
	// step 0 row 1: 2 -> 3, sweep 1, weight 1.00
	// step 0 row 2: 1 -> 2, sweep 1, weight 1.00
	// step 0 row 3: 0 -> 1, sweep 1, weight 1.00
	// step 1 row 0: 5 -> 1, per, weight 0.58
	// step 1 row 1: 5 -> 1, sweep 1, weight 1.00
	// step 1 row 2: 2 -> 3, sweep 2, weight 1.00
	// step 1 row 3: 1 -> 2, sweep 2, weight 1.00
	// |V| = 5, |V_E| = 1, 2 sweep(s), 7 vertices expanded
}
