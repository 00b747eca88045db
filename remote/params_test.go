package remote

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/model"
)

func seq(n int, base float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = base + float64(i)*0.5
	}
	return v
}

// paramsServer serves store through a ParamsServer with opts.
func paramsServer(t *testing.T, store *model.Store, opts ParamsServerOptions) (*bufServer, *ParamsServer) {
	t.Helper()
	ps, err := NewParamsServer(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	b := newBufServer(t, func(s *grpc.Server) { replayv1.RegisterParamsServer(s, ps) })
	return b, ps
}

func subscribe(t *testing.T, c *Client, store *model.Store) *ParamsSubscriber {
	t.Helper()
	sub, err := c.SubscribeParams(store, SubscriberOptions{MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	return sub
}

func wait(t *testing.T, sub *ParamsSubscriber, v uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sub.WaitVersion(ctx, v); err != nil {
		t.Fatalf("%v (stats %+v)", err, sub.Stats())
	}
}

func TestParamsChunkedNewestWins(t *testing.T) {
	checkLeaks(t)
	src := new(model.Store)
	// Three versions before anyone watches: the subscriber gets the newest only.
	for v := range uint64(3) {
		src.Publish(model.NewParams(v, seq(10, float64(v))))
	}
	b, ps := paramsServer(t, src, ParamsServerOptions{ChunkValues: 3, Poll: -1})
	c := b.client(ClientOptions{})
	dst := new(model.Store)
	sub := subscribe(t, c, dst)
	wait(t, sub, 2)
	if got := dst.Load(); got.Version() != 2 || !slices.Equal(got.Weights(), seq(10, 2)) {
		t.Fatalf("version %d: %v", got.Version(), got.Weights())
	}
	if st := sub.Stats(); st.Versions != 1 || st.Chunks != 4 || st.Version != 2 {
		t.Errorf("subscriber stats %+v, want 1 version in 4 chunks of ≤ 3 values", st)
	}
	// A version published through the server wakes the watch (no polling).
	ps.Publish(model.NewParams(7, seq(7, 7)))
	wait(t, sub, 7)
	if got := dst.Load(); !slices.Equal(got.Weights(), seq(7, 7)) {
		t.Fatalf("version 7: %v", got.Weights())
	}
	// Version 0 is sent to a subscriber that holds none.
	zero := new(model.Store)
	zero.Publish(model.NewParams(0, seq(4, -1)))
	b0, _ := paramsServer(t, zero, ParamsServerOptions{})
	sub0 := subscribe(t, b0.client(ClientOptions{}), new(model.Store))
	wait(t, sub0, 0)
	if st := sub0.Stats(); st.Versions != 1 {
		t.Errorf("version 0: stats %+v", st)
	}
	sub0.Close()
	sub.Close()
	if st := ps.Stats(); st.Versions != 2 || st.Chunks != 4+3 {
		t.Errorf("server stats %+v, want 2 versions in 7 chunks", st)
	}
}

func TestParamsPoll(t *testing.T) {
	checkLeaks(t)
	src := new(model.Store)
	b, _ := paramsServer(t, src, ParamsServerOptions{Poll: time.Millisecond})
	dst := new(model.Store)
	sub := subscribe(t, b.client(ClientOptions{}), dst)
	src.Publish(model.NewParams(1, seq(3, 1))) // direct: noticed by the poll
	wait(t, sub, 1)
}

func TestParamsSubscriberReconnects(t *testing.T) {
	checkLeaks(t)
	src := new(model.Store)
	b, ps := paramsServer(t, src, ParamsServerOptions{ChunkValues: 2})
	ps.Publish(model.NewParams(1, seq(5, 1)))
	dst := new(model.Store)
	sub := subscribe(t, b.client(ClientOptions{}), dst)
	wait(t, sub, 1)
	b.restart() // the stream breaks; the subscriber re-opens it
	ps.Publish(model.NewParams(2, seq(5, 2)))
	wait(t, sub, 2)
	if got := dst.Load(); !slices.Equal(got.Weights(), seq(5, 2)) {
		t.Fatalf("version 2: %v", got.Weights())
	}
	if st := sub.Stats(); st.Reconnects == 0 || st.Errors == 0 || st.LastError == "" {
		t.Errorf("stats %+v: want a reconnect and its error", st)
	}
}

// scriptedParams answers each Watch with the next script entry.
type scriptedParams struct {
	replayv1.UnimplementedParamsServer
	mu     sync.Mutex
	calls  int
	haves  []uint64
	script [][]*replayv1.ParamsChunk
}

func (s *scriptedParams) Watch(req *replayv1.ParamsRequest, stream grpc.ServerStreamingServer[replayv1.ParamsChunk]) error {
	s.mu.Lock()
	i := s.calls
	s.calls++
	s.haves = append(s.haves, req.GetHaveVersion())
	s.mu.Unlock()
	if i >= len(s.script) {
		<-stream.Context().Done()
		return nil
	}
	for _, ch := range s.script[i] {
		if err := stream.Send(ch); err != nil {
			return err
		}
	}
	return status.Error(codes.Unavailable, "scripted break")
}

func chunk(v, total, off uint64, vals []float64, last bool) *replayv1.ParamsChunk {
	return &replayv1.ParamsChunk{Version: v, Total: total, Offset: off, Values: encodeFloat64s(nil, vals), Last: last}
}

func TestParamsSubscriberDiscardsSupersededAndAsksForNewer(t *testing.T) {
	checkLeaks(t)
	fake := &scriptedParams{script: [][]*replayv1.ParamsChunk{
		// Version 1 starts, version 2 supersedes it, then the stream breaks.
		{chunk(1, 4, 0, []float64{1, 1}, false), chunk(2, 3, 0, []float64{2, 2}, false), chunk(2, 3, 2, []float64{2}, true)},
		// A malformed chunk (offset gap) breaks the next stream.
		{chunk(3, 4, 0, []float64{3}, false), chunk(3, 4, 2, []float64{3}, false)},
		{chunk(4, 1, 0, []float64{4}, true)},
	}}
	b := newBufServer(t, func(s *grpc.Server) { replayv1.RegisterParamsServer(s, fake) })
	dst := new(model.Store)
	sub := subscribe(t, b.client(ClientOptions{}), dst)
	wait(t, sub, 4)
	sub.Close()
	st := sub.Stats()
	if st.Discarded != 1 || st.Versions != 2 || st.Reconnects != 2 || st.Errors < 2 {
		t.Errorf("stats %+v: want 1 discarded, 2 versions, 2 reconnects after 2 errors", st)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if !slices.Equal(fake.haves[:3], []uint64{0, 2, 2}) {
		t.Errorf("have_version per call %v, want 0 2 2 ...", fake.haves)
	}
}

func TestAssemblyRefuses(t *testing.T) {
	checkLeaks(t)
	for _, tc := range []struct {
		name   string
		chunks []*replayv1.ParamsChunk
	}{
		{"odd bytes", []*replayv1.ParamsChunk{{Version: 1, Total: 1, Values: []byte{1, 2, 3}, Last: true}}},
		{"first offset", []*replayv1.ParamsChunk{chunk(1, 4, 2, []float64{1, 1}, true)}},
		{"past total", []*replayv1.ParamsChunk{chunk(1, 1, 0, []float64{1, 1}, true)}},
		{"last early", []*replayv1.ParamsChunk{chunk(1, 4, 0, []float64{1, 1}, true)}},
		{"not last at end", []*replayv1.ParamsChunk{chunk(1, 2, 0, []float64{1, 1}, false)}},
		{"total changes", []*replayv1.ParamsChunk{chunk(1, 4, 0, []float64{1, 1}, false), chunk(1, 5, 2, []float64{1}, false)}},
		{"older version", []*replayv1.ParamsChunk{chunk(2, 4, 0, []float64{1, 1}, false), chunk(1, 1, 0, []float64{1}, true)}},
		{"too large", []*replayv1.ParamsChunk{chunk(1, 1000, 0, []float64{1}, false)}},
	} {
		var a assembly
		var err error
		for _, ch := range tc.chunks {
			if _, _, err = a.add(ch, 100); err != nil {
				break
			}
		}
		if err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func TestParamsGet(t *testing.T) {
	checkLeaks(t)
	src := new(model.Store)
	b, ps := paramsServer(t, src, ParamsServerOptions{ChunkValues: 4})
	c := b.client(ClientOptions{})
	ps.Publish(model.NewParams(3, seq(9, 3)))
	p, err := c.GetParams(context.Background(), 2)
	if err != nil || p.Version() != 3 || !slices.Equal(p.Weights(), seq(9, 3)) {
		t.Fatalf("GetParams(2) = %v, %v", p, err)
	}
	// Waiting for a later version: the call returns once it is published.
	got := make(chan *model.Params, 1)
	go func() {
		p, err := c.GetParams(context.Background(), 5)
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	for ps.Stats().Gets < 2 || ps.Stats().Streams == 0 { // the call is waiting
		time.Sleep(time.Millisecond)
	}
	ps.Publish(model.NewParams(5, seq(2, 5)))
	if p := <-got; p == nil || p.Version() != 5 {
		t.Fatalf("GetParams(5) = %v", p)
	}
	// Never reached: the deadline ends the call.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.GetParams(ctx, 99); status.Code(errors.Unwrap(err)) != codes.DeadlineExceeded {
		t.Errorf("GetParams(99) past its deadline: %v", err)
	}
	// Without a deadline the server refuses the call.
	stream, err := replayv1.NewParamsClient(c.conn).Get(context.Background(), &replayv1.ParamsRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("Get without a deadline: %v", err)
	}
}

// TestParamsShutdownEndsWatches: a learner's parameter service stops at
// once with a subscriber attached (Shutdown ends its Watch through
// ParamsServer.Close instead of waiting for its deadline: a subscriber
// never hangs up itself), the subscriber keeping the versions it has;
// a Watch made after Close ends with Unavailable.
func TestParamsShutdownEndsWatches(t *testing.T) {
	checkLeaks(t)
	store := new(model.Store)
	ps, err := NewParamsServer(store, ParamsServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps.Publish(model.NewParams(1, seq(10, 1)))
	g, err := NewParamsGRPCServer(ps, GRPCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln) }()
	c, err := Dial(context.Background(), ln.Addr().String(), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local := new(model.Store)
	sub := subscribe(t, c, local)
	wait(t, sub, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	g.Shutdown(ctx)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Shutdown took %v with a subscriber attached: it waited for the Watch", took)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if p := local.Load(); p == nil || p.Version() != 1 {
		t.Errorf("the subscriber's store holds %v after the shutdown, want version 1", p)
	}
	sub.Close()

	// A Watch after Close (on a server of its own) ends with Unavailable.
	b, ps2 := paramsServer(t, store, ParamsServerOptions{})
	ps2.Close()
	stream, err := replayv1.NewParamsClient(b.client(ClientOptions{}).conn).Watch(context.Background(), &replayv1.ParamsRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unavailable {
		t.Errorf("Watch after Close: %v, want Unavailable", err)
	}
}
