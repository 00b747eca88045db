package runtime

import (
	"context"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// countedStage is the test-only method's stage: uniform selection that
// counts its Sample calls and keeps the option it was built with.
type countedStage struct {
	*sampler.Uniform
	tag         float64
	samples     atomic.Int64
	evaluations atomic.Int64
}

func (c *countedStage) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	c.samples.Add(1)
	return c.Uniform.Sample(rng, dst)
}

// lastCounted is the stage the test-only method built last.
var lastCounted atomic.Pointer[countedStage]

// The test-only method "counted": registered from this file alone, the
// runtime knows it only through its Spec (its option, its layout, its
// learner, its evaluation hook and its stats).
func init() {
	err := sampler.Register(sampler.Spec{
		Name:     "counted",
		Doc:      "test only: uniform selection counting its Sample calls",
		Options:  []sampler.Option{{Name: "counted-tag", Usage: "counted: a number the stage keeps (0: none)", Int: true}},
		Learners: []string{"dqn"},
		Stats:    []sampler.Stat{{Name: "counted_samples_total", Help: "counted: Sample calls.", Counter: true}},
		Layout: func(_ sampler.MethodConfig, c *buffer.Config) {
			c.StateHash = true // what this method asks of the buffer
		},
		Build: func(buf *buffer.Buffer, cfg sampler.MethodConfig) (sampler.Method, error) {
			st := &countedStage{Uniform: sampler.NewUniform(buf), tag: cfg.Option("counted-tag")}
			lastCounted.Store(st)
			return sampler.Method{Selector: st, Weighter: st.Uniform,
				Evaluated: func(float64) error { st.evaluations.Add(1); return nil },
				Stats: func() map[string]float64 {
					return map[string]float64{"counted_samples_total": float64(st.samples.Load())}
				}}, nil
		},
	})
	if err != nil {
		panic(err)
	}
}

// TestRegisteredMethodTrains: a method registered from a test file trains
// through NewTrainer and Run: its stage samples every learner step, its
// option reaches it, its layout shapes the buffer, its evaluation hook
// takes each periodic evaluation, its stats reach LearnerStats, and the
// runtime's checks speak of it like of any method.
func TestRegisteredMethodTrains(t *testing.T) {
	cfg := TrainConfig{Env: "CartPole-v1", Sampler: "counted", Actors: 1, Deterministic: true, Steps: 120, Batch: 16,
		Hidden: []int{8}, Capacity: 2000, MinSizeToSample: 100, EvalEverySteps: 40, EvalEpisodes: 1, FinalEpisodes: 1,
		MethodOptions: map[string]float64{"counted-tag": 7}}
	tr, err := NewTrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := lastCounted.Load()
	if st == nil || sampler.Unwrapped(tr.agent.method.Selector) != st || st.tag != 7 || !tr.buf.Config().StateHash {
		t.Fatalf("the run's stage %v is not the counted stage with tag 7 over a buffer with state hashes", tr.agent.method.Selector)
	}
	res, err := tr.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := st.samples.Load(); res.LearnerSteps != 120 || n != 120 {
		t.Errorf("%d learner steps, %d Sample calls: want 120 of each", res.LearnerSteps, n)
	}
	if n := st.evaluations.Load(); n != 3 { // at 40, 80 and 120 steps; the final evaluation is not handed over
		t.Errorf("the method took %d evaluations, want 3", n)
	}
	if got := tr.Stats().Learner.Method["counted_samples_total"]; got != 120 {
		t.Errorf("LearnerStats.Method %v, want counted_samples_total 120", tr.Stats().Learner.Method)
	}
	// Like any method's, its options are refused on another method, and
	// another method's on it.
	for c, want := range map[*TrainConfig]string{
		{Sampler: "per", MethodOptions: map[string]float64{"counted-tag": 1}, Steps: 1}:       "-counted-tag configures the counted method; this run's method is per",
		{Sampler: "counted", MethodOptions: map[string]float64{"ter-eta": 1}, Steps: 1}:       "-ter-eta configures the ter method; this run's method is counted",
		{Sampler: "counted", MethodOptions: map[string]float64{"counted-tag": 1.5}, Steps: 1}: "-counted-tag must be a whole number",
		{Env: "Pendulum-v1", Sampler: "counted", Steps: 1}:                                    "the counted replay method needs the dqn learner",
	} {
		if _, err := NewTrainer(*c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error mentioning %q", *c, err, want)
		}
	}
}

// TestTrainConfigJSONMethodOptions: MethodOptions round-trip through JSON
// under "method_options", and the JSON of releases that kept each option
// in a field of its own ("ter_eta", "ners_interval", ...) decodes into
// MethodOptions (an explicit method_options entry wins).
func TestTrainConfigJSONMethodOptions(t *testing.T) {
	c := TrainConfig{Sampler: "ter", MethodOptions: map[string]float64{"ter-eta": 0.25, "ter-roots": 4}}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"method_options":{"ter-eta":0.25,"ter-roots":4}`) {
		t.Errorf("JSON %s", js)
	}
	var back TrainConfig
	if err := json.Unmarshal(js, &back); err != nil || !maps.Equal(back.MethodOptions, c.MethodOptions) {
		t.Errorf("round trip: %v, %v", back.MethodOptions, err)
	}
	var old TrainConfig
	if err := json.Unmarshal([]byte(`{"sampler":"ners","ners_interval":200,"ners_alpha":0,"lap_k":2,"method_options":{"lap-k":3},"seed":5}`), &old); err != nil {
		t.Fatal(err)
	}
	if want := map[string]float64{"ners-interval": 200, "lap-k": 3}; !maps.Equal(old.MethodOptions, want) || old.Seed != 5 || old.Sampler != "ners" {
		t.Errorf("legacy JSON: options %v, seed %d; want %v", old.MethodOptions, old.Seed, want)
	}
	if err := json.Unmarshal([]byte(`{"ter_eta":"x"}`), &old); err == nil || !strings.Contains(err.Error(), "ter_eta") {
		t.Errorf("a malformed legacy field: %v", err)
	}
	// A method option named like a field of TrainConfig's own (a plugin's
	// "gamma") never takes that field's value as a legacy key.
	for _, k := range []string{"gamma", "batch", "seed", "steps", "method_options"} {
		if !trainConfigKeys[k] {
			t.Errorf("trainConfigKeys lacks %q", k)
		}
	}
	if trainConfigKeys["ter_eta"] {
		t.Error("trainConfigKeys holds the legacy key ter_eta")
	}
	// WithOption and ForMethod never write into the map they were given.
	base := TrainConfig{MethodOptions: map[string]float64{"ter-eta": 0.5}}
	_ = base.WithOption("ter-eta", 0.1).WithOption("lap-k", 2)
	_ = base.ForMethod("per")
	if !maps.Equal(base.MethodOptions, map[string]float64{"ter-eta": 0.5}) {
		t.Errorf("the base's map changed: %v", base.MethodOptions)
	}
}
