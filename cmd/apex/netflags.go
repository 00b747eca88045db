package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

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
	listen, addrFile string
	healthListen     string
	cert, key, ca    string
	tokens           string
	insecure         bool
}

// gracefulStop bounds a server's graceful stop: in-flight calls finish
// within it, then the remaining connections are closed.
const gracefulStop = 10 * time.Second

// addServeFlags defines the serving flags on fs, listening on defListen by
// default.
func addServeFlags(fs *flag.FlagSet, defListen, what string) *serveFlags {
	f := &serveFlags{}
	fs.StringVar(&f.listen, "listen", defListen, "host:port to serve "+what+" on (loopback by default; any other address needs -tls-cert, -tls-key and -tls-ca, or -insecure; port 0 picks a free port, see -addr-file)")
	fs.StringVar(&f.healthListen, "health-listen", "", "also serve the standard gRPC health service alone, in plaintext, on this host:port (e.g. :7702), for probes that cannot do mutual TLS such as Kubernetes' grpc probes; it carries nothing but serving statuses, so any address is allowed (empty: off; the service port answers health checks either way)")
	fs.StringVar(&f.addrFile, "addr-file", "", "write the address actually listened on to this file once serving (for -listen with port 0)")
	fs.StringVar(&f.cert, "tls-cert", "", "this server's certificate (PEM; apex certs makes one): mutual TLS 1.3, every client must present a certificate signed by -tls-ca")
	fs.StringVar(&f.key, "tls-key", "", "the key of -tls-cert (PEM)")
	fs.StringVar(&f.ca, "tls-ca", "", "the CA certificate (PEM) that signs this server's and its clients' certificates")
	fs.StringVar(&f.tokens, "tokens", "", "file of bearer tokens, one \"role token\" per line (roles: actor, learner, admin; # comments): every call must carry one whose role may make it (empty: no tokens checked)")
	fs.BoolVar(&f.insecure, "insecure", false, "allow listening beyond loopback without TLS (a warning is logged; traffic and tokens travel in the clear)")
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
	if host, _, err := net.SplitHostPort(f.listen); err == nil && !auth.IsLoopback(host) && f.tokens == "" {
		log.Warn("serving beyond loopback without -tokens: every client that can connect may make every call, the admin ones (checkpoints, limiter changes) included", "addr", f.listen)
	}
	if f.healthListen != "" {
		if _, _, err := net.SplitHostPort(f.healthListen); err != nil {
			return fmt.Errorf("-health-listen %q: %w", f.healthListen, err)
		}
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

// grpcOptions loads the flags' transport security and token checks
// (policy names the roles of each method of the services served) into
// remote.GRPCOptions.
func (f *serveFlags) grpcOptions(policy auth.Policy) (remote.GRPCOptions, error) {
	var o remote.GRPCOptions
	if f.tlsOn() {
		cfg, err := auth.ServerTLS(f.cert, f.key, f.ca)
		if err != nil {
			return o, err
		}
		o.TLS = cfg
	}
	var tokens *auth.Tokens
	if f.tokens != "" {
		t, err := auth.LoadTokens(f.tokens)
		if err != nil {
			return o, err
		}
		tokens = t
	}
	az, err := auth.NewAuthorizer(tokens, policy)
	if err != nil {
		return o, err
	}
	o.Auth = az
	return o, nil
}

// serve listens on -listen (and -health-listen), writes -addr-file and
// serves g there until ctx ends; then it stops g gracefully, forced after
// the grace period. It returns a listener's or g's error, if any.
func (f *serveFlags) serve(ctx context.Context, g *remote.GRPCServer, log *slog.Logger, what string) error {
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("%s: listen: %w", what, err)
	}
	var hln net.Listener
	if f.healthListen != "" {
		if hln, err = net.Listen("tcp", f.healthListen); err != nil {
			ln.Close()
			return fmt.Errorf("-health-listen: %w", err)
		}
	}
	addr := ln.Addr().String()
	if f.addrFile != "" {
		if err := writeFileAtomic(f.addrFile, []byte(addr+"\n")); err != nil {
			ln.Close()
			if hln != nil {
				hln.Close()
			}
			return fmt.Errorf("-addr-file: %w", err)
		}
	}
	log.Info("serving", "what", what, "addr", addr, "tls", f.tlsOn(), "tokens", f.tokens != "")
	errc := make(chan error, 2)
	running := 1
	go func() { errc <- g.Serve(ln) }()
	if hln != nil {
		running++
		log.Info("serving", "what", what+" health (plaintext probe port)", "addr", hln.Addr().String())
		go func() { errc <- g.ServeHealth(hln) }()
	}
	select {
	case err = <-errc:
		running--
	case <-ctx.Done():
	}
	// Either server's end (a failure, or the stop asked for) stops both.
	sctx, cancel := context.WithTimeout(context.Background(), gracefulStop)
	defer cancel()
	g.Shutdown(sctx)
	for ; running > 0; running-- {
		err = errors.Join(err, <-errc)
	}
	return err
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

// newLogger returns the commands' logger: text or json records on w.
func newLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("unknown -log-format %q (valid: text, json)", format)
}

// version is the binary's version for the servers' Info: the module
// version, or the VCS revision of a development build.
var version = func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			v += "+" + s.Value
		}
	}
	return v
}()

// obsFlags are the long-running commands' log and metrics flags (apex
// train, replay, learner, actor).
type obsFlags struct {
	logFormat, metricsAddr string
	metricsRemote          bool
}

// addObsFlags defines -log-format and, with metrics, -metrics-addr and
// -metrics-allow-remote on fs.
func addObsFlags(fs *flag.FlagSet, metrics bool) *obsFlags {
	o := &obsFlags{}
	fs.StringVar(&o.logFormat, "log-format", "text", "progress and summary records: text or json (a progress bar replaces text records of apex train on a terminal)")
	if metrics {
		fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus /metrics and pprof (/debug/pprof/) on this loopback host:port, e.g. 127.0.0.1:9090 (empty: off)")
		fs.BoolVar(&o.metricsRemote, "metrics-allow-remote", false, "allow a non-loopback -metrics-addr (exposes /metrics and pprof to the network)")
	}
	return o
}

// logger checks the flags (the log format, the metrics address) and
// returns the command's logger on w.
func (o *obsFlags) logger(w io.Writer) (*slog.Logger, error) {
	log, err := newLogger(o.logFormat, w)
	if err != nil {
		return nil, err
	}
	if o.metricsAddr != "" {
		if err := checkMetricsAddr(o.metricsAddr, o.metricsRemote); err != nil {
			return nil, err
		}
	}
	return log, nil
}

// startMetrics serves /metrics from the registry reg builds, and pprof, on
// -metrics-addr, logging where (and warning when beyond loopback); nil
// without -metrics-addr. The caller closes the server.
func (o *obsFlags) startMetrics(reg func() (*prometheus.Registry, error), log *slog.Logger) (*metricsServer, error) {
	if o.metricsAddr == "" {
		return nil, nil
	}
	r, err := reg()
	if err != nil {
		return nil, err
	}
	m, err := startMetricsServer(o.metricsAddr, r)
	if err != nil {
		return nil, err
	}
	addr := m.Addr()
	log.Info("metrics", "metrics_url", "http://"+addr+"/metrics", "pprof_url", "http://"+addr+"/debug/pprof/")
	if !isLoopback(addr) {
		log.Warn("metrics and pprof are exposed to the network (-metrics-allow-remote): anyone who can reach "+addr+
			" can read the run's metrics, profile the process and read its command line", "addr", addr)
	}
	return m, nil
}
