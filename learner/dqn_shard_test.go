package learner

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// goWorkers is a Workers that runs every shard but the first on a fresh
// goroutine per call: the concurrency of a pool without the runtime's.
type goWorkers int

func (g goWorkers) Workers() int { return int(g) }

func (g goWorkers) Run(n int, f func(int)) {
	var wg sync.WaitGroup
	for s := 1; s < n; s++ {
		wg.Go(func() { f(s) })
	}
	f(0)
	wg.Wait()
}

// shardRig is a rig of the default 4-64-64-2 network (float32 or not)
// under the named method (per or pal) on the given workers (nil: serial).
func shardRig(t *testing.T, f32 bool, name string, w Workers) *rig {
	t.Helper()
	r := newRig(t, DQNConfig{Batch: 64, Seed: 3}, model.Config{In: 4, Hidden: []int{64, 64}, Out: 2, Float32: f32}, 2048)
	if name != "per" {
		m, err := sampler.NewMethod(name, r.buf, sampler.MethodConfig{})
		if err != nil {
			t.Fatal(err)
		}
		l, err := NewDQN(r.l.Config(), r.l.Net().Clone(), r.buf, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.l = l
	}
	if err := r.l.SetWorkers(w); err != nil {
		t.Fatal(err)
	}
	return r
}

// maxAbsDiff returns max_i |a_i − b_i| and max_i |a_i|.
func maxAbsDiff(a, b []float64) (d, scale float64) {
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
		scale = max(scale, math.Abs(a[i]))
	}
	return d, scale
}

// TestDQNShardsMatchSerial: W shards give the serial step's gradient, loss
// and |δ| up to the order of the sums over rows. The tolerance is relative
// to the gradient's largest entry: float64 sums of 64 rows reassociated
// differ by a few ulps (1e-12 leaves three orders of margin); on the
// float32 path every shard's GEMM rounds to float32 (2^-24 ≈ 6e-8 per
// operation: we see up to 1e-7 relative; 1e-5, the bound float32_test.go
// puts on a 64-wide network against float64, leaves two orders).
func TestDQNShardsMatchSerial(t *testing.T) {
	ctx := context.Background()
	for _, f32 := range []bool{false, true} {
		for _, name := range []string{"per", "pal"} {
			for _, w := range []int{2, 3, 5} {
				t.Run(fmt.Sprintf("float32=%v/%s/W=%d", f32, name, w), func(t *testing.T) {
					tol := 1e-12
					if f32 {
						tol = 1e-5
					}
					ser, par := shardRig(t, f32, name, nil), shardRig(t, f32, name, SerialWorkers(w))
					if err := ser.l.Step(ctx); err != nil {
						t.Fatal(err)
					}
					if err := par.l.Step(ctx); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(ser.l.batch.Action, par.l.batch.Action) {
						t.Fatal("the two learners sampled different batches")
					}
					d, s := maxAbsDiff(ser.l.Net().Grads(), par.l.Net().Grads())
					t.Logf("max |serial − sharded| gradient %.3g relative", d/s)
					if s == 0 || d > tol*s {
						t.Errorf("gradient: max |serial − sharded| = %g, max |serial| = %g (tolerance %g relative)", d, s, tol)
					}
					if d, s := maxAbsDiff(ser.l.absTD, par.l.absTD); d > tol*max(s, 1) {
						t.Errorf("|δ|: max diff %g (scale %g)", d, s)
					}
					sl, pl := ser.l.Stats().Loss, par.l.Stats().Loss
					if math.Abs(sl-pl) > tol*math.Abs(sl) {
						t.Errorf("loss: serial %v, sharded %v", sl, pl)
					}
				})
			}
		}
	}
}

// TestDQNShardsBitIdentical: W = 1 is today's serial step bit for bit;
// the same W gives the same bits on one goroutine or on W (the reduction
// order is fixed), over steps that cross a target update and publishes.
func TestDQNShardsBitIdentical(t *testing.T) {
	ctx := context.Background()
	run := func(f32 bool, w Workers) []float64 {
		r := shardRig(t, f32, "per", w)
		r.l.cfg.TargetEvery = 7
		for range 25 {
			if err := r.l.Step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return append(params(r.l.Net()), params(r.l.Target())...)
	}
	for _, f32 := range []bool{false, true} {
		serial := run(f32, nil)
		if got := run(f32, SerialWorkers(1)); !slices.Equal(got, serial) {
			t.Errorf("float32=%v: W = 1 differs from the serial step", f32)
		}
		a, b := run(f32, SerialWorkers(3)), run(f32, goWorkers(3))
		if !slices.Equal(a, b) {
			t.Errorf("float32=%v: W = 3 on one goroutine and on three differ", f32)
		}
		if c := run(f32, goWorkers(3)); !slices.Equal(b, c) {
			t.Errorf("float32=%v: two runs with W = 3 differ", f32)
		}
		if slices.Equal(a, serial) && !f32 {
			t.Logf("float32=%v: W = 3 happens to equal the serial run bit for bit", f32)
		}
	}
}

// TestDQNSetWorkers: bad Workers are refused, W above the batch is
// clamped, and SetWorkers(nil) restores the serial step.
func TestDQNSetWorkers(t *testing.T) {
	r := shardRig(t, false, "per", nil)
	if err := r.l.SetWorkers(SerialWorkers(1000)); err != nil || len(r.l.par.shards) != 64 {
		t.Fatalf("W = 1000 over batch 64: err %v, shards %v", err, r.l.par)
	}
	if err := r.l.SetWorkers(badWorkers{}); err == nil {
		t.Fatal("Workers() = 0 accepted")
	}
	if err := r.l.SetWorkers(nil); err != nil || r.l.par != nil {
		t.Fatalf("SetWorkers(nil): err %v, par %v", err, r.l.par)
	}
}

type badWorkers struct{}

func (badWorkers) Workers() int       { return 0 }
func (badWorkers) Run(int, func(int)) {}

// TestShardedZeroAllocs: after warm-up a sharded DQN, TD3 or SAC step
// allocates nothing (no publish here), with or without a Normalizer, on
// one goroutine (runtime's WorkerPool has its own test).
func TestShardedZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation may allocate")
	}
	for _, name := range []string{"per", "pal"} {
		r := shardRig(t, true, name, SerialWorkers(3))
		r.l.cfg.PublishEvery = 1 << 30
		step := func() {
			if err := r.l.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		step()
		if a := testing.AllocsPerRun(30, step); a != 0 {
			t.Errorf("DQN %s on 3 shards: %v allocations per Step, want 0", name, a)
		}
	}
	l := shardTD3(t, true, "uniform", 2, SerialWorkers(3))
	l.cfg.PublishEvery = 1 << 30
	step := func() {
		if err := l.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if a := testing.AllocsPerRun(30, step); a != 0 {
		t.Errorf("TD3 on 3 shards: %v allocations per Step, want 0", a)
	}
	sac := shardSAC(t, true, "pal", SerialWorkers(3))
	sac.cfg.PublishEvery = 1 << 30
	step = func() {
		if err := sac.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if a := testing.AllocsPerRun(30, step); a != 0 {
		t.Errorf("SAC on 3 shards: %v allocations per Step, want 0", a)
	}
}
