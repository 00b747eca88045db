package runtime

import (
	"context"
	"errors"
	"math/rand/v2"
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
	for _, byCancel := range []bool{false, true} {
		buf, srcs, produced, learner := newParts(t, 8, 50)
		lim, err := NewRateLimiter(RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 100, ErrorBuffer: 200})
		if err != nil {
			t.Fatal(err)
		}
		cfg := PipelineConfig{Queue: 4, LearnerBatch: 16, Limiter: lim, MaxSteps: 300}
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
			t.Fatalf("byCancel=%v: produced %d, stored %d + discarded %d", byCancel, produced.Load(), st.Items, st.Discarded)
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
			t.Fatalf("byCancel=%v: sampled %d items for %d inserted", byCancel, ls.Sampled, ls.Inserted)
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
	for _, c := range []PipelineConfig{{Queue: 0, LearnerBatch: 1}, {Queue: 1, LearnerBatch: 0}, {Queue: 1, LearnerBatch: 1, MaxSteps: -1}} {
		if err := p.Run(context.Background(), buf, srcs, learner, c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := p.Run(context.Background(), buf, nil, learner, PipelineConfig{Queue: 1, LearnerBatch: 1}); err == nil {
		t.Error("no actors accepted")
	}
}
