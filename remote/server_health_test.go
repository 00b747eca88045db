package remote

import (
	"context"
	"net"
	"testing"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"
)

// TestServeHealth: the probe port answers the service port's statuses
// (SERVING for "" and the Replay service while it serves), carries nothing
// else (Replay's methods are Unimplemented there), answers NOT_SERVING or
// closes after Shutdown, and ServeHealth then returns nil.
func TestServeHealth(t *testing.T) {
	h := serve(t, testTable(t, "uniform", smallCfg(16, 1), nil), ServerOptions{})
	lis := bufconn.Listen(1 << 16)
	done := make(chan error, 1)
	go func() { done <- h.gs.ServeHealth(lis) }()
	conn, err := grpc.NewClient("passthrough:///health",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := ctx(t)
	hc := healthpb.NewHealthClient(conn)
	for _, svc := range []string{"", replayv1.Replay_ServiceDesc.ServiceName} {
		eventually(t, "SERVING on the probe port for "+svc, func() bool {
			r, err := hc.Check(c, &healthpb.HealthCheckRequest{Service: svc})
			return err == nil && r.Status == healthpb.HealthCheckResponse_SERVING
		})
	}
	if _, err := hc.Check(c, &healthpb.HealthCheckRequest{Service: "no.such.Service"}); err == nil {
		t.Fatal("an unknown service is healthy on the probe port")
	} else {
		wantCode(t, "unknown service", err, codes.NotFound)
	}
	_, err = replayv1.NewReplayClient(conn).Info(c, &replayv1.InfoRequest{})
	wantCode(t, "Info on the probe port", err, codes.Unimplemented)
	h.stop()
	if err := <-done; err != nil {
		t.Fatalf("ServeHealth after Shutdown: %v", err)
	}
	if r, err := hc.Check(c, &healthpb.HealthCheckRequest{}); err == nil && r.Status == healthpb.HealthCheckResponse_SERVING {
		t.Fatal("the probe port is SERVING after Shutdown")
	}
}
