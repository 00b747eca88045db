package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apexrl/apex/checkpoint"
)

func smallRun(path string) TrainConfig {
	return TrainConfig{Actors: 2, Steps: 120, Capacity: 3000, MinSizeToSample: 200, EvalEvery: time.Hour,
		EvalEpisodes: 1, FinalEpisodes: 2, Seed: 3, Checkpoint: path}
}

func savedBuffer(t *testing.T, tr *Trainer) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := tr.buf.Save(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestCheckpointResumeRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.ckpt")
	tr, err := NewTrainer(smallRun(path))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantBuf := savedBuffer(t, tr)
	st := tr.Stats()

	re, err := ResumeTrainer(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(savedBuffer(t, re), wantBuf) {
		t.Fatal("the resumed replay buffer differs (contents, priorities, generations or counters)")
	}
	for name, pair := range map[string][2][]float64{
		"online": {dqnOf(tr).Net().Params(), dqnOf(re).Net().Params()},
		"target": {dqnOf(tr).Target().Params(), dqnOf(re).Target().Params()},
	} {
		if !slices.Equal(pair[0], pair[1]) {
			t.Fatalf("the resumed %s network differs", name)
		}
	}
	// Load publishes the restored weights once; every other counter is as saved.
	ws, gs := dqnOf(tr).Stats(), dqnOf(re).Stats()
	gs.Publishes--
	if ws != gs {
		t.Fatalf("learner counters: resumed %+v, saved %+v", gs, ws)
	}
	rs := re.Stats()
	if rs.LearnerSteps != st.LearnerSteps || rs.EnvSteps != st.EnvSteps || rs.Episodes != st.Episodes || re.cfg.Resumes != 1 {
		t.Fatalf("counters: resumed %+v, saved %+v", rs, st)
	}
	if re.limiter.snapshot() != tr.limiter.snapshot() {
		t.Fatal("the rate limiter's balance was not restored")
	}
	// The resumed run continues to its new total of learner steps.
	re2, err := ResumeTrainer(path, func(c *TrainConfig) { c.Steps = 200 })
	if err != nil {
		t.Fatal(err)
	}
	res, err := re2.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.LearnerSteps != 200 || res.EnvSteps <= st.EnvSteps {
		t.Fatalf("resumed run: %d learner steps, %d env steps (saved %d)", res.LearnerSteps, res.EnvSteps, st.EnvSteps)
	}
}

// savedRun runs smallRun with its checkpoint in dir and returns the
// trainer, the checkpoint's path and its bytes.
func savedRun(t *testing.T, dir string) (*Trainer, string, []byte) {
	t.Helper()
	path := filepath.Join(dir, "run.ckpt")
	tr, err := NewTrainer(smallRun(path))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return tr, path, data
}

func TestCheckpointErrors(t *testing.T) {
	dir := t.TempDir()
	_, path, good := savedRun(t, dir)
	n := 0
	write := func(b []byte) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("bad%d.ckpt", n))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x40
	hdr := bytes.Clone(good)
	hdr[40] ^= 1
	js, rest := splitCheckpoint(t, good)
	var stage bytes.Buffer
	checkpoint.Save(&stage, "sampler.NERS", 1, func(io.Writer) error { return nil })
	var h map[string]any
	if err := json.Unmarshal(js, &h); err != nil {
		t.Fatal(err)
	}
	h["parts"] = []string{partBuffer, partLearner, partStage}
	withStage, _ := json.Marshal(h)
	h["parts"] = []string{partBuffer, partLearner, "optimizer moments"}
	unknown, _ := json.Marshal(h)
	for name, c := range map[string]struct {
		path string
		over func(*TrainConfig)
		want string
	}{
		"missing":      {filepath.Join(dir, "nope.ckpt"), nil, "no such file"},
		"not ours":     {write([]byte("hello, world, not a checkpoint")), nil, "bad magic"},
		"truncated":    {write(good[:len(good)-100]), nil, "truncated"},
		"byte flipped": {write(flipped), nil, "checksum"},
		"header":       {write(hdr), nil, "header"},
		"stage state for a stateless stage": {write(joinCheckpoint(withStage, append(bytes.Clone(rest), stage.Bytes()...))), nil,
			`the checkpoint holds the parts ["replay buffer" "learner" "sampler stage"], but this dqn run (sampler per) has ["replay buffer" "learner"]`},
		"unknown part":                  {write(joinCheckpoint(unknown, rest)), nil, `holds the parts ["replay buffer" "learner" "optimizer moments"]`},
		"a section after the last part": {write(append(bytes.Clone(good), stage.Bytes()...)), nil, "a sampler.NERS version 1 section after the last part"},
		"bytes after the last part":     {write(append(bytes.Clone(good), 1, 2, 3)), nil, "after the last part"},
	} {
		_, err := ResumeTrainer(c.path, c.over)
		if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want ErrCheckpoint mentioning %q", name, err, c.want)
		}
	}
	// A flag that conflicts with the file is the resume's fault, not the
	// file's: it is not called a bad checkpoint.
	_, err := ResumeTrainer(path, func(c *TrainConfig) { c.Env = "Acrobot-v1" })
	if !errors.Is(err, ErrResumeConflict) || errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), "cannot change") {
		t.Errorf("other env: got %v, want ErrResumeConflict mentioning %q", err, "cannot change")
	}
}

// TestCheckpointLegacyFixtures: the checkpoints the release before the
// checkpoint package wrote (APEXTRN1 version 2: a dqn CartPole run and a
// td3 Pendulum run, kept in testdata) are refused with an error that names
// their format and version and says what to do; so is a version 1 file.
func TestCheckpointLegacyFixtures(t *testing.T) {
	for _, name := range []string{"legacy-apextrn1-v2-dqn-cartpole.ckpt", "legacy-apextrn1-v2-td3-pendulum.ckpt"} {
		path := filepath.Join("testdata", name)
		_, err := ResumeTrainer(path, nil)
		var le *checkpoint.LegacyError
		if !errors.Is(err, ErrCheckpoint) || !errors.As(err, &le) || le.Magic != "APEXTRN1" || le.Version != 2 {
			t.Fatalf("%s: %v, want ErrCheckpoint and a checkpoint.LegacyError for APEXTRN1 version 2", name, err)
		}
		for _, want := range []string{path, "APEXTRN1 version 2 (a training checkpoint), written by apex before the unified checkpoint format",
			"resume it with the apex release that wrote it, or start a new run"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", name, err, want)
			}
		}
	}
	data, err := os.ReadFile(filepath.Join("testdata", "legacy-apextrn1-v2-dqn-cartpole.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	data[8] = 1 // version 1, as written before stateful stages
	path := filepath.Join(t.TempDir(), "v1.ckpt")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ResumeTrainer(path, nil); !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), "APEXTRN1 version 1") {
		t.Errorf("a version 1 file: %v", err)
	}
}

// TestCheckpointDropsIgnoredSettings: a checkpoint saved before settings
// its run ignored were refused (here a dqn run carrying td3's Sigma and
// ter's ter_eta option, in the field of earlier releases) still resumes,
// without them; setting one again on resume is the caller's error, not
// the file's.
func TestCheckpointDropsIgnoredSettings(t *testing.T) {
	dir := t.TempDir()
	_, _, good := savedRun(t, dir)
	hjs, rest := splitCheckpoint(t, good)
	var h map[string]json.RawMessage
	if err := json.Unmarshal(hjs, &h); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(h["config"], &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["sigma"], cfg["ter_eta"] = 0.3, 0.4
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h["config"] = js
	hj, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "old.ckpt")
	if err := os.WriteFile(path, joinCheckpoint(hj, rest), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := ResumeTrainer(path, nil)
	if err != nil {
		t.Fatalf("a checkpoint carrying ignored settings: %v", err)
	}
	if c := tr.Config(); c.Sigma != 0 || c.Option("ter-eta") != 0 || c.Algo != "dqn" {
		t.Errorf("resumed config kept ignored settings: algo %s, Sigma %v, ter-eta %v", c.Algo, c.Sigma, c.Option("ter-eta"))
	}
	_, err = ResumeTrainer(path, func(c *TrainConfig) { c.Sigma = 0.2 })
	if err == nil || errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), "Sigma (-sigma)") {
		t.Errorf("resume setting Sigma on a dqn run: %v, want the setting refused (not ErrCheckpoint)", err)
	}
}
