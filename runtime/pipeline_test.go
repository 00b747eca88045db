package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apexrl/apex/buffer"
)

// counter is a Source that emits transitions numbered id0, id0+1, ... in
// batches of size, recording how many it produced.
type counter struct {
	next, size int
	produced   *atomic.Int64
	delay      time.Duration
}

func (c *counter) Fill(ctx context.Context, t *buffer.Transitions) error {
	for range c.size {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c.delay > 0 {
			time.Sleep(c.delay)
		}
		id := float32(c.next)
		c.next++
		t.Obs = append(t.Obs, id)
		t.NextObs = append(t.NextObs, id)
		t.Action = append(t.Action, 0)
		t.Reward = append(t.Reward, id)
		t.Discount = append(t.Discount, 1)
		c.produced.Add(1)
	}
	return nil
}

// fakeLearner is a Stepper that samples a batch from the buffer.
type fakeLearner struct {
	buf   *buffer.Buffer
	bt    *buffer.Batch
	rng   *rand.Rand
	fail  int // step at which to fail (0: never)
	panic int // step at which to panic (0: never)
	steps int
}

func (s *fakeLearner) Step(ctx context.Context) error {
	s.steps++
	if s.steps == s.fail {
		return errors.New("boom")
	}
	if s.steps == s.panic {
		panic("kaboom")
	}
	return s.buf.Sample(s.rng, s.bt)
}

func newParts(t *testing.T, actors, batch int) (*buffer.Buffer, []Source, *atomic.Int64, *fakeLearner) {
	buf, err := buffer.New(buffer.Config{Capacity: 1 << 14, ObsDim: 1})
	if err != nil {
		t.Fatal(err)
	}
	var produced atomic.Int64
	srcs := make([]Source, actors)
	for i := range srcs {
		srcs[i] = &counter{next: i << 20, size: batch, produced: &produced}
	}
	bt, err := buf.NewBatch(16)
	if err != nil {
		t.Fatal(err)
	}
	return buf, srcs, &produced, &fakeLearner{buf: buf, bt: bt, rng: rand.New(rand.NewPCG(1, 2))}
}

// TestPipelineStoresEveryAcceptedBatch stops a run by MaxSteps and by
// cancellation and checks that every item produced was either stored or
// counted as discarded (a batch still being filled), never lost.
func TestPipelineStoresEveryAcceptedBatch(t *testing.T) {
	for _, c := range []struct {
		byCancel  bool
		inserters int
	}{{false, 0}, {true, 0}, {false, 3}, {true, 3}, {false, Direct}, {true, Direct}} {
		byCancel := c.byCancel
		buf, srcs, produced, learner := newParts(t, 8, 50)
		lim, err := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 100, ErrorBuffer: 200})
		if err != nil {
			t.Fatal(err)
		}
		cfg := PipelineConfig{Queue: 4, LearnerBatch: 16, Limiter: lim, MaxSteps: 300, Inserters: c.inserters}
		ctx, cancel := context.WithCancel(context.Background())
		if byCancel {
			cfg.MaxSteps = 0
			time.AfterFunc(30*time.Millisecond, cancel)
		}
		var p Pipeline
		if err := p.Run(ctx, buf, srcs, learner, cfg); err != nil {
			t.Fatal(err)
		}
		cancel()
		st := p.Stats()
		if st.Items+st.Discarded != produced.Load() {
			t.Fatalf("%+v: produced %d, stored %d + discarded %d", c, produced.Load(), st.Items, st.Discarded)
		}
		if got := buf.Stats().Inserts; got != uint64(st.Items) {
			t.Fatalf("buffer holds %d inserts, pipeline says %d", got, st.Items)
		}
		if !byCancel && st.LearnerSteps != 300 {
			t.Fatalf("%d learner steps, want MaxSteps 300", st.LearnerSteps)
		}
		if st.LearnerSteps == 0 || st.Batches == 0 {
			t.Fatalf("nothing happened: %+v", st)
		}
		// The limiter held the replay ratio: samples <= inserts·1 + the buffer.
		ls := lim.Stats()
		if float64(ls.Sampled) > float64(ls.Inserted-100)+200+16 {
			t.Fatalf("%+v: sampled %d items for %d inserted", c, ls.Sampled, ls.Inserted)
		}
	}
}

func TestPipelineErrorsStopEverything(t *testing.T) {
	limited := func() PipelineConfig {
		lim, err := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 32, ErrorBuffer: 64})
		if err != nil {
			t.Fatal(err)
		}
		return PipelineConfig{Queue: 2, LearnerBatch: 16, Limiter: lim}
	}
	buf, srcs, _, learner := newParts(t, 4, 10)
	learner.fail = 20
	var p Pipeline
	err := p.Run(context.Background(), buf, srcs, learner, limited())
	if err == nil || !strings.Contains(err.Error(), "learner step 19: boom") {
		t.Fatalf("got %v, want the learner's error naming its step", err)
	}
	buf, srcs, _, learner = newParts(t, 4, 10)
	learner.panic = 5
	err = p.Run(context.Background(), buf, srcs, learner, limited())
	if err == nil || !strings.Contains(err.Error(), "learner panicked: kaboom") {
		t.Fatalf("got %v, want the recovered panic", err)
	}
	// A bad batch from an actor is the inserter's error.
	buf, _, _, learner = newParts(t, 1, 10)
	bad := sourceFunc(func(ctx context.Context, t *buffer.Transitions) error {
		t.Reward = append(t.Reward, 1) // no Obs: rejected by Insert
		return nil
	})
	err = p.Run(context.Background(), buf, []Source{bad}, learner, limited())
	if !errors.Is(err, buffer.ErrShape) {
		t.Fatalf("got %v, want the buffer's shape error", err)
	}
}

type sourceFunc func(context.Context, *buffer.Transitions) error

func (f sourceFunc) Fill(ctx context.Context, t *buffer.Transitions) error { return f(ctx, t) }

func TestPipelineConfigErrors(t *testing.T) {
	buf, srcs, _, learner := newParts(t, 1, 1)
	var p Pipeline
	lim, err := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 1, ErrorBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	do := func(context.Context) (bool, error) { return false, nil }
	for _, c := range []PipelineConfig{{Queue: 0, LearnerBatch: 1}, {Queue: 1, LearnerBatch: 0}, {Queue: 1, LearnerBatch: 1, MaxSteps: -1},
		{Queue: 1, LearnerBatch: 1, Inserters: -2}, {Queue: 1, LearnerBatch: 1, Inserters: MaxInserters + 1},
		{Queue: 1, LearnerBatch: 1, PriorSteps: -1}, {Queue: 1, LearnerBatch: 1, Tasks: []Task{{Name: "x", Every: time.Second}}},
		{Queue: 1, LearnerBatch: 1, Tasks: []Task{{Name: "x", Every: -1, Do: do}}},
		{LearnerBatch: 1, Schedule: Lockstep, MaxSteps: 1},                 // no limiter
		{LearnerBatch: 1, Schedule: Lockstep, Limiter: lim},                // no MaxSteps
		{Queue: 1, LearnerBatch: 1, Schedule: Schedule(7), Limiter: lim}} { // unknown schedule
		if err := p.Run(context.Background(), buf, srcs, learner, c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	_, srcs2, _, _ := newParts(t, 2, 1)
	if err := p.Run(context.Background(), buf, srcs2, learner, PipelineConfig{LearnerBatch: 1, Schedule: Lockstep, Limiter: lim, MaxSteps: 1}); err == nil {
		t.Error("the lockstep schedule accepted two actors")
	}
	lim2, err := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 16, ErrorBuffer: 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background(), buf, srcs, learner, PipelineConfig{LearnerBatch: 16, Limiter: lim2, Inserters: Direct, MaxSteps: 5}); err != nil {
		t.Errorf("Direct needs no Queue, got %v", err)
	}
	// The partial runs: learner-only and actor-only take what makes sense.
	for _, c := range []struct {
		name    string
		sink    Sink
		srcs    []Source
		learner Stepper
		cfg     PipelineConfig
		want    string
	}{
		{"nothing", buf, nil, nil, PipelineConfig{Queue: 1, LearnerBatch: 1}, "no actors and no learner"},
		{"nil sink", nil, srcs, learner, PipelineConfig{Queue: 1, LearnerBatch: 1}, "nil sink"},
		{"nil buffer", (*buffer.Buffer)(nil), srcs, learner, PipelineConfig{Queue: 1, LearnerBatch: 1}, "nil sink"},
		{"actor-only lockstep", buf, srcs, nil, PipelineConfig{Queue: 1, Schedule: Lockstep, Limiter: lim, MaxSteps: 1}, "concurrent schedule"},
		{"actor-only MaxSteps", buf, srcs, nil, PipelineConfig{Queue: 1, MaxSteps: 3}, "no learner"},
		{"actor-only limiter", buf, srcs, nil, PipelineConfig{Queue: 1, Limiter: lim}, "takes no Limiter"},
		{"learner-only lockstep", buf, nil, learner, PipelineConfig{LearnerBatch: 1, Schedule: Lockstep, Limiter: lim, MaxSteps: 1}, "one actor"},
		{"lockstep without learner", buf, srcs, nil, PipelineConfig{LearnerBatch: 1, Schedule: Lockstep, Limiter: lim, MaxSteps: 1}, "concurrent schedule"},
	} {
		err := p.Run(context.Background(), c.sink, c.srcs, c.learner, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestPipelinePartialRuns: a learner-only run (no sources, nil sink)
// steps MaxSteps times against a buffer filled beforehand; an actor-only
// run (nil learner) inserts into its sink until ctx ends and hands every
// completed batch over.
func TestPipelinePartialRuns(t *testing.T) {
	buf, srcs, _, learner := newParts(t, 2, 10)
	var fill Pipeline
	ctx, cancel := context.WithCancel(context.Background())
	var sink countingSink
	sink.buf = buf
	sink.stop, sink.cancel = 200, cancel
	if err := fill.Run(ctx, &sink, srcs, nil, PipelineConfig{Queue: 2}); err != nil {
		t.Fatal(err)
	}
	st := fill.Stats()
	if st.LearnerSteps != 0 || st.Items < 200 || st.Items != sink.items.Load() || int64(buf.Stats().Size) != min(st.Items, int64(buf.Config().Capacity)) {
		t.Fatalf("actor-only run: %+v, sink got %d items, buffer %+v", st, sink.items.Load(), buf.Stats())
	}
	var learn Pipeline
	if err := learn.Run(context.Background(), nil, nil, learner, PipelineConfig{LearnerBatch: 1, MaxSteps: 7}); err != nil {
		t.Fatal(err)
	}
	if st := learn.Stats(); st.LearnerSteps != 7 || st.Items != 0 {
		t.Fatalf("learner-only run: %+v", st)
	}
}

// countingSink inserts into buf, counting items, and cancels once it holds
// stop items.
type countingSink struct {
	buf    *buffer.Buffer
	items  atomic.Int64
	stop   int64
	cancel func()
}

func (s *countingSink) Insert(t *buffer.Transitions) error {
	if err := s.buf.Insert(t); err != nil {
		return err
	}
	if s.items.Add(int64(t.Len())) >= s.stop {
		s.cancel()
	}
	return nil
}

// TestPipelineLockstep: the lockstep schedule interleaves inserts and
// steps by the limiter's admissions alone, so two runs from the same state
// take the same operations in the same order; step-paced tasks run at
// multiples of EverySteps counted from PriorSteps; a task can stop the run
// or fail it.
func TestPipelineLockstep(t *testing.T) {
	run := func(prior int64, do func(ctx context.Context) (bool, error)) (string, PipelineStats, []int64, error) {
		buf, srcs, _, learner := newParts(t, 1, 10)
		lim, err := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 2, MinSizeToSample: 40, ErrorBuffer: 32})
		if err != nil {
			t.Fatal(err)
		}
		var p Pipeline
		var log strings.Builder
		var at []int64
		task := Task{Name: "probe", EverySteps: 7, Every: time.Nanosecond, Do: func(ctx context.Context) (bool, error) {
			st := p.Stats()
			at = append(at, prior+st.LearnerSteps)
			fmt.Fprintf(&log, "%d/%d ", st.Items, st.LearnerSteps)
			if do != nil {
				return do(ctx)
			}
			return false, nil
		}}
		err = p.Run(context.Background(), buf, srcs, learner, PipelineConfig{LearnerBatch: 16, Limiter: lim, MaxSteps: 50,
			Schedule: Lockstep, PriorSteps: prior, Tasks: []Task{task}})
		return log.String(), p.Stats(), at, err
	}
	a, sta, at, err := run(3, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, stb, _, err := run(3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || sta != stb {
		t.Fatalf("same start, different runs:\n%s %+v\n%s %+v", a, sta, b, stb)
	}
	if sta.LearnerSteps != 50 || sta.Discarded != 0 {
		t.Fatalf("stats %+v, want 50 steps, nothing discarded", sta)
	}
	// SamplesPerInsert 2 with 16-item steps: at most (items−40)·2/16 + the
	// error buffer's worth of steps ahead of the inserts.
	if max := (sta.Items-40)*2/16 + 32/16 + 1; sta.LearnerSteps > max {
		t.Fatalf("%d steps for %d items: the limiter was not followed", sta.LearnerSteps, sta.Items)
	}
	if !slices.Equal(at, []int64{7, 14, 21, 28, 35, 42, 49}) {
		t.Fatalf("step-paced task ran at %v, want multiples of 7 from PriorSteps 3", at)
	}
	_, st, _, err := run(0, func(context.Context) (bool, error) { return true, nil })
	if err != nil || st.LearnerSteps != 7 {
		t.Fatalf("a task that stops: %v after %d steps, want nil after 7", err, st.LearnerSteps)
	}
	_, _, _, err = run(0, func(context.Context) (bool, error) { return false, errors.New("bang") })
	if err == nil || !strings.Contains(err.Error(), "probe: bang") {
		t.Fatalf("a failing task: %v", err)
	}
}

// TestPipelineTaskStopsConcurrent: on the concurrent schedule a task runs
// on its own ticker, and its stop ends the run without error.
func TestPipelineTaskStopsConcurrent(t *testing.T) {
	buf, srcs, _, learner := newParts(t, 4, 10)
	var runs atomic.Int64
	task := Task{Name: "probe", Every: time.Millisecond, Do: func(context.Context) (bool, error) {
		return runs.Add(1) == 3, nil
	}}
	var p Pipeline
	err := p.Run(context.Background(), buf, srcs, learner, PipelineConfig{Queue: 2, LearnerBatch: 16, Tasks: []Task{task},
		Limiter: mustLimiter(t)})
	if err != nil || runs.Load() != 3 {
		t.Fatalf("got %v after %d task runs, want nil after 3", err, runs.Load())
	}
}

func mustLimiter(t *testing.T) *RateLimiter {
	t.Helper()
	lim, err := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 32, ErrorBuffer: 64})
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// onceSource completes one batch of size items at once, then waits for
// the run's end and returns an empty batch.
type onceSource struct {
	id, size int
	calls    int
	produced *atomic.Int64
}

func (s *onceSource) Fill(ctx context.Context, t *buffer.Transitions) error {
	s.calls++
	if s.calls > 1 {
		<-ctx.Done()
		return nil
	}
	for k := range s.size {
		id := float32(s.id<<10 + k)
		t.Obs = append(t.Obs, id)
		t.NextObs = append(t.NextObs, id)
		t.Action = append(t.Action, 0)
		t.Reward = append(t.Reward, id)
		t.Discount = append(t.Discount, 1)
		s.produced.Add(1)
	}
	return nil
}

// TestPipelineStoresParkedBatches: batches the actors completed while
// the queue was full (here: the inserter held at the gate) are stored when
// the run stops, not discarded.
func TestPipelineStoresParkedBatches(t *testing.T) {
	buf, _, _, learner := newParts(t, 1, 1)
	const actors, size = 8, 5
	var produced atomic.Int64
	srcs := make([]Source, actors)
	for i := range srcs {
		srcs[i] = &onceSource{id: i, size: size, produced: &produced}
	}
	var p Pipeline
	release := p.hold() // the inserter cannot store: the queue of 1 fills, the other actors park
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- p.Run(ctx, buf, srcs, learner, PipelineConfig{Queue: 1, LearnerBatch: 1, Inserters: 1})
	}()
	for deadline := time.Now().Add(10 * time.Second); produced.Load() < actors*size && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // let the actors reach the full queue
	cancel()
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Items != actors*size || st.Discarded != 0 || buf.Size() != actors*size {
		t.Fatalf("produced %d: stored %d, discarded %d, buffer holds %d; want every completed batch stored", produced.Load(), st.Items, st.Discarded, buf.Size())
	}
}
