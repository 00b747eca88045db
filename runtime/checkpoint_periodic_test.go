package runtime

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"testing"
	"time"
)

// TestPeriodicCheckpoints: a run with CheckpointEvery writes checkpoints
// while it runs, each of which resumes, with the rate limiter's balance in
// the terms of what the checkpoint's buffer holds.
func TestPeriodicCheckpoints(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.ckpt")
	cfg := smallRun(path)
	cfg.Steps = 0
	cfg.Duration = 1500 * time.Millisecond
	cfg.CheckpointEvery = 100 * time.Millisecond
	tr, err := NewTrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		res *TrainResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := tr.Run(ctx)
		done <- result{res, err}
	}()
	// Copy checkpoints as they appear, while the run goes on.
	var copies [][]byte
	deadline := time.Now().Add(30 * time.Second)
	for len(copies) < 3 && time.Now().Before(deadline) {
		time.Sleep(150 * time.Millisecond)
		if data, err := os.ReadFile(path); err == nil && (len(copies) == 0 || !bytes.Equal(data, copies[len(copies)-1])) {
			copies = append(copies, data)
		}
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(copies) < 3 {
		t.Fatalf("only %d distinct checkpoints appeared while the run ran", len(copies))
	}
	st := tr.Stats().Checkpoints
	if st.Saved < 4 || st.Failed != 0 || st.LastBytes <= 0 {
		t.Fatalf("checkpoint stats %+v, want at least 4 saved (periodic and final), none failed", st)
	}
	if r.res.StopReason != StopDuration {
		t.Errorf("stop reason %q, want %q", r.res.StopReason, StopDuration)
	}
	for i, data := range copies {
		p := filepath.Join(dir, "copy.ckpt")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		re, err := ResumeTrainer(p, nil)
		if err != nil {
			t.Fatalf("mid-run checkpoint %d: %v", i, err)
		}
		if got, want := re.limiter.snapshot().inserted, int64(re.buf.Stats().Inserts); got != want {
			t.Errorf("mid-run checkpoint %d: the limiter counts %d inserted items, its buffer holds %d inserts", i, got, want)
		}
		if got, want := re.limiter.snapshot().sampled, int64(re.agent.steps())*int64(re.agent.batch); got != want {
			t.Errorf("mid-run checkpoint %d: the limiter counts %d sampled items, its learner took %d steps of %d", i, got, re.agent.steps(), re.agent.batch)
		}
		if re.Stats().LearnerSteps != int64(re.agent.steps()) {
			t.Errorf("mid-run checkpoint %d: counters say %d learner steps, the learner %d", i, re.Stats().LearnerSteps, re.agent.steps())
		}
	}
}

// TestSaveCheckpointDuringRun: an embedder's SaveCheckpoint while Run runs
// (which used to write files that failed to load) writes a checkpoint that
// resumes.
func TestSaveCheckpointDuringRun(t *testing.T) {
	dir := t.TempDir()
	cfg := smallRun("")
	cfg.Steps = 0
	cfg.Duration = time.Second
	tr, err := NewTrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() { _, runErr = tr.Run(context.Background()) })
	for i := range 5 {
		time.Sleep(120 * time.Millisecond)
		p := filepath.Join(dir, "live.ckpt")
		if err := tr.SaveCheckpoint(p); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		if _, err := ResumeTrainer(p, nil); err != nil {
			t.Fatalf("save %d during Run does not resume: %v", i, err)
		}
	}
	wg.Wait()
	if runErr != nil {
		t.Fatal(runErr)
	}
}

// TestRunOnce: a second Run, concurrent or after the first, is refused.
func TestRunOnce(t *testing.T) {
	cfg := smallRun("")
	cfg.Steps = 0
	cfg.Duration = 300 * time.Millisecond
	tr, err := NewTrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { _, errs[i] = tr.Run(context.Background()) })
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), ErrRunOnce) {
		t.Fatalf("two concurrent Runs: %v and %v, want one success and one ErrRunOnce", errs[0], errs[1])
	}
	if _, err := tr.Run(context.Background()); !errors.Is(err, ErrRunOnce) {
		t.Fatalf("Run after Run: %v, want ErrRunOnce", err)
	}
}

// TestStaleTemporaryFilesRemoved: temporary files that crashed saves left
// behind are removed when a run with that checkpoint starts; other files
// are not.
func TestStaleTemporaryFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.ckpt")
	stale := []string{path + ".tmp123", path + ".tmp9999"}
	keep := []string{path + ".tmp", filepath.Join(dir, "other.ckpt.tmp1"), path + ".failed"}
	for _, p := range append(append([]string(nil), stale...), keep...) {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewTrainer(smallRun(path)); err != nil {
		t.Fatal(err)
	}
	for _, p := range stale {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: still there (%v)", filepath.Base(p), err)
		}
	}
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(p), err)
		}
	}
}

// TestResumeCopyLeavesOriginal: resuming from a copied checkpoint does not
// write to the path recorded inside it (which used to overwrite the
// original run's newer checkpoint).
func TestResumeCopyLeavesOriginal(t *testing.T) {
	dir := t.TempDir()
	_, path, orig := savedRun(t, dir)
	cp := filepath.Join(t.TempDir(), "copy.ckpt")
	if err := os.WriteFile(cp, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	re, err := ResumeTrainer(cp, func(c *TrainConfig) { c.Steps = 200 })
	if err != nil {
		t.Fatal(err)
	}
	if re.Config().Checkpoint != "" {
		t.Fatalf("the resumed run writes to %q; only the override says where", re.Config().Checkpoint)
	}
	if _, err := re.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, orig) {
		t.Fatalf("the original checkpoint changed (%v)", err)
	}
	// With Checkpoint set by the override, the resumed run writes there.
	dst := filepath.Join(t.TempDir(), "next.ckpt")
	re2, err := ResumeTrainer(cp, func(c *TrainConfig) { c.Steps = 200; c.Checkpoint = dst })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := re2.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dst); err != nil {
		t.Fatal(err)
	}
}

// TestStopReasonsAndRecords: the result says why the run stopped and holds
// the effective configuration, the build and the machine.
func TestStopReasonsAndRecords(t *testing.T) {
	run := func(cfg TrainConfig, ctx context.Context) *TrainResult {
		t.Helper()
		tr, err := NewTrainer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		res, err := tr.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run(smallRun(""), context.Background())
	if res.StopReason != StopSteps {
		t.Errorf("Steps run: stop reason %q", res.StopReason)
	}
	if c := res.Config; c.Batch != 64 || c.LR != 1e-3 || c.MinSizeToSample != 200 || c.NStep != 3 {
		t.Errorf("effective config: batch %d, lr %v, min size %d, n-step %d; want 64, 0.001, 200, 3", c.Batch, c.LR, c.MinSizeToSample, c.NStep)
	}
	if res.Build.GoVersion != goruntime.Version() || res.Machine.CPUs != goruntime.NumCPU() || res.Machine.OS != goruntime.GOOS {
		t.Errorf("records: build %+v, machine %+v", res.Build, res.Machine)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := smallRun("")
	cfg.Steps, cfg.Duration = 0, time.Hour
	if res := run(cfg, ctx); res.StopReason != StopInterrupted {
		t.Errorf("cancelled run: stop reason %q", res.StopReason)
	}
	cfg = smallRun("")
	cfg.Steps, cfg.Duration = 0, 200*time.Millisecond
	if res := run(cfg, context.Background()); res.StopReason != StopDuration {
		t.Errorf("Duration run: stop reason %q", res.StopReason)
	}
	// CartPole returns at least 8 from any policy: a target of 1 is met by
	// the first evaluation and confirmed.
	cfg = smallRun("")
	cfg.Steps, cfg.Duration, cfg.TargetReturn, cfg.EvalEvery = 0, time.Minute, 1, 20*time.Millisecond
	if res := run(cfg, context.Background()); res.StopReason != StopSolved || !res.StoppedByTarget {
		t.Errorf("solved run: stop reason %q", res.StopReason)
	}
	// The default MinSizeToSample follows the batch (it used to refuse
	// batches above 950 with an error about a setting without a flag).
	cfg = smallRun("")
	cfg.MinSizeToSample, cfg.Batch, cfg.Capacity, cfg.Steps = 0, 1000, 5000, 1
	tr, err := NewTrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Config().MinSizeToSample; got != 1050 {
		t.Errorf("MinSizeToSample with batch 1000: %d, want 1050", got)
	}
}

// TestCheckpointSaveMemory: a save streams: it allocates a small fraction
// of the checkpoint's size (the replay buffer is most of it).
func TestCheckpointSaveMemory(t *testing.T) {
	cfg := smallRun("")
	cfg.Capacity = 1 << 17
	tr, err := NewTrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "big.ckpt")
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	if err := tr.SaveCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	goruntime.ReadMemStats(&after)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("checkpoint %d bytes, save allocated %d bytes (%.1f%%)", fi.Size(), alloc, 100*float64(alloc)/float64(fi.Size()))
	if fi.Size() < 8<<20 {
		t.Fatalf("checkpoint of %d bytes: too small to measure", fi.Size())
	}
	if alloc > uint64(fi.Size())/5 {
		t.Fatalf("the save allocated %d bytes for a %d-byte checkpoint: it does not stream", alloc, fi.Size())
	}
}

// TestResumeMemory: a resume reads the replay's columns straight into the
// buffer's records: it allocates the buffer once, not a second copy of
// its columns as well (23.6 MB before, 14.2 MB after, for this 9.1 MB
// checkpoint and 9.6 MB buffer).
func TestResumeMemory(t *testing.T) {
	cfg := smallRun("")
	cfg.Capacity = 1 << 17
	tr, err := NewTrainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "big.ckpt")
	if err := tr.SaveCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	re, err := ResumeTrainer(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	goruntime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	held, err := re.buf.Config().MemoryBytes()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("checkpoint %d bytes, buffer %d bytes, resume allocated %d bytes", fi.Size(), held, alloc)
	// Besides the records: the trees, the networks and the actors (about
	// half the checkpoint here); a second copy of the columns adds the
	// checkpoint's size again.
	if alloc > uint64(held)+uint64(fi.Size())*3/4 {
		t.Fatalf("the resume allocated %d bytes for a buffer of %d bytes (checkpoint %d): it holds a second copy of the columns", alloc, held, fi.Size())
	}
}
