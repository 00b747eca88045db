package runtime

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/checkpoint"
	"github.com/apexrl/apex/model"
)

// float32Params reports whether every parameter of n is a float32 value
// held in a float64 (as a float32 Adam step leaves them).
func float32Params(n *model.Net) bool {
	for _, p := range n.Params() {
		if float64(float32(p)) != p {
			return false
		}
	}
	return true
}

// TestFloat32Run: TrainConfig.Float32 builds every learner network and
// target in float32 (the actors' stay float64), a lockstep CartPole run
// trains on them (learner steps advance, the loss stays finite, the
// parameters are float32-rounded by the float32 Adam) and its checkpoint
// resumes as float32 with no conversion warning.
func TestFloat32Run(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.ckpt")
	cfg := TrainConfig{Env: "CartPole-v1", Sampler: "per", Actors: 1, Deterministic: true, Steps: 300, Batch: 32,
		Hidden: []int{32, 32}, Capacity: 4000, MinSizeToSample: 200, EvalEverySteps: 1000, EvalEpisodes: 1, FinalEpisodes: 1,
		Seed: 4, Float32: true, Checkpoint: path}
	tr, err := NewTrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := dqnOf(tr)
	if !l.Net().Config().Float32 || !l.Target().Config().Float32 || tr.agent.policy.Float32 {
		t.Fatalf("learner nets float32 %t/%t, actors' %t: want true/true/false",
			l.Net().Config().Float32, l.Target().Config().Float32, tr.agent.policy.Float32)
	}
	res, err := tr.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st := tr.Stats().Learner
	if res.LearnerSteps != 300 || st.Steps != 300 || math.IsNaN(st.Loss) || math.IsInf(st.Loss, 0) || st.Loss <= 0 {
		t.Fatalf("float32 run: %d learner steps, learner stats %+v", res.LearnerSteps, st)
	}
	if !float32Params(l.Net()) {
		t.Error("the online network holds parameters that are not float32 values: the float32 Adam did not step it")
	}

	re, err := ResumeTrainer(path, func(c *TrainConfig) { c.Steps = 400 })
	if err != nil {
		t.Fatal(err)
	}
	if !re.Config().Float32 || !dqnOf(re).Net().Config().Float32 {
		t.Fatal("the resumed run is not float32")
	}
	if res, err = re.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := re.Stats().Learner; res.LearnerSteps != 400 || math.IsNaN(st.Loss) || !float32Params(dqnOf(re).Net()) {
		t.Fatalf("resumed float32 run: %d learner steps, learner stats %+v", res.LearnerSteps, st)
	}
	for _, w := range re.Warnings() {
		if strings.Contains(w, "converted") {
			t.Errorf("a resume at the checkpoint's precision warns of a conversion: %q", w)
		}
	}
}

// mainNet returns the network a trainer's learner acts with (dqn's Q
// network, td3's actor, sac's policy, vracer's network).
func mainNet(tr *Trainer) *model.Net {
	switch tr.Config().Algo {
	case "td3":
		return td3Of(tr).Actor()
	case "sac":
		return sacOf(tr).Policy()
	case "vracer":
		return vracerOf(tr).Net()
	}
	return dqnOf(tr).Net()
}

// TestResumeConvertsPrecision: a checkpoint resumes in the other precision
// (float64 → float32 and float32 → float64) for every learner: the
// learner's networks are built in the new precision holding the saved
// parameters exactly, Warnings names the conversion, and the resumed run
// keeps learning in the new precision (learner steps advance to the new
// Steps, the loss stays finite, the parameters move, and are float32
// values after float32 steps and not after float64 ones).
func TestResumeConvertsPrecision(t *testing.T) {
	dqn := TrainConfig{Env: "CartPole-v1", Sampler: "per", Actors: 1, Deterministic: true, Steps: 250, Batch: 32,
		Hidden: []int{32, 32}, Capacity: 4000, MinSizeToSample: 200, EvalEverySteps: 1000, EvalEpisodes: 1, FinalEpisodes: 1, Seed: 4}
	for _, base := range []TrainConfig{dqn, smallTD3("uniform"), smallSAC("uniform"), smallTD3("refer")} {
		for _, from32 := range []bool{false, true} {
			cfg := base
			cfg.Float32 = from32
			cfg.Checkpoint = filepath.Join(t.TempDir(), "run.ckpt")
			tr, err := NewTrainer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			algo := tr.Config().Algo
			name := fmt.Sprintf("%s (sampler %s, seed %d) Float32 %t → %t", algo, cfg.Sampler, cfg.Seed, from32, !from32)
			if _, err := tr.Run(context.Background()); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			saved := slices.Clone(mainNet(tr).Params())
			re, err := ResumeTrainer(cfg.Checkpoint, func(c *TrainConfig) { c.Float32, c.Steps = !from32, cfg.Steps+150 })
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			to := map[bool]string{false: "float64", true: "float32"}[!from32]
			if ws := strings.Join(re.Warnings(), "\n"); !strings.Contains(ws, "converted to "+to) {
				t.Errorf("%s: warnings %q do not name the conversion", name, ws)
			}
			net := mainNet(re)
			if net.Config().Float32 == from32 || !slices.Equal(net.Params(), saved) || re.Stats().Learner.Steps != uint64(cfg.Steps) {
				t.Fatalf("%s: resumed network Float32 %t, parameters carried over %t, learner steps %d",
					name, net.Config().Float32, slices.Equal(net.Params(), saved), re.Stats().Learner.Steps)
			}
			res, err := re.Run(context.Background())
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			st := re.Stats().Learner
			if res.LearnerSteps != cfg.Steps+150 || math.IsNaN(st.Loss) || math.IsInf(st.Loss, 0) || slices.Equal(net.Params(), saved) {
				t.Fatalf("%s: the converted run did not keep learning: %d learner steps, loss %v, parameters moved %t",
					name, res.LearnerSteps, st.Loss, !slices.Equal(net.Params(), saved))
			}
			if float32Params(net) != !from32 {
				t.Errorf("%s: after the resumed steps every parameter a float32 value: %t", name, float32Params(net))
			}
		}
	}
}

// TestFloat32Agents: the td3, sac and vracer agents build their learners'
// networks in float32 and leave the actors' in float64.
func TestFloat32Agents(t *testing.T) {
	for _, c := range []TrainConfig{smallTD3("uniform"), smallSAC("uniform"), smallTD3("refer")} {
		c.Float32 = true
		tr, err := NewTrainer(c)
		if err != nil {
			t.Fatal(err)
		}
		var nets []*model.Net
		switch tr.Config().Algo {
		case "td3":
			nets = append(nets, td3Of(tr).Actor(), td3Of(tr).Critics()[0], td3Of(tr).Critics()[1])
		case "sac":
			nets = append(nets, sacOf(tr).Policy(), sacOf(tr).Critics()[0], sacOf(tr).Critics()[1])
		case "vracer":
			nets = append(nets, vracerOf(tr).Net())
		}
		for i, n := range nets {
			if !n.Config().Float32 {
				t.Errorf("%s: learner network %d is float64", tr.Config().Algo, i)
			}
		}
		if len(nets) == 0 || tr.agent.policy.Float32 {
			t.Errorf("%s: %d learner networks checked, actors' float32 %t", tr.Config().Algo, len(nets), tr.agent.policy.Float32)
		}
	}
}

// TestResumeConfigWithoutFloat32Key: a checkpoint whose configuration has
// no "float32" key (written before float32 became DefaultTrainConfig's,
// when a float64 run omitted it) still means the float64 learner: it
// resumes in float64 with no conversion. A configuration written now
// always holds the key.
func TestResumeConfigWithoutFloat32Key(t *testing.T) {
	cfg := TrainConfig{Env: "CartPole-v1", Sampler: "per", Actors: 1, Deterministic: true, Steps: 220, Batch: 32,
		Hidden: []int{16}, Capacity: 2000, MinSizeToSample: 200, EvalEverySteps: 1000, EvalEpisodes: 1, FinalEpisodes: 1, Seed: 6,
		Checkpoint: filepath.Join(t.TempDir(), "run.ckpt")}
	tr, err := NewTrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(cfg.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	// Rewrite the header section without the key; the parts after it
	// stay as they are.
	r := bytes.NewReader(data)
	var h map[string]any
	if err := checkpoint.Load(r, ckKind, ckVersion, func(_ uint32, r io.Reader) error {
		return checkpoint.ReadJSON(r, &h, maxHeaderBytes)
	}); err != nil {
		t.Fatal(err)
	}
	conf := h["config"].(map[string]any)
	if v, ok := conf["float32"]; !ok || v != false {
		t.Fatalf("a float64 run's saved configuration holds float32 = %v (present %t), want an explicit false", v, ok)
	}
	delete(conf, "float32")
	var old bytes.Buffer
	if err := checkpoint.Save(&old, ckKind, ckVersion, func(w io.Writer) error { return checkpoint.WriteJSON(w, h) }); err != nil {
		t.Fatal(err)
	}
	old.Write(data[len(data)-r.Len():])
	if err := os.WriteFile(cfg.Checkpoint, old.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	re, err := ResumeTrainer(cfg.Checkpoint, func(c *TrainConfig) { c.Steps = 260 })
	if err != nil {
		t.Fatal(err)
	}
	if re.Config().Float32 || dqnOf(re).Net().Config().Float32 || len(re.Warnings()) != 0 {
		t.Fatalf("a checkpoint without the float32 key resumed with Float32 %t (network %t), warnings %q",
			re.Config().Float32, dqnOf(re).Net().Config().Float32, re.Warnings())
	}
	if res, err := re.Run(context.Background()); err != nil || res.LearnerSteps != 260 {
		t.Fatalf("resumed run: %v, %+v", err, res)
	}
}
