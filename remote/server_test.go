package remote

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// srvHarness is a Server behind a GRPCServer on an in-memory listener,
// with a client connection.
type srvHarness struct {
	t    testing.TB
	srv  *Server
	gs   *GRPCServer
	lis  *bufconn.Listener
	conn *grpc.ClientConn
	cli  replayv1.ReplayClient
	done chan error
}

// serve starts a server for tab and registers its shutdown as a cleanup.
func serve(t testing.TB, tab Table, opts ServerOptions) *srvHarness {
	t.Helper()
	return serveWith(t, tab, opts, GRPCOptions{})
}

// serveWith is serve with gRPC options.
func serveWith(t testing.TB, tab Table, opts ServerOptions, gopts GRPCOptions) *srvHarness {
	t.Helper()
	srv, err := NewServer(tab, opts)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := NewGRPCServer(srv, gopts)
	if err != nil {
		t.Fatal(err)
	}
	h := &srvHarness{t: t, srv: srv, gs: gs, lis: bufconn.Listen(1 << 20), done: make(chan error, 1)}
	go func() { h.done <- gs.Serve(h.lis) }()
	h.conn, err = grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return h.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(4<<20), grpc.MaxCallRecvMsgSize(4<<20)))
	if err != nil {
		t.Fatal(err)
	}
	h.cli = replayv1.NewReplayClient(h.conn)
	t.Cleanup(h.stop)
	return h
}

// stop shuts the server down and waits for Serve to return.
func (h *srvHarness) stop() {
	if h.conn == nil {
		return
	}
	h.conn.Close()
	h.conn = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.gs.Shutdown(ctx)
	if err := <-h.done; err != nil {
		h.t.Errorf("Serve: %v", err)
	}
}

// ctx is a call context with a deadline far enough not to fire.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// testTable builds a table of layout cfg with the method called name.
func testTable(t testing.TB, name string, cfg buffer.Config, lim *runtime.RateLimiter) Table {
	t.Helper()
	buf, err := buffer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sampler.NewMethod(name, buf, sampler.MethodConfig{BetaSteps: 100})
	if err != nil {
		t.Fatal(err)
	}
	return Table{Buffer: buf, Method: m, Limiter: lim, Config: []byte(`{"test":true}`)}
}

// smallCfg is a discrete layout with state hashes (TER's) and episodes.
func smallCfg(capacity, stripes int) buffer.Config {
	return buffer.Config{Capacity: capacity, Stripes: stripes, ObsDim: 2, Action: buffer.Discrete, NumActions: 3,
		StateHash: true, Episode: true}
}

// batchOf makes n transitions of cfg from rng, encoded.
func batchOf(t testing.TB, rng *rand.Rand, cfg buffer.Config, n int) (*buffer.Transitions, *replayv1.Columns) {
	t.Helper()
	tr := randomTransitions(rng, cfg, n)
	var c replayv1.Columns
	if err := EncodeTransitions(&c, cfg, tr); err != nil {
		t.Fatal(err)
	}
	return tr, &c
}

// insertStream opens an Insert stream.
func (h *srvHarness) insertStream(c context.Context) grpc.BidiStreamingClient[replayv1.InsertRequest, replayv1.InsertAck] {
	h.t.Helper()
	st, err := h.cli.Insert(c)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// sampleStream opens a Sample stream.
func (h *srvHarness) sampleStream(c context.Context) grpc.BidiStreamingClient[replayv1.SampleRequest, replayv1.SampleReply] {
	h.t.Helper()
	st, err := h.cli.Sample(c)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// insert sends one batch and returns its ack.
func insert(t testing.TB, st grpc.BidiStreamingClient[replayv1.InsertRequest, replayv1.InsertAck], writer string, seq uint64, c *replayv1.Columns) *replayv1.InsertAck {
	t.Helper()
	if err := st.Send(&replayv1.InsertRequest{Writer: writer, Seq: seq, Data: c}); err != nil {
		t.Fatal(err)
	}
	ack, err := st.Recv()
	if err != nil {
		t.Fatalf("insert %s/%d: %v", writer, seq, err)
	}
	return ack
}

// draw sends a draw and returns its batch.
func draw(t testing.TB, st grpc.BidiStreamingClient[replayv1.SampleRequest, replayv1.SampleReply], d *replayv1.Draw) *replayv1.Batch {
	t.Helper()
	if err := st.Send(&replayv1.SampleRequest{Kind: &replayv1.SampleRequest_Draw{Draw: d}}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err != nil {
		t.Fatalf("draw %d: %v", d.Id, err)
	}
	b := r.GetBatch()
	if b == nil || b.Id != d.Id {
		t.Fatalf("draw %d answered by %v", d.Id, r)
	}
	return b
}

// writeBack sends a write-back and returns its result.
func writeBack(t testing.TB, st grpc.BidiStreamingClient[replayv1.SampleRequest, replayv1.SampleReply], wb *replayv1.WriteBack) *replayv1.WriteBackResult {
	t.Helper()
	if err := st.Send(&replayv1.SampleRequest{Kind: &replayv1.SampleRequest_WriteBack{WriteBack: wb}}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err != nil {
		t.Fatalf("write-back %d: %v", wb.Id, err)
	}
	res := r.GetWritten()
	if res == nil || res.Id != wb.Id {
		t.Fatalf("write-back %d answered by %v", wb.Id, r)
	}
	return res
}

// wantCode checks err's status code.
func wantCode(t testing.TB, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: %v, want code %v", what, err, code)
	}
}

// eventually polls cond (bounded: 10 s of 1 ms pauses) and fails with
// what if it never holds. Waits for a state, asserts no timing.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for range 10000 {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

func TestInsertIdempotent(t *testing.T) {
	cfg := smallCfg(64, 4)
	h := serve(t, testTable(t, "per", cfg, nil), ServerOptions{})
	rng := rand.New(rand.NewPCG(1, 1))
	_, b1 := batchOf(t, rng, cfg, 3)
	_, b2 := batchOf(t, rng, cfg, 2)
	_, b3 := batchOf(t, rng, cfg, 4)
	st := h.insertStream(ctx(t))
	for _, c := range []struct {
		seq       uint64
		data      *replayv1.Columns
		dup       bool
		size      uint64
		writerTag string
	}{
		{1, b1, false, 3, "a"}, {2, b2, false, 5, "a"}, {2, b2, true, 5, "a"}, {1, b1, true, 5, "a"},
		{3, b3, false, 9, "a"}, {1, b1, false, 12, "b"}, // another writer's seqs are its own
	} {
		ack := insert(t, st, c.writerTag, c.seq, c.data)
		if ack.Seq != c.seq || ack.Duplicate != c.dup || ack.Size != c.size || ack.Incarnation != h.srv.Incarnation() {
			t.Fatalf("writer %s seq %d: ack %v, want duplicate=%v size=%d incarnation=%d", c.writerTag, c.seq, ack, c.dup, c.size, h.srv.Incarnation())
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %v, want EOF", err)
	}
	// A reconnecting writer resends: the server still knows its seqs.
	st2 := h.insertStream(ctx(t))
	if ack := insert(t, st2, "a", 3, b3); !ack.Duplicate || ack.Size != 12 {
		t.Fatalf("resend on a new stream: %v, want a duplicate", ack)
	}
	if ack := insert(t, st2, "a", 4, b1); ack.Duplicate || ack.Size != 15 {
		t.Fatalf("next seq on a new stream: %v", ack)
	}
	s := h.srv.Stats()
	if s.InsertedBatches != 5 || s.InsertedItems != 15 || s.DuplicateBatches != 3 || s.Writers != 2 || s.RejectedMessages != 0 {
		t.Fatalf("stats %+v", s)
	}
	if got := h.srv.t.Buffer.Size(); got != 15 {
		t.Fatalf("buffer holds %d items, want 15", got)
	}
}

// TestInsertBackpressure: while the limiter holds a batch, the server
// stops reading the stream (no message is read ahead), acks only
// stored batches, and resumes once draws make room.
func TestInsertBackpressure(t *testing.T) {
	cfg := smallCfg(64, 1)
	lim, err := runtime.NewRateLimiter(runtime.RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 1, ErrorBuffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := serve(t, testTable(t, "uniform", cfg, lim), ServerOptions{})
	rng := rand.New(rand.NewPCG(2, 2))
	c := ctx(t)
	st := h.insertStream(c)
	const batches = 10
	data := make([]*replayv1.Columns, batches+1)
	for seq := 1; seq <= batches; seq++ {
		_, data[seq] = batchOf(t, rng, cfg, 1)
	}
	sent := make(chan error, 1)
	go func() {
		for seq := uint64(1); seq <= batches; seq++ {
			if err := st.Send(&replayv1.InsertRequest{Writer: "w", Seq: seq, Data: data[seq]}); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	// The limiter admits 2 one-item batches (see RateLimiterConfig), then
	// holds the third.
	for seq := uint64(1); seq <= 2; seq++ {
		ack, err := st.Recv()
		if err != nil || ack.Seq != seq {
			t.Fatalf("ack %v, %v; want seq %d", ack, err, seq)
		}
	}
	eventually(t, "an insert waits on the limiter", func() bool { return h.srv.Stats().InsertsWaiting == 1 })
	if got := h.srv.c.insertReceived.Load(); got != 3 {
		t.Fatalf("the server read %d messages while holding the third: the stream should not be read ahead", got)
	}
	if got := h.srv.Stats().InsertedBatches; got != 2 {
		t.Fatalf("%d batches stored while the limiter holds the third, want 2", got)
	}
	// Each one-item draw lets one more batch in.
	ss := h.sampleStream(c)
	for i := uint64(3); i <= batches; i++ {
		draw(t, ss, &replayv1.Draw{Id: i, Batch: 1, Seed: i, Step: i})
		ack, err := st.Recv()
		if err != nil || ack.Seq != i || ack.Size != i {
			t.Fatalf("after draw %d: ack %v, %v", i, ack, err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// TestInsertClientVanishes: a client that goes while its batch waits on
// the limiter ends the handler; the reservation never happened, nothing
// is stored, and the stream's goroutines are gone (goleak at TestMain).
func TestInsertClientVanishes(t *testing.T) {
	cfg := smallCfg(64, 1)
	lim, err := runtime.NewRateLimiter(runtime.RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 1, ErrorBuffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := serve(t, testTable(t, "uniform", cfg, lim), ServerOptions{})
	rng := rand.New(rand.NewPCG(3, 3))
	c, cancel := context.WithCancel(context.Background())
	st := h.insertStream(c)
	for seq := uint64(1); seq <= 3; seq++ {
		_, b := batchOf(t, rng, cfg, 1)
		if err := st.Send(&replayv1.InsertRequest{Writer: "w", Seq: seq, Data: b}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the third batch waits", func() bool { return h.srv.Stats().InsertsWaiting == 1 })
	cancel()
	eventually(t, "the handler returns", func() bool { return h.srv.Stats().InsertStreams == 0 })
	if s := h.srv.Stats(); s.InsertedBatches != 2 || s.InsertsWaiting != 0 || s.Size != 2 {
		t.Fatalf("stats %+v", s)
	}
	if ls := lim.Stats(); ls.Inserted != 2 {
		t.Fatalf("limiter counts %d inserted, want 2", ls.Inserted)
	}
}

// TestDeadlinesRequired: every unary call without a deadline is refused
// with InvalidArgument and counted.
func TestDeadlinesRequired(t *testing.T) {
	h := serve(t, testTable(t, "per", smallCfg(16, 1), nil), ServerOptions{})
	bg := context.Background()
	calls := map[string]func() error{
		"Fetch":      func() error { _, err := h.cli.Fetch(bg, &replayv1.FetchRequest{}); return err },
		"Evaluated":  func() error { _, err := h.cli.Evaluated(bg, &replayv1.EvaluatedRequest{}); return err },
		"Info":       func() error { _, err := h.cli.Info(bg, &replayv1.InfoRequest{}); return err },
		"Checkpoint": func() error { _, err := h.cli.Checkpoint(bg, &replayv1.CheckpointRequest{}); return err },
		"SetLimiter": func() error { _, err := h.cli.SetLimiter(bg, &replayv1.SetLimiterRequest{}); return err },
	}
	for name, call := range calls {
		err := call()
		wantCode(t, name, err, codes.InvalidArgument)
		if !contains(err, "deadline") {
			t.Errorf("%s: %v does not say a deadline is needed", name, err)
		}
	}
	if got := h.srv.Stats().RejectedMessages; got != uint64(len(calls)) {
		t.Fatalf("%d rejections counted, want %d", got, len(calls))
	}
	if _, err := h.cli.Info(ctx(t), &replayv1.InfoRequest{}); err != nil {
		t.Fatalf("Info with a deadline: %v", err)
	}
}

func contains(err error, s string) bool {
	return err != nil && len(s) > 0 && strings.Contains(status.Convert(err).Message(), s)
}

var errTest = errors.New("test: injected failure")

// TestInsertOptionalColumnsVary: batches on one stream may carry an
// optional column or leave it out (the stream's decoded columns are
// reused): absent priorities give the table's maximum, absent extra
// columns store zeros.
func TestInsertOptionalColumnsVary(t *testing.T) {
	cfg := layouts()["discrete-full"]
	cfg.Capacity, cfg.Stripes = 64, 1
	tab := testTable(t, "uniform", cfg, nil)
	h := serve(t, tab, ServerOptions{})
	rng := rand.New(rand.NewPCG(8, 8))
	st := h.insertStream(ctx(t))
	full, c := batchOf(t, rng, cfg, 3)
	insert(t, st, "w", 1, c)
	bare := randomTransitions(rng, cfg, 2)
	bare.Flags, bare.EpisodeID, bare.EpisodeStep, bare.GlobalStep, bare.ActorID = nil, nil, nil, nil, nil
	bare.StateHash, bare.NextStateHash, bare.Priority, bare.Floats = nil, nil, nil, nil
	var cb replayv1.Columns
	if err := EncodeTransitions(&cb, cfg, bare); err != nil {
		t.Fatal(err)
	}
	insert(t, st, "w", 2, &cb)
	maxP := tab.Buffer.MaxPriority() // before a later batch may raise it
	_, c = batchOf(t, rng, cfg, 1)
	if ack := insert(t, st, "w", 3, c); ack.Size != 6 {
		t.Fatalf("size %d after 6 items", ack.Size)
	}
	for slot := 3; slot < 5; slot++ {
		if _, p, ok := tab.Buffer.SlotPriority(slot); !ok || p != maxP {
			t.Fatalf("slot %d (no priority sent) has priority %v, want the maximum %v", slot, p, maxP)
		}
	}
	b, err := tab.Buffer.NewBatch(1)
	if err != nil {
		t.Fatal(err)
	}
	if !tab.Buffer.GatherSlot(b, 0, 3) || b.EpisodeID[0] != 0 || b.Floats[0][0] != 0 || b.Obs[0] != bare.Obs[0] {
		t.Fatalf("slot 3 holds %+v, want the bare batch's first item with zero optional columns", b.Transitions)
	}
	if !tab.Buffer.GatherSlot(b, 0, 0) || b.EpisodeID[0] != full.EpisodeID[0] {
		t.Fatal("slot 0 lost its episode id")
	}
}
