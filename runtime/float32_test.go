package runtime

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

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
// resumes as float32; switching float32 on resume is refused by name.
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
	if _, err := ResumeTrainer(path, func(c *TrainConfig) { c.Float32 = false }); err == nil || !strings.Contains(err.Error(), "float32") {
		t.Fatalf("resume switching float32 off: %v, want an error naming float32", err)
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
