package remote

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/apexrl/apex/runtime"
)

// TestShardedStaleFleetCounts is the deploy fleet test's stall after a
// partition, in one process: two shards whose limiters carry the fleet's
// ratio, an actor host's ShardedWriter inserting episodes into both, and
// a learner whose own link to shard a is cut while the actor still
// reaches a. Shard a's fleet counts then stop moving: on them the
// learner's samples from b are never seen, so a's limiter would hold the
// actor's batches for good, the writer (a shard that answers its probes
// is only applying backpressure) would wait on a's full window, b would
// get no inserts and the learner would wait on the fleet's ratio — no
// progress until the learner's link healed. With the lease on the fleet's
// counts a admits the held inserts once the lease passes (counted), so
// inserts and draws go on with the link cut; no shard is marked dead (no
// batch moved, episodes whole); the learner never draws past the fleet's
// balance on the shards' true counts; and once the link heals the learner
// takes a back and draws on within a bound (the actor once the learner
// has sampled down the surplus a admitted on stale counts).
func TestShardedStaleFleetCounts(t *testing.T) {
	checkLeaks(t)
	lcfg := runtime.RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 8, ErrorBuffer: 32}
	// Room for what shard a admits on stale counts while the learner is
	// cut off (its allowance is its capacity: past it a's limiter holds
	// again, and so the fleet).
	layout := shardLayout(1 << 16)
	layout.Episode = true
	const cfg = `{"run":1}`
	limA, _ := runtime.NewRateLimiter(lcfg)
	limB, _ := runtime.NewRateLimiter(lcfg)
	a := newTestShard(t, "shard-a", "per", layout, limA, cfg)
	b := newTestShard(t, "shard-b", "per", layout, limB, cfg)
	// The learner's own links to the shards (the actor's writer dials
	// them through a.c and b.c), so its link to a can be cut alone.
	clients, links := learnerLinks(t, 2*time.Second, a, b)

	// The actor host: a new episode every batch of 4 rows, placed by the
	// writer over both shards, a batch a millisecond at most.
	w, err := NewShardedWriter([]*Client{a.c, b.c}, "actor-0", ShardedWriterOptions{
		WriterOptions: WriterOptions{Layout: layout, Window: 4, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond},
		// A held shard is probed every 100 ms; a probe has 5 s to answer
		// (one slow Info under -race on a loaded machine must not mark a
		// shard dead: the test asserts none is).
		AckTimeout: 100 * time.Millisecond, ProbeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var stopOnce sync.Once
	actorDone := make(chan struct{})
	stopActor := func() {
		stopOnce.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = w.Close(ctx) // ends an Insert held by a shard's limiter
			<-actorDone
		})
	}
	go func() {
		defer close(actorDone)
		for ep := uint64(1); ; ep++ {
			if err := w.Insert(episodeRows(4, float32(4*ep), ep)); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	defer stopActor()
	acked := func() uint64 { return w.Stats().Sum().AckedItems }

	_, local := localTwin(t, "per", layout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counters := &ShardCounters{}
	const lease = 300 * time.Millisecond
	m, err := ShardedMethod(ctx, clients, local, 0, ShardOptions{Deadline: 500 * time.Millisecond, ProbeMin: 10 * time.Millisecond,
		ProbeMax: 40 * time.Millisecond, FleetLease: lease, Counters: counters})
	if err != nil {
		t.Fatal(err)
	}
	const rows = 8
	minDiff := lcfg.SamplesPerInsert*float64(lcfg.MinSizeToSample) - lcfg.ErrorBuffer
	rng := rand.New(rand.NewPCG(11, 12))
	dst, _ := a.buf.NewBatch(rows)
	absTD := make([]float64, rows)
	var sampled int64
	draws := 0
	drawFor := func(d time.Duration, what string) {
		t.Helper()
		for end := time.Now().Add(d); time.Now().Before(end); {
			if err := m.Selector.Sample(rng, dst); err != nil {
				ia, _ := limA.Counts()
				ib, _ := limB.Counts()
				t.Fatalf("%s: draw %d: %v (stalled: the actor's writer %+v; shard a inserted %d, b %d; learner %+v)", what, draws, err, w.Stats(), ia, ib, counters.Snapshot())
			}
			// The learner never over-samples: each draw was admitted on
			// the fleet's balance over the shards' true counts.
			ia, _ := limA.Counts()
			ib, _ := limB.Counts()
			if diff := float64(ia+ib)*lcfg.SamplesPerInsert - float64(sampled) - 1; diff < minDiff {
				t.Fatalf("%s: draw %d admitted at balance %v < %v (inserted %d, sampled %d)", what, draws, diff, minDiff, ia+ib, sampled)
			}
			sampled += rows
			draws++
			for i := range absTD {
				absTD[i] = rng.Float64()
			}
			if _, err := m.Selector.Update(dst.Refs, absTD); err != nil {
				t.Fatalf("%s: write-back %d: %v", what, draws, err)
			}
		}
	}
	// progress draws for d and returns the draws and acknowledged rows
	// made over its last second.
	progress := func(d time.Duration, what string) (int, uint64) {
		t.Helper()
		drawFor(d-time.Second, what)
		d0, a0 := draws, acked()
		drawFor(time.Second, what)
		return draws - d0, acked() - a0
	}
	drawFor(300*time.Millisecond, "before the cut")
	if a.srv.Stats().InsertedItems == 0 || b.srv.Stats().InsertedItems == 0 {
		t.Fatalf("before the cut the actor's episodes did not reach both shards: a %+v, b %+v", a.srv.Stats(), b.srv.Stats())
	}

	links[0].stop() // the learner loses shard a; the actor does not
	dn, an := progress(3*time.Second, "with the learner cut off shard a")
	st := counters.Snapshot()
	t.Logf("with the learner cut off shard a: %d draws and %d rows acknowledged over the last second; shard a admitted %d batches (%d items) on stale fleet counts",
		dn, an, a.srv.Stats().StaleFleetInserts, a.srv.Stats().StaleFleetItems)
	if st.Shards[0].Up || st.Shards[0].Downs != 1 {
		t.Fatalf("shard a with the learner's link cut: %+v", st.Shards[0])
	}
	if dn < 20 || an < 80 {
		t.Fatalf("with the learner cut off shard a: %d draws and %d rows acknowledged over a second (stalled)", dn, an)
	}
	if sa := a.srv.Stats(); sa.StaleFleetInserts == 0 || sa.StaleFleetItems > int64(layout.Capacity)+4 {
		t.Fatalf("shard a: %d batches (%d items) admitted on stale fleet counts, want some, at most its capacity %d and a batch", sa.StaleFleetInserts, sa.StaleFleetItems, layout.Capacity)
	}

	links[0].start()
	healed := time.Now()
	// The learner takes a back and draws on at once (a's inserts on stale
	// counts are a surplus it may sample); the actor goes on once the
	// learner has sampled that surplus down (a and b hold it meanwhile,
	// on fresh counts again).
	before, ackedBefore := draws, acked()
	for draws < before+50 || !counters.Snapshot().Shards[0].Up {
		if time.Since(healed) > 3*time.Second {
			t.Fatalf("3 s after the learner's link healed: %d draws since, shard a %+v", draws-before, counters.Snapshot().Shards[0])
		}
		drawFor(10*time.Millisecond, "after the heal")
	}
	learnerBack := time.Since(healed)
	for acked() < ackedBefore+200 {
		if time.Since(healed) > 15*time.Second {
			t.Fatalf("15 s after the learner's link healed: %d rows acknowledged since (%d draws)", acked()-ackedBefore, draws-before)
		}
		drawFor(10*time.Millisecond, "after the heal")
	}
	t.Logf("after the heal: shard a back and 50 draws within %v, 200 rows acknowledged within %v", learnerBack.Round(time.Millisecond), time.Since(healed).Round(time.Millisecond))
	if st := counters.Snapshot(); st.Shards[0].Rejoins != 1 {
		t.Fatalf("shard a after the heal: %+v", st.Shards[0])
	}
	stopActor()
	ws := w.Stats()
	for _, sh := range ws.Shards {
		if sh.Deaths != 0 || sh.Moved != 0 {
			t.Fatalf("the writer marked shard %s dead or moved its batches: %+v (a held shard is backpressure; episodes stay whole)", sh.Shard, sh)
		}
	}
	cancel()
}

// TestShardedFleetKeepAlive: a learner alive but not drawing (evaluating,
// checkpointing) keeps its lease on the shards' fleet counts with
// keep-alive tallies, so the shards hold their actors on the ratio
// (nothing admitted on stale counts); once the learner is gone the lease
// passes and the shards admit on their stale counts. With a negative
// FleetLease there is no lease: no keep-alive, and the counts never go
// stale, the learner gone or not.
func TestShardedFleetKeepAlive(t *testing.T) {
	checkLeaks(t)
	lcfg := runtime.RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 8, ErrorBuffer: 8}
	layout := shardLayout(1024)
	const idle = 2500 * time.Millisecond
	for _, tc := range []struct {
		name  string
		lease time.Duration
	}{{"lease", time.Second}, {"no lease", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var lims []*runtime.RateLimiter
			var shards []*testShard
			for _, name := range []string{"shard-a", "shard-b"} {
				lim, _ := runtime.NewRateLimiter(lcfg)
				sh := newTestShard(t, name, "per", layout, lim, `{"run":1}`)
				// Alone (the learner has not spoken yet) each limiter
				// admits 16 items: MinSizeToSample plus ErrorBuffer.
				sh.fillAdmitted(t, lim)
				lims, shards = append(lims, lim), append(shards, sh)
			}
			_, local := localTwin(t, "per", layout)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			counters := &ShardCounters{}
			m, err := ShardedMethod(ctx, clientsOf(shards...), local, 0, ShardOptions{FleetLease: tc.lease, Counters: counters})
			if err != nil {
				t.Fatal(err)
			}
			dst, _ := shards[0].buf.NewBatch(8)
			if err := m.Selector.Sample(rand.New(rand.NewPCG(1, 2)), dst); err != nil {
				t.Fatal(err)
			}
			// The fleet's counts (32 inserted, 8 sampled) hold both
			// shards' inserts; the learner idles well past its lease.
			held := func(what string) {
				t.Helper()
				for i, lim := range lims {
					if lim.CanInsert() || lim.Stats().StaleInserts != 0 {
						t.Fatalf("%s: shard %d admits inserts (%+v; learner %+v)", what, i, lim.Stats(), counters.Snapshot())
					}
				}
			}
			held("after the draw")
			time.Sleep(idle)
			held("the learner idle")
			keep := counters.Snapshot().KeepAlives
			if tc.lease > 0 && keep < 2 || tc.lease < 0 && keep != 0 {
				t.Fatalf("%d keep-alive rounds over %v idle with FleetLease %v", keep, idle, tc.lease)
			}
			cancel() // the learner gone
			if tc.lease < 0 {
				time.Sleep(idle)
				held("the learner gone, no lease")
				return
			}
			gone := time.Now()
			for !lims[0].CanInsert() || !lims[1].CanInsert() {
				if time.Since(gone) > 15*time.Second {
					t.Fatalf("15 s after the learner went: the shards still hold on its counts (%+v, %+v)", lims[0].Stats(), lims[1].Stats())
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("the learner gone: both shards' counts stale within %v", time.Since(gone).Round(time.Millisecond))
		})
	}
}
