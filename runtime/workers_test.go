package runtime

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestLearnerWorkersRun: LearnerWorkers = 2 runs the dqn learner's
// sharded step through the pool (its helper goroutine started by Run and
// stopped when Run ends: main_test's goleak check), in lockstep the same
// W gives the same parameters twice, and a concurrent run with W = 2
// (actors, inserter and the helper at once, under -race in CI) trains.
func TestLearnerWorkersRun(t *testing.T) {
	cfg := TrainConfig{Env: "CartPole-v1", Sampler: "per", Actors: 1, Deterministic: true, Steps: 150, Batch: 32,
		Hidden: []int{32, 32}, Capacity: 4000, MinSizeToSample: 200, EvalEverySteps: 1000, EvalEpisodes: 1, FinalEpisodes: 1,
		Seed: 5, LearnerWorkers: 2}
	run := func(cfg TrainConfig) []float64 {
		t.Helper()
		tr, err := NewTrainer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if w := tr.agent.workers; w == nil || w.Workers() != 2 {
			t.Fatalf("LearnerWorkers = 2 built pool %v", w)
		}
		res, err := tr.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.LearnerSteps != cfg.Steps {
			t.Fatalf("%d learner steps, want %d", res.LearnerSteps, cfg.Steps)
		}
		if tr.agent.workers.running.Load() {
			t.Fatal("the worker pool still runs after Run returned")
		}
		return slices.Clone(dqnOf(tr).Net().Params())
	}
	if a, b := run(cfg), run(cfg); !slices.Equal(a, b) {
		t.Error("two deterministic runs with LearnerWorkers = 2 differ")
	}
	cfg.Deterministic, cfg.Actors, cfg.Steps = false, 2, 100
	run(cfg)
}

// TestLearnerWorkersConfig: out-of-range LearnerWorkers and W > 1 on a
// learner without the sharded step (vracer, td3 with ReF-ER) are refused
// by name; 0 and 1 build no pool; td3 and sac run with W = 2.
func TestLearnerWorkersConfig(t *testing.T) {
	base := TrainConfig{Env: "CartPole-v1", Actors: 1, Steps: 10, Batch: 32, Capacity: 4000, MinSizeToSample: 200}
	for _, w := range []int{-1, MaxLearnerWorkers + 1} {
		c := base
		c.LearnerWorkers = w
		if _, err := NewTrainer(c); err == nil || !strings.Contains(err.Error(), "LearnerWorkers") {
			t.Errorf("LearnerWorkers = %d: %v, want an error naming it", w, err)
		}
	}
	for _, w := range []int{0, 1} {
		c := base
		c.LearnerWorkers = w
		tr, err := NewTrainer(c)
		if err != nil {
			t.Fatal(err)
		}
		if tr.agent.workers != nil {
			t.Errorf("LearnerWorkers = %d built a pool", w)
		}
	}
	vr := TrainConfig{Env: "Pendulum-v1", Sampler: "refer", Algo: "vracer", Actors: 1, Deterministic: true, Steps: 10, Batch: 32,
		Hidden: []int{16}, Capacity: 4000}
	for _, c := range []TrainConfig{vr, smallTD3("refer")} {
		c.LearnerWorkers = 2
		if _, err := NewTrainer(c); err == nil || !strings.Contains(err.Error(), "LearnerWorkers") {
			t.Errorf("%s/%s with LearnerWorkers = 2: %v, want an error naming it", c.Algo, c.Sampler, err)
		}
	}
	for _, c := range []TrainConfig{smallTD3("uniform"), smallSAC("uniform")} {
		c.LearnerWorkers, c.Steps = 2, 40
		tr, err := NewTrainer(c)
		if err != nil || tr.agent.workers == nil {
			t.Fatalf("%s with LearnerWorkers = 2: %v", c.Algo, err)
		}
		if res, err := tr.Run(context.Background()); err != nil || res.LearnerSteps != 40 {
			t.Fatalf("%s run with LearnerWorkers = 2: %v, %+v", c.Algo, err, res)
		}
	}
}

// TestWorkerPool: Run covers every shard once, on the caller before start
// and after stop too, and re-raises a shard's panic on the caller.
func TestWorkerPool(t *testing.T) {
	p := NewWorkerPool(3)
	hits := make([]int, 3)
	count := func(s int) { hits[s]++ }
	p.Run(3, count)
	p.Start()
	p.Run(3, count)
	p.Run(2, count)
	func() {
		defer func() {
			if v := recover(); v == nil || !strings.Contains(v.(string), "shard 2: boom") {
				t.Errorf("panic in shard 2: recovered %v", v)
			}
		}()
		p.Run(3, func(s int) {
			if s == 2 {
				panic("boom")
			}
		})
	}()
	p.Run(3, count) // still usable after a shard's panic
	p.Stop()
	p.Run(3, count)
	if want := []int{5, 5, 4}; !slices.Equal(hits, want) {
		t.Errorf("shard calls %v, want %v", hits, want)
	}
}

// TestWorkerPoolAllocs: a started pool's Run allocates nothing.
func TestWorkerPoolAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation may allocate")
	}
	p := NewWorkerPool(4)
	p.Start()
	defer p.Stop()
	var sink [4]int
	f := func(s int) { sink[s]++ }
	p.Run(4, f)
	if a := testing.AllocsPerRun(100, func() { p.Run(4, f) }); a != 0 {
		t.Errorf("Run: %v allocations, want 0", a)
	}
}
