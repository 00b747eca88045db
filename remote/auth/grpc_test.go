package auth_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/apexrl/apex/remote/auth"
)

// callTimeout bounds each test call so a broken setup fails instead of
// hanging; no test asserts on time.
const callTimeout = 20 * time.Second

// testServer is a gRPC server over bufconn serving the standard health
// service behind an Authorizer, with a last interceptor that records the
// role the Authorizer attached to each unary call.
type testServer struct {
	lis   *bufconn.Listener
	mu    sync.Mutex
	roles []string // "method role" per handled unary call
}

// startServer serves with creds (nil: plain text) and a (nil: no
// interceptors) until the test ends.
func startServer(t *testing.T, creds credentials.TransportCredentials, a *auth.Authorizer) *testServer {
	t.Helper()
	ts := &testServer{lis: bufconn.Listen(1 << 20)}
	var opts []grpc.ServerOption
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	record := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		r, _ := auth.RoleFromContext(ctx)
		ts.mu.Lock()
		ts.roles = append(ts.roles, info.FullMethod+" "+string(r))
		ts.mu.Unlock()
		return h(ctx, req)
	}
	if a != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(a.Unary(), record), grpc.ChainStreamInterceptor(a.Stream()))
	}
	s := grpc.NewServer(opts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(ts.lis)
	}()
	t.Cleanup(func() {
		hs.Shutdown()
		s.Stop()
		<-done
	})
	return ts
}

// dial connects to ts with creds (nil: plain text) and extra options; the
// connection closes when the test ends.
func (ts *testServer) dial(t *testing.T, creds credentials.TransportCredentials, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	opts = append(opts, grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ts.lis.DialContext(ctx) }))
	cc, err := grpc.NewClient("passthrough:///bufnet", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return healthpb.NewHealthClient(cc)
}

func check(t *testing.T, c healthpb.HealthClient, opts ...grpc.CallOption) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, opts...)
	return err
}

// watch opens a Watch stream and reads its first message.
func watch(t *testing.T, c healthpb.HealthClient, opts ...grpc.CallOption) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	st, err := c.Watch(ctx, &healthpb.HealthCheckRequest{}, opts...)
	if err != nil {
		return err
	}
	_, err = st.Recv()
	return err
}

func wantCode(t *testing.T, what string, err error, want codes.Code, msg string) {
	t.Helper()
	if got := status.Code(err); got != want || msg != "" && !strings.Contains(err.Error(), msg) {
		t.Errorf("%s: got %v (%v), want %v with %q", what, got, err, want, msg)
	}
}

func serverCreds(t *testing.T, p *pki) credentials.TransportCredentials {
	t.Helper()
	cfg, err := auth.ServerTLS(p.serverFile, p.serverKey, p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	return credentials.NewTLS(cfg)
}

func clientCreds(t *testing.T, p *pki) credentials.TransportCredentials {
	t.Helper()
	cfg, err := auth.ClientTLS(p.clientFile, p.clientKey, p.caFile, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	return credentials.NewTLS(cfg)
}

func TestMutualTLS(t *testing.T) {
	p := newPKI(t, auth.RoleActor)
	rec := &recordingCreds{TransportCredentials: serverCreds(t, p), errs: make(chan error, 8)}
	ts := startServer(t, rec, nil)

	if err := check(t, ts.dial(t, clientCreds(t, p))); err != nil {
		t.Fatalf("right client certificate: %v", err)
	}

	roots, err := auth.LoadCertPool(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	own, err := tls.LoadX509KeyPair(p.clientFile, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	other := newPKI(t, auth.RoleActor)
	foreign, err := tls.LoadX509KeyPair(other.clientFile, other.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	// Each is refused in the server's handshake, for the reason given. (The
	// client's error need not say why: under TLS 1.3 the client may finish
	// its side first and see only the closed connection.)
	refused := []struct {
		name string
		cfg  *tls.Config
		why  string
	}{
		{"no client certificate", &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots, ServerName: "localhost"}, "didn't provide a certificate"},
		{"a client certificate of another CA", &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots, ServerName: "localhost", Certificates: []tls.Certificate{foreign}}, "unknown authority"},
		{"TLS 1.2", &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, RootCAs: roots, ServerName: "localhost", Certificates: []tls.Certificate{own}}, "unsupported versions"},
		{"the server certificate as a client's", &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots, ServerName: "localhost", Certificates: []tls.Certificate{serverPair(t, p)}}, "incompatible key usage"},
	}
	for _, r := range refused {
		wantCode(t, r.name, check(t, ts.dial(t, credentials.NewTLS(r.cfg))), codes.Unavailable, "")
		select {
		case err := <-rec.errs:
			if !strings.Contains(err.Error(), r.why) {
				t.Errorf("%s: the server refused with %q, want %q", r.name, err, r.why)
			}
		case <-time.After(callTimeout):
			t.Fatalf("%s: the server's handshake did not fail", r.name)
		}
	}
	// A server of another CA is refused by the client.
	ts2 := startServer(t, serverCreds(t, other), nil)
	if err := check(t, ts2.dial(t, clientCreds(t, p))); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("server of another CA: got %v, want Unavailable about its certificate", err)
	}
	// A server name the certificate lacks is refused.
	cfg, err := auth.ClientTLS(p.clientFile, p.clientKey, p.caFile, "replay.example.org")
	if err != nil {
		t.Fatal(err)
	}
	if err := check(t, ts.dial(t, credentials.NewTLS(cfg))); status.Code(err) != codes.Unavailable {
		t.Errorf("wrong server name: got %v, want Unavailable", err)
	}
}

// recordingCreds passes on every server handshake's error.
type recordingCreds struct {
	credentials.TransportCredentials
	errs chan error
}

func (c *recordingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		select {
		case c.errs <- err:
		default:
		}
	}
	return out, info, err
}

func serverPair(t *testing.T, p *pki) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(p.serverFile, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTLSConfigErrors(t *testing.T) {
	p := newPKI(t, auth.RoleActor)
	other := newPKI(t, auth.RoleActor)
	cfg, err := auth.ServerTLS(p.serverFile, p.serverKey, p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS13 || cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.ClientCAs == nil {
		t.Errorf("server config: min version %x, client auth %v", cfg.MinVersion, cfg.ClientAuth)
	}
	ccfg, err := auth.ClientTLS(p.clientFile, p.clientKey, p.caFile, "")
	if err != nil {
		t.Fatal(err)
	}
	if ccfg.MinVersion != tls.VersionTLS13 || ccfg.RootCAs == nil || len(ccfg.Certificates) != 1 {
		t.Errorf("client config: min version %x", ccfg.MinVersion)
	}
	cases := []struct {
		name      string
		server    bool
		cert, key string
		ca        string
		want      string
	}{
		{"missing certificate", true, p.dir + "/none.pem", p.serverKey, p.caFile, "none.pem: no such file"},
		{"missing key", true, p.serverFile, p.dir + "/none-key.pem", p.caFile, "none-key.pem: no such file"},
		{"missing CA", true, p.serverFile, p.serverKey, p.dir + "/none-ca.pem", "none-ca.pem: no such file"},
		{"key of another certificate", true, p.serverFile, p.clientKey, p.caFile, "private key does not match public key"},
		{"certificate of another CA", true, other.serverFile, other.serverKey, p.caFile, "does not verify as a server certificate against the CA in"},
		{"client certificate as server", true, p.clientFile, p.clientKey, p.caFile, "does not verify as a server certificate"},
		{"server certificate as client", false, p.serverFile, p.serverKey, p.caFile, "does not verify as a client certificate"},
		{"client certificate of another CA", false, other.clientFile, other.clientKey, p.caFile, "does not verify as a client certificate"},
		{"key as CA", false, p.clientFile, p.clientKey, p.clientKey, "no PEM CERTIFICATE block"},
	}
	for _, c := range cases {
		var err error
		if c.server {
			_, err = auth.ServerTLS(c.cert, c.key, c.ca)
		} else {
			_, err = auth.ClientTLS(c.cert, c.key, c.ca, "localhost")
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// tokens configures one token per role.
func tokens(t *testing.T) (*auth.Tokens, map[auth.Role]string) {
	t.Helper()
	var ts auth.Tokens
	m := map[auth.Role]string{}
	for _, r := range auth.Roles {
		tok, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if err := ts.Add(r, tok); err != nil {
			t.Fatal(err)
		}
		m[r] = tok
	}
	return &ts, m
}

func bearer(t *testing.T, tok string) grpc.CallOption {
	t.Helper()
	b, err := auth.NewBearer(tok)
	if err != nil {
		t.Fatal(err)
	}
	return grpc.PerRPCCredentials(b)
}

// testPolicy names Check for learners and Watch for actors, and leaves
// List to the health exemption.
var testPolicy = auth.Policy{
	healthpb.Health_Check_FullMethodName: {auth.RoleLearner},
	healthpb.Health_Watch_FullMethodName: {auth.RoleActor},
}

func TestTokens(t *testing.T) {
	p := newPKI(t, auth.RoleActor)
	toks, tok := tokens(t)
	a, err := auth.NewAuthorizer(toks, testPolicy)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, serverCreds(t, p), a)
	c := ts.dial(t, clientCreds(t, p))

	wantCode(t, "Check without a token", check(t, c), codes.Unauthenticated, "missing bearer token")
	wrong, _ := auth.NewToken()
	wantCode(t, "Check with an unknown token", check(t, c, bearer(t, wrong)), codes.Unauthenticated, "unknown bearer token")
	wantCode(t, "Check as actor", check(t, c, bearer(t, tok[auth.RoleActor])), codes.PermissionDenied, "role actor may not call /grpc.health.v1.Health/Check")
	wantCode(t, "Check as learner", check(t, c, bearer(t, tok[auth.RoleLearner])), codes.OK, "")
	wantCode(t, "Check as admin", check(t, c, bearer(t, tok[auth.RoleAdmin])), codes.OK, "")
	wantCode(t, "Watch as actor", watch(t, c, bearer(t, tok[auth.RoleActor])), codes.OK, "")
	wantCode(t, "Watch as learner", watch(t, c, bearer(t, tok[auth.RoleLearner])), codes.PermissionDenied, "role learner may not call")
	wantCode(t, "Watch without a token", watch(t, c), codes.Unauthenticated, "")
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, err = c.List(ctx, &healthpb.HealthListRequest{})
	wantCode(t, "List (unnamed health method) without a token", err, codes.OK, "")

	want := auth.Stats{Allowed: 3, Unchecked: 1, Unauthenticated: 3, Denied: 2}
	if got := a.Stats(); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	ts.mu.Lock()
	got := strings.Join(ts.roles, ", ")
	ts.mu.Unlock()
	if want := "/grpc.health.v1.Health/Check learner, /grpc.health.v1.Health/Check admin, /grpc.health.v1.Health/List "; got != want {
		t.Errorf("handled calls with roles %q, want %q", got, want)
	}
}

func TestNoTokensAllowAll(t *testing.T) {
	a, err := auth.NewAuthorizer(nil, testPolicy)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, nil, a)
	lb, err := auth.NewLoopbackBearer(strings.Repeat("x", auth.MinTokenLen), "127.0.0.1:9000")
	if err != nil {
		t.Fatal(err)
	}
	c := ts.dial(t, nil)
	wantCode(t, "Check without a token", check(t, c), codes.OK, "")
	wantCode(t, "Watch without a token", watch(t, c), codes.OK, "")
	wantCode(t, "Check with any token", check(t, c, grpc.PerRPCCredentials(lb)), codes.OK, "")
	if got, want := a.Stats(), (auth.Stats{Unchecked: 3}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

func TestBearerTransportSecurity(t *testing.T) {
	toks, tok := tokens(t)
	a, err := auth.NewAuthorizer(toks, testPolicy)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, nil, a)
	c := ts.dial(t, nil)

	lb, err := auth.NewLoopbackBearer(tok[auth.RoleLearner], "localhost:9000")
	if err != nil {
		t.Fatal(err)
	}
	if lb.RequireTransportSecurity() {
		t.Error("loopback bearer requires transport security")
	}
	wantCode(t, "plain-text loopback bearer", check(t, c, grpc.PerRPCCredentials(lb)), codes.OK, "")

	b, err := auth.NewBearer(tok[auth.RoleLearner])
	if err != nil {
		t.Fatal(err)
	}
	if !b.RequireTransportSecurity() {
		t.Error("bearer does not require transport security")
	}
	if err := check(t, c, grpc.PerRPCCredentials(b)); err == nil || !strings.Contains(err.Error(), "secure") {
		t.Errorf("TLS-only bearer over plain text: got %v, want a refusal", err)
	}
	if got := a.Stats(); got.Allowed != 1 || got.Unauthenticated+got.Denied != 0 {
		t.Errorf("stats %+v: the token went over plain text", got)
	}

	if _, err := auth.NewLoopbackBearer(tok[auth.RoleLearner], "10.1.2.3:9000"); err == nil || !strings.Contains(err.Error(), "not loopback") {
		t.Errorf("loopback bearer to 10.1.2.3: %v", err)
	}
	if _, err := auth.NewLoopbackBearer(tok[auth.RoleLearner], "localhost"); err == nil {
		t.Error("loopback bearer to an address without a port")
	}
	if _, err := auth.NewBearer("short"); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("short token: %v", err)
	}
}
