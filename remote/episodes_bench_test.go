package remote

import (
	"context"
	"math/rand/v2"
	"testing"

	"google.golang.org/grpc"

	replayv1 "github.com/apexrl/apex/api/replay/v1"

	"github.com/apexrl/apex/learner"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// BenchmarkReferDraw measures a ReF-ER learner's draw of 256 rows through
// the remote stage over bufconn, one 200-step episode stored between two
// draws (about what V-RACER on Pendulum with a few actors sees): "feed"
// with the learner's REFERController observing the episode feed (each
// draw carries the finished and evicted episodes), "no-feed" the same
// draws with no observer (the stage still indexes; nothing is sent).
func BenchmarkReferDraw(b *testing.B) {
	for _, feed := range []bool{true, false} {
		name := "no-feed"
		if feed {
			name = "feed"
		}
		b.Run(name, func(b *testing.B) {
			const capacity, epLen, rows = 1 << 15, 200, 256
			srvBuf := samplertest.REFERBuffer(b, capacity, 1)
			srvM, err := sampler.NewMethod("refer", srvBuf, sampler.MethodConfig{BetaSteps: 1000, Learner: "vracer"})
			if err != nil {
				b.Fatal(err)
			}
			srv, err := NewServer(Table{Buffer: srvBuf, Method: srvM}, ServerOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(srv.Close)
			c := newBufServer(b, func(g *grpc.Server) { replayv1.RegisterReplayServer(g, srv) }).client(ClientOptions{})
			local := samplertest.REFERBuffer(b, 512, 1)
			localM, err := sampler.NewMethod("refer", local, sampler.MethodConfig{BetaSteps: 1000, Learner: "vracer"})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			b.Cleanup(cancel)
			m, err := c.Method(ctx, localM, 0)
			if err != nil {
				b.Fatal(err)
			}
			var ctl *learner.REFERController
			if feed {
				if ctl, err = learner.NewREFERController(m.Episodes); err != nil {
					b.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(1, 1))
			id := uint64(1)
			store := func() {
				e := samplertest.RandEpisode(rng, id, 1, 0.99)
				e.Reward = make([]float32, epLen)
				id++
				if err := srvBuf.Insert(e.Rows(0, epLen)); err != nil {
					b.Fatal(err)
				}
			}
			for range capacity / epLen {
				store()
			}
			batch, _ := local.NewBatch(rows)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				store()
				b.StartTimer()
				if err := m.Selector.Sample(rng, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if feed && ctl.Stats().Steps != srvM.Selector.(*sampler.REFER).Stats().Steps {
				b.Fatalf("the controller holds %d steps, the stage %d", ctl.Stats().Steps, srvM.Selector.(*sampler.REFER).Stats().Steps)
			}
		})
	}
}
