package runtime

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/sampler"
)

// TestNERSTrainsTD3: a lockstep TD3 run under ners trains end to end: the
// scorer is updated at evaluations (the first only sets the baseline),
// its scores stay in (0, 1], every sampled row's |δ| and Q are summed
// (each evaluation point holds the sums up to its step), and the run
// repeats bit for bit.
func TestNERSTrainsTD3(t *testing.T) {
	cfg := TrainConfig{Env: "SparsePendulum-v1", Algo: "td3", Sampler: "ners", Actors: 1, Deterministic: true, Steps: 500, Batch: 32,
		Hidden: []int{16}, Capacity: 4000, MinSizeToSample: 300, EvalEverySteps: 100, EvalEpisodes: 1, FinalEpisodes: 1,
		MethodOptions: map[string]float64{"ners-interval": 100, "ners-sample": 32}, Seed: 5}
	var out *TrainResult
	run := func() (*Trainer, TrainStats) {
		tr, err := NewTrainer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if out, err = tr.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return tr, tr.Stats()
	}
	tr, a := run()
	_, b := run()
	for i, p := range out.Curve {
		if p.Sampled == nil || p.Sampled.N != uint64(p.LearnerSteps)*32 || p.Sampled.N > b.Learner.Sampled.N {
			t.Errorf("curve[%d] at step %d: sampled sums %+v, want %d rows", i, p.LearnerSteps, p.Sampled, p.LearnerSteps*32)
		}
	}
	n := a.Learner.Method
	if n == nil {
		t.Fatal("no NERS stats")
	}
	if !maps.Equal(n, b.Learner.Method) || a.Learner.Sampled != b.Learner.Sampled {
		t.Errorf("same seed, different runs: %+v / %+v", n, b.Learner.Method)
	}
	// 5 evaluations at 100..500 steps: the first sets the baseline, the
	// last comes after the final step (no Sample applies it).
	if n["ners_updates_total"] != 3 || n["ners_train_rows"] != 32 || !(n["ners_score_min"] > 0 && n["ners_score_max"] <= 1) {
		t.Errorf("ners stats %+v: want 3 updates on 32 rows, scores in (0, 1]", n)
	}
	m := a.Learner.Sampled
	if m.N != 500*32 {
		t.Errorf("sampled moments over %d rows, want %d", m.N, 500*32)
	}
	if td, sd := m.TD(); !(td > 0 && sd > 0) {
		t.Errorf("sampled |δ| mean %v sd %v", td, sd)
	}
	stage := sampler.Unwrapped(tr.agent.method.Selector).(*sampler.NERS)
	if c := stage.Config(); c.Horizon != 200 || c.ActionScale != 2 || c.Interval != 100 || c.TrainSize != 32 {
		t.Errorf("stage config %+v: want the env's horizon 200 and half-range 2", c)
	}
}

// TestNERSTrainsDQNConcurrently: the concurrent pipeline (actors,
// inserter, learner and evaluator goroutines) runs DQN under ners, feeds
// the evaluator's returns to the stage (from the evaluator's goroutine)
// and stops cleanly (the package's TestMain checks for leaked goroutines).
func TestNERSTrainsDQNConcurrently(t *testing.T) {
	cfg := TrainConfig{Env: "CartPole-v1", Sampler: "ners", Actors: 2, Steps: 1000, Batch: 32, Hidden: []int{16}, Capacity: 4000,
		MinSizeToSample: 200, EvalEvery: time.Millisecond, EvalEpisodes: 1, FinalEpisodes: 1, MethodOptions: map[string]float64{"ners-interval": 20, "ners-sample": 16}, Seed: 8}
	tr, err := NewTrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st := tr.Stats().Learner
	if res.LearnerSteps != 1000 || st.Method == nil || st.Sampled.N != 1000*32 {
		t.Fatalf("learner steps %d, ners %+v, sampled %+v", res.LearnerSteps, st.Method, st.Sampled)
	}
	// Evaluations every millisecond over 1000 learner steps: after the
	// baseline, later ones either trained the scorer or came within the
	// interval and were ignored.
	if n := st.Method; n["ners_updates_total"]+n["ners_ignored_evaluations_total"] == 0 {
		t.Errorf("the stage took no evaluation after its baseline (%d periodic evaluations): %+v", len(res.Curve)-1, n)
	}
	t.Logf("ners %+v after %d evaluations", st.Method, len(res.Curve))
}

// TestNERSCheckpointResume: a checkpoint of a ners run holds the stage's
// state, a resumed run's stage equals the saved one (scorer and
// counters), and its settings cannot change on resume.
func TestNERSCheckpointResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ners.ckpt")
	cfg := TrainConfig{Env: "CartPole-v1", Sampler: "ners", Actors: 1, Deterministic: true, Steps: 300, Batch: 32, Hidden: []int{16},
		Capacity: 3000, MinSizeToSample: 200, EvalEverySteps: 50, EvalEpisodes: 1, FinalEpisodes: 1, MethodOptions: map[string]float64{"ners-interval": 50, "ners-sample": 16},
		Seed: 4, Checkpoint: path}
	tr, err := NewTrainer(cfg)
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
	a, b := sampler.Unwrapped(tr.agent.method.Selector).(*sampler.NERS), sampler.Unwrapped(re.agent.method.Selector).(*sampler.NERS)
	if sa, sb := a.Stats(), b.Stats(); sa != sb || sa.Updates == 0 {
		t.Fatalf("stage stats: saved %+v, resumed %+v", sa, sb)
	}
	pa, pb := a.Net().Params(), b.Net().Params()
	for i := range pa {
		if !slices.Equal(pa[i], pb[i]) {
			t.Fatalf("scorer subnet %d differs after resume", i)
		}
	}
	// Without its stage section the checkpoint is refused.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st bytes.Buffer
	if err := a.Save(&st); err != nil {
		t.Fatal(err)
	}
	if len(data) < st.Len() || !bytes.Equal(data[len(data)-st.Len():], st.Bytes()) {
		t.Fatal("the checkpoint does not end with the stage's state")
	}
	bare := bytes.Clone(data[:len(data)-st.Len()])
	barePath := filepath.Join(t.TempDir(), "bare.ckpt")
	if err := os.WriteFile(barePath, bare, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ResumeTrainer(barePath, nil); !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), "sampler stage: ") || !strings.Contains(err.Error(), "empty input, want a sampler.NERS section") {
		t.Errorf("checkpoint without the stage's state: %v", err)
	}
	if _, err := ResumeTrainer(path, func(c *TrainConfig) { *c = c.WithOption("ners-sample", 64) }); !errors.Is(err, ErrResumeConflict) {
		t.Errorf("resume with another -ners-sample: %v, want ErrResumeConflict", err)
	}
	re2, err := ResumeTrainer(path, func(c *TrainConfig) { c.Steps = 400 })
	if err != nil {
		t.Fatal(err)
	}
	if res, err := re2.Run(context.Background()); err != nil || res.LearnerSteps != 400 {
		t.Fatalf("resumed run: %v, %+v", err, res)
	}
}

// TestMethodSettingsReachTheStage: every TrainConfig setting of a replay
// method is the stage's, defaults or not (C, D and alpha once stayed at the
// stage's defaults).
func TestMethodSettingsReachTheStage(t *testing.T) {
	stage := func(cfg TrainConfig) sampler.Selector {
		t.Helper()
		cfg.Env, cfg.Steps = "Pendulum-v1", 1000
		tr, err := NewTrainer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return sampler.Unwrapped(tr.agent.method.Selector)
	}
	opts := func(kv ...any) map[string]float64 {
		m := map[string]float64{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1].(float64)
		}
		return m
	}
	if r := stage(TrainConfig{Sampler: "refer", Algo: "vracer", MethodOptions: opts("refer-c", 2.0, "refer-d", 0.3, "refer-a", 1e-3)}).(*sampler.REFER).Config(); r.C != 2 || r.D != 0.3 || r.A != 1e-3 || r.NoRetrace {
		t.Errorf("refer config %+v", r)
	}
	if r := stage(TrainConfig{Sampler: "refer", Algo: "td3"}).(*sampler.REFER).Config(); r.C != sampler.DefaultREFERC || r.A != sampler.DefaultREFERA || !r.NoRetrace {
		t.Errorf("td3 refer config %+v: want the defaults, the paper's A and no Retrace", r)
	}
	if n := stage(TrainConfig{Sampler: "ners", MethodOptions: opts("ners-alpha", 0.9, "ners-interval", 7.0, "ners-sample", 11.0), Seed: 3}).(*sampler.NERS).Config(); n.Alpha != 0.9 || n.Interval != 7 || n.TrainSize != 11 || n.Horizon != 200 || n.ActionScale != 2 || n.Seed != 3 {
		t.Errorf("ners config %+v", n)
	}
	if tc := stage(TrainConfig{Sampler: "ter", MethodOptions: opts("ter-eta", 0.25, "ter-roots", 4.0, "ter-preds", 2.0)}).(*sampler.TER).Config(); tc.Eta != 0.25 || tc.Roots != 4 || tc.Preds != 2 {
		t.Errorf("ter %+v", tc)
	}
	if p := stage(TrainConfig{Sampler: "pal", MethodOptions: opts("lap-alpha", 0.3, "lap-k", 2.0)}); !strings.Contains(p.String(), "alpha=0.3") || !strings.Contains(p.String(), "k=2") {
		t.Errorf("pal stage %v", p)
	}
	// A value the stage refuses is refused, not ignored.
	if _, err := NewTrainer(TrainConfig{Env: "Pendulum-v1", Sampler: "refer", MethodOptions: map[string]float64{"refer-d": 2}, Steps: 10}); err == nil {
		t.Error("ReF-ER's D = 2 accepted")
	}
	if _, err := NewTrainer(TrainConfig{Env: "Pendulum-v1", Sampler: "ners", MethodOptions: map[string]float64{"ners-alpha": -1}, Steps: 10}); err == nil {
		t.Error("NERS's alpha = -1 accepted")
	}
}

// probeEnv makes env or fails the test.
func probeEnv(t *testing.T, name string) envs.Env {
	t.Helper()
	e, err := envs.Make(name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
