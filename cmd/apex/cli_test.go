package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/apexrl/apex/runtime"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers: the signal
// watcher writes to stderr while run does. onWrite, if set, sees every
// write (under the lock).
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	onWrite func(p []byte)
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onWrite != nil {
		s.onWrite(p)
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// withSignals makes run's signal subscription call subscribed with the
// channel the signals would arrive on (instead of subscribing to the
// process's signals) for the rest of the test. Run calls it right before
// training starts: the last moment between validation and training.
func withSignals(t *testing.T, subscribed func(c chan<- os.Signal)) {
	old := notifySignals
	notifySignals = func(c chan<- os.Signal, _ ...os.Signal) func() {
		subscribed(c)
		return func() {}
	}
	t.Cleanup(func() { notifySignals = old })
}

// readResults decodes dir/results.json into v.
func readResults(t *testing.T, dir string, v any) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("results.json: %v\n%s", err, raw)
	}
	return raw
}

// floatFlags lists the float flags a command's -h documents ("  -name float").
func floatFlags(t *testing.T, args ...string) []string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(append(args, "-h"), &out, &errb); code != 0 {
		t.Fatalf("%v -h: exit %d: %s", args, code, errb.String())
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^  -(\S+) float$`).FindAllStringSubmatch(out.String(), -1) {
		names = append(names, m[1])
	}
	return names
}

func TestParseFlagsRefusesNonFinite(t *testing.T) {
	for _, v := range []string{"NaN", "nan", "Inf", "+Inf", "-Inf", "infinity"} {
		fs := flag.NewFlagSet("apex test", flag.ContinueOnError)
		fs.Float64("a", 0, "")
		fs.Float64("x", 0, "")
		var out, errb bytes.Buffer
		code, ok := parseFlags(fs, []string{"-a=1.5", "-x=" + v}, &out, &errb)
		if ok || code != 2 || !strings.HasPrefix(errb.String(), "apex test: -x must be a finite number, got ") {
			t.Errorf("-x=%s: code %d ok %v, stderr %q", v, code, ok, errb.String())
		}
	}
}

// TestNonFiniteFlagsRefusedBeforeWork: every float flag of every command
// refuses NaN and infinities, naming the flag, before anything starts (the
// train command would otherwise train for its default 3 minutes, and the
// output folder would exist).
func TestNonFiniteFlagsRefusedBeforeWork(t *testing.T) {
	cmds := [][]string{{"train"}, {"bench"}}
	for _, e := range experiments {
		cmds = append(cmds, []string{"experiment", e.name})
	}
	tried := 0
	for _, cmd := range cmds {
		for _, name := range floatFlags(t, cmd...) {
			for _, v := range []string{"NaN", "Inf", "-Inf"} {
				out := filepath.Join(t.TempDir(), "out")
				args := append(append([]string(nil), cmd...), "-"+name+"="+v)
				if cmd[0] != "bench" {
					args = append(args, "-out", out)
				}
				var stdout, stderr bytes.Buffer
				code := run(args, &stdout, &stderr)
				want := "-" + name + " must be a finite number, got "
				if code != 2 || !strings.Contains(stderr.String(), want) || stdout.Len() != 0 {
					t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", args, code, stdout.String(), stderr.String(), want)
				}
				if _, err := os.Stat(out); err == nil {
					t.Errorf("%v: the output folder was made before the flag was refused", args)
				}
				tried++
			}
		}
	}
	if tried < 3*10 { // train alone has more than ten float flags
		t.Fatalf("only %d cases: the float flags were not found in -h", tried)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-target-return=NaN", "-steps=50"}, &stdout, &stderr); code != 2 ||
		stderr.String() != "apex: -target-return must be a finite number, got NaN\n" {
		t.Errorf("-target-return=NaN: exit %d, stderr %q", code, stderr.String())
	}
}

// TestTrainOutUnwritable: an output folder that cannot be made or written
// is refused before training, naming the folder.
func TestTrainOutUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, want string }{
		{"/proc/x", "cannot create the output folder"},
		{"/proc", "the output folder is not writable"}, // exists; no new files, even for root
		{filepath.Join(file, "sub"), "cannot create the output folder"},
	} {
		var out, errb bytes.Buffer
		code := run([]string{"-out", c.dir, "-duration=15s", "-stop-when-solved=false", "-progress=0"}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "-out "+c.dir+": "+c.want) || out.Len() != 0 {
			t.Errorf("-out %s: exit %d, stdout %q, stderr %q; want 2 and %q before any training", c.dir, code, out.String(), errb.String(), c.want)
		}
	}
	// The experiments prove their output folder too, before any run.
	for _, e := range experiments {
		var out, errb bytes.Buffer
		want := "apex experiment " + e.name + ": -out /proc: the output folder is not writable"
		if code := run([]string{"experiment", e.name, "-out", "/proc"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), want) {
			t.Errorf("experiment %s -out /proc: exit %d, stderr %q; want 1 and %q", e.name, code, errb.String(), want)
		}
	}
	entries, err := os.ReadDir(filepath.Dir(file))
	if err != nil || len(entries) != 1 {
		t.Errorf("the probe left files behind: %v %v", entries, err)
	}
}

// TestTrainNegativeFlags: -progress=-1s is refused (it meant "off"), and
// so is every negative count or time, naming the flag, before any work.
func TestTrainNegativeFlags(t *testing.T) {
	var out, errb bytes.Buffer
	dir := filepath.Join(t.TempDir(), "out")
	if code := run([]string{"-progress=-1s", "-out", dir}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "-progress must not be negative, got -1s") {
		t.Errorf("-progress=-1s: exit %d, stderr %q", code, errb.String())
	}
	// Counts and times name their flag (the runtime's own checks name the
	// TrainConfig field).
	for _, a := range []string{"-checkpoint-every=-1s", "-min-replay=-1", "-duration=-1s", "-steps=-5", "-batch=-1",
		"-random-steps=-1", "-epsilon-decay=-1", "-ter-roots=-1", "-ter-preds=-1", "-ners-interval=-1", "-ners-sample=-1"} {
		errb.Reset()
		name, val, _ := strings.Cut(a, "=")
		want := "apex: " + name + " must not be negative, got " + val + "\n"
		if code := run([]string{a, "-out", dir}, &out, &errb); code != 2 || errb.String() != want {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", a, code, errb.String(), want)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("the output folder was made before the flags were refused")
	}
}

// TestTrainBatch1000: batches above 950 work (the minimum replay size is
// derived from the batch, and -min-replay sets it).
func TestTrainBatch1000(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, c := range []struct {
		extra   []string
		minSize int
	}{{nil, 1050}, {[]string{"-min-replay=1200"}, 1200}} {
		dir := t.TempDir()
		var out, errb bytes.Buffer
		args := append([]string{"-batch=1000", "-steps=2", "-duration=30s", "-actors=2", "-capacity=5000", "-progress=0",
			"-checkpoint=none", "-out", dir}, c.extra...)
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		var res struct {
			Config struct {
				Batch   int `json:"batch"`
				MinSize int `json:"min_size_to_sample"`
			} `json:"config"`
			LearnerSteps int64 `json:"learner_steps"`
		}
		raw := readResults(t, dir, &res)
		if res.Config.Batch != 1000 || res.Config.MinSize != c.minSize || res.LearnerSteps != 2 {
			t.Errorf("%v: results.json %s", c.extra, raw)
		}
	}
}

// TestHelpOnce: every command's -h prints its usage once, on stdout.
func TestHelpOnce(t *testing.T) {
	cmds := [][]string{{"-h"}, {"train", "-h"}, {"-help"}, {"bench", "-h"}, {"experiment", "-h"}, {"methods", "-h"}, {"certs", "-h"}, {"health", "-h"}}
	for _, e := range experiments {
		cmds = append(cmds, []string{"experiment", e.name, "-h"})
	}
	for _, args := range cmds {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		if code != 0 || strings.Count(out.String(), "usage: ") != 1 || errb.Len() != 0 {
			t.Errorf("%v: exit %d, %d usage lines on stdout, stderr %q", args, code, strings.Count(out.String(), "usage: "), errb.String())
		}
	}
	// A bad flag prints the flag package's message and the usage once, on stderr.
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "-nosuchflag"}, &out, &errb); code != 2 || strings.Count(errb.String(), "usage: ") != 1 || out.Len() != 0 {
		t.Errorf("bench -nosuchflag: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

// TestTrainJSONLogsWithMetrics: with -log-format=json every line is a
// JSON record, the metrics address included, and a non-loopback address
// logs a warning that /metrics and pprof are exposed.
func TestTrainJSONLogsWithMetrics(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, c := range []struct {
		args []string
		warn bool
	}{
		{[]string{"-metrics-addr=127.0.0.1:0"}, false},
		{[]string{"-metrics-addr=0.0.0.0:0", "-metrics-allow-remote"}, true},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"-actors=2", "-steps=30", "-duration=0", "-capacity=2000", "-progress=0", "-log-format=json",
			"-checkpoint=none", "-out", t.TempDir()}, c.args...)
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errb.String())
		}
		msgs := map[string]map[string]any{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("%v: not a JSON record: %q (%v)", c.args, line, err)
			}
			msgs[rec["msg"].(string)] = rec
		}
		if m := msgs["metrics"]; m == nil || !strings.HasSuffix(m["metrics_url"].(string), "/metrics") {
			t.Errorf("%v: no metrics record: %v", c.args, msgs)
		}
		var warned bool
		for msg, rec := range msgs {
			warned = warned || rec["level"] == "WARN" && strings.Contains(msg, "exposed to the network")
		}
		if warned != c.warn {
			t.Errorf("%v: exposure warning %v, want %v: %s", c.args, warned, c.warn, out.String())
		}
	}
}

// TestTrainResultsWhenCheckpointFails: a checkpoint that cannot be written
// at the end (its folder turned into a file after the run was validated)
// still leaves results.json and curve.png, and the error names the
// checkpoint file; the exit status is 1.
func TestTrainResultsWhenCheckpointFails(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	ckDir := filepath.Join(dir, "ck")
	ck := filepath.Join(ckDir, "run.apex")
	out := filepath.Join(dir, "out")
	withSignals(t, func(chan<- os.Signal) { // validated: now break the folder
		if err := os.RemoveAll(ckDir); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(ckDir, []byte("not a folder"), 0o644); err != nil {
			t.Error(err)
		}
	})
	if err := os.MkdirAll(ckDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"-actors=2", "-steps=30", "-duration=0", "-capacity=2000", "-progress=0", "-checkpoint", ck,
		"-checkpoint-every=0", "-out", out}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "checkpoint") || !strings.Contains(stderr.String(), ck) {
		t.Fatalf("exit %d, stderr %q: want 1 and an error naming the checkpoint %s", code, stderr.String(), ck)
	}
	var res struct {
		StopReason   string `json:"stop_reason"`
		LearnerSteps int64  `json:"learner_steps"`
	}
	if raw := readResults(t, out, &res); res.StopReason != "steps" || res.LearnerSteps != 30 {
		t.Errorf("results.json: %s", raw)
	}
	if st, err := os.Stat(filepath.Join(out, "curve.png")); err != nil || st.Size() == 0 {
		t.Errorf("curve.png: %v", err)
	}
	if !strings.Contains(stdout.String(), "checkpoint=none") {
		t.Errorf("the done record claims a checkpoint: %s", stdout.String())
	}
}

// TestTrainInterruptExitCodes: a run stopped by SIGINT, SIGTERM or SIGHUP
// writes its results and checkpoint, says it was interrupted and exits
// 128+signal.
func TestTrainInterruptExitCodes(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, c := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{{syscall.SIGINT, "SIGINT", 130}, {syscall.SIGTERM, "SIGTERM", 143}, {syscall.SIGHUP, "SIGHUP", 129}} {
		withSignals(t, func(ch chan<- os.Signal) { ch <- c.sig })
		dir := t.TempDir()
		var stdout, stderr syncBuffer
		code := run([]string{"-actors=2", "-capacity=2000", "-duration=60s", "-stop-when-solved=false", "-progress=0", "-out", dir}, &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), "interrupted by "+c.name) {
			t.Errorf("%s: exit %d, stderr %q; want %d", c.name, code, stderr.String(), c.code)
		}
		var res struct {
			StopReason string `json:"stop_reason"`
		}
		if raw := readResults(t, dir, &res); res.StopReason != "interrupted" {
			t.Errorf("%s: results.json %s", c.name, raw)
		}
		if _, err := os.Stat(filepath.Join(dir, "checkpoint.apex")); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if !strings.Contains(stdout.String(), "msg=\"interrupted: stopping") || !strings.Contains(stdout.String(), "stop_reason=interrupted") {
			t.Errorf("%s: log %s", c.name, stdout.String())
		}
	}
}

// TestTrainSecondSignal: a second signal exits at once, 128+signal, saying
// which checkpoint is the last one on disk.
func TestTrainSecondSignal(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	ck := filepath.Join(dir, "run.apex")
	if err := os.WriteFile(ck, []byte("an earlier checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	exited := make(chan int, 1)
	old := exitNow
	exitNow = func(code int) { exited <- code }
	t.Cleanup(func() { exitNow = old })
	withSignals(t, func(ch chan<- os.Signal) { ch <- syscall.SIGINT; ch <- syscall.SIGTERM })
	var stdout, stderr syncBuffer
	run([]string{"-actors=2", "-capacity=2000", "-duration=60s", "-stop-when-solved=false", "-progress=0", "-checkpoint", ck, "-out", dir}, &stdout, &stderr)
	select {
	case code := <-exited:
		if code != 143 {
			t.Errorf("second signal SIGTERM: exit %d, want 143", code)
		}
	default:
		t.Fatalf("the second signal did not exit; stderr %q", stderr.String())
	}
	if want := "apex: second interrupt (SIGTERM): exiting now; the last periodic checkpoint is " + ck; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr.String(), want)
	}
}

// TestResumeWritesOwnCheckpoint: -resume FILE writes this run's checkpoint
// (<out>/checkpoint.apex by default), never the path recorded in FILE: a
// copy resumed elsewhere leaves the original run's checkpoint alone.
func TestResumeWritesOwnCheckpoint(t *testing.T) {
	defer goleak.VerifyNone(t)
	first, second := t.TempDir(), t.TempDir()
	orig := filepath.Join(first, "checkpoint.apex")
	var out, errb bytes.Buffer
	if code := run([]string{"-actors=2", "-steps=40", "-duration=0", "-capacity=2000", "-progress=0", "-out", first}, &out, &errb); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errb.String())
	}
	before, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(second, "copy.apex")
	if err := os.WriteFile(cp, before, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"-resume", cp, "-steps=60", "-duration=0", "-progress=0", "-out", second}, &out, &errb); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errb.String())
	}
	if after, err := os.ReadFile(orig); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the resumed copy wrote over the original run's checkpoint %s (%v)", orig, err)
	}
	if after, err := os.ReadFile(cp); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the resumed run wrote over the file it resumed from %s (%v)", cp, err)
	}
	if _, err := os.Stat(filepath.Join(second, "checkpoint.apex")); err != nil {
		t.Errorf("no checkpoint in the resumed run's -out: %v", err)
	}
	var res struct {
		LearnerSteps int64 `json:"learner_steps"`
		Config       struct {
			Checkpoint string `json:"checkpoint"`
		} `json:"config"`
	}
	if raw := readResults(t, second, &res); res.LearnerSteps != 60 || res.Config.Checkpoint != filepath.Join(second, "checkpoint.apex") {
		t.Errorf("resumed results.json: %s", raw)
	}
}

// TestNewEval: a progress record shows an evaluation once, not again on
// the records after it (the records before showed it as current).
func TestNewEval(t *testing.T) {
	none := runtime.TrainStats{}
	e1 := runtime.TrainStats{Evaluated: true, LastEval: 12, Evaluations: 1}
	e2 := runtime.TrainStats{Evaluated: true, LastEval: 31, Evaluations: 2}
	e3 := runtime.TrainStats{Evaluated: true, LastEval: 31, Evaluations: 3} // the same mean again: still new
	for _, c := range []struct {
		name         string
		reported, st runtime.TrainStats
		want         bool
	}{
		{"before any evaluation", none, none, false},
		{"the first evaluation", none, e1, true},
		{"the first evaluation again", e1, e1, false},
		{"a new evaluation", e1, e2, true},
		{"the new one again", e2, e2, false},
		{"a new evaluation with the same mean", e2, e3, true},
	} {
		if got := newEval(c.reported, c.st); got != c.want {
			t.Errorf("%s: newEval %v, want %v", c.name, got, c.want)
		}
	}
}

// TestTrainInterruptSubprocess: the real binary, sent SIGINT by its pid
// while it trains, stops gracefully: results.json says interrupted, the
// checkpoint is written, and the exit status is 130.
func TestTrainInterruptSubprocess(t *testing.T) {
	bin := apexBinary(t) // kill_test.go
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.CommandContext(ctx, bin, "-actors=2", "-capacity=5000", "-duration=2m", "-stop-when-solved=false",
		"-progress=50ms", "-log-format=json", "-checkpoint-every=0", "-out", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var records []map[string]any
	sc := bufio.NewScanner(pipe)
	signalled := false
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Errorf("not a JSON record: %q", sc.Text())
			continue
		}
		records = append(records, rec)
		if rec["msg"] == "progress" && !signalled && rec["learner_steps"].(float64) > 0 {
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			signalled = true
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !signalled || !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("signalled %v, exit %v (want 130); stderr:\n%s", signalled, err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "apex: interrupted by SIGINT") {
		t.Errorf("stderr %q does not say the run was interrupted", stderr.String())
	}
	var res struct {
		StopReason   string `json:"stop_reason"`
		LearnerSteps int64  `json:"learner_steps"`
	}
	if raw := readResults(t, out, &res); res.StopReason != "interrupted" || res.LearnerSteps == 0 {
		t.Errorf("results.json: %s", raw)
	}
	if st, err := os.Stat(filepath.Join(out, "checkpoint.apex")); err != nil || st.Size() == 0 {
		t.Errorf("checkpoint: %v", err)
	}
	if last := records[len(records)-1]; last["msg"] != "done" || last["stop_reason"] != "interrupted" {
		t.Errorf("last record: %v", last)
	}
}

// TestTrainPeriodicCheckpointFailureWarns: a periodic checkpoint that
// cannot be written is logged as a warning while the run goes on (here the
// warning interrupts the run; without it the run would last its 60 s).
func TestTrainPeriodicCheckpointFailureWarns(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	ckDir := filepath.Join(dir, "ck")
	if err := os.MkdirAll(ckDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var sigs chan<- os.Signal
	withSignals(t, func(c chan<- os.Signal) {
		sigs = c
		if err := os.RemoveAll(ckDir); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(ckDir, nil, 0o644); err != nil {
			t.Error(err)
		}
	})
	stdout := &syncBuffer{}
	sent := false
	stdout.onWrite = func(p []byte) {
		if !sent && bytes.Contains(p, []byte(`"msg":"checkpoint failed"`)) {
			sigs <- os.Interrupt
			sent = true
		}
	}
	var stderr syncBuffer
	code := run([]string{"-actors=2", "-capacity=2000", "-duration=60s", "-stop-when-solved=false", "-progress=20ms", "-log-format=json",
		"-checkpoint", filepath.Join(ckDir, "run.apex"), "-checkpoint-every=50ms", "-out", dir}, stdout, &stderr)
	if !sent {
		t.Fatalf("no checkpoint failure warning; exit %d; log:\n%s", code, stdout.String())
	}
	if code != 1 || !strings.Contains(stderr.String(), filepath.Join(ckDir, "run.apex")) {
		t.Errorf("exit %d, stderr %q: want 1 (the final checkpoint fails too) naming the checkpoint", code, stderr.String())
	}
	var res struct {
		StopReason string `json:"stop_reason"`
	}
	if raw := readResults(t, dir, &res); res.StopReason != "interrupted" {
		t.Errorf("results.json: %s", raw)
	}
}
