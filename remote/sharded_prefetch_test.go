package remote

import (
	"context"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// invPriority is the |δ| whose priority under f is p (bisection): a
// write-back of it leaves an item's priority as it was.
func invPriority(f func(float64) float64, p float64) float64 {
	lo, hi := 0.0, 1.0
	for f(hi) < p {
		hi *= 2
	}
	for range 200 {
		mid := (lo + hi) / 2
		if f(mid) < p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// TestShardedPrefetchChiSquare is TestShardedChiSquare's exact and
// one-shard draws with ShardOptions.Prefetch: every batch after the first
// is drawn right after the previous one's write-back (which leaves each
// item's priority as it was, so the masses stay 1:100), and every item's
// frequency and reported probability is still p_i/Σp.
func TestShardedPrefetchChiSquare(t *testing.T) {
	for _, mode := range []ShardSampling{ShardExact, ShardOne} {
		t.Run(mode.String(), func(t *testing.T) {
			checkLeaks(t)
			seed := uint64(20261127) + uint64(mode) // fixed: see TestShardedChiSquare
			layout := shardLayout(16)
			a, b, prios := unevenShards(t, layout) // masses 1 and 100
			const total = 101.0
			pa, pb := prios[:8], prios[8:]
			probs := scaled(prios, 1/total)
			_, local := localTwin(t, "per", layout)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			counters := &ShardCounters{}
			m, err := ShardedMethod(ctx, clientsOf(a, b), local, 0, ShardOptions{Sampling: mode, Counters: counters, Prefetch: true})
			if err != nil {
				t.Fatal(err)
			}
			absTD := make([]float64, 16)
			for i, p := range prios {
				absTD[i] = invPriority(m.Selector.Priority, p)
			}
			rng := rand.New(rand.NewPCG(seed, 7))
			scratch, _ := buffer.New(layout)
			const rows, draws = 32, 1200
			dst, _ := scratch.NewBatch(rows)
			counts := make([]int, 16)
			batches := make([]int, 2)
			wb := make([]float64, rows)
			for range draws {
				if err := m.Selector.Sample(rng, dst); err != nil {
					t.Fatal(err)
				}
				batches[int(dst.Obs[1])]++
				for j := range rows {
					cell := int(dst.Obs[2*j]) + 8*int(dst.Obs[2*j+1])
					counts[cell]++
					wb[j] = absTD[cell]
					if want := probs[cell]; math.Abs(dst.Prob[j]-want) > 1e-6*want {
						t.Fatalf("row %d (item %d): probability %v, want %v", j, cell, dst.Prob[j], want)
					}
				}
				if _, err := m.Selector.Update(dst.Refs, wb); err != nil {
					t.Fatal(err)
				}
			}
			if mode == ShardExact {
				samplertest.ChiSquare(t, seed, counts, probs)
			} else {
				samplertest.ChiSquare(t, seed, batches, []float64{1 / total, 100 / total})
				samplertest.ChiSquare(t, seed, counts[:8], scaled(pa, 1))
				samplertest.ChiSquare(t, seed, counts[8:], scaled(pb, 1.0/100))
			}
			if st := counters.Snapshot(); st.Draws != draws || st.Prefetched != draws-1 || st.PrefetchDiscarded != 0 {
				t.Errorf("counters %+v: want %d draws, %d prefetched", st, draws, draws-1)
			}
			cancel()
		})
	}
}

// TestShardedPrefetchSameDraws runs two identical fleets, one learner
// with Prefetch and one without, the second handed a generator seeded as
// the first seeds its own: with the same write-backs (priorities that
// change every step) and no inserts, every batch's rows and probabilities
// are the same, bit for bit.
func TestShardedPrefetchSameDraws(t *testing.T) {
	checkLeaks(t)
	layout := shardLayout(16)
	prios := []float64{0.5, 1, 2, 3, 4, 0.25, 7, 1}
	var ms [2]sampler.Method
	var counters [2]ShardCounters
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for k := range 2 {
		a := newTestShard(t, "shard-a", "per", layout, nil, `{"run":1}`)
		b := newTestShard(t, "shard-b", "per", layout, nil, `{"run":1}`)
		a.fill(t, prios, 0)
		b.fill(t, scaled(prios, 3), 1)
		_, local := localTwin(t, "per", layout)
		var err error
		ms[k], err = ShardedMethod(ctx, clientsOf(a, b), local, 0, ShardOptions{Prefetch: k == 1, Counters: &counters[k]})
		if err != nil {
			t.Fatal(err)
		}
	}
	const seed = 99
	seeder := rand.New(rand.NewPCG(seed, 1))
	rngs := [2]*rand.Rand{rand.New(rand.NewPCG(seeder.Uint64(), seeder.Uint64())), rand.New(rand.NewPCG(seed, 1))}
	scratch, _ := buffer.New(layout)
	const rows, steps = 8, 60
	var dst [2]*buffer.Batch
	for k := range 2 {
		dst[k], _ = scratch.NewBatch(rows)
	}
	absTD := make([]float64, rows)
	for step := range steps {
		for k := range 2 {
			if err := ms[k].Selector.Sample(rngs[k], dst[k]); err != nil {
				t.Fatal(err)
			}
		}
		for j := range rows {
			if dst[0].Obs[2*j] != dst[1].Obs[2*j] || dst[0].Obs[2*j+1] != dst[1].Obs[2*j+1] || dst[0].Prob[j] != dst[1].Prob[j] {
				t.Fatalf("step %d row %d: item (%v, %v) p %v without prefetch, (%v, %v) p %v with", step, j,
					dst[0].Obs[2*j+1], dst[0].Obs[2*j], dst[0].Prob[j], dst[1].Obs[2*j+1], dst[1].Obs[2*j], dst[1].Prob[j])
			}
			absTD[j] = 0.1 + float64((step*7+j)%11)
		}
		if dst[0].Total != dst[1].Total || dst[0].MinProb != dst[1].MinProb || dst[0].Size != dst[1].Size {
			t.Fatalf("step %d: total/min/size %v %v %d without prefetch, %v %v %d with", step, dst[0].Total, dst[0].MinProb, dst[0].Size, dst[1].Total, dst[1].MinProb, dst[1].Size)
		}
		for k := range 2 {
			if _, err := ms[k].Selector.Update(dst[k].Refs, absTD); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := counters[1].Snapshot(); st.Prefetched != steps-1 {
		t.Errorf("prefetched %d of %d draws", st.Prefetched, steps)
	}
	if st := counters[0].Snapshot(); st.Prefetched != 0 {
		t.Errorf("without prefetch: %d prefetched", st.Prefetched)
	}
	cancel()
}

// hangingReplay is a replay server whose Sample stream stops answering
// draws while hang is set (the reply held until the stream ends): a shard
// that fails while a prefetched draw is out.
type hangingReplay struct {
	*Server
	hang atomic.Bool
}

type hangingStream struct {
	grpc.BidiStreamingServer[replayv1.SampleRequest, replayv1.SampleReply]
	h *hangingReplay
}

func (s hangingStream) Send(r *replayv1.SampleReply) error {
	if r.GetBatch() != nil && s.h.hang.Load() {
		<-s.Context().Done()
		return s.Context().Err()
	}
	return s.BidiStreamingServer.Send(r)
}

func (h *hangingReplay) Sample(stream grpc.BidiStreamingServer[replayv1.SampleRequest, replayv1.SampleReply]) error {
	return h.Server.Sample(hangingStream{stream, h})
}

// TestShardedPrefetchShardFails takes a shard down while a prefetched draw
// is out (it stops answering draws): the next Sample finds it past its
// deadline, takes it down and plans the batch again over the other shard
// (a replan, as when a shard fails during a draw). A Sample of another
// batch size discards the prefetched draw and draws anew.
func TestShardedPrefetchShardFails(t *testing.T) {
	checkLeaks(t)
	layout := shardLayout(16)
	ones := []float64{1, 1, 1, 1, 1, 1, 1, 1}
	a := newTestShard(t, "shard-a", "per", layout, nil, `{"run":1}`)
	b := newTestShard(t, "shard-b", "per", layout, nil, `{"run":1}`)
	hb := &hangingReplay{Server: b.srv}
	hbs := newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, hb) })
	_ = b.c.Close() // its own client is replaced by one of the hanging server
	var err error
	b.c, err = Dial(context.Background(), "passthrough:///shard-b-hanging", ClientOptions{Insecure: true,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(hbs.dial), testReconnect}})
	if err != nil {
		t.Fatal(err)
	}
	a.fill(t, ones, 0)
	b.fill(t, ones, 1)
	_, local := localTwin(t, "per", layout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counters := &ShardCounters{}
	m, err := ShardedMethod(ctx, clientsOf(a, b), local, 0, ShardOptions{Prefetch: true, Deadline: 200 * time.Millisecond,
		ProbeMin: 10 * time.Millisecond, ProbeMax: 40 * time.Millisecond, Counters: counters})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	dst, _ := a.buf.NewBatch(8)
	absTD := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	fromB := func(d *buffer.Batch) (n int) {
		for j := range d.Len() {
			if d.Obs[2*j+1] == 1 {
				n++
			}
		}
		return n
	}
	if err := m.Selector.Sample(rng, dst); err != nil {
		t.Fatal(err)
	}
	if n := fromB(dst); n == 0 || n == 8 {
		t.Fatalf("%d of 8 rows from shard b: want both shards", n)
	}
	hb.hang.Store(true)
	if _, err := m.Selector.Update(dst.Refs, absTD); err != nil { // the next draw goes out
		t.Fatal(err)
	}
	if err := m.Selector.Sample(rng, dst); err != nil {
		t.Fatalf("a prefetched draw with shard b hanging: %v", err)
	}
	st := counters.Snapshot()
	if n := fromB(dst); n != 0 || st.Shards[1].Up || st.Replans == 0 || st.Prefetched != 0 {
		t.Fatalf("after shard b failed with the prefetch out: %d rows from b, %+v", n, st)
	}
	// The batch drawn again over shard a is written back, and the next
	// draw is prefetched from a alone.
	if res, err := m.Selector.Update(dst.Refs, absTD); err != nil || res.Applied != 8 {
		t.Fatalf("write-back: %+v, %v", res, err)
	}
	if err := m.Selector.Sample(rng, dst); err != nil || fromB(dst) != 0 {
		t.Fatalf("the prefetched draw over shard a: %v, %d rows from b", err, fromB(dst))
	}
	if st := counters.Snapshot(); st.Prefetched != 1 {
		t.Fatalf("prefetched %d, want 1: %+v", st.Prefetched, st)
	}
	// Another batch size: the prefetched draw of 8 is discarded, 4 drawn.
	if _, err := m.Selector.Update(dst.Refs, absTD); err != nil {
		t.Fatal(err)
	}
	small, _ := a.buf.NewBatch(4)
	if err := m.Selector.Sample(rng, small); err != nil {
		t.Fatal(err)
	}
	st = counters.Snapshot()
	if st.PrefetchDiscarded != 1 || st.Prefetched != 1 || st.Rows != 8+8+8+4 {
		t.Fatalf("after a batch-size change: %+v", st)
	}
	if res, err := m.Selector.Update(small.Refs, absTD[:4]); err != nil || res.Applied != 4 {
		t.Fatalf("write-back of the 4-row batch: %+v, %v", res, err)
	}
	// Shard b answers again and rejoins; a prefetched draw is left out
	// when ctx ends (no goroutine left: checkLeaks).
	hb.hang.Store(false)
	start := time.Now()
	for fromB(small) == 0 {
		if time.Since(start) > 3*time.Second {
			t.Fatalf("shard b did not rejoin: %+v", counters.Snapshot())
		}
		time.Sleep(5 * time.Millisecond)
		if err := m.Selector.Sample(rng, small); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Selector.Update(small.Refs, absTD[:4]); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
}

// TestShardedPrefetchKeepAlive: a learner that idles after a write-back
// with its next draw prefetched keeps renewing its lease (the keep-alive
// receives the prefetched draw off the streams first, then tallies), and
// its next Sample is served from that draw. A learner whose next draw the
// fleet's ratio would hold prefetches nothing (its write-back does not
// wait).
func TestShardedPrefetchKeepAlive(t *testing.T) {
	checkLeaks(t)
	lcfg := runtime.RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 8, ErrorBuffer: 8}
	layout := shardLayout(1024)
	var shards []*testShard
	for _, name := range []string{"shard-a", "shard-b"} {
		lim, _ := runtime.NewRateLimiter(lcfg)
		sh := newTestShard(t, name, "per", layout, lim, `{"run":1}`)
		sh.fillAdmitted(t, lim)
		shards = append(shards, sh)
	}
	_, local := localTwin(t, "per", layout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counters := &ShardCounters{}
	m, err := ShardedMethod(ctx, clientsOf(shards...), local, 0, ShardOptions{FleetLease: 200 * time.Millisecond, Counters: counters, Prefetch: true})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	dst, _ := shards[0].buf.NewBatch(4)
	absTD := []float64{1, 1, 1, 1}
	if err := m.Selector.Sample(rng, dst); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Selector.Update(dst.Refs, absTD); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // the learner idle, its next draw out
	if st := counters.Snapshot(); st.KeepAlives < 2 {
		t.Fatalf("%d keep-alive rounds in 400 ms with a prefetched draw out: %+v", st.KeepAlives, st)
	}
	if err := m.Selector.Sample(rng, dst); err != nil {
		t.Fatal(err)
	}
	if st := counters.Snapshot(); st.Prefetched != 1 || st.Draws != 2 {
		t.Fatalf("after the idle: %+v, want the second draw prefetched", st)
	}
	// The fleet's 32 inserts admit 32 samples and the bound's allowance:
	// draw and write back until the ratio would hold the next draw; no
	// write-back waits for it, and no prefetch goes out past it.
	for counters.Snapshot().Rows < 64 {
		start := time.Now()
		if _, err := m.Selector.Update(dst.Refs, absTD); err != nil {
			t.Fatal(err)
		}
		// A write-back never waits for the ratio (it may wait for a
		// keep-alive round's tally: seconds only on a stalled machine).
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a write-back took %v", d)
		}
		// A draw not answered within 2 s is held by the ratio (an
		// answered one takes milliseconds, even under -race on a loaded
		// machine; a held one waits until ctx ends).
		sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
		done := make(chan error, 1)
		go func() { done <- m.Selector.Sample(rng, dst) }()
		select {
		case err := <-done:
			scancel()
			if err != nil {
				t.Fatal(err)
			}
			continue
		case <-sctx.Done():
			scancel()
		}
		// Held by the ratio: nothing was prefetched past it.
		st := counters.Snapshot()
		if st.Prefetched+1 != st.Draws || st.GateWaits != 0 {
			t.Fatalf("held after %d draws: %+v, want every draw but the first prefetched", st.Draws, st)
		}
		t.Logf("held by the ratio after %d draws (%d rows)", st.Draws, st.Rows)
		cancel() // ends the held draw
		if err := <-done; err == nil {
			t.Fatal("a draw held by the ratio returned no error when ctx ended")
		}
		return
	}
	t.Fatalf("the ratio never held the learner: %+v", counters.Snapshot())
}
