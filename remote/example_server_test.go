package remote_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/remote/auth"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
)

// A replay server program serves one table: a buffer, the replay method's
// stage over it and a rate limiter. It listens on loopback (auth.CheckListen
// refuses other addresses without TLS), serves until told to stop, then
// shuts down: every stream ends, nothing keeps running.
func ExampleNewGRPCServer() {
	buf, err := buffer.New(buffer.Config{Capacity: 1 << 16, ObsDim: 4, Action: buffer.Discrete, NumActions: 2})
	if err != nil {
		log.Fatal(err)
	}
	method, err := sampler.NewMethod("per", buf, sampler.MethodConfig{BetaSteps: 100_000})
	if err != nil {
		log.Fatal(err)
	}
	lim, err := runtime.NewRateLimiter(runtime.RateLimiterConfig{SamplesPerInsert: 8, MinSizeToSample: 1000, ErrorBuffer: 800})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := remote.NewServer(remote.Table{Name: "cartpole", Buffer: buf, Method: method, Limiter: lim}, remote.ServerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	gs, err := remote.NewGRPCServer(srv, remote.GRPCOptions{}) // TLS and Auth: auth.ServerTLS, auth.NewAuthorizer(tokens, remote.ReplayPolicy())
	if err != nil {
		log.Fatal(err)
	}
	addr := "127.0.0.1:0"
	if err := auth.CheckListen(addr, false, false, nil); err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()

	// ... actors insert, a learner draws; a signal asks the program to stop:
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs.Shutdown(ctx)
	if err := <-served; err != nil {
		log.Fatal(err)
	}
	fmt.Println(srv.Stats().Size, "items; incarnation drawn:", srv.Incarnation() != 0)
	// Output: 0 items; incarnation drawn: true
}
