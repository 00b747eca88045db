package remote_test

import (
	"context"
	"log"
	"math/rand/v2"
	"time"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/sampler"
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

// A learner program dials the replay server, builds its replay method
// locally from the server's configuration (its Loss and Normalizer run
// in the learner) and swaps in the remote stage: draws, weights and
// write-backs then go to the server.
func ExampleClient_Method() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // ends the stage's stream
	c, err := remote.Dial(ctx, "127.0.0.1:7070", remote.ClientOptions{Token: "learner-token-from-the-tokens-file"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	cfg, err := c.Config(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// A small local buffer of the table's layout serves the local twin
	// and the learner's batches (NewBatch).
	local, err := buffer.New(buffer.Config{Capacity: 1024, ObsDim: 4, Action: buffer.Discrete, NumActions: 2})
	if err != nil {
		log.Fatal(err)
	}
	twin, err := sampler.NewMethod(cfg.Sampler, local, sampler.MethodConfig{BetaSteps: cfg.Steps})
	if err != nil {
		log.Fatal(err)
	}
	m, err := c.Method(ctx, twin, 0)
	if err != nil {
		log.Fatal(err) // the ReF-ER methods are refused here
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0))
	b, _ := local.NewBatch(64)
	if err := m.Selector.Sample(rng, b); err != nil { // learner step 1
		log.Fatal(err)
	}
	if m.Weighter != nil {
		if err := m.Weighter.Weights(b, 0); err != nil {
			log.Fatal(err)
		}
	}
	absTD := make([]float64, b.Len()) // from the learner's forward pass
	if _, err := m.Selector.Update(b.Refs, absTD); err != nil {
		log.Fatal(err)
	}
}
