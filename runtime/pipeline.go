package runtime

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

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

// Sink stores complete batches of transitions: a *buffer.Buffer in
// process, or an adaptor that sends them to a replay server. Insert is
// called with a batch the caller owns again once it returns (a Sink that
// keeps the data copies it); the Concurrent schedule calls it from several
// goroutines at once (one per inserter, one per actor with Inserters =
// Direct), so it must be safe for concurrent use. An error ends the run.
// A Sink that applies its own backpressure (a remote rate limiter) may
// block in Insert; the pipeline's shutdown waits for it.
type Sink interface {
	Insert(t *buffer.Transitions) error
}

// Stepper is one learner step (sample, learn, write priorities back),
// called from one goroutine only.
type Stepper interface {
	Step(ctx context.Context) error
}

// Schedule is how a Pipeline interleaves its actors' inserts and its
// learner's steps.
type Schedule uint8

const (
	// Concurrent runs every actor, the inserters and the learner in
	// goroutines of their own, paced by the rate limiter: Ape-X's
	// schedule, and the default.
	Concurrent Schedule = iota
	// Lockstep runs one actor and the learner on the goroutine that called
	// Run: the learner steps while the rate limiter admits samples, then
	// the actor fills one local batch, which is inserted; repeat. Nothing
	// else runs meanwhile (Tasks run between two operations), so the same
	// actor, learner and limiter state give the same run, bit for bit. It
	// needs exactly one Source, a Limiter and MaxSteps > 0.
	Lockstep
)

// String is the schedule's name: "concurrent" or "lockstep".
func (s Schedule) String() string {
	switch s {
	case Concurrent:
		return "concurrent"
	case Lockstep:
		return "lockstep"
	}
	return fmt.Sprintf("Schedule(%d)", uint8(s))
}

// DefaultInserters is the number of inserter goroutines of the Concurrent
// schedule when PipelineConfig.Inserters is 0. One: on a machine with few
// cores, the actors then park on the full channel and only the inserter
// and the learner compete for the CPUs; direct inserts store more items
// per second but starve the learner (package doc, "Inserters").
const DefaultInserters = 1

// Direct is the PipelineConfig.Inserters value that removes the channel
// and the inserter goroutines: each actor inserts its own batches into the
// buffer (its lock-free multi-writer path), after the rate limiter admits
// them.
const Direct = -1

// MaxInserters bounds PipelineConfig.Inserters.
const MaxInserters = 1 << 10

// PipelineConfig configures Pipeline.Run.
type PipelineConfig struct {
	// Queue is how many batches the actors' channel holds (>= 1 where there
	// is a channel: the Concurrent schedule without Direct): a full channel
	// blocks the actors (backpressure), never an unbounded queue.
	Queue int
	// LearnerBatch is the number of items a learner step samples, for the
	// rate limiter (>= 1).
	LearnerBatch int
	// Limiter, if set, paces inserts against samples; nil lets both run
	// freely (the Lockstep schedule needs one). A learner-only run (no
	// Sources) may take the limiter its inserts go through elsewhere (a
	// replay core's, in process); an actor-only run (nil learner) takes
	// none: nothing here samples, so its inserts would stop at the
	// ratio's bound (a remote Sink applies the server's limiter).
	Limiter *RateLimiter
	// MaxSteps stops the run after this many learner steps of this call
	// (0: run until the context ends; the Lockstep schedule needs > 0).
	MaxSteps int64
	// Schedule is Concurrent (the default) or Lockstep.
	Schedule Schedule
	// Inserters is the number of goroutines of the Concurrent schedule
	// that drain the actors' channel into the buffer: 0 means
	// DefaultInserters, Direct (−1) has every actor insert its own batches;
	// at most MaxInserters. The Lockstep schedule inserts on its own
	// goroutine and ignores it.
	Inserters int
	// PriorSteps is the learner steps taken before this call (a resumed
	// run): error messages and Task.EverySteps count from it.
	PriorSteps int64
	// Tasks is periodic work beside the data flow (evaluations,
	// checkpoints).
	Tasks []Task
}

// Task is periodic work beside a pipeline's data flow: an evaluation, a
// checkpoint.
type Task struct {
	// Name names the task in errors ("evaluator").
	Name string
	// Every is the time between two runs of Do on the Concurrent schedule
	// (a ticker started with Run), and on the Lockstep schedule when
	// EverySteps is 0 (checked after every operation). 0 with EverySteps 0:
	// never.
	Every time.Duration
	// EverySteps, on the Lockstep schedule, runs Do after every learner
	// step whose count (PriorSteps included) is a multiple of it. The
	// Concurrent schedule ignores it.
	EverySteps int64
	// Do runs the task. On the Concurrent schedule it runs on a goroutine of
	// its own, concurrently with the actors, the inserters, the learner and
	// the other tasks, never with itself; on the Lockstep schedule on Run's
	// goroutine, between two operations. It takes no lock of the pipeline:
	// a task that changes replay or learner state takes its own care (see
	// Trainer). stop ends the run as MaxSteps does; an error ends it with
	// that error, unless the run's context has ended already.
	Do func(ctx context.Context) (stop bool, err error)
}

// PipelineStats counts what a pipeline did. Read it with Stats while the
// pipeline runs or after it returns.
type PipelineStats struct {
	// Batches and Items count what the inserters stored in the buffer.
	Batches, Items int64
	// Discarded counts items that actors had produced but not yet handed
	// over when the run stopped (a partial local batch mid-episode).
	Discarded int64
	// LearnerSteps counts completed learner steps.
	LearnerSteps int64
}

// Pipeline is the Ape-X data flow: actors → bounded channel → inserters →
// buffer, and a learner stepping against it, on one of two schedules
// (Concurrent, Lockstep) that share its insert and step operations and
// its counters. The zero value is ready to use; a Pipeline must not be
// copied after first use. Run may be called again after it returned (the
// counters accumulate) but not concurrently with itself; Stats is safe
// from any goroutine. Only the pipeline's own operations write its
// counters.
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
// one insert per inserter (per actor with Inserters = Direct) and one
// step.
func (p *Pipeline) hold() (release func()) {
	p.gate.Lock()
	return p.gate.Unlock
}

// Stats returns a snapshot of the counters. Safe for concurrent use.
func (p *Pipeline) Stats() PipelineStats {
	return PipelineStats{Batches: p.batches.Load(), Items: p.items.Load(),
		Discarded: p.discarded.Load(), LearnerSteps: p.steps.Load()}
}

// nilSink reports whether sink is nil, or a nil *buffer.Buffer in a
// non-nil interface.
func nilSink(sink Sink) bool {
	b, ok := sink.(*buffer.Buffer)
	return sink == nil || ok && b == nil
}

// check refuses a configuration Run cannot follow.
func (cfg PipelineConfig) check(sink Sink, sources []Source, learner Stepper) error {
	channel := cfg.Schedule == Concurrent && cfg.Inserters != Direct && len(sources) > 0
	switch {
	case len(sources) == 0 && learner == nil:
		return errors.New("runtime: pipeline: no actors and no learner: nothing to run")
	case len(sources) > 0 && nilSink(sink):
		return errors.New("runtime: pipeline: nil sink (the actors' batches need a buffer or another Sink)")
	case learner == nil && cfg.Schedule != Concurrent:
		return fmt.Errorf("runtime: pipeline: an actor-only run (nil learner) runs on the concurrent schedule, got %v", cfg.Schedule)
	case learner == nil && cfg.MaxSteps != 0:
		return fmt.Errorf("runtime: pipeline: MaxSteps %d counts learner steps, and this actor-only run has no learner (it runs until ctx ends or a Task stops it)", cfg.MaxSteps)
	case learner == nil && cfg.Limiter != nil:
		return errors.New("runtime: pipeline: an actor-only run (nil learner) takes no Limiter: nothing here samples, so its inserts would stop at the ratio's bound (pace them in the Sink)")
	case channel && cfg.Queue < 1:
		return fmt.Errorf("runtime: pipeline: Queue must be >= 1, got %d", cfg.Queue)
	case learner != nil && cfg.LearnerBatch < 1:
		return fmt.Errorf("runtime: pipeline: LearnerBatch must be >= 1, got %d", cfg.LearnerBatch)
	case cfg.MaxSteps < 0:
		return fmt.Errorf("runtime: pipeline: MaxSteps must not be negative, got %d", cfg.MaxSteps)
	case cfg.PriorSteps < 0:
		return fmt.Errorf("runtime: pipeline: PriorSteps must not be negative, got %d", cfg.PriorSteps)
	case cfg.Inserters < Direct || cfg.Inserters > MaxInserters:
		return fmt.Errorf("runtime: pipeline: Inserters must be in [%d, %d] (%d: Direct, 0: DefaultInserters), got %d",
			Direct, MaxInserters, Direct, cfg.Inserters)
	}
	for i, s := range sources {
		if s == nil {
			return fmt.Errorf("runtime: pipeline: actor %d is nil", i)
		}
	}
	for i, t := range cfg.Tasks {
		if t.Do == nil || t.Every < 0 || t.EverySteps < 0 {
			return fmt.Errorf("runtime: pipeline: task %d (%q) needs a Do and Every, EverySteps >= 0", i, t.Name)
		}
	}
	switch cfg.Schedule {
	case Concurrent:
	case Lockstep:
		switch {
		case learner == nil:
			return errors.New("runtime: pipeline: the lockstep schedule needs a learner (it alternates the actor's inserts with learner steps)")
		case len(sources) != 1:
			return fmt.Errorf("runtime: pipeline: the lockstep schedule runs one actor, got %d", len(sources))
		case cfg.Limiter == nil:
			return errors.New("runtime: pipeline: the lockstep schedule needs a Limiter (it alternates by the limiter's admissions)")
		case cfg.MaxSteps == 0:
			return errors.New("runtime: pipeline: the lockstep schedule needs MaxSteps > 0")
		}
	default:
		return fmt.Errorf("runtime: pipeline: unknown %v", cfg.Schedule)
	}
	return nil
}

// Run runs the pipeline until ctx ends, cfg.MaxSteps learner steps are done,
// a Task stops it, or a part fails; it returns the first error (nil when it
// stopped because of MaxSteps, a Task or ctx). Every goroutine it starts
// has ended when it returns; a panic in any part is returned as its error.
//
// Shutdown stores every accepted batch: a batch an actor completed before
// the run stopped is inserted even when the run is stopping (the
// inserters drain the channel after the last actor has exited, a direct
// or lockstep insert completes), bypassing the limiter, so nothing
// accepted is lost; only batches still being filled are discarded, and
// counted.
//
// sink receives the actors' batches (a *buffer.Buffer, or a Sink of the
// caller's). Two partial runs are allowed on the Concurrent schedule: a
// learner-only run (no sources, sink unused and may be nil: the learner
// samples a buffer filled elsewhere) and an actor-only run (nil learner,
// MaxSteps 0, no Limiter: it runs until ctx ends or a Task stops it).
// The Lockstep schedule needs one source, a sink, a learner and a
// Limiter.
func (p *Pipeline) Run(ctx context.Context, sink Sink, sources []Source, learner Stepper, cfg PipelineConfig) error {
	if err := cfg.check(sink, sources, learner); err != nil {
		return err
	}
	if cfg.Schedule == Lockstep {
		return p.runLockstep(ctx, sink, sources[0], learner, cfg)
	}
	return p.runConcurrent(ctx, sink, sources, learner, cfg)
}

// insert stores one complete batch t: after the limiter (if any) admits
// it, unless ctx has ended (a batch accepted before the stop is stored
// anyway), then under the gate. Returns the limiter's error (ctx alive) or
// the buffer's.
func (p *Pipeline) insert(ctx context.Context, buf Sink, t *buffer.Transitions, lim *RateLimiter) error {
	n := t.Len()
	admitted := false
	if lim != nil && ctx.Err() == nil {
		// Reserve, store, then commit: the limiter lets the learner start
		// only on items a sample can see (many direct writers can hold
		// thousands of admitted items between admission and store).
		err := lim.ReserveInsert(ctx, n)
		if err != nil && ctx.Err() == nil {
			return err
		}
		admitted = err == nil
	}
	p.gate.RLock()
	defer p.gate.RUnlock()
	if err := buf.Insert(t); err != nil {
		if admitted {
			err = errors.Join(err, lim.AbortInsert(n))
		}
		return err
	}
	p.batches.Add(1)
	p.items.Add(int64(n))
	if admitted {
		p.limited.Add(int64(n))
		return lim.CommitInsert(n)
	}
	return nil
}

// step runs one learner step under the gate and counts it if it
// succeeded.
func (p *Pipeline) step(ctx context.Context, learner Stepper) error {
	p.gate.RLock()
	defer p.gate.RUnlock()
	if err := learner.Step(ctx); err != nil {
		return err
	}
	p.steps.Add(1)
	return nil
}

// fill resets t and has src fill it. It reports whether the batch is
// complete; a batch interrupted by ctx's end is counted as discarded.
func (p *Pipeline) fill(ctx context.Context, src Source, t *buffer.Transitions) (bool, error) {
	t.Reset()
	err := src.Fill(ctx, t)
	if ctx.Err() != nil { // stopped mid-batch: not accepted
		p.discarded.Add(int64(t.Len()))
		return false, nil
	}
	return err == nil, err
}

// runConcurrent is the Concurrent schedule.
func (p *Pipeline) runConcurrent(ctx context.Context, buf Sink, sources []Source, learner Stepper, cfg PipelineConfig) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(runCtx)
	inserters := cfg.Inserters
	if inserters == 0 {
		inserters = DefaultInserters
	}
	actors, actx := errgroup.WithContext(gctx)
	switch {
	case len(sources) == 0: // a learner-only run: no actors, no inserters
	case inserters == Direct:
		for i, src := range sources {
			actors.Go(func() (err error) {
				defer recoverTo(&err, fmt.Sprintf("actor %d", i))
				t := &buffer.Transitions{} // the actor's own, reused
				for actx.Err() == nil {
					ok, err := p.fill(actx, src, t)
					if err != nil {
						return fmt.Errorf("actor %d: %w", i, err)
					}
					if !ok || t.Len() == 0 {
						continue
					}
					if err := p.insert(actx, buf, t, cfg.Limiter); err != nil {
						return fmt.Errorf("actor %d: insert: %w", i, err)
					}
				}
				return nil
			})
		}
		g.Go(actors.Wait)
	default:
		// Every batch that can exist at once: one per actor, Queue in the
		// channel, one per inserter. Batches are reused, never reallocated.
		pool := len(sources) + cfg.Queue + inserters
		free := make(chan *buffer.Transitions, pool)
		for range pool {
			free <- &buffer.Transitions{}
		}
		work := make(chan *buffer.Transitions, cfg.Queue)
		// gone is closed when the last inserter has returned (drained or
		// failed): an actor holding a completed batch waits for room in
		// work until then, even after the stop, so that batch is stored.
		gone := make(chan struct{})
		var live atomic.Int64
		live.Store(int64(inserters))
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
					ok, err := p.fill(actx, src, t)
					if err != nil {
						return fmt.Errorf("actor %d: %w", i, err)
					}
					if !ok {
						return nil // stopped
					}
					if t.Len() == 0 {
						free <- t
						continue
					}
					select { // completed: handed over even after the stop
					case work <- t:
					case <-gone: // no inserter left (one failed): the run ends with its error
						p.discarded.Add(int64(t.Len()))
						return nil
					}
				}
			})
		}
		g.Go(func() error {
			err := actors.Wait()
			close(work) // every actor has exited: the inserters drain what is left
			return err
		})
		for range inserters {
			g.Go(func() (err error) {
				defer func() {
					if live.Add(-1) == 0 {
						close(gone)
					}
				}()
				defer recoverTo(&err, "inserter")
				for t := range work {
					if err := p.insert(gctx, buf, t, cfg.Limiter); err != nil {
						return fmt.Errorf("inserter: %w", err)
					}
					free <- t // never blocks: free has room for every batch
				}
				return nil
			})
		}
	}
	if learner != nil {
		g.Go(p.learn(gctx, learner, cfg, stop))
	}
	for _, task := range cfg.Tasks {
		if task.Every == 0 {
			continue
		}
		g.Go(func() (err error) {
			defer recoverTo(&err, task.Name)
			tick := time.NewTicker(task.Every)
			defer tick.Stop()
			for {
				select {
				case <-gctx.Done():
					return nil
				case <-tick.C:
				}
				halt, err := task.Do(gctx)
				if err != nil {
					if gctx.Err() != nil {
						return nil
					}
					return fmt.Errorf("%s: %w", task.Name, err)
				}
				if halt {
					stop()
					return nil
				}
			}
		})
	}
	return g.Wait()
}

// learn is the Concurrent schedule's learner goroutine: steps while the
// limiter (if any) admits samples, until gctx ends or MaxSteps, which
// stops the run.
func (p *Pipeline) learn(gctx context.Context, learner Stepper, cfg PipelineConfig, stop func()) func() error {
	return func() (err error) {
		defer recoverTo(&err, "learner")
		for done := int64(0); cfg.MaxSteps == 0 || done < cfg.MaxSteps; done++ {
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
			if err := p.step(gctx, learner); err != nil {
				if gctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("learner step %d: %w", cfg.PriorSteps+done, err)
			}
		}
		stop() // MaxSteps reached: stop the actors and tasks, drain, return
		return nil
	}
}

// runLockstep is the Lockstep schedule: everything on this goroutine.
func (p *Pipeline) runLockstep(ctx context.Context, buf Sink, src Source, learner Stepper, cfg PipelineConfig) (err error) {
	defer recoverTo(&err, "lockstep loop")
	lim := cfg.Limiter
	// A cancelled context ends the run cleanly, whichever call noticed it.
	stopped := func(err error) error {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	last := make([]time.Time, len(cfg.Tasks)) // when each time-paced task last ran
	for i := range last {
		last[i] = time.Now()
	}
	// tasks runs the tasks due after an operation (steps: the learner
	// steps done, PriorSteps included, after a learner step; 0 after an
	// insert).
	tasks := func(steps int64) (bool, error) {
		for i, task := range cfg.Tasks {
			var due bool
			switch {
			case task.EverySteps > 0:
				due = steps > 0 && steps%task.EverySteps == 0
			case task.Every > 0:
				due = time.Since(last[i]) >= task.Every
			}
			if !due {
				continue
			}
			halt, err := task.Do(ctx)
			last[i] = time.Now()
			if err != nil {
				return true, stopped(fmt.Errorf("%s: %w", task.Name, err))
			}
			if halt {
				return true, nil
			}
		}
		return false, nil
	}
	t := &buffer.Transitions{}
	for done := int64(0); done < cfg.MaxSteps; {
		// Learn first, while the limiter admits samples: actor and learner
		// share this goroutine, so neither may wait for the other.
		for done < cfg.MaxSteps && lim.CanSample() {
			if err := lim.AwaitSample(ctx, cfg.LearnerBatch); err != nil {
				return stopped(err)
			}
			if err := p.step(ctx, learner); err != nil {
				return stopped(fmt.Errorf("learner step %d: %w", cfg.PriorSteps+done, err))
			}
			done++
			if halt, err := tasks(cfg.PriorSteps + done); halt {
				return err
			}
		}
		if done >= cfg.MaxSteps || ctx.Err() != nil {
			return nil
		}
		ok, err := p.fill(ctx, src, t)
		if err != nil {
			return stopped(fmt.Errorf("actor 0: %w", err))
		}
		if !ok {
			return nil // stopped
		}
		if t.Len() == 0 {
			continue
		}
		if !lim.CanInsert() {
			// Cannot happen with a balance this schedule produced itself
			// (the learner just drained it); refuse rather than wait
			// forever.
			s := lim.snapshot()
			return fmt.Errorf("runtime: lockstep schedule: the rate limiter admits neither an insert nor a sample (inserted %d, sampled %d)",
				s.inserted, s.sampled)
		}
		if err := p.insert(ctx, buf, t, lim); err != nil {
			return stopped(fmt.Errorf("inserter: %w", err))
		}
		if halt, err := tasks(0); halt {
			return err
		}
	}
	return nil
}

// recoverTo turns a panic in a pipeline goroutine into its error (errgroup
// does not propagate panics), with the stack.
func recoverTo(err *error, who string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("runtime: %s panicked: %v\n%s", who, r, debug.Stack())
	}
}
