package sampler_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// transitions builds n toy transitions of a 1-dimensional task.
func transitions(n int) *buffer.Transitions {
	t := &buffer.Transitions{
		Obs:      make([]float32, n),
		NextObs:  make([]float32, n),
		Action:   make([]int32, n),
		Reward:   make([]float32, n),
		Discount: make([]float32, n),
	}
	for i := range n {
		t.Obs[i], t.NextObs[i], t.Reward[i], t.Discount[i] = float32(i), float32(i+1), float32(i%3), 0.99
	}
	return t
}

// ExamplePER shows one learner step with proportional PER: insert (new
// items get the maximum priority), sample a batch, weight it, and write the
// learner's TD errors back as priorities.
func ExamplePER() {
	buf, err := buffer.New(buffer.Config{Capacity: 1024, ObsDim: 1})
	if err != nil {
		panic(err)
	}
	per, err := sampler.NewPER(buf, sampler.DefaultPERConfig(100_000)) // beta 0.4 → 1 over 1e5 steps
	if err != nil {
		panic(err)
	}
	if err := buf.Insert(transitions(256)); err != nil {
		panic(err)
	}

	rng := rand.New(rand.NewPCG(1, 2)) // the learner's own seeded stream
	batch, err := buf.NewBatch(32)
	if err != nil {
		panic(err)
	}
	var step int64
	if err := per.Sample(rng, batch); err != nil {
		panic(err)
	}
	if err := per.Weights(batch, step); err != nil { // scale each row's loss by batch.Weight[i]
		panic(err)
	}
	absTD := make([]float64, batch.Len()) // |delta| from the learner's forward pass
	for i := range absTD {
		absTD[i] = 0.1 * float64(i%4)
	}
	res, err := per.Update(batch.Refs, absTD)
	if err != nil {
		panic(err)
	}
	fmt.Println(per)
	fmt.Printf("rows %d, uniform priorities so every weight is %.0f, applied %d, stale %d\n",
		batch.Len(), batch.Weight[0], res.Applied, res.Stale)
	// Output:
	// per(alpha=0.6,beta=0.4→1/100000,eps=1e-06,norm=buffer)
	// rows 32, uniform priorities so every weight is 1, applied 32, stale 0
}

// ExampleAnnotate shows an Ape-X actor computing priorities for its own
// transitions before inserting them; a negative error means "unknown" and
// gets the buffer's maximum priority.
func ExampleAnnotate() {
	buf, _ := buffer.New(buffer.Config{Capacity: 64, ObsDim: 1})
	per, _ := sampler.NewPER(buf, sampler.PERConfig{Alpha: 1, Eps: 0, Beta: sampler.Linear{Start: 1, End: 1}})
	items := transitions(3)
	if err := sampler.Annotate(per, items, []float64{0.5, 2, -1}); err != nil {
		panic(err)
	}
	fmt.Println(items.Priority)
	if err := buf.Insert(items); err != nil {
		panic(err)
	}
	// Output:
	// [0.5 2 1]
}

// ExampleRank shows the rank-based stage: row j of a batch comes from the
// j-th of k equal-probability segments of the rank power law, and its
// probability is 1/(k·|segment|).
func ExampleRank() {
	buf, _ := buffer.New(buffer.Config{Capacity: 100, ObsDim: 1})
	rank, err := sampler.NewRank(buf, sampler.DefaultRankConfig(1000))
	if err != nil {
		panic(err)
	}
	_ = buf.Insert(transitions(100))
	batch, err := buf.NewBatch(4)
	if err != nil {
		panic(err)
	}
	if err := rank.Sample(rand.New(rand.NewPCG(3, 4)), batch); err != nil {
		panic(err)
	}
	fmt.Println("segment boundaries:", rank.Boundaries(nil))
	for j := range batch.Len() {
		fmt.Printf("row %d: P = %.4f\n", j, batch.Prob[j])
	}
	// Output:
	// segment boundaries: [0 5 18 48 100]
	// row 0: P = 0.0500
	// row 1: P = 0.0192
	// row 2: P = 0.0083
	// row 3: P = 0.0048
}

// ExampleUniform shows the baseline stage: weights are all 1.
func ExampleUniform() {
	buf, _ := buffer.New(buffer.Config{Capacity: 64, ObsDim: 1})
	u := sampler.NewUniform(buf)
	_ = buf.Insert(transitions(64))
	batch, err := buf.NewBatch(8)
	if err != nil {
		panic(err)
	}
	_ = u.Sample(rand.New(rand.NewPCG(5, 6)), batch)
	_ = u.Weights(batch, 0)
	fmt.Println(u, batch.Prob[0], batch.Weight)
	// Output:
	// uniform 0.015625 [1 1 1 1 1 1 1 1]
}

// ExampleNERS shows the NERS loop a learner drives: sample, train, report
// each row's Q and target (the stage scores the batch as a set and writes
// the scores back as priorities), and hand every evaluation's mean return
// to the stage, which trains its scorer on the change of return.
func ExampleNERS() {
	buf, err := buffer.New(buffer.Config{Capacity: 1024, ObsDim: 1})
	if err != nil {
		panic(err)
	}
	cfg := sampler.DefaultNERSConfig(100_000)
	cfg.Interval, cfg.TrainSize = 2, 16 // a scorer update at most every 2 steps, on 16 sampled items
	ners, err := sampler.NewNERS(buf, cfg)
	if err != nil {
		panic(err)
	}
	if err := buf.Insert(transitions(256)); err != nil { // new items enter at priority 1
		panic(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	batch, err := buf.NewBatch(32)
	if err != nil {
		panic(err)
	}
	q, y := make([]float64, batch.Len()), make([]float64, batch.Len())
	for step := range int64(5) {
		if step == 1 || step == 4 {
			// The evaluator's mean return (any goroutine): the first sets
			// the baseline, the second trains the scorer on +5.
			if err := ners.Evaluated(float64(10 + 5*(step/4))); err != nil {
				panic(err)
			}
		}
		if err := ners.Sample(rng, batch); err != nil {
			panic(err)
		}
		if err := ners.Weights(batch, step); err != nil {
			panic(err)
		}
		for i := range q { // Q(s, a) and the target y from the learner's forward pass
			q[i], y[i] = 0.5, float64(batch.Reward[i])
		}
		if _, err := ners.UpdateFeatures(batch.Refs, q, y); err != nil {
			panic(err)
		}
	}
	st := ners.Stats()
	fmt.Println(ners)
	fmt.Printf("scorer updates %d (reward %g), scores in (0, 1]: %v\n", st.Updates, st.Reward, st.ScoreMin > 0 && st.ScoreMax <= 1)
	// Output:
	// ners(alpha=0.5,beta=0.4→1/100000,norm=buffer,interval=2,n=16)
	// scorer updates 1 (reward 5), scores in (0, 1]: true
}
