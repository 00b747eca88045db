package runtime

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/apexrl/apex/buffer"
)

// Source fills batches of transitions: an actor. Fill appends to t (which
// the pipeline hands over empty) until the actor's local batch is complete,
// and returns; it returns early, without error, when ctx ends. Each Source
// is called from one goroutine only.
type Source interface {
	Fill(ctx context.Context, t *buffer.Transitions) error
}

// Stepper is one learner step (sample, learn, write priorities back),
// called from one goroutine only.
type Stepper interface {
	Step(ctx context.Context) error
}

// PipelineConfig configures RunPipeline.
type PipelineConfig struct {
	// Queue is how many batches the actors' channel holds (>= 1): a full
	// channel blocks the actors (backpressure), never an unbounded queue.
	Queue int
	// LearnerBatch is the number of items a learner step samples, for the
	// rate limiter (>= 1).
	LearnerBatch int
	// Limiter, if set, paces inserts against samples; nil lets both run
	// freely.
	Limiter *RateLimiter
	// MaxSteps stops the run after this many learner steps (0: run until
	// the context ends).
	MaxSteps int64
}

// PipelineStats counts what a pipeline did. Read it with Stats while the
// pipeline runs or after it returns.
type PipelineStats struct {
	// Batches and Items count what the inserter stored in the buffer.
	Batches, Items int64
	// Discarded counts items that actors had produced but not yet handed
	// over when the run stopped (a partial local batch mid-episode).
	Discarded int64
	// LearnerSteps counts completed learner steps.
	LearnerSteps int64
}

// Pipeline is the Ape-X data flow: actors → bounded channel → one inserter
// → buffer, and a learner stepping against it, each in its own goroutine.
// The zero value is ready to use; a Pipeline must not be copied after first
// use.
type Pipeline struct {
	batches, items, discarded, steps atomic.Int64

	// gate is held shared by each insert and each learner step (and by the
	// Trainer's other writers of replay or learner state) and exclusively
	// by hold, so a holder sees the buffer, the learner and the limiter at
	// rest.
	gate sync.RWMutex
	// limited counts the items inserted after the rate limiter admitted
	// them (inserts that drain the queue at shutdown bypass it), and steps
	// the completed learner steps; both change only with the gate held
	// shared, in the same critical section as the operation they count. So a
	// holder of the gate can state the limiter's balance in the terms of
	// what the buffer and the learner hold, which the limiter's own counts
	// (taken at admission, before the operation) cannot.
	limited atomic.Int64
}

// hold blocks until no insert and no learner step is in progress and keeps
// new ones from starting until release is called. Cost: waits for at most
// one insert and one step.
func (p *Pipeline) hold() (release func()) {
	p.gate.Lock()
	return p.gate.Unlock
}

// Stats returns a snapshot of the counters. Safe for concurrent use.
func (p *Pipeline) Stats() PipelineStats {
	return PipelineStats{Batches: p.batches.Load(), Items: p.items.Load(),
		Discarded: p.discarded.Load(), LearnerSteps: p.steps.Load()}
}

// Run runs the pipeline until ctx ends, cfg.MaxSteps learner steps are done,
// or a part fails; it returns the first error (nil when it stopped because
// of MaxSteps or ctx). Every goroutine it starts has ended when it returns.
//
// Shutdown stores every accepted batch: a batch an actor handed to the
// channel is inserted even when the run is stopping (the inserter drains
// the channel after the last actor has exited), so nothing accepted is
// lost; only batches still being filled are discarded, and counted.
func (p *Pipeline) Run(ctx context.Context, buf *buffer.Buffer, sources []Source, learner Stepper, cfg PipelineConfig) error {
	switch {
	case buf == nil:
		return errors.New("runtime: pipeline: nil buffer")
	case len(sources) == 0:
		return errors.New("runtime: pipeline: no actors")
	case cfg.Queue < 1:
		return fmt.Errorf("runtime: pipeline: Queue must be >= 1, got %d", cfg.Queue)
	case cfg.LearnerBatch < 1:
		return fmt.Errorf("runtime: pipeline: LearnerBatch must be >= 1, got %d", cfg.LearnerBatch)
	case cfg.MaxSteps < 0:
		return fmt.Errorf("runtime: pipeline: MaxSteps must not be negative, got %d", cfg.MaxSteps)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(runCtx)

	// Every batch that can exist at once: one per actor, Queue in the
	// channel, one in the inserter. Batches are reused, never reallocated.
	pool := len(sources) + cfg.Queue + 1
	free := make(chan *buffer.Transitions, pool)
	for range pool {
		free <- &buffer.Transitions{}
	}
	work := make(chan *buffer.Transitions, cfg.Queue)

	actors, actx := errgroup.WithContext(gctx)
	for i, src := range sources {
		actors.Go(func() (err error) {
			defer recoverTo(&err, fmt.Sprintf("actor %d", i))
			for {
				var t *buffer.Transitions
				select {
				case t = <-free:
				case <-actx.Done():
					return nil
				}
				t.Reset()
				err := src.Fill(actx, t)
				n := int64(t.Len())
				if actx.Err() != nil { // stopped mid-batch: not accepted
					p.discarded.Add(n)
					return nil
				}
				if err != nil {
					return fmt.Errorf("actor %d: %w", i, err)
				}
				if n == 0 {
					free <- t
					continue
				}
				select {
				case work <- t:
				case <-actx.Done():
					p.discarded.Add(n)
					return nil
				}
			}
		})
	}
	g.Go(func() error {
		err := actors.Wait()
		close(work) // every actor has exited: the inserter drains what is left
		return err
	})
	g.Go(func() (err error) {
		defer recoverTo(&err, "inserter")
		for t := range work {
			n := t.Len()
			admitted := false
			if cfg.Limiter != nil && gctx.Err() == nil {
				err := cfg.Limiter.AwaitInsert(gctx, n)
				if err != nil && gctx.Err() == nil {
					return err
				}
				admitted = err == nil
			}
			p.gate.RLock()
			err := buf.Insert(t)
			if err == nil {
				p.batches.Add(1)
				p.items.Add(int64(n))
				if admitted {
					p.limited.Add(int64(n))
				}
			}
			p.gate.RUnlock()
			if err != nil {
				return fmt.Errorf("inserter: %w", err)
			}
			free <- t // never blocks: free has room for every batch
		}
		return nil
	})
	g.Go(func() (err error) {
		defer recoverTo(&err, "learner")
		for cfg.MaxSteps == 0 || p.steps.Load() < cfg.MaxSteps {
			if cfg.Limiter != nil {
				if err := cfg.Limiter.AwaitSample(gctx, cfg.LearnerBatch); err != nil {
					if gctx.Err() != nil {
						return nil
					}
					return err
				}
			} else if gctx.Err() != nil {
				return nil
			}
			p.gate.RLock()
			err := learner.Step(gctx)
			if err == nil {
				p.steps.Add(1)
			}
			p.gate.RUnlock()
			if err != nil {
				if gctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("learner step %d: %w", p.steps.Load(), err)
			}
		}
		stop() // MaxSteps reached: stop the actors, drain, return
		return nil
	})
	return g.Wait()
}

// recoverTo turns a panic in a pipeline goroutine into its error (errgroup
// does not propagate panics), with the stack.
func recoverTo(err *error, who string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("runtime: %s panicked: %v\n%s", who, r, debug.Stack())
	}
}
