package runtime

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/checkpoint"
)

// ErrCheckpoint is wrapped by every error about a checkpoint file that
// cannot be used: missing, truncated, damaged, or written for another
// configuration.
var ErrCheckpoint = errors.New("runtime: bad checkpoint")

// ErrResumeConflict is wrapped by the error of a resume that would change a
// setting the checkpoint's model, replay or rate limiter was built for.
var ErrResumeConflict = errors.New("runtime: resume")

// Checkpoint file layout: a sequence of sections of the checkpoint
// package's format (magic, kind, version, chunked payload, CRC-32C), one
// per part of the run, each written by the part's own Save:
//
//	runtime.Trainer version 1: JSON (ckHeader: the configuration, the
//	         counters, the evaluation curve, the rate limiter's balance,
//	         and the list of the parts that follow)
//	buffer   the replay buffer (buffer.Buffer.Save)
//	learner  the learner (learner.DQN, TD3, SAC or VRACER's Save)
//	stage    the replay method's own state (sampler.Method.State's Save),
//	         only when the method has one (NERS)
//
// The trainer reads them in that order and refuses a part it does not
// know, a part missing or left over, and anything after the last one.
// Files of the earlier format (magic APEXTRN1, versions 1 and 2, written
// by apex before the checkpoint package) are refused with an error that
// names their format and version and says what to do.
const (
	ckKind    = "runtime.Trainer"
	ckVersion = 1
)

// The parts of a checkpoint after its header, in file order.
const (
	partBuffer  = "replay buffer"
	partLearner = "learner"
	partStage   = "sampler stage"
)

type ckHeader struct {
	Config   TrainConfig `json:"config"`
	Base     counterBase `json:"counters"`
	Curve    []EvalPoint `json:"curve"`
	Inserted int64       `json:"limiter_inserted"`
	Sampled  int64       `json:"limiter_sampled"`
	// Parts names the sections that follow the header, in order.
	Parts []string `json:"parts"`
}

// maxHeaderBytes bounds a checkpoint's JSON header (the configuration,
// counters and evaluation curve: about 150 bytes an evaluation).
const maxHeaderBytes = 64 << 20

// SaveCheckpoint writes the run's state to path atomically: it streams it
// into a temporary file in path's folder, syncs it, renames it over path
// and syncs the folder, so a crash leaves either the old checkpoint or the
// new one (and the temporary file, which the next NewTrainer or
// ResumeTrainer with this Checkpoint removes).
//
// It may be called at any time, also while Run runs (Run calls it every
// CheckpointEvery and when it ends): it waits for the insert and the
// learner step in progress to finish and holds new ones until the state is
// written; actors keep stepping into the bounded queue meanwhile (with
// Inserters = Direct each actor waits at its next insert). Cost:
// O(replay size) time; memory a 64 KiB write buffer plus at most 64 KiB
// per open section (the replay buffer's columns are written from where
// they lie), not O(replay size).
func (t *Trainer) SaveCheckpoint(path string) error {
	return saveAtomic(path, t.writeCheckpoint)
}

// saveAtomic has write stream a checkpoint into a temporary file in
// path's folder, syncs it, renames it over path and syncs the folder, so
// a crash leaves either the old file or the new one (and the temporary
// file, which prepareCheckpoint removes). Errors are *CheckpointError.
func saveAtomic(path string, write func(f *os.File) error) error {
	if path == "" {
		return errors.New("runtime: checkpoint: empty path")
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &CheckpointError{Path: path, Err: err}
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+tmpInfix+"*")
	if err != nil {
		return &CheckpointError{Path: path, Err: err}
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if err := write(f); err != nil {
		f.Close()
		return &CheckpointError{Path: path, Err: err}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return &CheckpointError{Path: path, Err: err}
	}
	if err := f.Close(); err != nil {
		return &CheckpointError{Path: path, Err: err}
	}
	if err := os.Rename(tmp, path); err != nil {
		return &CheckpointError{Path: path, Err: err}
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the rename durable where the OS allows
		d.Close()
	}
	return nil
}

// tmpInfix names a checkpoint's temporary files: path + tmpInfix + a
// random suffix.
const tmpInfix = ".tmp"

// writeCheckpoint streams the checkpoint into f (format above) with the
// pipeline held: the header, then each part's own section.
func (t *Trainer) writeCheckpoint(f *os.File) error {
	release := t.lh.pipe.hold()
	defer release()
	t.lh.gate.Lock() // also the evaluations handed to the stage
	defer t.lh.gate.Unlock()
	// The limiter's balance in the terms of what this checkpoint holds:
	// its own counts include admissions whose operation has not run.
	// Batches stored while the run drains at its end bypass the limiter,
	// so they are in the buffer but not in Inserted: a resumed run's
	// learner then sees at most Actors+Queue batches more data than its
	// balance says, and catches up by that much (a bounded, one-off
	// lead of the inserts, never a lost or doubled item).
	h := t.lh.header()
	h.Inserted = t.limBase.inserted + t.lh.pipe.limited.Load()
	h.Sampled = t.limBase.sampled + t.lh.pipe.steps.Load()*int64(t.agent.batch)
	parts := t.ckParts()
	for _, p := range parts {
		h.Parts = append(h.Parts, p.name)
	}
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if len(js) > maxHeaderBytes { // ResumeTrainer would refuse it
		return fmt.Errorf("the header (configuration, counters and %d evaluations) is %d bytes, above %d", len(h.Curve), len(js), maxHeaderBytes)
	}
	bw := bufio.NewWriterSize(f, 64<<10) // gathers the sections' small writes (heads, chunk lengths)
	if err := checkpoint.Save(bw, ckKind, ckVersion, func(w io.Writer) error { return checkpoint.WriteJSON(w, h) }); err != nil {
		return err
	}
	for _, p := range parts {
		if err := p.save(bw); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
	}
	return bw.Flush()
}

// ckPart is one part of a run that a checkpoint holds after its header:
// its name (in the header's list) and its Save and Load.
type ckPart struct {
	name string
	save func(io.Writer) error
	load func(io.Reader) error
}

// ckParts lists t's parts in checkpoint order (the buffer first: the run
// is built over it).
func (t *Trainer) ckParts() []ckPart {
	parts := []ckPart{
		{partBuffer, t.buf.Save, nil},
		{partLearner, t.agent.save, t.agent.load},
	}
	if stage := t.agent.method.State; stage != nil { // the method's own state (NERS's scorer)
		parts = append(parts, ckPart{partStage, stage.Save, stage.Load})
	}
	return parts
}

// removeStaleTemps removes the temporary files that saves of path
// interrupted by a crash left behind (path + tmpInfix + suffix), and
// reports how many it removed. A missing folder is not an error.
func removeStaleTemps(path string) (int, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), base+tmpInfix) && len(e.Name()) > len(base+tmpInfix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// probeWritable creates path's folder if needed and checks that a file can
// be created in it (the checkpoint is written there as a temporary file
// and renamed), so a run fails before it starts rather than when it saves.
func probeWritable(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+tmpInfix+"*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// ResumeTrainer rebuilds the Trainer saved in path: its replay buffer
// (contents, priorities, generations, counters), learner (networks,
// optimizer, step, RNG) and run counters, exactly. override, if not nil, may
// change how the resumed run proceeds (Steps, Duration, TargetReturn,
// Actors, EvalEvery, Checkpoint, CheckpointEvery); fields that shape the
// model or the replay must stay as saved. Float32 may change: the
// learner's float64 master parameters load into networks of the new
// precision and each optimizer's step count and moments carry over
// (rounded to float32, or widened exactly; model.Adam.SetFloat32), and
// Warnings names the conversion. The checkpoint path recorded in
// the file is not reused: the resumed run writes checkpoints only where
// override sets Checkpoint (so resuming a copy never overwrites the
// original run's newer checkpoint). Actors start new episodes with fresh
// seeds: their mid-episode state is not part of a checkpoint.
//
// The sections are streamed from the file, and every length is bounded
// before anything is allocated (chunks of at most 1 MiB; the header at
// most 64 MiB; each part as its Load bounds it). A file of the earlier
// format (APEXTRN1) is refused with an error wrapping ErrCheckpoint and a
// *checkpoint.LegacyError that names its version and says what to do.
func ResumeTrainer(path string, override func(*TrainConfig)) (*Trainer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s: not a regular file", ErrCheckpoint, path)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCheckpoint, path, fmt.Sprintf(format, args...))
	}
	badPart := func(part string, err error) error {
		return fmt.Errorf("%w: %s: %s: %w", ErrCheckpoint, path, part, err)
	}
	br := &fileReader{Reader: bufio.NewReaderSize(f, 1<<20), f: f, size: fi.Size()}
	var h ckHeader
	err = checkpoint.Load(br, ckKind, ckVersion, func(_ uint32, r io.Reader) error {
		return checkpoint.ReadJSON(r, &h, maxHeaderBytes)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: header: %w", ErrCheckpoint, path, err)
	}
	if err := h.check(); err != nil {
		return nil, bad("header: %v", err)
	}
	if len(h.Parts) == 0 || h.Parts[0] != partBuffer {
		return nil, bad("the header lists the parts %q; this build reads %q first", h.Parts, partBuffer)
	}
	// A run saved before ignored settings were refused may carry some:
	// they did nothing then, and are dropped now.
	h.Config = dropIgnored(h.Config)
	cfg := h.Config
	cfg.Checkpoint = "" // only where this resume says (override)
	if override != nil {
		override(&cfg)
		if err := sameShape(h.Config, cfg); err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrResumeConflict, path, err)
		}
		if err := checkApplies(cfg, cfg.Algo); err != nil { // a setting of this resume's, not the file's
			return nil, err
		}
	}
	if err := checkConfig(h.Config); err != nil { // the file's own settings, before anything is built from them
		return nil, bad("%v", err)
	}
	buf, err := buffer.Load(br)
	if err != nil {
		return nil, badPart(partBuffer, err)
	}
	cfg.Resumes = h.Config.Resumes + 1
	t, err := newTrainer(cfg, buf)
	if err != nil {
		if errors.Is(err, errShape) {
			return nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, path, err)
		}
		return nil, fmt.Errorf("runtime: resume %s: %w", path, err)
	}
	parts := t.ckParts()
	var want []string
	for _, p := range parts {
		want = append(want, p.name)
	}
	if !slices.Equal(h.Parts, want) {
		return nil, bad("the checkpoint holds the parts %q, but this %s run (sampler %s) has %q", h.Parts, cfg.Algo, cfg.Sampler, want)
	}
	for _, p := range parts[1:] {
		if err := p.load(br); err != nil {
			return nil, badPart(p.name, err)
		}
	}
	switch hd, err := checkpoint.NewReader(br).Next(); {
	case err == io.EOF:
	case err != nil:
		return nil, fmt.Errorf("%w: %s: after the last part: %w", ErrCheckpoint, path, err)
	default:
		return nil, bad("a %s section after the last part", hd)
	}
	if h.Config.Float32 != cfg.Float32 {
		t.notes = append(t.notes, precisionNote(h.Config.Float32, cfg.Float32))
	}
	t.lh.base = h.Base
	t.lh.curve = h.Curve
	t.limiter.restore(h.Inserted, h.Sampled)
	t.limBase = limiterState{inserted: h.Inserted, sampled: h.Sampled}
	return t, nil
}

// check refuses counters and curve points a run cannot have produced
// (negative, non-finite), naming the field.
func (h *ckHeader) check() error {
	b := h.Base
	switch {
	case !finite(b.Seconds) || b.Seconds < 0:
		return fmt.Errorf("counters.seconds = %v", b.Seconds)
	case b.EnvSteps < 0 || b.Episodes < 0 || b.LearnerSteps < 0:
		return fmt.Errorf("negative counters (env_steps %d, episodes %d, learner_steps %d)", b.EnvSteps, b.Episodes, b.LearnerSteps)
	case h.Inserted < 0 || h.Sampled < 0:
		return fmt.Errorf("negative rate limiter counts (inserted %d, sampled %d)", h.Inserted, h.Sampled)
	}
	for i, p := range h.Curve {
		if !finite(p.Seconds) || !finite(p.MeanReturn) || !finite(p.FarFraction) || !finite(p.MeanKL) {
			return fmt.Errorf("curve[%d] holds a non-finite value", i)
		}
	}
	return nil
}

// sameShape refuses overrides that change what the checkpoint's model and
// replay were built for.
func sameShape(a, b TrainConfig) error {
	if err := sameReplayShape(a, b); err != nil {
		return err
	}
	if a.ReplayRatio != b.ReplayRatio || a.MinSizeToSample != b.MinSizeToSample {
		return errors.New("the rate limiter's settings (replay ratio, minimum size to sample) cannot change on resume: its saved balance is in their terms")
	}
	return nil
}

// sameReplayShape is sameShape but for the rate limiter's settings (a
// replay core's restore compares the limiter itself: LoadReplayCoreWith).
func sameReplayShape(a, b TrainConfig) error {
	switch {
	case a.Env != b.Env:
		return fmt.Errorf("env %s cannot change to %s on resume", a.Env, b.Env)
	case a.Sampler != b.Sampler:
		return fmt.Errorf("sampler %s cannot change to %s on resume", a.Sampler, b.Sampler)
	case a.Algo != b.Algo && b.Algo != "":
		return fmt.Errorf("algo %s cannot change to %s on resume", a.Algo, b.Algo)
	case a.Loss != b.Loss, a.Tau != b.Tau, a.NoIS != b.NoIS, !maps.Equal(a.MethodOptions, b.MethodOptions):
		return errors.New("the method's settings (loss, tau, no-is, the method's options) cannot change on resume")
	case a.Capacity != b.Capacity, a.Dueling != b.Dueling, fmt.Sprint(a.Hidden) != fmt.Sprint(b.Hidden),
		a.Batch != b.Batch, a.LR != b.LR, a.Seed != b.Seed, a.NStep != b.NStep, a.Gamma != b.Gamma:
		return errors.New("the replay, model and learner settings (capacity, hidden, dueling, batch, lr, seed, n-step, gamma) cannot change on resume")
	case a.Deterministic != b.Deterministic:
		return errors.New("the deterministic mode cannot be switched on or off on resume")
	}
	return nil
}

// precisionNote says which conversion a resume that changed Float32 made
// of the checkpoint's learner (from32: the checkpoint's Float32, to32:
// the resumed run's).
func precisionNote(from32, to32 bool) string {
	name := map[bool]string{false: "float64", true: "float32"}
	how := "its float64 parameters carry over as they are and its Adam moments are widened exactly"
	if to32 {
		how = "its float64 parameters carry over (the next float32 Adam step rounds them to float32) and its Adam moments are rounded to float32"
	}
	return fmt.Sprintf("resume: the checkpoint's %s learner was converted to %s (Float32 %t → %t): %s; the run continues in %s",
		name[from32], name[to32], from32, to32, how, name[to32])
}

// fileReader is a buffered reader over a checkpoint file that reports the
// bytes it has left (Remaining), so that buffer.Load reads the replay's
// columns straight into its records instead of holding a second copy.
type fileReader struct {
	*bufio.Reader
	f    *os.File
	size int64
}

// Remaining is the file's bytes not yet read through r, or -1 if the
// file's offset cannot be had. O(1) (a seek to the current offset).
func (r *fileReader) Remaining() int64 {
	off, err := r.f.Seek(0, io.SeekCurrent)
	if err != nil || off > r.size {
		return -1
	}
	return r.size - off + int64(r.Reader.Buffered())
}
