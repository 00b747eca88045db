package remote_test

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"time"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/sampler"
)

// An actor host dials the replay server, opens one writer for its
// actors' batches and closes it (flushing) before it exits. The writer is
// a runtime.Sink: hand it to the actor host in place of a local buffer.
// (The server here is started in process for the example; apex replay
// runs it in its own.)
func ExampleClient_NewWriter() {
	layout := buffer.Config{Capacity: 1024, ObsDim: 4, Action: buffer.Discrete, NumActions: 2} // CartPole's table
	addr, stop := startReplay(layout, "uniform")
	defer stop()

	ctx := context.Background()
	c, err := remote.Dial(ctx, addr, remote.ClientOptions{}) // TLS and Token in a real deployment
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	w, err := c.NewWriter("host-a/pid-4242", remote.WriterOptions{Layout: layout})
	if err != nil {
		log.Fatal(err)
	}
	batch := &buffer.Transitions{
		Obs:      []float32{0.01, 0.02, 0.03, 0.04, 0.02, 0.03, 0.04, 0.05},
		NextObs:  []float32{0.02, 0.03, 0.04, 0.05, 0.03, 0.04, 0.05, 0.06},
		Action:   []int32{1, 0},
		Reward:   []float32{1, 1},
		Discount: []float32{0.99, 0.99},
	}
	if err := w.Insert(batch); err != nil { // blocks while the window is full
		log.Fatal(err)
	}
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.Close(closeCtx); err != nil { // flushes; reports any batch lost
		log.Fatal(err)
	}
	st := w.Stats()
	fmt.Printf("%d batch of %d items acknowledged, %d lost\n", st.Acked, st.AckedItems, st.Lost)
	// Output: 1 batch of 2 items acknowledged, 0 lost
}

// startReplay serves a table of layout with replay method method on a
// loopback port.
func startReplay(layout buffer.Config, method string) (addr string, stop func()) {
	buf, err := buffer.New(layout)
	if err != nil {
		log.Fatal(err)
	}
	m, err := sampler.NewMethod(method, buf, sampler.MethodConfig{BetaSteps: 1000})
	if err != nil {
		log.Fatal(err)
	}
	cfg := []byte(`{"sampler":"` + method + `","steps":1000,"seed":1}`) // the run's TrainConfig
	srv, err := remote.NewServer(remote.Table{Buffer: buf, Method: m, Config: cfg}, remote.ServerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	gs, err := remote.NewGRPCServer(srv, remote.GRPCOptions{})
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := gs.Serve(lis); err != nil {
			log.Print(err)
		}
	}()
	return lis.Addr().String(), func() {
		gs.Shutdown(context.Background())
		<-done
	}
}

// A learner program dials the replay server, builds its replay method
// locally from the server's configuration (its Loss and Normalizer run
// in the learner) and swaps in the remote stage: draws, weights and
// write-backs then go to the server, and the learner's generator is
// consumed exactly as in process.
func ExampleClient_Method() {
	layout := buffer.Config{Capacity: 1024, ObsDim: 4, Action: buffer.Discrete, NumActions: 2}
	addr, stop := startReplay(layout, "per")
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // ends the stage's stream
	c, err := remote.Dial(ctx, addr, remote.ClientOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fill(c, layout, 64) // what the actor hosts do

	cfg, err := c.Config(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// A small local buffer of the table's layout serves the local twin
	// and the learner's batches (NewBatch).
	local, err := buffer.New(buffer.Config{Capacity: 64, ObsDim: 4, Action: buffer.Discrete, NumActions: 2})
	if err != nil {
		log.Fatal(err)
	}
	twin, err := sampler.NewMethod(cfg.Sampler, local, sampler.MethodConfig{BetaSteps: cfg.Steps})
	if err != nil {
		log.Fatal(err)
	}
	m, err := c.Method(ctx, twin, 0)
	if err != nil {
		log.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0))
	b, _ := local.NewBatch(8)
	if err := m.Selector.Sample(rng, b); err != nil { // learner step 1
		log.Fatal(err)
	}
	if err := m.Weighter.Weights(b, 0); err != nil { // weights for step 1 are asked at step-1
		log.Fatal(err)
	}
	absTD := make([]float64, b.Len()) // from the learner's forward pass
	for i := range absTD {
		absTD[i] = 0.5
	}
	res, err := m.Selector.Update(b.Refs, absTD)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: drew %d of %d items, wrote back %d\n", m.Name, b.Len(), b.Size, res.Applied)
	// Output: per: drew 8 of 64 items, wrote back 8
}

// fill inserts n transitions of layout through a writer.
func fill(c *remote.Client, layout buffer.Config, n int) {
	w, err := c.NewWriter("example-actor-host", remote.WriterOptions{Layout: layout})
	if err != nil {
		log.Fatal(err)
	}
	t := &buffer.Transitions{}
	for i := range n {
		f := float32(i) / float32(n)
		t.Obs = append(t.Obs, f, f, f, f)
		t.NextObs = append(t.NextObs, f, f, f, f)
		t.Action = append(t.Action, int32(i%2))
		t.Reward = append(t.Reward, 1)
		t.Discount = append(t.Discount, 0.99)
	}
	if err := w.Insert(t); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(context.Background()); err != nil {
		log.Fatal(err)
	}
}
