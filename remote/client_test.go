package remote

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/test/bufconn"

	"github.com/apexrl/apex/remote/auth"
)

// bufServer is a gRPC server on an in-memory listener that tests can
// restart (a new listener; the dialer always reaches the current one).
type bufServer struct {
	t        testing.TB
	register func(*grpc.Server)
	opts     []grpc.ServerOption

	mu  sync.Mutex
	lis *bufconn.Listener
	srv *grpc.Server
	wg  sync.WaitGroup
}

// checkLeaks registers a leak check of the test's goroutines as a
// cleanup: call it first, so that it runs after every other cleanup.
func checkLeaks(t testing.TB) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// newBufServer starts a server with register's services and registers
// its stop as a cleanup.
func newBufServer(t testing.TB, register func(*grpc.Server), opts ...grpc.ServerOption) *bufServer {
	t.Helper()
	b := &bufServer{t: t, register: register, opts: opts}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *bufServer) start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lis = bufconn.Listen(1 << 20)
	// The wire options of NewGRPCServer (codec, pool, windows), so these
	// servers behave as apex replay's do.
	so := append(wireServerOptions(), grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
	b.srv = grpc.NewServer(append(so, b.opts...)...)
	b.register(b.srv)
	lis, srv := b.lis, b.srv
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		_ = srv.Serve(lis)
	}()
}

// stop ends the server (every stream breaks) and waits for it.
func (b *bufServer) stop() {
	b.mu.Lock()
	srv := b.srv
	b.mu.Unlock()
	srv.Stop()
	b.wg.Wait()
}

// restart stops the server and starts a new one with the same services.
func (b *bufServer) restart() {
	b.stop()
	b.start()
}

func (b *bufServer) dial(ctx context.Context, _ string) (net.Conn, error) {
	b.mu.Lock()
	lis := b.lis
	b.mu.Unlock()
	return lis.DialContext(ctx)
}

// client dials the server with opts (Insecure and the bufconn dialer
// added) and closes the client at cleanup.
func (b *bufServer) client(opts ClientOptions) *Client {
	b.t.Helper()
	opts.Insecure = true
	opts.DialOptions = append(opts.DialOptions, grpc.WithContextDialer(b.dial))
	c, err := Dial(context.Background(), "passthrough:///bufnet", opts)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestDialRefusesNonLoopbackWithoutTLS(t *testing.T) {
	for _, target := range []string{"10.0.0.1:7000", "example.com:7000", "dns:///example.com:7000"} {
		if c, err := Dial(context.Background(), target, ClientOptions{}); err == nil {
			c.Close()
			t.Errorf("Dial(%q) without TLS: no error", target)
		}
	}
	for _, target := range []string{"127.0.0.1:7000", "localhost:7000", "[::1]:7000", "dns:///localhost:7000"} {
		c, err := Dial(context.Background(), target, ClientOptions{})
		if err != nil {
			t.Errorf("Dial(%q): %v", target, err)
			continue
		}
		c.Close()
	}
	tok, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if c, err := Dial(context.Background(), "10.0.0.1:7000", ClientOptions{Insecure: true, Token: tok}); err == nil {
		c.Close()
		t.Error("a token in the clear to a non-loopback target: no error")
	}
	c, err := Dial(context.Background(), "127.0.0.1:7000", ClientOptions{Token: tok})
	if err != nil {
		t.Fatalf("a token to a loopback target: %v", err)
	}
	c.Close()
}

func TestDecodeConfig(t *testing.T) {
	if _, err := decodeConfig(nil); err == nil {
		t.Error("empty config: no error")
	}
	if _, err := decodeConfig([]byte("{")); err == nil {
		t.Error("bad JSON: no error")
	}
	cfg, err := decodeConfig([]byte(`{"env":"CartPole-v1","sampler":"per","batch":32}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Env != "CartPole-v1" || cfg.Sampler != "per" || cfg.Batch != 32 {
		t.Errorf("decoded %+v", cfg)
	}
}
