package runtime

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apexrl/apex/learner"
)

func TestTrainerSmoke(t *testing.T) {
	cfg := TrainConfig{Env: "CartPole-v1", Actors: 3, Steps: 150, Capacity: 5000, MinSizeToSample: 200,
		EvalEvery: 50 * time.Millisecond, EvalEpisodes: 2, FinalEpisodes: 3, Seed: 7}
	tr, err := NewTrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Stats is read concurrently with Run (progress lines, metrics scrapes).
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			default:
				_ = tr.Stats()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	res, err := tr.Run(context.Background())
	close(stop)
	<-polled
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

func TestTrainerStopsOnTarget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net only
	defer cancel()
	tr, err := NewTrainer(TrainConfig{Actors: 2, Duration: time.Hour, Capacity: 2000, MinSizeToSample: 200,
		EvalEvery: 20 * time.Millisecond, EvalEpisodes: 1, FinalEpisodes: 2, TargetReturn: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Any CartPole episode returns at least 1, so the first evaluation and its
	// confirmation reach the target and end the hour-long run.
	if !res.StoppedByTarget || ctx.Err() != nil || len(res.FinalReturns) != 2 || res.FinalReturn < 1 {
		t.Fatalf("not stopped by the target: %+v (ctx %v)", res, ctx.Err())
	}
}

func TestTrainerConfigErrors(t *testing.T) {
	for cfg, want := range map[*TrainConfig]string{
		{Env: "NoSuchEnv-v0", Steps: 1}:                                  "CartPole-v1",
		{Sampler: "greedy", Steps: 1}:                                    "valid: uniform, per, rank, lap, pal, ter, refer, refer-1, refer-2, er, ners",
		{Env: "Pendulum-v1", Algo: "dqn", Steps: 1}:                      "continuous action space",
		{Env: "CartPole-v1", Algo: "td3", Steps: 1}:                      "discrete action space",
		{Env: "CartPole-v1", Sampler: "refer", Algo: "dqn", Steps: 1}:    "needs the vracer or td3 learner",
		{Env: "Pendulum-v1", Sampler: "per", Algo: "vracer", Steps: 1}:   "the per replay method needs the dqn, td3 or sac learner (-algo); the vracer learner replays through refer, refer-1, refer-2 or er",
		{Env: "CartPole-v1", Sampler: "refer", Algo: "vracer", Steps: 1}: "discrete action space",
		{Algo: "ppo", Steps: 1}:                                          "valid: [dqn td3 sac vracer]",
		{Sampler: "lap", Loss: "mse", Steps: 1}:                          "pairs with the huber(k=1) loss",
		{Sampler: "per", Loss: "l2", Steps: 1}:                           "unknown loss",
		{}:                                                               "Steps or Duration",
		{Actors: -1, Steps: 1}:                                           "Actors (-actors) must not be negative",
		{Actors: 1_000_000, Steps: 1}:                                    "Actors (-actors) must be at most 16384",
		{Capacity: 500, Steps: 1}:                                        "Capacity (-capacity) 500 cannot hold the 1000 items learning waits for (MinSizeToSample (-min-replay))",
		{Sampler: "pal", Loss: "huber", Steps: 1}:                        "Loss (-loss) huber: the pal method pairs with the pal(k=1,alpha=0.4)/batch-mean loss",
		{TargetReturn: math.NaN(), Steps: 1}:                             "TargetReturn (-target-return) must be a finite number, got NaN",
		{LR: math.Inf(1), Steps: 1}:                                      "LR (-lr) must be a finite number, got +Inf",
		{Epsilon: math.NaN(), Steps: 1}:                                  "Epsilon (-epsilon) must be a finite number",
		{Gamma: -0.5, Steps: 1}:                                          "Gamma must not be negative",
		{CheckpointEvery: -time.Second, Steps: 1}:                        "CheckpointEvery (-checkpoint-every) must not be negative",
		{Hidden: []int{64, 0}, Steps: 1}:                                 "Hidden[1] = 0",
		{Hidden: []int{1 << 20}, Steps: 1}:                               "widths must be in [1, 65536]",
		{Checkpoint: "/proc/y/ck.apex", Steps: 1}:                        "the checkpoint /proc/y/ck.apex cannot be written",
		// Settings the run's method or learner would ignore.
		{Sampler: "per", MethodOptions: map[string]float64{"lap-alpha": 0.4}, Steps: 1}:                     "-lap-alpha configures the lap and pal methods; this run's method is per",
		{Env: "Pendulum-v1", Sampler: "uniform", MethodOptions: map[string]float64{"refer-c": 4}, Steps: 1}: "-refer-c configures the refer, refer-1, refer-2 and er methods",
		{Sampler: "per", MethodOptions: map[string]float64{"ter-roots": 8}, Steps: 1}:                       "-ter-roots configures the ter method; this run's method is per",
		{Sampler: "uniform", MethodOptions: map[string]float64{"ners-interval": 10}, Steps: 1}:              "-ners-interval configures the ners method",
		{Sampler: "per", MethodOptions: map[string]float64{"ter-roots": 1.5}, Steps: 1}:                     "-ter-roots must be a whole number, got 1.5",
		{Sampler: "per", MethodOptions: map[string]float64{"ter-eta": -1}, Steps: 1}:                        "-ter-eta must not be negative, got -1",
		{Sampler: "per", MethodOptions: map[string]float64{"per-alpha": 1}, Steps: 1}:                       `unknown option "per-alpha"`,
		{Env: "Pendulum-v1", Epsilon: 0.1, Steps: 1}:                                                        "Epsilon (-epsilon) configures the dqn learner's actors; this run's learner is td3",
		{Env: "Pendulum-v1", Dueling: true, Steps: 1}:                                                       "Dueling (-dueling)",
		{Sigma: 0.2, Steps: 1}: "Sigma (-sigma) configures the td3 learner's actors",
		{Env: "Pendulum-v1", Sampler: "refer", Algo: "vracer", Sigma: 0.2, Steps: 1}: "this run's learner is vracer",
		{Env: "Pendulum-v1", Sampler: "refer", Algo: "vracer", Tau: 0.01, Steps: 1}:  "Tau (-tau) configures target networks",
		{Env: "Pendulum-v1", Sampler: "refer", Algo: "vracer", NStep: 3, Steps: 1}:   "NStep (-n-step) above 1",
		{RandomSteps: 100, Steps: 1}: "RandomSteps (-random-steps)",
		{Env: "Pendulum-v1", Sampler: "refer-1", MethodOptions: map[string]float64{"refer-d": 0.2}, Steps: 1}: "-refer-d configures the refer and refer-2 methods",
	} {
		if _, err := NewTrainer(*cfg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: got %v, want an error mentioning %q", *cfg, err, want)
		}
	}
}

// TestForMethod: a base carrying every method's settings keeps only the
// chosen method's, and builds a trainer for each of them.
func TestForMethod(t *testing.T) {
	base := TrainConfig{Env: "Pendulum-v1", Algo: "td3", Steps: 1, MethodOptions: map[string]float64{"lap-alpha": 0.3, "lap-k": 2,
		"refer-c": 3, "refer-d": 0.2, "refer-a": 1e-6, "ter-eta": 0.4, "ter-roots": 4, "ter-preds": 2, "ners-alpha": 0.7, "ners-interval": 50, "ners-sample": 64}}
	all := maps.Clone(base.MethodOptions)
	for _, m := range []string{"uniform", "per", "lap", "pal", "refer", "ners"} {
		c := base.ForMethod(m)
		if c.Sampler != m {
			t.Fatalf("ForMethod(%q) set Sampler %q", m, c.Sampler)
		}
		lap, refer, ners := c.Option("lap-alpha") != 0 || c.Option("lap-k") != 0, c.Option("refer-c") != 0 || c.Option("refer-d") != 0 || c.Option("refer-a") != 0,
			c.Option("ners-alpha") != 0 || c.Option("ners-interval") != 0 || c.Option("ners-sample") != 0
		ter := c.Option("ter-eta") != 0 || c.Option("ter-roots") != 0 || c.Option("ter-preds") != 0
		if lap != (m == "lap" || m == "pal") || refer != (m == "refer") || ners != (m == "ners") || ter {
			t.Errorf("ForMethod(%q) kept the wrong settings: %+v", m, c)
		}
		if _, err := NewTrainer(c); err != nil {
			t.Errorf("ForMethod(%q): %v", m, err)
		}
	}
	if !maps.Equal(base.MethodOptions, all) {
		t.Errorf("ForMethod changed the base's map: %v", base.MethodOptions)
	}
	if c := base.ForMethod("ter"); c.Option("ter-eta") != 0.4 || c.Option("ter-roots") != 4 || c.Option("ter-preds") != 2 || len(c.MethodOptions) != 3 {
		t.Errorf("ForMethod(\"ter\") kept the wrong settings: %+v", c.MethodOptions)
	}
}

func TestDeterministicModeRepeats(t *testing.T) {
	run := func(seed uint64) (*TrainResult, []float64) {
		tr, err := NewTrainer(TrainConfig{Actors: 1, Deterministic: true, Steps: 300, Capacity: 4000,
			MinSizeToSample: 200, EvalEverySteps: 100, EvalEpisodes: 2, FinalEpisodes: 3, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		res, err := tr.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return res, dqnOf(tr).Net().Params()
	}
	a, pa := run(5)
	b, pb := run(5)
	if !slices.Equal(pa, pb) {
		t.Fatal("same seed, different network parameters")
	}
	if a.LearnerSteps != 300 || a.EnvSteps != b.EnvSteps || !slices.Equal(a.FinalReturns, b.FinalReturns) || len(a.Curve) != len(b.Curve) {
		t.Fatalf("same seed, different runs:\n%+v\n%+v", a, b)
	}
	for i := range a.Curve {
		x, y := a.Curve[i], b.Curve[i]
		if x.MeanReturn != y.MeanReturn || x.LearnerSteps != y.LearnerSteps || x.EnvSteps != y.EnvSteps {
			t.Fatalf("evaluation %d differs: %+v vs %+v", i, x, y)
		}
	}
	if _, pc := run(6); slices.Equal(pa, pc) {
		t.Fatal("another seed gave the same parameters")
	}
	if _, err := NewTrainer(TrainConfig{Actors: 2, Deterministic: true, Steps: 10}); err == nil {
		t.Fatal("the deterministic mode accepted 2 actors")
	}
}

// TestDeterministicCancelEndsCleanly cancels lockstep runs at random
// moments: Run must return a result, never the context's error.
func TestDeterministicCancelEndsCleanly(t *testing.T) {
	for i := range 6 {
		tr, err := NewTrainer(TrainConfig{Actors: 1, Deterministic: true, Steps: 1 << 40, Capacity: 4000,
			MinSizeToSample: 200, EvalEverySteps: 50, EvalEpisodes: 1, FinalEpisodes: 1, Seed: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+30*i)*time.Millisecond)
		res, err := tr.Run(ctx)
		cancel()
		if err != nil || res == nil {
			t.Fatalf("run %d: cancelled deterministic run returned %v", i, err)
		}
	}
}

// TestResumeCompletedRunTakesNoSteps resumes a run that already took its
// steps: it goes straight to the final evaluation.
func TestResumeCompletedRunTakesNoSteps(t *testing.T) {
	path := t.TempDir() + "/done.ckpt"
	tr, err := NewTrainer(TrainConfig{Actors: 2, Steps: 80, Capacity: 3000, MinSizeToSample: 200,
		EvalEvery: time.Hour, FinalEpisodes: 2, Checkpoint: path, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	re, err := ResumeTrainer(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := re.Run(context.Background())
	if err != nil || res.LearnerSteps != 80 {
		t.Fatalf("resumed finished run: %v, %d learner steps (want 80)", err, res.LearnerSteps)
	}
	if _, err := ResumeTrainer(path, func(c *TrainConfig) { c.ReplayRatio = 8 }); err == nil || !strings.Contains(err.Error(), "rate limiter") {
		t.Fatalf("a changed replay ratio on resume: %v", err)
	}
}

// dqnOf is the DQN learner of a discrete run.
func dqnOf(t *Trainer) *learner.DQN { return t.agent.impl.(*learner.DQN) }

// TestTrainerRefusesBufferBeyondMemory: a capacity whose replay buffer
// cannot fit in the machine's memory is an error before anything is
// allocated (it used to end the process out of memory).
func TestTrainerRefusesBufferBeyondMemory(t *testing.T) {
	if _, ok := machineMemory(); !ok {
		t.Fatal("this machine's available memory cannot be read (/proc/meminfo)")
	}
	defer func(f func() (uint64, bool)) { availableMemory = f }(availableMemory)
	availableMemory = func() (uint64, bool) { return 1 << 30, true } // 1 GiB left
	_, err := NewTrainer(TrainConfig{Steps: 1, Capacity: 100_000_000})
	if err == nil || !strings.Contains(err.Error(), "1.0 GiB available") || !strings.Contains(err.Error(), "-capacity") {
		t.Fatalf("got %v, want an error about the 1 GiB available naming -capacity", err)
	}
	if _, err := NewTrainer(TrainConfig{Steps: 1, Capacity: 100_000}); err != nil {
		t.Fatalf("a buffer that fits: %v", err)
	}
	_, err = NewTrainer(TrainConfig{Steps: 1, Actors: 64, Hidden: []int{4096, 4096}})
	if err == nil || !strings.Contains(err.Error(), "networks") || !strings.Contains(err.Error(), "-actors") {
		t.Fatalf("64 actors with 4096-wide layers and 1 GiB: got %v, want an error about the networks", err)
	}
}

// TestRefreshEveryDerived: the actors' refresh period keeps their policy
// within about refreshLag learner steps of the learner's: 400 environment
// steps (Ape-X's) for one actor, 100 for dqn's defaults with 64 actors, 6
// for td3 and sac with 64 actors (with 400 they would replay the initial
// policy for a whole 20k-step run).
func TestRefreshEveryDerived(t *testing.T) {
	for _, c := range []struct {
		cfg  TrainConfig
		want int
	}{
		{TrainConfig{Steps: 1}, 100},
		{TrainConfig{Steps: 1, Actors: 1}, 400},
		{TrainConfig{Steps: 1, Env: "Pendulum-v1", Algo: "td3"}, 6},
		{TrainConfig{Steps: 1, Env: "Pendulum-v1", Algo: "sac"}, 6},
		{TrainConfig{Steps: 1, Env: "Pendulum-v1", Algo: "sac", Actors: 1}, 400},
		{TrainConfig{Steps: 1, Env: "Pendulum-v1", Algo: "td3", Actors: 4096, Capacity: 1 << 23}, 1},
		{TrainConfig{Steps: 1, Env: "Pendulum-v1", Algo: "td3", RefreshEvery: 7}, 7},
		{TrainConfig{Steps: 1, Env: "Pendulum-v1", Sampler: "refer"}, 0}, // vracer: its actors' own 20
	} {
		c.cfg.Hidden = []int{8}
		tr, err := NewTrainer(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.Config().RefreshEvery; got != c.want {
			t.Errorf("%s with %d actors: RefreshEvery %d, want %d", tr.Config().Algo, tr.Config().Actors, got, c.want)
		}
	}
}

// TestTrainInserters: a run trains through any inserter setting (direct
// inserts, several inserters), stores every batch it accepted, and
// refuses a setting it cannot follow.
func TestTrainInserters(t *testing.T) {
	for _, n := range []int{Direct, 2} {
		tr, err := NewTrainer(TrainConfig{Actors: 3, Steps: 60, Capacity: 3000, MinSizeToSample: 200,
			EvalEvery: time.Hour, FinalEpisodes: 1, Seed: 4, Inserters: n})
		if err != nil {
			t.Fatal(err)
		}
		res, err := tr.Run(context.Background())
		if err != nil {
			t.Fatalf("inserters %d: %v", n, err)
		}
		st := tr.Stats()
		if res.LearnerSteps != 60 || st.Pipeline.Items != int64(st.Buffer.Inserts) || st.Pipeline.Items < int64(tr.cfg.MinSizeToSample) {
			t.Fatalf("inserters %d: %d steps, pipeline %+v, buffer inserts %d", n, res.LearnerSteps, st.Pipeline, st.Buffer.Inserts)
		}
	}
	for _, c := range []TrainConfig{{Steps: 5, Inserters: -2}, {Steps: 5, Inserters: MaxInserters + 1},
		{Steps: 5, Actors: 1, Deterministic: true, Inserters: 1}} {
		if _, err := NewTrainer(c); err == nil || !strings.Contains(err.Error(), "Inserters (-inserters)") {
			t.Errorf("%+v: got %v, want an error naming Inserters", c, err)
		}
	}
}
