package remote

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// testShard is one replay shard of a test fleet: a server on an
// in-memory listener, its buffer, and a client dialed by its own name.
type testShard struct {
	name string
	srv  *Server
	buf  *buffer.Buffer
	bs   *bufServer
	c    *Client
}

// testReconnect re-dials a stopped shard every 10-50 ms (gRPC's default
// backoff grows to seconds).
var testReconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 50 * time.Millisecond},
	MinConnectTimeout: time.Second,
})

// shardLayout is the layout the sharded tests use.
func shardLayout(capacity int) buffer.Config {
	return buffer.Config{Capacity: capacity, Stripes: 2, ObsDim: 2, Action: buffer.Discrete, NumActions: 2}
}

// newTestShard serves method name over a fresh buffer of layout with lim
// (nil: none) and config as the run configuration.
func newTestShard(t *testing.T, name, method string, layout buffer.Config, lim *runtime.RateLimiter, config string) *testShard {
	t.Helper()
	buf, err := buffer.New(layout)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sampler.NewMethod(method, buf, sampler.MethodConfig{BetaSteps: 100})
	if err != nil {
		t.Fatal(err)
	}
	sh := &testShard{name: name, buf: buf}
	sh.srv, err = NewServer(Table{Buffer: buf, Method: m, Limiter: lim, Config: []byte(config)}, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.srv.Close() })
	sh.bs = newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, sh.srv) })
	sh.c, err = Dial(context.Background(), "passthrough:///"+name, ClientOptions{Insecure: true,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(sh.bs.dial), testReconnect}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.c.Close() })
	return sh
}

// filledShards starts two PER shards of layout serving config, shard-a
// holding one row per priority in prios tagged 0 and shard-b the same
// tagged 1, and returns them with the local twin of their method.
func filledShards(t *testing.T, layout buffer.Config, config string, prios []float64) (a, b *testShard, local sampler.Method) {
	t.Helper()
	a = newTestShard(t, "shard-a", "per", layout, nil, config)
	b = newTestShard(t, "shard-b", "per", layout, nil, config)
	a.fill(t, prios, 0)
	b.fill(t, prios, 1)
	_, local = localTwin(t, "per", layout)
	return a, b, local
}

// fillAdmitted inserts rows of priority 1 (tag 0) through lim, one at a
// time, as long as lim admits one at once.
func (sh *testShard) fillAdmitted(t *testing.T, lim *runtime.RateLimiter) {
	t.Helper()
	for lim.CanInsert() {
		if err := lim.ReserveInsert(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		sh.fill(t, []float64{1}, 0)
		if err := lim.CommitInsert(1); err != nil {
			t.Fatal(err)
		}
	}
}

// fill inserts one row per priority (obs[0] = its index, obs[1] = tag).
func (sh *testShard) fill(t *testing.T, prios []float64, tag float32) {
	t.Helper()
	tr := &buffer.Transitions{}
	for i, p := range prios {
		tr.Obs = append(tr.Obs, float32(i), tag)
		tr.NextObs = append(tr.NextObs, float32(i), tag)
		tr.Action = append(tr.Action, int32(i%2))
		tr.Reward = append(tr.Reward, float32(i))
		tr.Discount = append(tr.Discount, 0.99)
		tr.Priority = append(tr.Priority, p)
	}
	if err := sh.buf.Insert(tr); err != nil {
		t.Fatal(err)
	}
}

// localTwin is method name over a buffer of layout (the learner's twin).
func localTwin(t *testing.T, method string, layout buffer.Config) (*buffer.Buffer, sampler.Method) {
	t.Helper()
	buf, err := buffer.New(layout)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sampler.NewMethod(method, buf, sampler.MethodConfig{BetaSteps: 100})
	if err != nil {
		t.Fatal(err)
	}
	return buf, m
}

func clientsOf(shards ...*testShard) []*Client {
	out := make([]*Client, len(shards))
	for i, sh := range shards {
		out[i] = sh.c
	}
	return out
}

// TestShardedChiSquare draws many batches across two shards whose masses
// differ 1:100 and checks, with a chi-square test, that every item's
// frequency is p_i/Σp over both shards, in the exact mode and the
// one-shard mode; and that every row's reported probability is that.
func TestShardedChiSquare(t *testing.T) {
	for _, mode := range []ShardSampling{ShardExact, ShardOne} {
		t.Run(mode.String(), func(t *testing.T) {
			checkLeaks(t)
			// A fixed seed per mode: the draws are then the same every
			// run (the learner's generator gives every shard its seeds and
			// positions, and no inserts move the masses), so the four
			// chi-square checks at the 0.999 quantile do not fail at
			// random ~0.4% of runs; a change to the sampling that breaks
			// the distribution still fails them. Printed on failure.
			seed := uint64(20261126) + uint64(mode)
			defer func() {
				if t.Failed() {
					t.Logf("seed %d", seed)
				}
			}()
			layout := shardLayout(16)
			a, b, prios := unevenShards(t, layout) // masses 1 and 100
			const total = 101.0
			pa, pb := prios[:8], prios[8:]
			probs := scaled(prios, 1/total)

			_, local := localTwin(t, "per", layout)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			counters := &ShardCounters{}
			m, err := ShardedMethod(ctx, clientsOf(a, b), local, 0, ShardOptions{Sampling: mode, Counters: counters})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(seed, 7))
			scratch, _ := buffer.New(layout)
			const rows, draws = 32, 1200
			dst, err := scratch.NewBatch(rows)
			if err != nil {
				t.Fatal(err)
			}
			counts := make([]int, 16)
			batches := make([]int, 2) // one mode: the batches drawn from each shard
			for range draws {
				if err := m.Selector.Sample(rng, dst); err != nil {
					t.Fatal(err)
				}
				if dst.Size != 16 || math.Abs(dst.Total-total) > 1e-6*total {
					t.Fatalf("size %d total %v, want 16 and %v", dst.Size, dst.Total, total)
				}
				batches[int(dst.Obs[1])]++
				for j := range rows {
					cell := int(dst.Obs[2*j]) + 8*int(dst.Obs[2*j+1])
					counts[cell]++
					if want := probs[cell]; math.Abs(dst.Prob[j]-want) > 1e-6*want {
						t.Fatalf("row %d (item %d): probability %v, want %v", j, cell, dst.Prob[j], want)
					}
				}
			}
			if mode == ShardExact {
				// Stratified rows vary less than independent ones: the
				// test is conservative for them.
				samplertest.ChiSquare(t, seed, counts, probs)
			} else {
				// A batch's rows share its shard, so rows are not
				// independent: test the shards' choice per batch (M_s/M),
				// then the items within each shard (p_i/M_s).
				samplertest.ChiSquare(t, seed, batches, []float64{1 / total, 100 / total})
				samplertest.ChiSquare(t, seed, counts[:8], scaled(pa, 1))
				samplertest.ChiSquare(t, seed, counts[8:], scaled(pb, 1.0/100))
			}
			st := counters.Snapshot()
			if st.Draws != draws || st.Rows != rows*draws || st.Shards[0].Rows+st.Shards[1].Rows != rows*draws {
				t.Errorf("counters %+v", st)
			}
			cancel()
		})
	}
}

func scaled(xs []float64, f float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * f
	}
	return out
}

// TestShardedWeightsMatchInProcess checks that the importance weights of
// rows drawn across two shards equal those an in-process PER over one
// buffer holding the same items with the same priorities gives the same
// items (NormalizeBuffer: they depend on N, P(i) and the smallest P).
func TestShardedWeightsMatchInProcess(t *testing.T) {
	checkLeaks(t)
	seed := uint64(time.Now().UnixNano())
	defer func() {
		if t.Failed() {
			t.Logf("seed %d", seed)
		}
	}()
	layout := shardLayout(16)
	a := newTestShard(t, "shard-a", "per", layout, nil, `{"run":1}`)
	b := newTestShard(t, "shard-b", "per", layout, nil, `{"run":1}`)
	pa := []float64{0.5, 1, 2, 3}
	pb := []float64{10, 20, 40, 80, 5}
	a.fill(t, pa, 0)
	b.fill(t, pb, 1)
	// The in-process twin: one buffer, the same items (obs[1] = 0 or 1
	// tags the shard, obs[0] the index).
	inBuf, inM := localTwin(t, "per", shardLayout(16))
	one := &testShard{buf: inBuf}
	one.fill(t, pa, 0)
	one.fill(t, pb, 1)
	const rows = 8
	for _, step := range []int64{0, 50, 99} {
		inWeight := map[[2]int]float64{}
		rng := rand.New(rand.NewPCG(seed, 1))
		bIn, _ := inBuf.NewBatch(rows)
		for range 200 {
			if err := inM.Selector.Sample(rng, bIn); err != nil {
				t.Fatal(err)
			}
			if err := inM.Weighter.Weights(bIn, step); err != nil {
				t.Fatal(err)
			}
			for j := range rows {
				inWeight[[2]int{int(bIn.Obs[2*j+1]), int(bIn.Obs[2*j])}] = bIn.Weight[j]
			}
		}
		for _, mode := range []ShardSampling{ShardExact, ShardOne} {
			_, local := localTwin(t, "per", layout)
			ctx, cancel := context.WithCancel(context.Background())
			m, err := ShardedMethod(ctx, clientsOf(a, b), local, 0, ShardOptions{Sampling: mode})
			if err != nil {
				t.Fatal(err)
			}
			dst, _ := inBuf.NewBatch(rows)
			checked := 0
			for range 50 {
				if err := m.Selector.Sample(rng, dst); err != nil {
					t.Fatal(err)
				}
				if err := m.Weighter.Weights(dst, step); err != nil {
					t.Fatal(err)
				}
				for j := range rows {
					key := [2]int{int(dst.Obs[2*j+1]), int(dst.Obs[2*j])}
					want, ok := inWeight[key]
					if !ok {
						continue // not drawn in process
					}
					checked++
					if math.Abs(dst.Weight[j]-want) > 1e-6*want {
						t.Fatalf("%s, step %d: item %v weighs %v across shards, %v in process", mode, step, key, dst.Weight[j], want)
					}
				}
			}
			if checked < 100 {
				t.Errorf("%s: only %d rows compared", mode, checked)
			}
			cancel()
		}
	}
}

// TestShardedWriteBacksRouted draws a batch across two shards and checks
// that each row's |δ| lands in the shard it came from, and nowhere else.
func TestShardedWriteBacksRouted(t *testing.T) {
	checkLeaks(t)
	layout := shardLayout(16)
	a := newTestShard(t, "shard-a", "per", layout, nil, `{"run":1}`)
	b := newTestShard(t, "shard-b", "per", layout, nil, `{"run":1}`)
	a.fill(t, []float64{1, 1, 1, 1, 1, 1, 1, 1}, 0)
	b.fill(t, []float64{1, 1, 1, 1, 1, 1, 1, 1}, 1)
	_, local := localTwin(t, "per", layout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := ShardedMethod(ctx, clientsOf(a, b), local, 0, ShardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	dst, _ := a.buf.NewBatch(8)
	if err := m.Selector.Sample(rng, dst); err != nil {
		t.Fatal(err)
	}
	fromA := 0
	absTD := make([]float64, 8)
	want := map[[2]int]float64{}
	for j := range 8 {
		absTD[j] = float64(j + 2)
		if dst.Obs[2*j+1] == 0 {
			fromA++
		}
		want[[2]int{int(dst.Obs[2*j+1]), int(dst.Refs[j].Slot)}] = m.Selector.Priority(absTD[j])
	}
	if fromA == 0 || fromA == 8 {
		t.Fatalf("%d of 8 rows from shard a: want both shards in the batch", fromA)
	}
	res, err := m.Selector.Update(dst.Refs, absTD)
	if err != nil || res.Applied != 8 || res.Stale != 0 {
		t.Fatalf("write-back %+v, %v", res, err)
	}
	for s, sh := range []*testShard{a, b} {
		for slot := range 8 {
			_, p, ok := sh.buf.SlotPriority(slot)
			w, written := want[[2]int{s, slot}]
			if !written {
				w = 1
			}
			if !ok || math.Abs(p-w) > 1e-6*w {
				t.Errorf("shard %d slot %d: priority %v, want %v", s, slot, p, w)
			}
		}
	}
	// Refs other than the latest batch's are refused, nothing sent.
	other := append([]buffer.Ref(nil), dst.Refs...)
	other[0].Slot ^= 1
	if _, err := m.Selector.Update(other, absTD); err == nil {
		t.Error("a write-back for refs that are not the latest batch's: no error")
	}
}

// restart stops the shard's server and serves a new one (a new
// incarnation) over a new buffer filled with prios, tagged tag.
func (sh *testShard) restart(t *testing.T, method string, layout buffer.Config, lim *runtime.RateLimiter, config string, prios []float64, tag float32) {
	t.Helper()
	if err := sh.restartErr(t, method, layout, lim, config, prios, tag); err != nil {
		t.Fatal(err)
	}
}

// restartErr is restart for any goroutine: it returns its error.
func (sh *testShard) restartErr(t *testing.T, method string, layout buffer.Config, lim *runtime.RateLimiter, config string, prios []float64, tag float32) error {
	sh.bs.stop()
	sh.srv.Close()
	buf, err := buffer.New(layout)
	if err != nil {
		return err
	}
	m, err := sampler.NewMethod(method, buf, sampler.MethodConfig{BetaSteps: 100})
	if err != nil {
		return err
	}
	srv, err := NewServer(Table{Buffer: buf, Method: m, Limiter: lim, Config: []byte(config)}, ServerOptions{})
	if err != nil {
		return err
	}
	t.Cleanup(srv.Close)
	tr := &buffer.Transitions{}
	for i, p := range prios {
		tr.Obs = append(tr.Obs, float32(i), tag)
		tr.NextObs = append(tr.NextObs, float32(i), tag)
		tr.Action = append(tr.Action, int32(i%2))
		tr.Reward = append(tr.Reward, float32(i))
		tr.Discount = append(tr.Discount, 0.99)
		tr.Priority = append(tr.Priority, p)
	}
	if err := buf.Insert(tr); err != nil {
		return err
	}
	sh.srv, sh.buf = srv, buf
	sh.bs.start()
	return nil
}

// TestShardedDeadShard stops one of two shards: the write-backs meant for
// it are dropped and counted, never applied; the learner keeps drawing
// from the other; the shard, restarted with a new incarnation, rejoins
// within the probe backoff and rows come from it again, while write-backs
// for rows drawn from its earlier incarnation are dropped.
func TestShardedDeadShard(t *testing.T) {
	checkLeaks(t)
	layout := shardLayout(16)
	const cfg = `{"run":1}`
	ones := []float64{1, 1, 1, 1, 1, 1, 1, 1}
	a, b, local := filledShards(t, layout, cfg, ones)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counters := &ShardCounters{}
	m, err := ShardedMethod(ctx, clientsOf(a, b), local, 0, ShardOptions{Deadline: 300 * time.Millisecond, ProbeMin: 10 * time.Millisecond, ProbeMax: 40 * time.Millisecond, Counters: counters})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	dst, _ := a.buf.NewBatch(8)
	fromB := func() int {
		n := 0
		for j := range 8 {
			if dst.Obs[2*j+1] == 1 {
				n++
			}
		}
		return n
	}
	if err := m.Selector.Sample(rng, dst); err != nil {
		t.Fatal(err)
	}
	nb := fromB()
	if nb == 0 || nb == 8 {
		t.Fatalf("%d of 8 rows from shard b", nb)
	}
	absTD := []float64{5, 5, 5, 5, 5, 5, 5, 5}
	b.bs.stop() // shard b dies
	res, err := m.Selector.Update(dst.Refs, absTD)
	if err != nil || res.Applied != 8-nb || res.Stale != nb {
		t.Fatalf("write-back with shard b down: %+v, %v (want %d applied, %d dropped)", res, err, 8-nb, nb)
	}
	st := counters.Snapshot()
	if st.Dropped != uint64(nb) || st.Shards[1].Dropped != uint64(nb) || st.Shards[1].Up || st.Shards[1].Downs != 1 {
		t.Fatalf("after the write-back: %+v", st)
	}
	for slot := range 8 { // nothing applied on b
		if _, p, _ := b.buf.SlotPriority(slot); p != 1 {
			t.Fatalf("shard b slot %d: priority %v after its write-back was dropped", slot, p)
		}
	}
	// The learner keeps drawing, from shard a only.
	for i := range 20 {
		if err := m.Selector.Sample(rng, dst); err != nil {
			t.Fatalf("draw %d with shard b down: %v", i, err)
		}
		if n := fromB(); n != 0 {
			t.Fatalf("draw %d: %d rows from the dead shard", i, n)
		}
		if _, err := m.Selector.Update(dst.Refs, absTD); err != nil {
			t.Fatal(err)
		}
	}
	oldInc := counters.Snapshot().Shards[1].Incarnation
	b.restart(t, "per", layout, nil, cfg, ones, 1)
	start := time.Now()
	for fromB() == 0 {
		if time.Since(start) > 2*time.Second {
			t.Fatalf("shard b did not rejoin within 2 s of its restart: %+v", counters.Snapshot())
		}
		time.Sleep(5 * time.Millisecond)
		if err := m.Selector.Sample(rng, dst); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("shard b rejoined %v after its restart", time.Since(start))
	st = counters.Snapshot()
	if !st.Shards[1].Up || st.Shards[1].Incarnation == oldInc || st.Shards[1].Rejoins == 0 {
		t.Fatalf("after the rejoin: %+v", st.Shards[1])
	}
	// Rows drawn before another restart: their write-back is dropped,
	// never applied to the new incarnation.
	nb = fromB()
	b.restart(t, "per", layout, nil, cfg, ones, 1)
	res, err = m.Selector.Update(dst.Refs, absTD)
	if err != nil || res.Stale != nb {
		t.Fatalf("write-back across a restart: %+v, %v (want %d dropped)", res, err, nb)
	}
	for slot := range 8 {
		if _, p, _ := b.buf.SlotPriority(slot); p != 1 {
			t.Fatalf("restarted shard b slot %d: priority %v: a write-back for its earlier incarnation was applied", slot, p)
		}
	}
	// Every shard down: a draw waits until one comes back.
	a.bs.stop()
	b.bs.stop()
	restarted := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		restarted <- a.restartErr(t, "per", layout, nil, cfg, ones, 0)
	}()
	start = time.Now()
	if err := m.Selector.Sample(rng, dst); err != nil {
		t.Fatalf("a draw with every shard down: %v", err)
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond || fromB() != 0 {
		t.Fatalf("with every shard down the draw returned after %v with %d rows from b", waited, fromB())
	}
	cancel()
}

// TestShardedGlobalRatio runs a learner over two shards whose inserts are
// uneven (shard a takes batches of 8 rows as fast as it may, b one row a millisecond of shard b's) and whose sampling
// shares differ from their insert shares (b's items carry about 15× the
// priority): the fleet's sample-to-insert ratio holds on the fleet's
// counts throughout, both sides make progress (no shard's limiter stalls
// on its own counts), actors wait while the learner does not draw, and
// the learner waits while actors do not insert.
func TestShardedGlobalRatio(t *testing.T) {
	checkLeaks(t)
	lcfg := runtime.RateLimiterConfig{SamplesPerInsert: 2, MinSizeToSample: 16, ErrorBuffer: 24}
	layout := shardLayout(4096)
	const cfg = `{"run":1}`
	limA, _ := runtime.NewRateLimiter(lcfg)
	limB, _ := runtime.NewRateLimiter(lcfg)
	a := newTestShard(t, "shard-a", "per", layout, limA, cfg)
	b := newTestShard(t, "shard-b", "per", layout, limB, cfg)

	// The actors: each shard's inserts pass its limiter as the server's
	// insert path does (reserve, store, commit).
	actx, stopActors := context.WithCancel(context.Background())
	defer stopActors()
	done := make(chan struct{}, 2)
	actor := func(sh *testShard, lim *runtime.RateLimiter, rows int, prio float64, tag float32, pause time.Duration) {
		defer func() { done <- struct{}{} }()
		prios := make([]float64, rows)
		for i := range prios {
			prios[i] = prio
		}
		for actx.Err() == nil {
			if err := lim.ReserveInsert(actx, rows); err != nil {
				return
			}
			sh.fill(t, prios, tag)
			_ = lim.CommitInsert(rows)
			time.Sleep(pause)
		}
	}
	go actor(a, limA, 8, 1, 0, 0)
	go actor(b, limB, 1, 20, 1, time.Millisecond) // a slow actor host

	_, local := localTwin(t, "per", layout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counters := &ShardCounters{}
	m, err := ShardedMethod(ctx, clientsOf(a, b), local, 0, ShardOptions{Counters: counters})
	if err != nil {
		t.Fatal(err)
	}
	const rows = 8
	inserted := func() int64 {
		ia, _ := limA.Counts()
		ib, _ := limB.Counts()
		return ia + ib
	}
	minDiff := lcfg.SamplesPerInsert*float64(lcfg.MinSizeToSample) - lcfg.ErrorBuffer
	maxDiff := lcfg.SamplesPerInsert*float64(lcfg.MinSizeToSample) + lcfg.ErrorBuffer
	rng := rand.New(rand.NewPCG(5, 6))
	dst, _ := a.buf.NewBatch(rows)
	var sampled int64
	inBound := false
	for i := range 400 {
		if err := m.Selector.Sample(rng, dst); err != nil {
			t.Fatalf("draw %d: %v (inserted %d, sampled %d)", i, err, inserted(), sampled)
		}
		sampled += rows
		// The learner's side: a draw is admitted only when its first row
		// fits the fleet's balance.
		if diff := float64(inserted())*lcfg.SamplesPerInsert - float64(sampled-rows) - 1; diff < minDiff {
			t.Fatalf("draw %d admitted at balance %v < %v (inserted %d, sampled %d)", i, diff, minDiff, inserted(), sampled)
		}
		// The actors' side: the fleet's balance stays within the bound,
		// plus what each shard may admit on counts one round trip old (one
		// batch and one learner batch per shard).
		// Before the learner's first message each shard's limiter admits
		// its own start-up allowance; the check starts once the fleet's
		// balance has come within the bound.
		slack := 2 * (lcfg.SamplesPerInsert*8 + rows)
		diff := float64(inserted())*lcfg.SamplesPerInsert - float64(sampled)
		if !inBound {
			inBound = diff <= maxDiff+slack
			if i > 100 && !inBound {
				t.Fatalf("draw %d: the fleet's balance %v never came within %v + %v", i, diff, maxDiff, slack)
			}
		} else if diff > maxDiff+slack {
			t.Fatalf("draw %d: the fleet's balance %v exceeds %v + %v (inserted %d, sampled %d)", i, diff, maxDiff, slack, inserted(), sampled)
		}
		absTD := make([]float64, rows)
		for j := range absTD {
			absTD[j] = 0.5 + rng.Float64() + 100*float64(dst.Obs[2*j+1]) // b's rows keep their high priority
		}
		if _, err := m.Selector.Update(dst.Refs, absTD); err != nil {
			t.Fatal(err)
		}
	}
	st := counters.Snapshot()
	ia, _ := limA.Counts()
	ib, _ := limB.Counts()
	t.Logf("inserted a %d, b %d; sampled %d (a %d rows, b %d rows); gate waits %d (%v)", ia, ib, sampled, st.Shards[0].Rows, st.Shards[1].Rows, st.GateWaits, st.GateWait)
	if sampleShare, insertShare := float64(st.Shards[1].Rows)/float64(sampled), float64(ib)/float64(ia+ib); sampleShare-insertShare < 0.2 { // b: a far larger share of the samples than of the inserts
		t.Errorf("the test wants sampling shares unlike insert shares: inserted a %d b %d, sampled a %d b %d", ia, ib, st.Shards[0].Rows, st.Shards[1].Rows)
	}
	// The learner stops: the actors wait on the fleet's balance.
	before := inserted()
	time.Sleep(100 * time.Millisecond)
	if got := inserted(); float64(got)*lcfg.SamplesPerInsert-float64(sampled) > maxDiff+2*lcfg.SamplesPerInsert*8 {
		t.Errorf("with the learner stopped the actors inserted %d → %d items: past the bound (sampled %d)", before, got, sampled)
	}
	// The actors stop: the learner waits (then gives up at its deadline).
	stopActors()
	<-done
	<-done
	short, cancelShort := context.WithCancel(context.Background())
	time.AfterFunc(150*time.Millisecond, cancelShort)
	_, local2 := localTwin(t, "per", layout)
	m2, err := ShardedMethod(short, clientsOf(a, b), local2, 0, ShardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	drawn := 0
	for ; drawn < 1000; drawn++ {
		if err := m2.Selector.Sample(rng, dst); err != nil {
			break
		}
	}
	if drawn == 1000 {
		t.Fatal("with the actors stopped the learner never waited")
	}
	if short.Err() == nil {
		t.Fatalf("the learner's draw %d failed before its context ended", drawn)
	}
	cancelShort()
}

// TestShardedRefusals: shards serving different run configurations are
// refused by name; exact sampling refuses a method that cannot draw at
// positions (rank), which the one-shard mode takes; TER, whose weights
// need its own last sample, is refused in both.
func TestShardedRefusals(t *testing.T) {
	checkLeaks(t)
	layout := shardLayout(16)
	a := newTestShard(t, "shard-a", "per", layout, nil, `{"capacity":16,"seed":1}`)
	b := newTestShard(t, "shard-b", "per", layout, nil, `{"capacity":16,"seed":2}`)
	_, local := localTwin(t, "per", layout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := ShardedMethod(ctx, clientsOf(a, b), local, 0, ShardOptions{})
	if err == nil || !strings.Contains(err.Error(), "shard-a") || !strings.Contains(err.Error(), "shard-b") || !strings.Contains(err.Error(), "seed differ") {
		t.Errorf("mismatched run configurations: %v", err)
	}

	ra := newTestShard(t, "rank-a", "rank", layout, nil, `{"run":1}`)
	rb := newTestShard(t, "rank-b", "rank", layout, nil, `{"run":1}`)
	ra.fill(t, []float64{1, 2, 3, 4}, 0)
	rb.fill(t, []float64{1, 2, 3, 4}, 1)
	_, rank := localTwin(t, "rank", layout)
	if _, err := ShardedMethod(ctx, clientsOf(ra, rb), rank, 0, ShardOptions{}); err == nil || !strings.Contains(err.Error(), "-shard-sampling=one") {
		t.Errorf("rank in exact mode: %v", err)
	}
	m, err := ShardedMethod(ctx, clientsOf(ra, rb), rank, 0, ShardOptions{Sampling: ShardOne})
	if err != nil {
		t.Fatalf("rank in one mode: %v", err)
	}
	dst, _ := ra.buf.NewBatch(4)
	if err := m.Selector.Sample(rand.New(rand.NewPCG(1, 1)), dst); err != nil {
		t.Fatalf("rank in one mode: %v", err)
	}

	terLayout := twinLayout(t, "ter", sampler.MethodConfig{})
	ta := newTestShard(t, "ter-a", "ter", terLayout, nil, `{"run":1}`)
	_, ter := localTwin(t, "ter", terLayout)
	for _, mode := range []ShardSampling{ShardExact, ShardOne} {
		if _, err := ShardedMethod(ctx, clientsOf(ta), ter, 0, ShardOptions{Sampling: mode}); err == nil || !strings.Contains(err.Error(), "run one replay server") {
			t.Errorf("ter, %s: %v", mode, err)
		}
	}
	if _, err := ShardedMethod(ctx, nil, local, 0, ShardOptions{}); err == nil {
		t.Error("no shards: no error")
	}
	if _, err := ParseShardSampling("all"); err == nil {
		t.Error("ParseShardSampling(all): no error")
	}
}

// TestShardedEmptyShardJoins: a shard empty when the learner starts (no
// limiter holds draws) is drawn from once it holds items: its mass is
// refreshed by tallies riding along with the draws it does not serve.
func TestShardedEmptyShardJoins(t *testing.T) {
	checkLeaks(t)
	layout := shardLayout(16)
	for _, mode := range []ShardSampling{ShardExact, ShardOne} {
		a := newTestShard(t, "shard-a", "per", layout, nil, `{"run":1}`)
		b := newTestShard(t, "shard-b", "per", layout, nil, `{"run":1}`)
		a.fill(t, []float64{1, 1, 1, 1}, 0)
		_, local := localTwin(t, "per", layout)
		ctx, cancel := context.WithCancel(context.Background())
		m, err := ShardedMethod(ctx, clientsOf(a, b), local, 0, ShardOptions{Sampling: mode})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 8))
		dst, _ := a.buf.NewBatch(4)
		if err := m.Selector.Sample(rng, dst); err != nil {
			t.Fatal(err)
		}
		b.fill(t, []float64{50, 50, 50, 50}, 1) // now most of the mass
		fromB := false
		for i := 0; i < 200 && !fromB; i++ {
			if err := m.Selector.Sample(rng, dst); err != nil {
				t.Fatal(err)
			}
			for j := range 4 {
				fromB = fromB || dst.Obs[2*j+1] == 1
			}
			time.Sleep(time.Millisecond)
		}
		if !fromB {
			t.Errorf("%s: shard b, filled after the learner started, was never drawn from", mode)
		}
		cancel()
	}
}

// TestShardedRestartRefused restarts a shard of a per fleet as uniform with
// another run configuration: the learner keeps it down (never draws its
// rows, whose probabilities are another method's), counts and reports the
// refusal naming what differs, and takes it back once it is restarted
// with the fleet's flags. A new incarnation met on a reply (observe) is
// checked the same way.
func TestShardedRestartRefused(t *testing.T) {
	checkLeaks(t)
	layout := shardLayout(16)
	const cfg = `{"run":1,"sampler":"per"}`
	ones := []float64{1, 1, 1, 1, 1, 1, 1, 1}
	a, b, local := filledShards(t, layout, cfg, ones)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counters := &ShardCounters{}
	var reported []string
	m, err := ShardedMethod(ctx, clientsOf(a, b), local, 0, ShardOptions{Deadline: 300 * time.Millisecond, ProbeMin: 5 * time.Millisecond, ProbeMax: 20 * time.Millisecond,
		Counters: counters, OnRefused: func(target string, inc uint64, err error) { reported = append(reported, err.Error()) }})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	dst, _ := a.buf.NewBatch(8)
	fromB := func() int {
		n := 0
		for j := range 8 {
			if dst.Obs[2*j+1] == 1 {
				n++
			}
		}
		return n
	}
	if err := m.Selector.Sample(rng, dst); err != nil {
		t.Fatal(err)
	}
	b.restart(t, "uniform", layout, nil, `{"run":2,"sampler":"uniform"}`, ones, 1)
	deadline := time.Now().Add(5 * time.Second)
	for counters.Snapshot().Shards[1].Refused == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the restarted uniform shard was not refused within 5 s: %+v", counters.Snapshot().Shards[1])
		}
		if err := m.Selector.Sample(rng, dst); err != nil {
			t.Fatal(err)
		}
		if n := fromB(); n != 0 {
			t.Fatalf("%d rows drawn from the shard restarted as uniform with another run configuration", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	for i := range 30 { // it stays down
		if err := m.Selector.Sample(rng, dst); err != nil {
			t.Fatal(err)
		}
		if n := fromB(); n != 0 {
			t.Fatalf("draw %d after the refusal: %d rows from the refused shard", i, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	st := counters.Snapshot().Shards[1]
	if st.Up || st.Refused != 1 || !strings.Contains(st.Refusal, "run, sampler differ") || !strings.Contains(st.Refusal, `runs "uniform`) || !strings.Contains(st.Refusal, "shard-b") {
		t.Fatalf("the refused shard: %+v", st)
	}
	if len(reported) != 1 || reported[0] != st.Refusal {
		t.Fatalf("OnRefused was told %q, the counters say %q", reported, st.Refusal)
	}
	// Restarted with the fleet's flags, it rejoins.
	b.restart(t, "per", layout, nil, cfg, ones, 1)
	deadline = time.Now().Add(5 * time.Second)
	for fromB() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("shard b restarted with the fleet's flags did not rejoin within 5 s: %+v", counters.Snapshot().Shards[1])
		}
		time.Sleep(2 * time.Millisecond)
		if err := m.Selector.Sample(rng, dst); err != nil {
			t.Fatal(err)
		}
	}
	// A new incarnation met on a reply (a re-opened stream) is checked
	// too: restart b wrongly and hand the learner a reply of the new
	// incarnation directly.
	s := m.Selector.(*sharded)
	sh := s.shards[1]
	before := sh.counted()
	b.restart(t, "uniform", layout, nil, `{"run":2,"sampler":"uniform"}`, ones, 1)
	var info *replayv1.InfoReply
	for try := 0; ; try++ { // the client re-dials the restarted shard
		if info, err = b.c.Info(ctx); err == nil {
			break
		}
		if try == 200 {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	err = s.observe(sh, info.GetIncarnation(), 8, 8, 0.125, 0)
	if err == nil || !errors.Is(err, errRefused) || !strings.Contains(err.Error(), "run, sampler differ") {
		t.Fatalf("observe of a wrongly restarted incarnation: %v", err)
	}
	if sh.incarnation == info.GetIncarnation() || sh.counted() != before {
		t.Fatalf("the refused reply was taken: incarnation %d, counted %d (was %d)", sh.incarnation, sh.counted(), before)
	}
	if got := counters.Snapshot().Shards[1].Refused; got != 2 {
		t.Fatalf("refusals counted: %d, want 2", got)
	}
	// A down shard whose probe reaches another entry's server (the same
	// incarnation: an address that now leads there) is not taken back:
	// one server counted twice would halve its rows' probabilities.
	sh.up = false
	sh.probe.Store(&replayv1.InfoReply{Incarnation: s.shards[0].incarnation, Config: []byte(cfg), Tables: []*replayv1.TableInfo{s.tab}})
	s.rejoin()
	if st := counters.Snapshot().Shards[1]; sh.up || st.Refused != 3 || !strings.Contains(st.Refusal, "it is the server of shard passthrough:///shard-a") {
		t.Fatalf("a probe reaching shard a's server: up %v, %+v", sh.up, st)
	}
	cancel()
}

// TestShardedWriteBackAfterFailedDraw writes back the previous batch's refs
// after a draw failed: the stage refuses it with a clear error and no
// shard applies anything (the failed attempt re-planned the shards' rows,
// so routing by it would send keys to the wrong shard).
func TestShardedWriteBackAfterFailedDraw(t *testing.T) {
	checkLeaks(t)
	layout := shardLayout(16)
	const cfg = `{"run":1}`
	ones := []float64{1, 1, 1, 1, 1, 1, 1, 1}
	a, b, local := filledShards(t, layout, cfg, ones)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := make([]*Client, 2)
	for i, sh := range []*testShard{a, b} {
		c, err := Dial(context.Background(), "passthrough:///"+sh.name, ClientOptions{Insecure: true, DrawTimeout: 300 * time.Millisecond,
			DialOptions: []grpc.DialOption{grpc.WithContextDialer(sh.bs.dial), testReconnect}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	m, err := ShardedMethod(ctx, clients, local, 0, ShardOptions{Deadline: 300 * time.Millisecond, ProbeMin: 5 * time.Millisecond, ProbeMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	dst, _ := a.buf.NewBatch(8)
	if err := m.Selector.Sample(rng, dst); err != nil {
		t.Fatal(err)
	}
	prev := append([]buffer.Ref(nil), dst.Refs...)
	// A draw that fails after planning: both shards stop, the planned
	// draw fails, and the wait for a live shard ends at DrawTimeout.
	a.bs.stop()
	b.bs.stop()
	if err := m.Selector.Sample(rng, dst); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a draw with both shards stopped: %v", err)
	}
	a.bs.start()
	b.bs.start()
	absTD := []float64{9, 9, 9, 9, 9, 9, 9, 9}
	res, err := m.Selector.Update(prev, absTD)
	if err == nil || !strings.Contains(err.Error(), "no batch to write back") {
		t.Fatalf("write-back of the previous batch after a failed draw: %+v, %v", res, err)
	}
	for _, sh := range []*testShard{a, b} {
		for slot := range 8 {
			if _, p, _ := sh.buf.SlotPriority(slot); p != 1 {
				t.Fatalf("%s slot %d: priority %v: a refused write-back was applied", sh.name, slot, p)
			}
		}
	}
	// The next good draw writes back as usual.
	if err := m.Selector.Sample(rng, dst); err != nil {
		t.Fatal(err)
	}
	if res, err := m.Selector.Update(dst.Refs, absTD); err != nil || res.Applied != 8 {
		t.Fatalf("write-back of a good draw: %+v, %v", res, err)
	}
	cancel()
}

// TestShardedDuplicateShard lists one server twice (two clients of one
// shard): ShardedMethod refuses it naming both entries, whether it asks
// the shards (FleetConfig) or is handed their Info replies, so no row's
// probability is halved by a shard counted twice.
func TestShardedDuplicateShard(t *testing.T) {
	checkLeaks(t)
	layout := shardLayout(16)
	const cfg = `{"run":1}`
	a := newTestShard(t, "shard-a", "per", layout, nil, cfg)
	a.fill(t, []float64{1, 1, 1, 1}, 0)
	twin, err := Dial(context.Background(), "passthrough:///shard-a-again", ClientOptions{Insecure: true,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(a.bs.dial)}})
	if err != nil {
		t.Fatal(err)
	}
	defer twin.Close()
	_, local := localTwin(t, "per", layout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = ShardedMethod(ctx, []*Client{a.c, twin}, local, 0, ShardOptions{})
	if err == nil || !strings.Contains(err.Error(), "shard-a and passthrough:///shard-a-again are one server") {
		t.Fatalf("one shard listed twice: %v", err)
	}
	_, infos, err := FleetConfig(ctx, []*Client{a.c}, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ShardedMethod(ctx, []*Client{a.c, twin}, local, 0, ShardOptions{Infos: []*replayv1.InfoReply{infos[0], infos[0]}})
	if err == nil || !strings.Contains(err.Error(), "are one server") {
		t.Fatalf("one shard listed twice, Info replies handed in: %v", err)
	}
	cancel()
}

// TestShardedRejoinAfterPartition cuts the learner off one of two shards
// whose limiters carry the fleet's ratio while an actor keeps inserting
// (into the other shard only, as a writer re-places batches, then into
// both again before the learner's link heals, so the cut shard's limiter
// holds the actor on the fleet's balance as it last heard it): once the
// learner's link heals, the learner takes the shard back, draws and the
// actor's inserts resume within a bound (the deploy fleet test's stall
// after a partition), and the learner's count of the fleet's inserts is
// the shards' own, not one shard counted twice.
func TestShardedRejoinAfterPartition(t *testing.T) {
	checkLeaks(t)
	lcfg := runtime.RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 8, ErrorBuffer: 32}
	layout := shardLayout(1 << 14)
	const cfg = `{"run":1}`
	limA, _ := runtime.NewRateLimiter(lcfg)
	limB, _ := runtime.NewRateLimiter(lcfg)
	a := newTestShard(t, "shard-a", "per", layout, limA, cfg)
	b := newTestShard(t, "shard-b", "per", layout, limB, cfg)
	// The learner's own links to the shards (the actor's inserts reach
	// them directly), so its link to a can be cut alone.
	clients, links := learnerLinks(t, 3*time.Second, a, b)
	var toA atomic.Bool
	toA.Store(true)
	var actorRows atomic.Int64
	actx, stopActor := context.WithCancel(context.Background())
	actorDone := make(chan struct{})
	go func() { // one actor host: its episodes alternate between the shards
		defer close(actorDone)
		prios := []float64{1, 1, 1, 1}
		for i := 0; actx.Err() == nil; i++ {
			sh, lim := b, limB
			if i%2 == 0 && toA.Load() {
				sh, lim = a, limA
			}
			// A batch held longer than the writer's ack deadline is
			// re-placed on the other shard (ShardedWriter).
			ictx, icancel := context.WithTimeout(actx, 100*time.Millisecond)
			err := lim.ReserveInsert(ictx, len(prios))
			icancel()
			if actx.Err() != nil {
				return
			}
			if err != nil && sh == a {
				sh, lim = b, limB
				err = lim.ReserveInsert(actx, len(prios))
			}
			if err != nil {
				continue
			}
			sh.fill(t, prios, 0)
			_ = lim.CommitInsert(len(prios))
			actorRows.Add(int64(len(prios)))
		}
	}()
	defer func() { stopActor(); <-actorDone }()

	_, local := localTwin(t, "per", layout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counters := &ShardCounters{}
	m, err := ShardedMethod(ctx, clients, local, 0, ShardOptions{Deadline: 200 * time.Millisecond, ProbeMin: 10 * time.Millisecond, ProbeMax: 40 * time.Millisecond, Counters: counters})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	dst, _ := a.buf.NewBatch(8)
	absTD := make([]float64, 8)
	draws := 0
	drawFor := func(d time.Duration, what string) {
		t.Helper()
		for end := time.Now().Add(d); time.Now().Before(end); {
			if err := m.Selector.Sample(rng, dst); err != nil {
				t.Fatalf("%s: draw %d: %v (%+v)", what, draws, err, counters.Snapshot())
			}
			draws++
			for i := range absTD {
				absTD[i] = rng.Float64()
			}
			if _, err := m.Selector.Update(dst.Refs, absTD); err != nil {
				t.Fatalf("%s: write-back %d: %v", what, draws, err)
			}
		}
	}
	drawFor(300*time.Millisecond, "before the cut")
	links[0].stop() // the learner loses shard a
	toA.Store(false)
	drawFor(500*time.Millisecond, "with shard a cut off")
	if st := counters.Snapshot(); st.Shards[0].Up || st.Shards[0].Downs != 1 {
		t.Fatalf("shard a after the cut: %+v", st.Shards[0])
	}
	toA.Store(true) // the actor reaches shard a before the learner does
	time.Sleep(300 * time.Millisecond)
	links[0].start()
	healed := time.Now()
	before, rowsBefore := draws, actorRows.Load()
	for draws < before+50 || actorRows.Load() < rowsBefore+200 {
		if time.Since(healed) > 3*time.Second {
			t.Fatalf("3 s after the learner's link healed: %d draws, %d actor rows since (stalled): %+v", draws-before, actorRows.Load()-rowsBefore, counters.Snapshot())
		}
		drawFor(10*time.Millisecond, "after the heal")
	}
	t.Logf("after the heal: 50 draws and 200 actor rows within %v", time.Since(healed))
	if st := counters.Snapshot(); !st.Shards[0].Up || st.Shards[0].Rejoins != 1 {
		t.Fatalf("shard a after the heal: %+v", st.Shards[0])
	}
	// The learner's fleet count is the shards' own (one message old).
	s := m.Selector.(*sharded)
	stopActor()
	<-actorDone
	s.tallyRound(true)
	ia, _ := limA.Counts()
	ib, _ := limB.Counts()
	if got := s.inserted(); got != ia+ib {
		t.Fatalf("the learner counts %d inserted, the shards %d + %d = %d", got, ia, ib, ia+ib)
	}
	cancel()
}

// learnerLinks gives a learner its own bufconn link to each shard (the
// shards' other clients keep theirs), so a test can cut the learner off one
// shard alone with links[i].stop() and heal it with links[i].start(). The
// clients close when the test ends.
func learnerLinks(t *testing.T, drawTimeout time.Duration, shards ...*testShard) ([]*Client, []*bufServer) {
	t.Helper()
	var clients []*Client
	var links []*bufServer
	for _, sh := range shards {
		srv := sh.srv
		link := newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, srv) })
		c, err := Dial(context.Background(), "passthrough:///learner-"+sh.name, ClientOptions{Insecure: true, DrawTimeout: drawTimeout,
			DialOptions: []grpc.DialOption{grpc.WithContextDialer(link.dial), testReconnect}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients, links = append(clients, c), append(links, link)
	}
	return clients, links
}

// unevenShards starts two PER shards of layout holding 8 items each, shard
// a's priorities summing to 1 and shard b's to 100, and returns them with
// the 16 priorities (a's, then b's) whose probabilities are p_i / 101.
func unevenShards(t *testing.T, layout buffer.Config) (a, b *testShard, prios []float64) {
	t.Helper()
	a = newTestShard(t, "shard-a", "per", layout, nil, `{"run":1}`)
	b = newTestShard(t, "shard-b", "per", layout, nil, `{"run":1}`)
	var pa, pb []float64
	for i := range 8 {
		pa = append(pa, float64(i+1)/36)
		pb = append(pb, 100*float64(8-i)/36)
	}
	a.fill(t, pa, 0)
	b.fill(t, pb, 1)
	return a, b, append(pa, pb...)
}
