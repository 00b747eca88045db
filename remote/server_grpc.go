package remote

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/remote/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
)

// ReplayPolicy is the roles allowed each Replay method, as replay.proto
// documents them, for auth.NewAuthorizer (admin may call every method).
func ReplayPolicy() auth.Policy {
	all := []auth.Role{auth.RoleActor, auth.RoleLearner, auth.RoleAdmin}
	learner := []auth.Role{auth.RoleLearner, auth.RoleAdmin}
	admin := []auth.Role{auth.RoleAdmin}
	const svc = "/" + "apex.replay.v1.Replay" + "/"
	return auth.Policy{
		svc + "Insert": all, svc + "Sample": learner, svc + "Fetch": learner, svc + "Watch": learner,
		svc + "Evaluated": learner, svc + "Info": all, svc + "Checkpoint": admin, svc + "SetLimiter": admin,
	}
}

// MaxStreamsPerConn bounds the concurrent streams of one client
// connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): an actor host needs
// one insert stream, a learner one sample stream and a few calls.
const MaxStreamsPerConn = 256

// Defaults of GRPCOptions.
const (
	// DefaultMinPingInterval is the shortest interval between a client's
	// keepalive pings the server tolerates (clients ping every 30 s by
	// default; ClientOptions.Keepalive).
	DefaultMinPingInterval = 10 * time.Second
	// DefaultPingInterval is how long a connection may be idle before the
	// server pings it, and DefaultPingTimeout how long it waits for the
	// answer before closing it.
	DefaultPingInterval = 60 * time.Second
	DefaultPingTimeout  = 20 * time.Second
)

// GRPCOptions configure NewGRPCServer; zero values select the defaults.
type GRPCOptions struct {
	// TLS, if set, serves TLS with it (auth.ServerTLS: TLS 1.3, mutual).
	// nil serves plaintext: the caller applies auth.CheckListen first.
	TLS *tls.Config
	// Auth, if set, checks every call's bearer token and role
	// (auth.NewAuthorizer with ReplayPolicy, plus the policies of any
	// other service registered on the server).
	Auth *auth.Authorizer
	// MinPingInterval is the keepalive enforcement: a client pinging more
	// often is disconnected (DefaultMinPingInterval). Pings without an
	// active stream are permitted.
	MinPingInterval time.Duration
	// PingInterval and PingTimeout are the server's own keepalive
	// (DefaultPingInterval, DefaultPingTimeout).
	PingInterval, PingTimeout time.Duration
}

// GRPCServer is a gRPC server carrying one apex service — a Server's
// Replay service (NewGRPCServer) or a learner's Params service
// (NewParamsGRPCServer) — and the standard health service (NOT_SERVING
// until Serve, SERVING while it serves, NOT_SERVING from Shutdown on),
// with the message limits of api/replay/v1 (MaxMessageBytes each way:
// larger messages are refused by gRPC with ResourceExhausted), keepalive
// enforcement and, when given, TLS and token checks. Safe for concurrent
// use.
type GRPCServer struct {
	g       *grpc.Server
	health  *health.Server
	service string
	// hg serves the health service alone (ServeHealth).
	hg *grpc.Server
	// end ends the service's stream handlers and waits (Server.Close);
	// nil for a service whose handlers end with their streams.
	end  func()
	once sync.Once
}

// NewGRPCServer builds the gRPC server for srv. Other services may be
// registered on GRPC() before Serve.
func NewGRPCServer(srv *Server, opts GRPCOptions) (*GRPCServer, error) {
	if srv == nil {
		return nil, errors.New("remote: NewGRPCServer: nil Server")
	}
	return newGRPCServer(opts, replayv1.Replay_ServiceDesc.ServiceName, srv.Close, func(g *grpc.Server) { replayv1.RegisterReplayServer(g, srv) }), nil
}

// NewParamsGRPCServer builds the gRPC server for a learner's parameter
// service ps (ParamsPolicy gives its roles for opts.Auth).
func NewParamsGRPCServer(ps *ParamsServer, opts GRPCOptions) (*GRPCServer, error) {
	if ps == nil {
		return nil, errors.New("remote: NewParamsGRPCServer: nil ParamsServer")
	}
	return newGRPCServer(opts, replayv1.Params_ServiceDesc.ServiceName, ps.Close, func(g *grpc.Server) { replayv1.RegisterParamsServer(g, ps) }), nil
}

// ParamsPolicy is the roles allowed each Params method, as replay.proto
// documents them, for auth.NewAuthorizer.
func ParamsPolicy() auth.Policy {
	all := []auth.Role{auth.RoleActor, auth.RoleLearner, auth.RoleAdmin}
	const svc = "/" + "apex.replay.v1.Params" + "/"
	return auth.Policy{svc + "Watch": all, svc + "Get": all}
}

// newGRPCServer builds a GRPCServer for the service named service, which
// register registers; end (may be nil) ends its handlers on Shutdown.
func newGRPCServer(opts GRPCOptions, service string, end func(), register func(*grpc.Server)) *GRPCServer {
	if opts.MinPingInterval <= 0 {
		opts.MinPingInterval = DefaultMinPingInterval
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.PingTimeout <= 0 {
		opts.PingTimeout = DefaultPingTimeout
	}
	so := []grpc.ServerOption{
		// Each stream may hold the message it handles and its decode
		// buffers (up to MaxMessageBytes each): bound the streams a
		// connection may open.
		grpc.MaxConcurrentStreams(MaxStreamsPerConn),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: opts.MinPingInterval, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: opts.PingInterval, Timeout: opts.PingTimeout}),
	}
	so = append(so, wireServerOptions()...)
	if opts.TLS != nil {
		so = append(so, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	if opts.Auth != nil {
		so = append(so, grpc.ChainUnaryInterceptor(opts.Auth.Unary()), grpc.ChainStreamInterceptor(opts.Auth.Stream()))
	}
	g := grpc.NewServer(so...)
	register(g)
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	h.SetServingStatus(service, healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(g, h)
	// The probe port carries no apex data and checks no token: a few
	// streams per connection are plenty for probes, and keepalive is
	// enforced as on the service port.
	hg := grpc.NewServer(grpc.MaxConcurrentStreams(maxHealthStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: opts.MinPingInterval, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: opts.PingInterval, Timeout: opts.PingTimeout}))
	healthpb.RegisterHealthServer(hg, h)
	return &GRPCServer{g: g, health: h, service: service, end: end, hg: hg}
}

// maxHealthStreams bounds the concurrent streams of one connection to the
// probe port (ServeHealth).
const maxHealthStreams = 8

// GRPC is the underlying server, for registering more services before
// Serve.
func (s *GRPCServer) GRPC() *grpc.Server { return s.g }

// Serve marks the server SERVING and serves lis until Shutdown; it
// returns nil after Shutdown, otherwise grpc.Server.Serve's error.
func (s *GRPCServer) Serve(lis net.Listener) error {
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(s.service, healthpb.HealthCheckResponse_SERVING)
	err := s.g.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// ServeHealth serves the standard health service alone — the statuses
// Serve and Shutdown set, for "" and the service's name — in plaintext on
// lis until Shutdown, for probes that can present neither a client
// certificate nor a token (Kubernetes' native gRPC probes speak plain
// HTTP/2). It carries nothing but serving statuses, so it may listen beyond
// loopback without TLS. It returns nil after Shutdown, otherwise
// grpc.Server.Serve's error. Optional; at most one call per listener, made
// before or after Serve.
func (s *GRPCServer) ServeHealth(lis net.Listener) error {
	err := s.hg.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Shutdown marks the server NOT_SERVING (on ServeHealth's port too, which
// closes last), ends every stream handler and
// wait of the service (the Replay service's Server.Close, the Params
// service's ParamsServer.Close: their clients see Unavailable) and stops gRPC gracefully: unary calls in flight finish,
// no new ones start. If ctx ends first, the remaining connections are
// closed at once. It returns when every handler has returned; a second call
// returns once the first has (at once if it has already). Safe for
// concurrent use.
func (s *GRPCServer) Shutdown(ctx context.Context) {
	s.once.Do(func() {
		s.health.Shutdown()
		if s.end != nil {
			s.end()
		}
		done := make(chan struct{})
		go func() {
			s.g.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			s.g.Stop()
			<-done
		}
		// The probe port answers NOT_SERVING while the service drains,
		// then closes (a health Watch would hold a graceful stop).
		s.hg.Stop()
	})
}
