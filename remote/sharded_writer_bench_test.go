package remote

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
)

// cartPoleEpisodes is cartPole with episode ids (what apex's runs store).
var cartPoleEpisodes = func() buffer.Config { c := cartPole; c.Episode = true; return c }()

// actorBatches makes n actor batches of 50 CartPole transitions whose
// episodes are 100 steps long (half the batches cross an episode end), of
// 8 actors in turn.
func actorBatches(n int) []*buffer.Transitions {
	out := make([]*buffer.Transitions, n)
	for i := range out {
		t := cartPoleRows(50)
		actor, step := uint64(i%8), (i/8)*50
		for j := range 50 {
			t.EpisodeID = append(t.EpisodeID, actor<<32|uint64((step+j+25*int(actor%2))/100))
			t.EpisodeStep = append(t.EpisodeStep, int32((step+j)%100))
		}
		out[i] = t
	}
	return out
}

// BenchmarkShardedWriterInsert: actor batches of 50 CartPole transitions
// (see actorBatches) through a Writer into one real server, and through a
// ShardedWriter into 1 and 2 real servers, over bufconn, window 8 per
// shard; every server stores what it gets into its buffer.
func BenchmarkShardedWriterInsert(b *testing.B) {
	batches := actorBatches(64)
	for _, shards := range []int{0, 1, 2} {
		name := fmt.Sprintf("shards=%d", shards)
		if shards == 0 {
			name = "writer"
		}
		b.Run(name, func(b *testing.B) {
			var servers []*Server
			var clients []*Client
			for i := range max(shards, 1) {
				buf, err := buffer.New(cartPoleEpisodes)
				if err != nil {
					b.Fatal(err)
				}
				srv, err := NewServer(Table{Buffer: buf, Method: mustMethod(b, "uniform", buf)}, ServerOptions{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(srv.Close)
				bs := newBufServer(b, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, srv) })
				c, err := Dial(context.Background(), fmt.Sprintf("passthrough:///bench-%d", i),
					ClientOptions{Insecure: true, DialOptions: []grpc.DialOption{grpc.WithContextDialer(bs.dial)}})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = c.Close() })
				servers, clients = append(servers, srv), append(clients, c)
			}
			var w interface {
				Insert(*buffer.Transitions) error
				Close(context.Context) error
			}
			var err error
			if shards == 0 {
				w, err = clients[0].NewWriter("bench", WriterOptions{Layout: cartPoleEpisodes})
			} else {
				w, err = NewShardedWriter(clients, "bench", ShardedWriterOptions{WriterOptions: WriterOptions{Layout: cartPoleEpisodes}})
			}
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				if err := w.Insert(batches[i%len(batches)]); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N*50)/time.Since(start).Seconds(), "items/s")
			var stored uint64
			for _, srv := range servers {
				stored += srv.Stats().InsertedItems
			}
			if stored != uint64(b.N*50) {
				b.Fatalf("servers stored %d items, want %d", stored, b.N*50)
			}
		})
	}
}
