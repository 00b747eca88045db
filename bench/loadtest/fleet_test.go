package loadtest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/sampler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// testShard is an in-process replay server (PER over a CartPole table) on
// a loopback address, restartable on the same address as a new
// incarnation (empty: no checkpoint).
type testShard struct {
	t    *testing.T
	addr string
	srv  *remote.Server
	gs   *remote.GRPCServer
	wg   sync.WaitGroup
}

func startTestShard(t *testing.T, addr string) *testShard {
	t.Helper()
	layout := Layout
	layout.Capacity = 1 << 14
	buf, err := buffer.New(layout)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sampler.NewMethod("per", buf, sampler.MethodConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// A fleet's learner checks that every shard serves one run configuration.
	srv, err := remote.NewServer(remote.Table{Buffer: buf, Method: m, Config: []byte(`{"sampler":"per"}`)}, remote.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := remote.NewGRPCServer(srv, remote.GRPCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &testShard{t: t, addr: lis.Addr().String(), srv: srv, gs: gs}
	s.wg.Go(func() {
		if err := gs.Serve(lis); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

// stop ends the server at once (its streams break, as a killed process's).
func (s *testShard) stop() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.gs.Shutdown(ctx)
	s.wg.Wait()
}

// TestFleetParts: an actor host and a learner over two in-process shards.
// Both shards take inserts and draws; while shard 1 is down the learner
// goes on drawing from shard 0 and the actors' batches go there too; the
// restarted shard (a new, empty incarnation on the same address) takes
// inserts and draws again, and refuses the probe's write-back of its
// earlier incarnation (no stale write applied).
func TestFleetParts(t *testing.T) {
	shards := []*testShard{startTestShard(t, "127.0.0.1:0"), startTestShard(t, "127.0.0.1:0")}
	defer func() {
		for _, s := range shards {
			s.stop()
		}
	}()
	ctx := context.Background()
	list := shards[0].addr + "," + shards[1].addr
	addrs, err := remote.ResolveShards(ctx, list, nil)
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]int{shards[0].addr: 0, shards[1].addr: 1}
	var clients []*remote.Client
	var conns []*grpc.ClientConn
	defer func() {
		for _, c := range clients {
			c.Close()
		}
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 2 { // the actors' clients, then the learner's
		for _, a := range addrs {
			c, err := remote.DialShard(ctx, a, remote.ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
		}
	}
	for _, a := range addrs {
		c, err := grpc.NewClient(a.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	actors, err := StartActors(clients[:2], ActorsConfig{Actors: 8, Total: 8, InsertBatch: 32, Window: 4, InsertRate: 8000, Seed: 3, Nonce: 9})
	if err != nil {
		t.Fatal(err)
	}
	actorsStopped := false
	defer func() {
		if !actorsStopped {
			actors.Stop(ctx)
		}
	}()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after 20 s: %s", what)
			}
		}
	}
	waitFor("both shards hold a batch", func() bool {
		return shards[0].srv.Stats().Size >= 64 && shards[1].srv.Stats().Size >= 64
	})
	local := Layout
	local.Capacity = 64
	lbuf, err := buffer.New(local)
	if err != nil {
		t.Fatal(err)
	}
	lm, err := sampler.NewMethod("per", lbuf, sampler.MethodConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := lbuf.NewBatch(64)
	if err != nil {
		t.Fatal(err)
	}
	mctx, stopMethod := context.WithCancel(ctx)
	defer stopMethod()
	var counters remote.ShardCounters
	m, err := remote.ShardedMethod(mctx, clients[2:], lm, 0, remote.ShardOptions{Counters: &counters, ProbeMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := StartLearner(m, batch, &counters, conns, LearnerConfig{SampleRate: 6400, ProbeEvery: 50 * time.Millisecond, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	learnerStopped := false
	defer func() {
		if !learnerStopped {
			l.Stop(time.Second)
		}
	}()
	rows := func(shard int) uint64 {
		smp, _ := l.Stats()
		for j, a := range addrs {
			if idx[a.Addr] == shard {
				return smp[j].Rows
			}
		}
		return 0
	}
	waitFor("both shards drawn from", func() bool { return rows(0) > 0 && rows(1) > 0 })
	l.Phase("before")
	time.Sleep(300 * time.Millisecond)

	shards[1].stop()
	l.Phase("during")
	r0 := rows(0)
	waitFor("the learner goes on with shard 0", func() bool { return rows(0) >= r0+640 })
	shards[1] = startTestShard(t, shards[1].addr)
	l.Phase("after")
	r1 := rows(1)
	waitFor("the restarted shard drawn from again", func() bool { return rows(1) > r1 })
	waitFor("the probe's stale write-back answered", func() bool {
		smp, _ := l.Stats()
		for j, a := range addrs {
			if idx[a.Addr] == 1 && smp[j].Probes > 0 && smp[j].WrongIncarnation > 0 {
				return true
			}
		}
		return false
	})
	if err := actors.Stop(ctx); err != nil {
		t.Errorf("actors: %v", err)
	}
	actorsStopped = true
	l.Stop(time.Second)
	learnerStopped = true
	smp, tot := l.Stats()
	ins := actors.Stats()
	t.Logf("learner %+v\nshards %+v\ninserts %+v", tot, smp, ins)
	for j := range smp {
		if smp[j].StaleApplied != 0 {
			t.Errorf("shard %s applied %d stale write-back values", addrs[j].Addr, smp[j].StaleApplied)
		}
		if ins[j].AckedItems == 0 {
			t.Errorf("shard %s acknowledged no insert", addrs[j].Addr)
		}
	}
	if got := shards[1].srv.Stats().InsertedItems; got == 0 {
		t.Error("the restarted shard stored no insert")
	}
	// The surviving shard stored, under the host's writer id, exactly what
	// it acknowledged: no acknowledged insert lost, none stored twice.
	for j, a := range addrs {
		if idx[a.Addr] != 0 {
			continue
		}
		ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
		info, err := shards[0].srv.Info(ictx, &replayv1.InfoRequest{Writers: true})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var rec *replayv1.WriterRecord
		for _, r := range info.GetWriters().GetRecords() {
			if r.Id == ins[j].Writer {
				rec = r
			}
		}
		if ins[j].Writer == "" || rec == nil || rec.Items != ins[j].AckedItems || rec.Batches != ins[j].AckedBatches {
			t.Errorf("the surviving shard's record of writer %q: %v; want %d items in %d batches, as acknowledged",
				ins[j].Writer, rec, ins[j].AckedItems, ins[j].AckedBatches)
		}
	}
	rtt := l.RTTs()
	for _, ph := range []string{"before", "during", "after", "measured"} {
		if rtt[ph].Count == 0 || rtt[ph].P50US <= 0 {
			t.Errorf("round trips of phase %s: %+v", ph, rtt[ph])
		}
	}
	if tot.Draws == 0 || tot.Applied == 0 {
		t.Errorf("learner totals %+v", tot)
	}
}
