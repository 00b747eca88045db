package loadtest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/apexrl/apex/bench/loadtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ExampleRun drives a replay server already serving on a loopback port
// (apex replay) with 8 actor streams for 3 seconds and prints the figures.
func ExampleRun() {
	cfg := loadtest.DefaultConfig()
	cfg.Streams, cfg.Duration = 8, 3*time.Second
	dial := func() (*grpc.ClientConn, error) {
		return grpc.NewClient("127.0.0.1:7700", grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	rep, err := loadtest.Run(context.Background(), dial, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%.0f inserts/s, %.0f sampled/s, p99 %.0f µs\n", rep.InsertsPerSec, rep.SampledPerSec, rep.SampleRTTP99US)
}
