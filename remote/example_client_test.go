package remote_test

import (
	"context"
	"log"
	"time"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/remote"
)

// An actor host dials the replay server, opens one writer for its
// actors' batches and flushes before it exits. The writer's Insert is a
// runtime.Sink's: hand the writer to the pipeline in place of a local
// buffer.
func ExampleClient_NewWriter() {
	ctx := context.Background()
	c, err := remote.Dial(ctx, "127.0.0.1:7070", remote.ClientOptions{Token: "actor-token-from-the-tokens-file"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	cfg, err := c.Config(ctx) // the server's run configuration: build the actors from it
	if err != nil {
		log.Fatal(err)
	}
	_ = cfg
	layout := buffer.Config{ObsDim: 4, Action: buffer.Discrete, NumActions: 2} // the table's layout (CartPole)
	w, err := c.NewWriter("host-a/pid-4242", remote.WriterOptions{Layout: layout})
	if err != nil {
		log.Fatal(err)
	}
	batch := &buffer.Transitions{
		Obs:      []float32{0.01, 0.02, 0.03, 0.04},
		NextObs:  []float32{0.02, 0.03, 0.04, 0.05},
		Action:   []int32{1},
		Reward:   []float32{1},
		Discount: []float32{0.99},
	}
	if err := w.Insert(batch); err != nil { // blocks while the window is full
		log.Fatal(err)
	}
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.Close(closeCtx); err != nil { // flushes; reports any batch lost
		log.Fatal(err)
	}
	log.Printf("%+v", w.Stats())
}
