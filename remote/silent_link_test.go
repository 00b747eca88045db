package remote

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
)

// silentLink is a network link a test cuts the way a partition does, not
// the way a crash does: the connections open across the cut go silent for
// good (what is written to them vanishes, their reads never return), as
// when a middlebox dropped their state or the kernel's retransmission
// timer has backed off far past the cut, and new connections fail until
// the link heals. A client notices a silent connection only by a deadline
// (keepalive takes ClientOptions.Keepalive twice); after the heal only a
// new connection reaches the server.
type silentLink struct {
	dial func(ctx context.Context, addr string) (net.Conn, error)

	mu    sync.Mutex
	cut   bool
	conns []*silentConn // every connection made, for cut
	dials int
}

var errUnreachable = errors.New("silent link: network unreachable")

// dialer is the link's ClientOptions.Dialer.
func (l *silentLink) dialer(ctx context.Context, addr string) (net.Conn, error) {
	l.mu.Lock()
	cut := l.cut
	l.mu.Unlock()
	if cut {
		return nil, errUnreachable
	}
	nc, err := l.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	c := &silentConn{Conn: nc, done: make(chan struct{})}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut { // cut while dialing
		c.silent.Store(true)
	}
	l.conns = append(l.conns, c)
	l.dials++
	return c, nil
}

// setCut cuts the link (every open connection silent) or heals it (new
// connections work; the silent ones stay silent).
func (l *silentLink) setCut(cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = cut
	if cut {
		for _, c := range l.conns {
			c.silent.Store(true)
		}
	}
}

// connections is how many connections the link has made.
func (l *silentLink) connections() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dials
}

// silentConn is one connection of a silentLink.
type silentConn struct {
	net.Conn
	silent atomic.Bool
	once   sync.Once
	done   chan struct{} // closed by Close
}

func (c *silentConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if !c.silent.Load() {
			return n, err
		}
		if err != nil { // the server's end closed: still silent until Close
			<-c.done
			return 0, net.ErrClosed
		}
		// Bytes on a dead path: dropped.
	}
}

func (c *silentConn) Write(b []byte) (int, error) {
	if c.silent.Load() {
		select {
		case <-c.done:
			return 0, net.ErrClosed
		default:
			return len(b), nil // into the void
		}
	}
	return c.Conn.Write(b)
}

func (c *silentConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// TestShardedRejoinAfterSilentPartition cuts the learner's link to one of
// two shards so that its connection goes silent rather than breaking: the
// shard goes down on the deadline and the learner keeps drawing from the
// other. Once the link heals, the shard must be back on a new connection
// within a bound below the 60 s keepalive takes to end a silent one (30 s
// to ping, 30 s for the answer): the learner ended the
// connection when the shard missed its deadline (Client.ResetConnection)
// and its probes dial a new one.
func TestShardedRejoinAfterSilentPartition(t *testing.T) {
	checkLeaks(t)
	layout := shardLayout(1 << 12)
	const cfg = `{"run":1}`
	a := newTestShard(t, "shard-a", "per", layout, nil, cfg)
	b := newTestShard(t, "shard-b", "per", layout, nil, cfg)
	prios := make([]float64, 256)
	for i := range prios {
		prios[i] = 1 + float64(i%7)
	}
	for _, sh := range []*testShard{a, b} {
		sh.fill(t, prios, 0)
	}
	var clients []*Client
	var links []*silentLink
	for _, sh := range []*testShard{a, b} {
		l := &silentLink{dial: sh.bs.dial}
		c, err := Dial(context.Background(), "passthrough:///learner-"+sh.name, ClientOptions{Insecure: true, Dialer: l.dialer,
			DialOptions: []grpc.DialOption{testReconnect}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients, links = append(clients, c), append(links, l)
	}
	_, local := localTwin(t, "per", layout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counters := &ShardCounters{}
	// Long enough that a live shard on 2 loaded cores under -race does not
	// miss it, short enough to notice the cut quickly.
	const deadline = 500 * time.Millisecond
	m, err := ShardedMethod(ctx, clients, local, 0, ShardOptions{Deadline: deadline, ProbeMin: 10 * time.Millisecond, ProbeMax: 40 * time.Millisecond,
		FleetLease: -1, Counters: counters})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(21, 22))
	dst, _ := a.buf.NewBatch(16)
	absTD := make([]float64, 16)
	draw := func(what string) {
		t.Helper()
		if err := m.Selector.Sample(rng, dst); err != nil {
			t.Fatalf("%s: %v (%+v)", what, err, counters.Snapshot())
		}
		for i := range absTD {
			absTD[i] = 0.5 + rng.Float64()
		}
		if _, err := m.Selector.Update(dst.Refs, absTD); err != nil {
			t.Fatalf("%s: write-back: %v", what, err)
		}
	}
	for range 20 {
		draw("before the cut")
	}
	links[0].setCut(true)
	cut := time.Now()
	for counters.Snapshot().Shards[0].Up {
		if time.Since(cut) > 10*time.Second {
			t.Fatalf("shard a still up 10 s after its link went silent (deadline %v): %+v", deadline, counters.Snapshot())
		}
		draw("at the cut")
	}
	for range 20 { // the other shard serves meanwhile
		draw("with shard a cut off")
	}
	if st := clients[0].Stats(); st.ConnectionResets == 0 {
		t.Fatalf("shard a missed its deadline but its connection was not ended: %+v", st)
	}
	dialsBefore := links[0].connections()
	links[0].setCut(false)
	healed := time.Now()
	// Not a timing: the bound only keeps the wait finite. A rejoin needs a
	// probe (at most 40 ms apart), a connection and an Info on it (16 ms
	// measured, BENCHMARKS.md); a learner that kept the silent connection
	// would wait for keepalive, 30 s to ping and 30 s more to give up.
	const bound = 20 * time.Second
	for !counters.Snapshot().Shards[0].Up {
		if time.Since(healed) > bound {
			t.Fatalf("shard a not back %v after its link healed (a silent connection kept?): %+v, client %+v, %d connections made",
				bound, counters.Snapshot().Shards[0], clients[0].Stats(), links[0].connections())
		}
		draw("after the heal")
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("shard a back %v after the heal (cut for %v)", time.Since(healed).Round(time.Millisecond), healed.Sub(cut).Round(time.Millisecond))
	if links[0].connections() <= dialsBefore {
		t.Fatalf("shard a rejoined without a new connection (%d made)", links[0].connections())
	}
	rowsBefore := counters.Snapshot().Shards[0].Rows
	for range 20 {
		draw("after the rejoin")
	}
	if st := counters.Snapshot().Shards[0]; st.Rows <= rowsBefore || st.Rejoins < 1 {
		t.Fatalf("shard a after its rejoin: %+v (rows before %d)", st, rowsBefore)
	}
	cancel()
}

// TestShardedWriterRejoinAfterSilentPartition is the writer's side: a
// shard whose connection goes silent is marked dead (its probe missed
// ProbeTimeout, which ends the connection), its batches move to the other
// shard, and once the link heals it rejoins on a new connection well
// within the silent connection's keepalive.
func TestShardedWriterRejoinAfterSilentPartition(t *testing.T) {
	checkLeaks(t)
	fl := newTestFleet(t, 2)
	link := &silentLink{dial: fl.servers[0].dial}
	c, err := Dial(context.Background(), "passthrough:///silent-shard-0", ClientOptions{Insecure: true, Dialer: link.dialer,
		DialOptions: []grpc.DialOption{testReconnect}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	fl.clients[0] = c
	const ack, probe = 300 * time.Millisecond, 500 * time.Millisecond
	s := newTestShardedWriter(t, fl, "silent-link", ShardedWriterOptions{WriterOptions: WriterOptions{Window: 2}, AckTimeout: ack, ProbeTimeout: probe})
	var next float32
	insertEpisodes(t, s, 1, 20, 2, &next)
	flushSharded(t, s)
	link.setCut(true)
	cut := time.Now()
	for e := uint64(100); s.Stats().Shards[0].Deaths == 0; e++ {
		if time.Since(cut) > 10*time.Second {
			t.Fatalf("shard 0 not marked dead 10 s after its link went silent (AckTimeout %v, ProbeTimeout %v): %+v", ack, probe, s.Stats())
		}
		insertEpisodes(t, s, e, 1, 2, &next)
		time.Sleep(2 * time.Millisecond)
	}
	st := s.Stats().Shards[0]
	if st.ConnectionResets == 0 {
		t.Fatalf("shard 0 went dead without its silent connection ended: %+v", st)
	}
	dialsBefore := link.connections()
	link.setCut(false)
	healed := time.Now()
	const bound = 20 * time.Second // as in TestShardedRejoinAfterSilentPartition: keepalive would take 60 s
	if !waitStats(s, bound, func(st ShardedWriterStats) bool { return st.Shards[0].Live }) {
		t.Fatalf("shard 0 not back %v after its link healed: %+v, %d connections made", bound, s.Stats().Shards[0], link.connections())
	}
	t.Logf("shard 0 back %v after the heal", time.Since(healed).Round(time.Millisecond))
	if link.connections() <= dialsBefore {
		t.Fatalf("shard 0 rejoined without a new connection")
	}
	acked := s.Stats().Shards[0].Acked
	for e := uint64(200_000); s.Stats().Shards[0].Acked == acked; e++ {
		if time.Since(healed) > 2*bound {
			t.Fatalf("shard 0 stores nothing after its rejoin: %+v", s.Stats().Shards[0])
		}
		insertEpisodes(t, s, e, 1, 2, &next)
		flushSharded(t, s)
	}
	flushSharded(t, s)
	if st := s.Stats(); st.Lost != 0 {
		t.Fatalf("batches lost: %+v", st)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// silentClient serves a test shard named name and dials it through a
// silentLink of its own; the client closes when the test ends.
func silentClient(t *testing.T, name string) (*Client, *silentLink) {
	t.Helper()
	sh := newTestShard(t, name, "per", shardLayout(64), nil, `{"run":1}`)
	link := &silentLink{dial: sh.bs.dial}
	c, err := Dial(context.Background(), "passthrough:///"+name, ClientOptions{Insecure: true, Dialer: link.dialer, DialOptions: []grpc.DialOption{testReconnect}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, link
}

// infoAfterReset calls Info until it succeeds, at most 100 times 10 ms
// apart, each within 1 s: a call racing the end of the old connection may still fail on
// it; then one succeeds on a new connection.
func infoAfterReset(t *testing.T, c *Client) {
	t.Helper()
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Info(ctx)
		cancel()
		if err == nil {
			return
		}
		if try == 100 {
			t.Fatalf("Info after ResetConnection, 100 tries 10 ms apart: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClientResetConnection: ResetConnection ends the connection in use
// (a stream on it breaks), the next call dials a new one, and it reports
// false with no connection to end (before the first call, after Close).
func TestClientResetConnection(t *testing.T) {
	checkLeaks(t)
	c, link := silentClient(t, "reset")
	if c.ResetConnection() {
		t.Fatal("ResetConnection before any call: reported a connection")
	}
	if _, err := c.Info(context.Background()); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	stream, err := c.replay.Sample(sctx)
	if err != nil {
		t.Fatal(err)
	}
	// One exchange first: a stream whose headers have not left yet would
	// be retried on the next connection, transparently.
	if err := stream.Send(&replayv1.SampleRequest{Kind: &replayv1.SampleRequest_Tally{Tally: &replayv1.Tally{Id: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("a tally on the stream: %v", err)
	}
	recvErr := make(chan error, 1)
	go func() { _, err := stream.Recv(); recvErr <- err }()
	if !c.ResetConnection() {
		t.Fatal("ResetConnection after a call: no connection to end")
	}
	select {
	case err := <-recvErr:
		if err == nil {
			t.Fatal("a stream on the ended connection received a reply")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stream on the ended connection did not break within 10 s")
	}
	if c.ResetConnection() {
		t.Fatal("a second ResetConnection ended a connection again")
	}
	infoAfterReset(t, c)
	if n := link.connections(); n != 2 {
		t.Fatalf("%d connections made, want 2 (one after the reset)", n)
	}
	if st := c.Stats(); st.ConnectionResets != 1 {
		t.Fatalf("ConnectionResets %d, want 1", st.ConnectionResets)
	}
	c.Close()
	if c.ResetConnection() {
		t.Fatal("ResetConnection after Close reported a connection")
	}
}

// TestClientResetIfSilent: the stages end a connection after a missed
// deadline only if the call went out on it while it was ready and no
// connection has been dialed since; a call made while connecting, or one
// older than the connection now, leaves the connection alone.
func TestClientResetIfSilent(t *testing.T) {
	checkLeaks(t)
	c, _ := silentClient(t, "guard")
	gen, ready := c.connGen() // before the first connection: not ready
	if ready {
		t.Fatal("connGen before any call: ready")
	}
	if _, err := c.Info(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.resetIfSilent(gen, ready) {
		t.Fatal("resetIfSilent ended a connection for a call made while none was ready")
	}
	gen, ready = c.connGen()
	if !ready || gen != 1 {
		t.Fatalf("connGen after a call: %d, ready %v; want 1, true", gen, ready)
	}
	// A call that went out while gRPC was still connecting (ready false
	// at its start), on the connection that is there now.
	if c.resetIfSilent(gen, false) {
		t.Fatal("resetIfSilent ended the connection for a call that went out while connecting")
	}
	// A new connection since the call (the old one ended, another dialed):
	// the call's miss says nothing of it.
	if !c.ResetConnection() {
		t.Fatal("ResetConnection: no connection")
	}
	infoAfterReset(t, c)
	if c.resetIfSilent(gen, true) {
		t.Fatal("resetIfSilent ended a connection dialed after the call")
	}
	if n := c.Stats().ConnectionResets; n != 1 {
		t.Fatalf("ConnectionResets %d, want 1", n)
	}
	gen, ready = c.connGen()
	if !c.resetIfSilent(gen, ready) {
		t.Fatal("resetIfSilent did not end the connection a call went out on while ready")
	}
}

// TestDialUnixSocket: Dial's own dialer reaches "unix:" targets (gRPC hands
// a custom dialer "unix://" + the path) and "unix-abstract:" ones.
func TestDialUnixSocket(t *testing.T) {
	checkLeaks(t)
	dir, err := os.MkdirTemp("", "apx")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sh := newTestShard(t, "unix", "per", shardLayout(64), nil, `{"run":1}`)
	var nonce [6]byte
	_, _ = crand.Read(nonce[:])
	abstract := "apex-test-" + hex.EncodeToString(nonce[:])
	for _, tc := range []struct{ listen, target string }{
		{filepath.Join(dir, "replay.sock"), "unix://" + filepath.Join(dir, "replay.sock")},
		{filepath.Join(dir, "replay2.sock"), "unix:" + filepath.Join(dir, "replay2.sock")},
		{"@" + abstract, "unix-abstract:" + abstract},
	} {
		ln, err := net.Listen("unix", tc.listen)
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(wireServerOptions()...)
		replayv1.RegisterReplayServer(srv, sh.srv)
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(ln) }()
		t.Cleanup(func() { srv.Stop(); <-done })
		c, err := Dial(context.Background(), tc.target, ClientOptions{Insecure: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = c.Info(ctx)
		cancel()
		if err != nil {
			t.Errorf("Info over %s: %v", tc.target, err)
		}
	}
}
