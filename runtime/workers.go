package runtime

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apexrl/apex/learner"
)

var _ learner.Workers = (*WorkerPool)(nil)

// WorkerPool is a learner's data-parallel workers (learner.Workers): W − 1
// persistent goroutines that, with the calling learner goroutine running
// shard 0, run a step's W shards at once. A Trainer with LearnerWorkers >
// 1 creates one with its learner (no goroutine yet), starts it when Run
// begins and stops it when Run ends; an embedder stepping a learner
// itself does the same (NewWorkerPool, Start, SetWorkers, Stop). No
// goroutine is spawned per step, and each helper's queue holds at most
// one job (the learner waits for every shard before its next Run). Before
// Start and after Stop, Run runs the shards in turn on the caller, which
// gives the same bits (a learner's result does not depend on the
// schedule).
//
// Start and Stop are called by one goroutine (the one that owns the
// learner's lifetime), Run by one goroutine at a time (the learner's),
// never concurrently with Start or Stop. A WorkerPool must not be copied.
type WorkerPool struct {
	n       int
	jobs    []chan func(int) // helper i runs shard i+1; capacity 1
	done    chan any         // one value per finished job: nil, or a panic's value
	running atomic.Bool
	wg      sync.WaitGroup
}

// NewWorkerPool returns a stopped pool of n workers (n < 1 counts as 1).
func NewWorkerPool(n int) *WorkerPool {
	return &WorkerPool{n: max(n, 1)}
}

// Workers returns W. It implements learner.Workers.
func (p *WorkerPool) Workers() int { return p.n }

// Start starts the W − 1 helper goroutines (none for W = 1; a second
// Start does nothing). Cost: W − 1 goroutines and channels.
func (p *WorkerPool) Start() {
	if p.n < 2 || p.running.Load() {
		return
	}
	p.jobs = make([]chan func(int), p.n-1)
	p.done = make(chan any, p.n-1)
	for i := range p.jobs {
		ch := make(chan func(int), 1)
		p.jobs[i] = ch
		p.wg.Go(func() {
			for f := range ch {
				p.done <- runShard(f, i+1)
			}
		})
	}
	p.running.Store(true)
}

// runShard runs f(s) and returns the value of a panic in it (nil if none).
func runShard(f func(int), s int) (pv any) {
	defer func() {
		if v := recover(); v != nil {
			pv = fmt.Sprintf("shard %d: %v", s, v)
		}
	}()
	f(s)
	return nil
}

// Stop ends the helpers and waits for them (a stopped pool's Stop does
// nothing); Run then runs shards on the caller. Call it once the learner
// has stopped stepping.
func (p *WorkerPool) Stop() {
	if !p.running.CompareAndSwap(true, false) {
		return
	}
	for _, ch := range p.jobs {
		close(ch)
	}
	p.wg.Wait()
}

// Run implements learner.Workers: shards 1..n−1 on the helpers, shard 0
// on the caller, then it waits for all of them; a panic in any shard is
// re-raised here once every shard has returned. It allocates nothing.
func (p *WorkerPool) Run(n int, f func(int)) {
	if n > p.n {
		panic(fmt.Sprintf("runtime: WorkerPool.Run(%d) on %d workers", n, p.n))
	}
	if n < 2 || !p.running.Load() {
		for s := range n {
			f(s)
		}
		return
	}
	for s := 1; s < n; s++ {
		p.jobs[s-1] <- f
	}
	first := runShard(f, 0)
	for s := 1; s < n; s++ {
		if v := <-p.done; v != nil && first == nil {
			first = v
		}
	}
	if first != nil {
		panic(first)
	}
}
