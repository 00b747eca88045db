package runtime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apexrl/apex/buffer"
)

// BenchmarkPipelineInsert measures the Concurrent schedule's insert path:
// benchActors actors fill batches of benchBatch CartPole-sized
// transitions (as cheaply as possible: the fill is not what is measured)
// and hand them to the buffer through 1, 2 or 4 inserter goroutines or
// directly (Direct), while one learner samples benchLearnerBatch items
// and writes their priorities back as fast as it can (no rate limiter). One
// b.N is one transition. It reports the transitions stored per second
// (items/s) and the items the learner sampled per second beside them
// (sampled/s): the first is what the insert path can carry, the second
// how much of the machine it leaves to the learner. Run it with
//
//	go test -run '^$' -bench BenchmarkPipelineInsert -benchtime 2000000x -count 5 -cpu 1,2,4,8,16 ./runtime/
//
// The buffer is filled to capacity before timing, as in a long run.
func BenchmarkPipelineInsert(b *testing.B) {
	for _, ins := range []int{Direct, 1, 2, 4} {
		name := fmt.Sprintf("inserters=%d", ins)
		if ins == Direct {
			name = "inserters=direct"
		}
		b.Run(name, func(b *testing.B) { benchPipelineInsert(b, ins) })
	}
}

const (
	benchActors       = 64
	benchBatch        = 32
	benchLearnerBatch = 256
	benchCapacity     = 1 << 18
)

// benchSource is an actor that writes fixed CartPole-like rows and stops
// the run once the benchmark's budget of transitions is spent.
type benchSource struct {
	budget *atomic.Int64
	stop   context.CancelFunc
	seq    uint64
}

func (s *benchSource) Fill(ctx context.Context, t *buffer.Transitions) error {
	if s.budget.Add(-benchBatch) < 0 {
		s.stop()
		return nil
	}
	for i := range benchBatch {
		x := float32((s.seq+uint64(i))&1023) * (1.0 / 1024)
		t.Obs = append(t.Obs, x, -x, 0.5*x, 0.25*x)
		t.NextObs = append(t.NextObs, x+0.01, -x, 0.5*x, 0.25*x)
		t.Action = append(t.Action, int32((s.seq+uint64(i))&1))
		t.Reward = append(t.Reward, 1)
		t.Discount = append(t.Discount, 0.99)
	}
	s.seq += benchBatch
	return nil
}

// benchLearner samples a batch and writes random |δ|-like priorities back.
type benchLearner struct {
	buf   *buffer.Buffer
	batch *buffer.Batch
	rng   *rand.Rand
	prios []float64
}

func (l *benchLearner) Step(context.Context) error {
	if err := l.buf.Sample(l.rng, l.batch); err != nil {
		return err
	}
	for i := range l.prios {
		l.prios[i] = l.rng.ExpFloat64()
	}
	_, err := l.buf.UpdatePriorities(l.batch.Refs, l.prios)
	return err
}

func benchPipelineInsert(b *testing.B, inserters int) {
	buf, err := buffer.New(buffer.Config{Capacity: benchCapacity, ObsDim: 4, NumActions: 2})
	if err != nil {
		b.Fatal(err)
	}
	var fill atomic.Int64
	fill.Store(benchCapacity)
	pre := &benchSource{budget: &fill, stop: func() {}}
	for buf.Size() < benchCapacity {
		t := &buffer.Transitions{}
		if err := pre.Fill(context.Background(), t); err != nil {
			b.Fatal(err)
		}
		if err := buf.Insert(t); err != nil {
			b.Fatal(err)
		}
	}
	bt, err := buf.NewBatch(benchLearnerBatch)
	if err != nil {
		b.Fatal(err)
	}
	learner := &benchLearner{buf: buf, batch: bt, rng: rand.New(rand.NewPCG(1, 2)), prios: make([]float64, benchLearnerBatch)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var budget atomic.Int64
	budget.Store(int64(b.N))
	sources := make([]Source, benchActors)
	for i := range sources {
		sources[i] = &benchSource{budget: &budget, stop: cancel, seq: uint64(i) << 32}
	}
	var p Pipeline
	b.ResetTimer()
	start := time.Now()
	err = p.Run(ctx, buf, sources, learner, PipelineConfig{Queue: 2 * benchActors, LearnerBatch: benchLearnerBatch, Inserters: inserters})
	sec := time.Since(start).Seconds()
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	st := p.Stats()
	b.ReportMetric(float64(st.Items)/sec, "items/s")
	b.ReportMetric(float64(st.LearnerSteps*benchLearnerBatch)/sec, "sampled/s")
}
