package remote

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/netem"
	"github.com/apexrl/apex/sampler"
)

func cartPoleRows(n int) *buffer.Transitions {
	t := &buffer.Transitions{}
	for i := range n {
		f := float32(i)
		t.Obs = append(t.Obs, f, f, f, f)
		t.NextObs = append(t.NextObs, f, f, f, f)
		t.Action = append(t.Action, int32(i%2))
		t.Reward = append(t.Reward, 1)
		t.Discount = append(t.Discount, 0.99)
	}
	return t
}

// BenchmarkWriterInsert: one writer into the real server over bufconn,
// batches of 256 CartPole transitions, window 8 (the server stores every
// batch into its buffer).
func BenchmarkWriterInsert(b *testing.B) {
	srv, _, bs := benchServer(b, "uniform")
	c := bs.client(ClientOptions{})
	w, err := c.NewWriter("bench", WriterOptions{Layout: cartPole})
	if err != nil {
		b.Fatal(err)
	}
	tr := cartPoleRows(256)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := w.Insert(tr); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N*256)/time.Since(start).Seconds(), "items/s")
	if got := srv.Stats().InsertedItems; got != uint64(b.N*256) {
		b.Fatalf("server stored %d items, want %d", got, b.N*256)
	}
}

// BenchmarkStageSampleUpdate: 512-row PER draws with a |δ| write-back
// each through the remote stage, over bufconn.
func BenchmarkStageSampleUpdate(b *testing.B) {
	_, buf, bs := benchServer(b, "per")
	if err := buf.Insert(cartPoleRows(1 << 16)); err != nil {
		b.Fatal(err)
	}
	stageSampleUpdate(b, bs.client(ClientOptions{}))
}

// BenchmarkStagePipeline is BenchmarkStageSampleUpdate with the stage's
// write-backs pipelined (ClientOptions.Pipeline) and not, over bufconn and
// over loopback TCP through a netem proxy that delays each direction by
// 1 ms (the learner step's round trips then dominate).
func BenchmarkStagePipeline(b *testing.B) {
	for _, link := range []string{"bufconn", "delay1ms"} {
		for _, pipe := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/pipeline=%t", link, pipe), func(b *testing.B) {
				srv, buf, bs := benchServer(b, "per")
				if err := buf.Insert(cartPoleRows(1 << 16)); err != nil {
					b.Fatal(err)
				}
				opts := ClientOptions{Pipeline: pipe}
				if link == "bufconn" {
					stageSampleUpdate(b, bs.client(opts))
					return
				}
				stageSampleUpdate(b, delayedClient(b, srv, time.Millisecond, opts))
			})
		}
	}
}

// delayedClient serves srv on loopback TCP behind a netem proxy that
// delays each direction by delay, and dials the proxy.
func delayedClient(b *testing.B, srv *Server, delay time.Duration, opts ClientOptions) *Client {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer(grpc.MaxRecvMsgSize(replayv1.MaxMessageBytes), grpc.MaxSendMsgSize(replayv1.MaxMessageBytes))
	replayv1.RegisterReplayServer(g, srv)
	served := make(chan struct{})
	go func() { defer close(served); _ = g.Serve(ln) }()
	shape := netem.Shape{Delay: delay}
	p, err := netem.Listen("127.0.0.1:0", netem.Config{Target: ln.Addr().String(), Up: shape, Down: shape, Queue: 1024})
	if err != nil {
		g.Stop()
		<-served
		b.Fatal(err)
	}
	c, err := Dial(context.Background(), p.Addr().String(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c.Close()
		p.Close()
		g.Stop()
		<-served
	})
	return c
}

// stageSampleUpdate runs b.N learner steps (draw, weights, write-back)
// of 512 rows through c's remote PER stage.
func stageSampleUpdate(b *testing.B, c *Client) {
	lbuf, _ := buffer.New(buffer.Config{Capacity: 1024, ObsDim: 4, Action: buffer.Discrete, NumActions: 2})
	local := mustMethod(b, "per", lbuf)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := c.Method(ctx, local, 0)
	if err != nil {
		b.Fatal(err)
	}
	bt, _ := lbuf.NewBatch(512)
	absTD := make([]float64, 512)
	for i := range absTD {
		absTD[i] = float64(i%7) + 0.5
	}
	rng := newRand(1)
	b.ResetTimer()
	start := time.Now()
	for step := range b.N {
		if err := m.Selector.Sample(rng, bt); err != nil {
			b.Fatal(err)
		}
		if err := m.Weighter.Weights(bt, int64(step)); err != nil {
			b.Fatal(err)
		}
		if _, err := m.Selector.Update(bt.Refs, absTD); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := Settle(m); err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.ReportMetric(float64(b.N*512)/el.Seconds(), "rows/s")
	b.ReportMetric(float64(el.Microseconds())/float64(b.N), "µs/step")
	if st := c.Stats(); st.WriteBacks != uint64(b.N) || st.Applied+st.Stale != uint64(b.N*512) {
		b.Fatalf("client stats %+v after %d steps", st, b.N)
	}
}

func benchServer(b *testing.B, method string) (*Server, *buffer.Buffer, *bufServer) {
	b.Helper()
	buf, err := buffer.New(cartPole)
	if err != nil {
		b.Fatal(err)
	}
	// A fleet's learner checks that every shard serves the same run
	// configuration: serve one.
	srv, err := NewServer(Table{Buffer: buf, Method: mustMethod(b, method, buf), Config: []byte(`{"bench":"` + method + `"}`)}, ServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	return srv, buf, newBufServer(b, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, srv) })
}

// BenchmarkShardedSampleUpdate is BenchmarkStageSampleUpdate across
// shards (each 2^16 rows, in one process over bufconn): one shard through
// Client.Method, and two through ShardedMethod, exact and one-shard.
func BenchmarkShardedSampleUpdate(b *testing.B) {
	for _, c := range []struct {
		name   string
		shards int
		mode   ShardSampling
	}{{"single", 1, 0}, {"exact/shards=2", 2, ShardExact}, {"one/shards=2", 2, ShardOne}} {
		b.Run(c.name, func(b *testing.B) {
			var clients []*Client
			for range c.shards {
				_, buf, bs := benchServer(b, "per")
				if err := buf.Insert(cartPoleRows(1 << 16)); err != nil {
					b.Fatal(err)
				}
				clients = append(clients, bs.client(ClientOptions{}))
			}
			lbuf, _ := buffer.New(buffer.Config{Capacity: 1024, ObsDim: 4, Action: buffer.Discrete, NumActions: 2})
			local := mustMethod(b, "per", lbuf)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var m sampler.Method
			var err error
			if c.shards == 1 {
				m, err = clients[0].Method(ctx, local, 0)
			} else {
				m, err = ShardedMethod(ctx, clients, local, 0, ShardOptions{Sampling: c.mode})
			}
			if err != nil {
				b.Fatal(err)
			}
			bt, _ := lbuf.NewBatch(512)
			absTD := make([]float64, 512)
			for i := range absTD {
				absTD[i] = float64(i%7) + 0.5
			}
			rng := newRand(1)
			b.ResetTimer()
			start := time.Now()
			for step := range b.N {
				if err := m.Selector.Sample(rng, bt); err != nil {
					b.Fatal(err)
				}
				if err := m.Weighter.Weights(bt, int64(step)); err != nil {
					b.Fatal(err)
				}
				if _, err := m.Selector.Update(bt.Refs, absTD); err != nil {
					b.Fatal(err)
				}
			}
			el := time.Since(start)
			b.ReportMetric(float64(b.N*512)/el.Seconds(), "rows/s")
			b.ReportMetric(float64(el.Microseconds())/float64(b.N), "µs/step")
		})
	}
}
