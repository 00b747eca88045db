package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apexrl/apex/checkpoint"
)

var (
	apexOnce sync.Once
	apexBin  string
	apexErr  error
)

// apexBinary builds the apex binary once per test process (go build into
// a temporary folder removed when the tests end) and returns its path.
// Tests that run the real program as a process use it.
func apexBinary(t *testing.T) string {
	t.Helper()
	apexOnce.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			apexErr = err
			return
		}
		dir, err := os.MkdirTemp("", "apex-bin")
		if err != nil {
			apexErr = err
			return
		}
		apexBin = filepath.Join(dir, "apex")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if b, err := exec.CommandContext(ctx, gobin, "build", "-o", apexBin, ".").CombinedOutput(); err != nil {
			apexErr = &buildError{err, b}
		}
	})
	if apexErr != nil {
		t.Fatalf("building the apex binary (the go command is needed): %v", apexErr)
	}
	return apexBin
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

// checkpointCounters reads the run counters from a training checkpoint's
// JSON header (format in runtime/checkpoint.go: magic, version, header
// length, header).
func checkpointCounters(t *testing.T, path string) (seconds float64, learnerSteps int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The file's first section is the trainer's JSON header.
	var head map[string]json.RawMessage
	if err := checkpoint.Load(f, "runtime.Trainer", 1, func(_ uint32, r io.Reader) error {
		return checkpoint.ReadJSON(r, &head, 1<<26)
	}); err != nil {
		t.Fatalf("%s is not a training checkpoint: %v", path, err)
	}
	var c struct {
		Seconds      float64 `json:"seconds"`
		LearnerSteps int64   `json:"learner_steps"`
	}
	if err := json.Unmarshal(head["counters"], &c); err != nil {
		t.Fatal(err)
	}
	return c.Seconds, c.LearnerSteps
}

// TestSIGKILLLosesAtMostOneInterval: a training process killed with
// SIGKILL (by its own pid) at a random moment leaves a checkpoint at most
// one -checkpoint-every interval (plus the save's own time) behind the
// moment of the kill; the run resumes from it, in another -out, without
// touching the killed run's checkpoint.
func TestSIGKILLLosesAtMostOneInterval(t *testing.T) {
	bin := apexBinary(t)
	seed := uint64(20261126) // fixed; APEX_KILL_SEED picks other moments
	if s := os.Getenv("APEX_KILL_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	killAt := 2.5 + 2*rng.Float64() // seconds into the run
	const every = time.Second
	// slack covers a save's own time and the progress records' period.
	const slack = 1.5
	t.Logf("seed %d (APEX_KILL_SEED): SIGKILL after %.2f s of training", seed, killAt)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	out := filepath.Join(dir, "run")
	cmd := exec.CommandContext(ctx, bin, "-actors=4", "-capacity=20000", "-duration=2m", "-stop-when-solved=false",
		"-progress=100ms", "-log-format=json", "-checkpoint-every="+every.String(), "-out", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type point struct {
		elapsed float64
		steps   int64
	}
	var progress []point
	killed := false
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		var rec struct {
			Msg          string  `json:"msg"`
			Elapsed      float64 `json:"elapsed_s"`
			LearnerSteps int64   `json:"learner_steps"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Msg != "progress" {
			continue
		}
		progress = append(progress, point{rec.Elapsed, rec.LearnerSteps})
		if !killed && rec.Elapsed >= killAt {
			if err := cmd.Process.Kill(); err != nil { // SIGKILL, by the process's own pid
				t.Fatal(err)
			}
			killed = true
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("seed %d: the run ended before the kill; stderr:\n%s", seed, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(out, "results.json")); err == nil {
		t.Fatalf("seed %d: a killed run wrote results.json", seed)
	}
	ck := filepath.Join(out, "checkpoint.apex")
	secs, steps := checkpointCounters(t, ck)
	killed_ := progress[len(progress)-1]
	// Work done up to one interval (and the slack) before the kill is in
	// the checkpoint.
	var due point
	for _, p := range progress {
		if p.elapsed <= killed_.elapsed-every.Seconds()-slack {
			due = p
		}
	}
	t.Logf("killed at %.2f s, %d learner steps; the checkpoint holds %.2f s, %d steps", killed_.elapsed, killed_.steps, secs, steps)
	if secs < killed_.elapsed-every.Seconds()-slack || steps < due.steps {
		t.Fatalf("seed %d: the checkpoint (%.2f s, %d steps) is more than one interval behind the kill (%.2f s, %d steps; %d steps were done at %.2f s)",
			seed, secs, steps, killed_.elapsed, killed_.steps, due.steps, due.elapsed)
	}
	before, err := os.ReadFile(ck)
	if err != nil {
		t.Fatal(err)
	}

	// Resume into another folder: the run goes on from the checkpoint.
	out2 := filepath.Join(dir, "resumed")
	res := exec.CommandContext(ctx, bin, "-resume", ck, "-duration=1s", "-progress=0", "-out", out2)
	if b, err := res.CombinedOutput(); err != nil {
		t.Fatalf("seed %d: resume: %v\n%s", seed, err, b)
	}
	var r struct {
		LearnerSteps int64  `json:"learner_steps"`
		StopReason   string `json:"stop_reason"`
		Config       struct {
			Resumes    int    `json:"resumes"`
			Checkpoint string `json:"checkpoint"`
		} `json:"config"`
	}
	raw, err := os.ReadFile(filepath.Join(out2, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if r.LearnerSteps < steps || r.Config.Resumes != 1 || r.StopReason != "duration" || r.Config.Checkpoint != filepath.Join(out2, "checkpoint.apex") {
		t.Fatalf("seed %d: the resumed run's results.json: %s", seed, raw)
	}
	if after, err := os.ReadFile(ck); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("seed %d: resuming changed the killed run's checkpoint (%v)", seed, err)
	}
}
