package runtime_test

import (
	"context"
	"fmt"

	"github.com/apexrl/apex/runtime"
)

// Example_splitRun wires a run from the parts a distributed run is made
// of, in one process: the replay server's core (buffer, method, rate
// limiter), a learner host over the core's method (remotely: a method
// whose stage is an adaptor to the server), and an actor host whose
// actors read the learner's parameters and insert through the core's
// limiter. The replay server hands its configuration out as JSON; the
// hosts build their parts from the decoded copy.
func Example_splitRun() {
	core, err := runtime.NewReplayCore(runtime.TrainConfig{Env: "CartPole-v1", Actors: 2, Steps: 200,
		Capacity: 5000, MinSizeToSample: 300, Seed: 1, FinalEpisodes: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	js, _ := core.ConfigJSON() // what the server sends its hosts
	cfg, err := runtime.DecodeTrainConfig(js)
	if err != nil {
		fmt.Println(err)
		return
	}
	learner, err := runtime.NewLearnerHost(cfg, core.Method(), runtime.WithLimiter(core.Limiter()))
	if err != nil {
		fmt.Println(err)
		return
	}
	actx, stop := context.WithCancel(context.Background())
	defer stop()
	actors, err := runtime.NewActorHost(cfg, 2, learner.Store(), core.Sink(actx))
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- actors.Run(actx) }()
	res, err := learner.Run(context.Background()) // until Steps
	stop()
	if aerr := <-done; err == nil {
		err = aerr
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("learner steps:", res.LearnerSteps, "stopped by:", res.StopReason)
	fmt.Println("every handed batch stored:", int64(core.Stats().Buffer.Inserts) == actors.Stats().Pipeline.Items)
	// Output:
	// learner steps: 200 stopped by: steps
	// every handed batch stored: true
}
