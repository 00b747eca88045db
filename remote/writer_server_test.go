package remote

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// loseAcks is a stream interceptor that fails every k-th acknowledgement
// of the Insert call: the server has stored the batch, and the stream
// breaks before the writer hears of it.
func loseAcks(k int64) grpc.StreamServerInterceptor {
	n := new(atomic.Int64)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if info.FullMethod != replayv1.Replay_Insert_FullMethodName {
			return handler(srv, ss)
		}
		return handler(srv, &ackLoser{ServerStream: ss, n: n, k: k})
	}
}

type ackLoser struct {
	grpc.ServerStream
	n *atomic.Int64
	k int64
}

func (a *ackLoser) SendMsg(m any) error {
	if a.n.Add(1)%a.k == 0 {
		return status.Error(codes.Unavailable, "test: acknowledgement lost")
	}
	return a.ServerStream.SendMsg(m)
}

func realServer(t *testing.T, layout buffer.Config, method string, opts ...grpc.ServerOption) (*Server, *buffer.Buffer, *bufServer) {
	t.Helper()
	buf, err := buffer.New(layout)
	if err != nil {
		t.Fatal(err)
	}
	m := mustMethod(t, method, buf)
	srv, err := NewServer(Table{Buffer: buf, Method: m}, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, buf, newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, srv) }, opts...)
}

// TestWriterResendRealServer breaks the insert stream after the server
// stored a batch and before its acknowledgement (every 7th), and restarts
// the server's transport once: the server stores every batch exactly
// once.
func TestWriterResendRealServer(t *testing.T) {
	checkLeaks(t)
	layout := testLayout
	layout.Capacity = 4096
	srv, buf, b := realServer(t, layout, "per", grpc.ChainStreamInterceptor(loseAcks(7)))
	c := b.client(ClientOptions{})
	w := newTestWriter(t, c, "host-1", WriterOptions{Window: 4})
	const batches, per = 60, 5
	for i := range batches {
		if err := w.Insert(rows(per, float32(i*per))); err != nil {
			t.Fatal(err)
		}
		if i == batches/2 {
			flush(t, w)
			b.restart() // the transport goes; the Server and its writer table stay
		}
	}
	flush(t, w)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ss, ws := srv.Stats(), w.Stats()
	if ss.InsertedBatches != batches || ss.InsertedItems != batches*per || buf.Size() != batches*per {
		t.Fatalf("server stored %d batches, %d items (buffer %d); want %d, %d", ss.InsertedBatches, ss.InsertedItems, buf.Size(), batches, batches*per)
	}
	if ws.Acked != batches || ws.Lost != 0 || ws.Duplicates == 0 || ws.Duplicates != ss.DuplicateBatches || ws.Reconnects == 0 {
		t.Errorf("writer %+v, server %+v: want every batch acknowledged, the lost acknowledgements' batches acknowledged as duplicates", ws, ss)
	}
}

// TestMethodServerRestart: after the server restarts with a new
// incarnation, the old batch's write-back is dropped whole and counted,
// and the next draw works.
func TestMethodServerRestart(t *testing.T) {
	checkLeaks(t)
	layout := testLayout
	layout.Capacity = 64
	buf, err := buffer.New(layout)
	if err != nil {
		t.Fatal(err)
	}
	newServer := func() *Server {
		m, err := sampler.NewMethod("per", buf, sampler.MethodConfig{BetaSteps: 10})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := NewServer(Table{Buffer: buf, Method: m}, ServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		return srv
	}
	srv := newServer()
	b := newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, srv) })
	c := b.client(ClientOptions{})
	if err := buf.Insert(rows(32, 0)); err != nil {
		t.Fatal(err)
	}
	local, lbuf := perTwin(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := c.Method(ctx, local, 0)
	if err != nil {
		t.Fatal(err)
	}
	bt, _ := lbuf.NewBatch(8)
	rng := newRand(5)
	if err := m.Selector.Sample(rng, bt); err != nil {
		t.Fatal(err)
	}
	old := srv
	srv = newServer()
	b.restart()
	absTD := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	res, err := m.Selector.Update(bt.Refs, absTD)
	if status.Code(errors.Unwrap(err)) == codes.Unavailable {
		// The request went out on the old stream before the client saw
		// it break: the call's error is returned; the next call re-opens.
		res, err = m.Selector.Update(bt.Refs, absTD)
	}
	if err != nil || res.Applied != 0 || res.Stale != 8 {
		t.Fatalf("write-back of the old incarnation's batch: %+v, %v", res, err)
	}
	if st := c.Stats(); st.WrongIncarnation != 8 || srv.Stats().WriteBacksWrongIncarnation != 8 {
		t.Errorf("client %+v, server %+v", st, srv.Stats())
	}
	if err := m.Selector.Sample(rng, bt); err != nil {
		t.Fatal(err)
	}
	if res, err := m.Selector.Update(bt.Refs, absTD); err != nil || res.Applied != 8 {
		t.Fatalf("write-back: %+v, %v", res, err)
	}
	if old.Incarnation() == srv.Incarnation() {
		t.Fatal("the restarted server has the same incarnation")
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

func mustMethod(tb testing.TB, name string, buf *buffer.Buffer) sampler.Method {
	tb.Helper()
	m, err := sampler.NewMethod(name, buf, sampler.MethodConfig{BetaSteps: 10})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestClientConfig(t *testing.T) {
	checkLeaks(t)
	buf, err := buffer.New(testLayout)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(Table{Buffer: buf, Method: mustMethod(t, "per", buf),
		Config: []byte(`{"env":"CartPole-v1","sampler":"per","batch":64,"seed":9}`)}, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c := newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, srv) }).client(ClientOptions{})
	cfg, err := c.Config(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Env != "CartPole-v1" || cfg.Sampler != "per" || cfg.Batch != 64 || cfg.Seed != 9 {
		t.Errorf("config %+v", cfg)
	}
	info, err := c.Info(context.Background())
	if err != nil || info.GetIncarnation() != srv.Incarnation() {
		t.Errorf("info %v, %v", info, err)
	}
}
