package runtime

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestTrainerSmoke(t *testing.T) {
	cfg := TrainConfig{Env: "CartPole-v1", Actors: 3, Steps: 150, Capacity: 5000, MinSizeToSample: 200,
		EvalEvery: 50 * time.Millisecond, EvalEpisodes: 2, FinalEpisodes: 3, Seed: 7}
	tr, err := NewTrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.LearnerSteps != 150 || res.EnvSteps < 200 || len(res.FinalReturns) != 3 || !(res.FinalReturn >= 1) {
		t.Fatalf("result %+v", res)
	}
	if len(res.Curve) == 0 || res.Curve[len(res.Curve)-1].MeanReturn != res.FinalReturn {
		t.Fatalf("curve %+v does not end with the final evaluation %v", res.Curve, res.FinalReturn)
	}
	st := tr.Stats()
	if st.Pipeline.Items == 0 || st.Buffer.Size == 0 || st.Learner.Steps != 150 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTrainerStopsOnContextAndTarget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	tr, err := NewTrainer(TrainConfig{Actors: 2, Duration: time.Hour, Capacity: 2000, MinSizeToSample: 100,
		EvalEvery: 20 * time.Millisecond, EvalEpisodes: 1, FinalEpisodes: 1, TargetReturn: 1})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := tr.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatalf("run took %v", time.Since(start))
	}
	// Any CartPole episode returns at least 1, so the first evaluation
	// reaches the target (unless the context ended first).
	if !res.StoppedByTarget && ctx.Err() == nil {
		t.Fatalf("not stopped by the target: %+v", res)
	}
}

func TestTrainerConfigErrors(t *testing.T) {
	for cfg, want := range map[*TrainConfig]string{
		{Env: "NoSuchEnv-v0", Steps: 1}: "CartPole-v1",
		{Sampler: "greedy", Steps: 1}:   "valid: [per rank uniform]",
		{Env: "Pendulum-v1", Steps: 1}:  "continuous action space",
		{}:                              "Steps or Duration",
		{Actors: -1, Steps: 1}:          "Actors must be >= 1",
	} {
		if _, err := NewTrainer(*cfg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: got %v, want an error mentioning %q", *cfg, err, want)
		}
	}
}
