package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/remote/auth"
)

// The network programs (apex replay, apex learner, apex actor) share two
// groups of flags: serveFlags for a process that listens (replay, and the
// learner's parameter service) and dialFlags for a process that connects
// (learner and actor hosts). Both default to loopback without TLS; beyond
// loopback a server needs its TLS flags (or -insecure, which warns).

// serveFlags are a listening process's flags.
type serveFlags struct {
	listen, addrFile     string
	cert, key, ca        string
	tokens               string
	insecure             bool
	gracefulStopDuration time.Duration
}

// addServeFlags defines the serving flags on fs, listening on defListen by
// default.
func addServeFlags(fs *flag.FlagSet, defListen, what string) *serveFlags {
	f := &serveFlags{}
	fs.StringVar(&f.listen, "listen", defListen, "host:port to serve "+what+" on (loopback by default; any other address needs -tls-cert, -tls-key and -tls-ca, or -insecure; port 0 picks a free port, see -addr-file)")
	fs.StringVar(&f.addrFile, "addr-file", "", "write the address actually listened on to this file once serving (for -listen with port 0)")
	fs.StringVar(&f.cert, "tls-cert", "", "this server's certificate (PEM; apex certs makes one): mutual TLS 1.3, every client must present a certificate signed by -tls-ca")
	fs.StringVar(&f.key, "tls-key", "", "the key of -tls-cert (PEM)")
	fs.StringVar(&f.ca, "tls-ca", "", "the CA certificate (PEM) that signs this server's and its clients' certificates")
	fs.StringVar(&f.tokens, "tokens", "", "file of bearer tokens, one \"role token\" per line (roles: actor, learner, admin; # comments): every call must carry one whose role may make it (empty: no tokens checked)")
	fs.BoolVar(&f.insecure, "insecure", false, "allow listening beyond loopback without TLS (a warning is logged; traffic and tokens travel in the clear)")
	f.gracefulStopDuration = 10 * time.Second
	return f
}

// tlsOn reports whether the TLS flags are set; check refuses a partial set.
func (f *serveFlags) tlsOn() bool { return f.cert != "" }

// check validates the flags before any work: the TLS files come as a set
// and load, the tokens file parses, the listening policy allows -listen,
// and -addr-file's folder is writable.
func (f *serveFlags) check(log *slog.Logger) error {
	set := 0
	for _, s := range []string{f.cert, f.key, f.ca} {
		if s != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		return errors.New("-tls-cert, -tls-key and -tls-ca go together: give all three or none")
	}
	if f.tlsOn() {
		if _, err := auth.ServerTLS(f.cert, f.key, f.ca); err != nil {
			return err
		}
	}
	if f.tokens != "" {
		if _, err := auth.LoadTokens(f.tokens); err != nil {
			return err
		}
	}
	if err := auth.CheckListen(f.listen, f.tlsOn(), f.insecure, log); err != nil {
		return err
	}
	if f.addrFile != "" {
		if err := checkWritableDir(filepath.Dir(f.addrFile)); err != nil {
			return fmt.Errorf("-addr-file: %w", err)
		}
	}
	return nil
}

// checkWritableDir proves dir exists and takes a new file.
func checkWritableDir(dir string) error {
	f, err := os.CreateTemp(dir, ".apex-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// grpcServer builds a gRPC server with the flags' transport security and
// token checks (policy names the roles of each method), 1 MiB message
// limits, keepalive enforcement and the standard health service, which it
// returns to be marked serving once the caller has registered its
// services.
func (f *serveFlags) grpcServer(policy auth.Policy) (*grpc.Server, *health.Server, *auth.Authorizer, error) {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(replayv1.MaxMessageBytes + 64<<10),
		grpc.MaxSendMsgSize(replayv1.MaxMessageBytes + 64<<10),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	}
	if f.tlsOn() {
		cfg, err := auth.ServerTLS(f.cert, f.key, f.ca)
		if err != nil {
			return nil, nil, nil, err
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	var tokens *auth.Tokens
	if f.tokens != "" {
		t, err := auth.LoadTokens(f.tokens)
		if err != nil {
			return nil, nil, nil, err
		}
		tokens = t
	}
	az, err := auth.NewAuthorizer(tokens, policy)
	if err != nil {
		return nil, nil, nil, err
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(az.Unary()), grpc.ChainStreamInterceptor(az.Stream()))
	srv := grpc.NewServer(opts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	return srv, hs, az, nil
}

// serve listens on -listen, writes -addr-file, marks every service
// serving and serves srv until ctx ends; then it marks them not serving
// and stops gracefully (in-flight calls finish, streams end), forcing the
// stop after the grace period. It returns the listener's error, if any.
func (f *serveFlags) serve(ctx context.Context, srv *grpc.Server, hs *health.Server, log *slog.Logger, what string) error {
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("%s: listen: %w", what, err)
	}
	addr := ln.Addr().String()
	if f.addrFile != "" {
		if err := writeFileAtomic(f.addrFile, []byte(addr+"\n")); err != nil {
			ln.Close()
			return fmt.Errorf("-addr-file: %w", err)
		}
	}
	hs.Resume()
	log.Info("serving", "what", what, "addr", addr, "tls", f.tlsOn(), "tokens", f.tokens != "")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	hs.Shutdown()
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(f.gracefulStopDuration):
		srv.Stop()
		<-stopped
	}
	return <-errc
}

// writeFileAtomic writes data to path through a temporary file in its
// folder and a rename, so a reader never sees a partial file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".apex-tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// dialFlags are a connecting process's flags (its client identity).
type dialFlags struct {
	cert, key, ca, serverName string
	tokenFile                 string
	insecure                  bool
}

// addDialFlags defines the client flags on fs. prefix distinguishes them
// from a serving process's own TLS flags ("tls-client-" on apex learner,
// which serves too; "tls-" on apex actor).
func addDialFlags(fs *flag.FlagSet, prefix string, shareCA bool) *dialFlags {
	f := &dialFlags{}
	fs.StringVar(&f.cert, prefix+"cert", "", "this process's client certificate (PEM; apex certs makes one per role) for mutual TLS to the servers it dials")
	fs.StringVar(&f.key, prefix+"key", "", "the key of -"+prefix+"cert (PEM)")
	if !shareCA {
		fs.StringVar(&f.ca, "tls-ca", "", "the CA certificate (PEM) that signs the servers' certificates")
	}
	fs.StringVar(&f.serverName, "tls-server-name", "", "the name the servers' certificates must carry (empty: the host of each address dialed)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding this process's bearer token (its first line; apex certs writes one per role)")
	if !shareCA {
		fs.BoolVar(&f.insecure, "insecure", false, "allow dialing beyond loopback without TLS (traffic and the token travel in the clear)")
	}
	return f
}

// options loads the client identity into remote.ClientOptions; ca and
// insecure come from the serving flags on a process that has both.
func (f *dialFlags) options() (remote.ClientOptions, error) {
	var o remote.ClientOptions
	set := 0
	for _, s := range []string{f.cert, f.key, f.ca} {
		if s != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		return o, errors.New("the client TLS flags (certificate, key and CA) go together: give all three or none")
	}
	if f.cert != "" {
		cfg, err := auth.ClientTLS(f.cert, f.key, f.ca, f.serverName)
		if err != nil {
			return o, err
		}
		o.TLS = cfg
	}
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return o, fmt.Errorf("-token-file: %w", err)
		}
		tok, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if tok = strings.TrimSpace(tok); tok == "" {
			return o, fmt.Errorf("-token-file %s holds no token", f.tokenFile)
		}
		o.Token = tok
	}
	o.Insecure = f.insecure
	return o, nil
}
