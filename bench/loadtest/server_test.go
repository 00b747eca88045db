package loadtest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/meter"
	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/sampler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestRunRealServer: a short run against the real replay server (PER over
// a CartPole table) on a loopback listener: the server stores every acknowledged batch, draws
// and applies write-backs; the report has every field.
func TestRunRealServer(t *testing.T) {
	cfg := smokeConfig()
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
	// No rate limiter: the server refuses a draw larger than the table,
	// so this also checks that the learner waits for a batch's worth.
	srv, err := remote.NewServer(remote.Table{Buffer: buf, Method: m}, remote.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := remote.NewGRPCServer(srv, remote.GRPCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := gs.Serve(lis); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gs.Shutdown(ctx)
		wg.Wait()
	}()
	cfg.ServerCPU = func() (time.Duration, error) { return meter.ProcessCPU(), nil } // one process here
	rep, err := Run(context.Background(), func() (*grpc.ClientConn, error) {
		return grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, cfg)
	st := srv.Stats()
	t.Logf("report %+v\nserver %+v", rep, st)
	// Run returns after every stream ended: all it counted, the server did.
	if st.InsertedItems < rep.Inserted || st.Draws < rep.Draws || st.WriteBacksApplied+st.WriteBacksStale < rep.Sampled {
		t.Errorf("server stats %+v below the report's %+v", st, rep)
	}
	if st.DuplicateBatches != 0 || st.RejectedMessages != 0 {
		t.Errorf("server counted %d duplicates, %d rejections", st.DuplicateBatches, st.RejectedMessages)
	}
	if uint64(buf.Size()) != min(st.InsertedItems, uint64(layout.Capacity)) {
		t.Errorf("buffer holds %d items after %d inserted", buf.Size(), st.InsertedItems)
	}
}
