package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/apexrl/apex/remote/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

const healthUsage = `usage: apex health -addr HOST:PORT [flags]

Asks a server's standard gRPC health service (grpc.health.v1) whether it
serves, once: apex replay and apex learner answer it on their service port
(mutual TLS when they serve it: give -tls-cert, -tls-key and -tls-ca) and,
with -health-listen, on a plaintext probe port. It is the health check of
containers built FROM scratch, which have no shell or curl:

  healthcheck: {test: ["CMD", "/apex", "health", "-addr", "127.0.0.1:7702"]}

No token is sent: the health service is open to every caller. Exit status
0: SERVING; 1: any other status, an error or no answer within -timeout
(the reason on stderr); 2: a usage error.

flags:
`

// runHealth is apex health.
func runHealth(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apex health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "host:port of the server's service port or its -health-listen probe port (required)")
	service := fs.String("service", "", "the service whose status to ask (empty: the server as a whole; apex.replay.v1.Replay or apex.replay.v1.Params)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer, connecting included")
	cert := fs.String("tls-cert", "", "client certificate (PEM) for a server that serves mutual TLS on -addr")
	key := fs.String("tls-key", "", "the key of -tls-cert (PEM)")
	ca := fs.String("tls-ca", "", "the CA certificate (PEM) that signs the server's certificate")
	serverName := fs.String("tls-server-name", "", "the name the server's certificate must carry (empty: the host of -addr)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), healthUsage)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "apex health: "+format+"\n", a...)
		return 2
	}
	if *addr == "" {
		return usageErr("-addr is required: the host:port of the server to ask")
	}
	if _, _, err := net.SplitHostPort(*addr); err != nil {
		return usageErr("-addr %q: %v", *addr, err)
	}
	if *timeout <= 0 {
		return usageErr("-timeout must be positive, got %v", *timeout)
	}
	creds := insecure.NewCredentials()
	switch set := countSet(*cert, *key, *ca); {
	case set == 3:
		cfg, err := auth.ClientTLS(*cert, *key, *ca, *serverName)
		if err != nil {
			return usageErr("%v", err)
		}
		creds = credentials.NewTLS(cfg)
	case set != 0:
		return usageErr("-tls-cert, -tls-key and -tls-ca go together: give all three or none")
	}
	conn, err := grpc.NewClient("passthrough:///"+*addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return usageErr("-addr %q: %v", *addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: *service}, grpc.WaitForReady(true))
	if err != nil {
		fmt.Fprintf(stderr, "apex health: %s: %v\n", *addr, err)
		return 1
	}
	if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		fmt.Fprintf(stderr, "apex health: %s: %s\n", *addr, r.GetStatus())
		return 1
	}
	fmt.Fprintf(stdout, "%s: SERVING\n", *addr)
	return 0
}

// countSet counts the non-empty strings of ss.
func countSet(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}
