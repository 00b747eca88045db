package remote_test

import (
	"context"
	"fmt"
	"log"
	"net"

	"google.golang.org/grpc"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/remote"
)

// The learner serves its newest parameters; an actor host subscribes and
// its actors read the local store as they would in process.
func ExampleParamsServer() {
	// Learner side: the store its learner publishes into.
	learnerStore := new(model.Store)
	ps, err := remote.NewParamsServer(learnerStore, remote.ParamsServerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	g := grpc.NewServer() // in apex learner: the GRPCServer's GRPC(), with TLS and tokens
	replayv1.RegisterParamsServer(g, ps)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go g.Serve(lis)
	defer g.Stop()
	ps.Publish(model.NewParams(1, []float64{0.1, 0.2, 0.3})) // wakes every subscriber at once

	// Actor host side.
	c, err := remote.Dial(context.Background(), lis.Addr().String(), remote.ClientOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	actorStore := new(model.Store)
	sub, err := c.SubscribeParams(actorStore, remote.SubscriberOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	if err := sub.WaitVersion(context.Background(), 1); err != nil {
		log.Fatal(err)
	}
	fmt.Println(actorStore.Load().Version(), actorStore.Load().Weights())
	// Output: 1 [0.1 0.2 0.3]
}
