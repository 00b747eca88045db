package runtime

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// ErrCheckpoint is wrapped by every error about a checkpoint file that
// cannot be used: missing, truncated, damaged, or written for another
// configuration.
var ErrCheckpoint = errors.New("runtime: bad checkpoint")

// ErrResumeConflict is wrapped by the error of a resume that would change a
// setting the checkpoint's model, replay or rate limiter was built for.
var ErrResumeConflict = errors.New("runtime: resume")

// Checkpoint file layout (little endian), version 2:
//
//	magic    "APEXTRN1"
//	version  uint32
//	hdrLen   uint32, then hdrLen bytes of JSON (ckHeader), then CRC-32C of them
//	learner  uint64 length + the learner's Save bytes (learner.DQN or
//	         learner.TD3, own checksum)
//	buffer   uint64 length + buffer.Buffer.Save bytes (own checksum)
//	stage    uint64 length + the sampler stage's Save bytes when it is a
//	         sampler.Stateful (NERS), else length 0
//
// Version 1 files (no stage section) are still read.
const (
	ckMagic   = "APEXTRN1"
	ckVersion = 2
)

type ckHeader struct {
	Config   TrainConfig `json:"config"`
	Base     counterBase `json:"counters"`
	Curve    []EvalPoint `json:"curve"`
	Inserted int64       `json:"limiter_inserted"`
	Sampled  int64       `json:"limiter_sampled"`
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
// written; actors keep stepping into the bounded queue meanwhile. Cost:
// O(replay size) time; memory O(learner parameters) plus a 1 MiB write
// buffer, not O(replay size).
func (t *Trainer) SaveCheckpoint(path string) error {
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
	if err := t.writeCheckpoint(f); err != nil {
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
// pipeline held. Each section's length is written as a placeholder and
// patched once the section is written.
func (t *Trainer) writeCheckpoint(f *os.File) error {
	release := t.pipe.hold()
	defer release()
	st := t.Stats()
	// The limiter's balance in the terms of what this checkpoint holds:
	// its own counts include admissions whose operation has not run.
	h := ckHeader{Config: t.cfg, Base: counterBase{Seconds: st.Seconds, EnvSteps: st.EnvSteps,
		Episodes: st.Episodes, LearnerSteps: int64(t.agent.steps())},
		Inserted: t.limBase.inserted + t.pipe.limited.Load(),
		Sampled:  t.limBase.sampled + t.pipe.steps.Load()*int64(t.agent.batch)}
	t.mu.Lock()
	h.Curve = append([]EvalPoint(nil), t.curve...)
	t.mu.Unlock()
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if len(js) > maxHeaderBytes { // ResumeTrainer would refuse it
		return fmt.Errorf("the header (configuration, counters and %d evaluations) is %d bytes, above %d", len(h.Curve), len(js), maxHeaderBytes)
	}
	cw := &countingWriter{w: bufio.NewWriterSize(f, 1<<20)}
	var hdr [16]byte
	copy(hdr[:8], ckMagic)
	binary.LittleEndian.PutUint32(hdr[8:], ckVersion)
	binary.LittleEndian.PutUint32(hdr[12:], uint32(len(js)))
	cw.Write(hdr[:])
	cw.Write(js)
	cw.Write(binary.LittleEndian.AppendUint32(nil, crc32.Checksum(js, crc32.MakeTable(crc32.Castagnoli))))
	stage, stateful := t.agent.method.Selector.(sampler.Stateful)
	for _, s := range []struct {
		name string
		save func(io.Writer) error
	}{
		{"learner", t.agent.save},
		{"replay buffer", t.buf.Save},
		{"sampler stage", func(w io.Writer) error {
			if stateful {
				return stage.Save(w)
			}
			return nil
		}},
	} {
		at := cw.n
		cw.Write(make([]byte, 8)) // the length, patched below
		if cw.err != nil {
			return cw.err
		}
		if err := s.save(cw); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if cw.err != nil {
			return cw.err
		}
		if err := cw.w.Flush(); err != nil {
			return err
		}
		if _, err := f.WriteAt(binary.LittleEndian.AppendUint64(nil, uint64(cw.n-at-8)), at); err != nil {
			return err
		}
	}
	return cw.w.Flush()
}

// countingWriter counts the bytes written through it and keeps the first
// error (later writes are then dropped).
type countingWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
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
// model or the replay must stay as saved. The checkpoint path recorded in
// the file is not reused: the resumed run writes checkpoints only where
// override sets Checkpoint (so resuming a copy never overwrites the
// original run's newer checkpoint). Actors start new episodes with fresh
// seeds: their mid-episode state is not part of a checkpoint.
//
// Every length and count in the file is checked against the file's size
// before anything is allocated; the sections are streamed from the file.
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
	size := fi.Size()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCheckpoint, path, fmt.Sprintf(format, args...))
	}
	var hdr [16]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil || string(hdr[:8]) != ckMagic {
		return nil, bad("not an apex training checkpoint (bad magic)")
	}
	version := binary.LittleEndian.Uint32(hdr[8:])
	if version != 1 && version != ckVersion {
		return nil, bad("version %d, this build reads 1 and %d", version, ckVersion)
	}
	n := int64(binary.LittleEndian.Uint32(hdr[12:]))
	if n > maxHeaderBytes || n > size-16-4 {
		return nil, bad("header length %d (the file has %d bytes, at most %d allowed)", n, size, maxHeaderBytes)
	}
	js := make([]byte, n+4)
	if _, err := io.ReadFull(f, js); err != nil {
		return nil, bad("truncated header: %v", err)
	}
	if binary.LittleEndian.Uint32(js[n:]) != crc32.Checksum(js[:n], crc32.MakeTable(crc32.Castagnoli)) {
		return nil, bad("header checksum mismatch")
	}
	var h ckHeader
	dec := json.NewDecoder(bytes.NewReader(js[:n]))
	if err := dec.Decode(&h); err != nil {
		return nil, bad("header: %v", err)
	}
	if err := h.check(); err != nil {
		return nil, bad("header: %v", err)
	}
	off := 16 + n + 4
	section := func(name string) (*io.SectionReader, error) {
		var l [8]byte
		if _, err := f.ReadAt(l[:], off); err != nil {
			return nil, bad("truncated before the %s section", name)
		}
		ln := binary.LittleEndian.Uint64(l[:])
		if ln > uint64(size-off-8) {
			return nil, bad("truncated %s section (%d of %d bytes)", name, size-off-8, ln)
		}
		s := io.NewSectionReader(f, off+8, int64(ln))
		off += 8 + int64(ln)
		return s, nil
	}
	lsec, err := section("learner")
	if err != nil {
		return nil, err
	}
	bsec, err := section("replay buffer")
	if err != nil {
		return nil, err
	}
	var ssec *io.SectionReader
	if version >= 2 {
		if ssec, err = section("sampler stage"); err != nil {
			return nil, err
		}
	}
	if off != size {
		return nil, bad("%d bytes after the last section", size-off)
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
	buf, err := buffer.Load(bufio.NewReaderSize(bsec, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, path, err)
	}
	cfg.Resumes = h.Config.Resumes + 1
	t, err := newTrainer(cfg, buf)
	if err != nil {
		if errors.Is(err, errShape) {
			return nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, path, err)
		}
		return nil, fmt.Errorf("runtime: resume %s: %w", path, err)
	}
	if err := loadExactly(lsec, t.agent.load); err != nil {
		return nil, fmt.Errorf("%w: %s: learner: %w", ErrCheckpoint, path, err)
	}
	st, stateful := t.agent.method.Selector.(sampler.Stateful)
	switch {
	case stateful && (ssec == nil || ssec.Size() == 0):
		return nil, bad("the %s stage keeps state, and the checkpoint has none for it", cfg.Sampler)
	case !stateful && ssec != nil && ssec.Size() != 0:
		return nil, bad("a %d-byte sampler stage section, but the %s stage keeps no state", ssec.Size(), cfg.Sampler)
	case stateful:
		if err := loadExactly(ssec, st.Load); err != nil {
			return nil, fmt.Errorf("%w: %s: sampler stage: %w", ErrCheckpoint, path, err)
		}
	}
	t.base = h.Base
	t.curve = h.Curve
	t.limiter.restore(h.Inserted, h.Sampled)
	t.limBase = limiterState{h.Inserted, h.Sampled}
	return t, nil
}

// loadExactly runs load over s and checks that it read all of s.
func loadExactly(s *io.SectionReader, load func(io.Reader) error) error {
	if err := load(s); err != nil {
		return err
	}
	if pos, _ := s.Seek(0, io.SeekCurrent); pos != s.Size() {
		return fmt.Errorf("%d bytes after its state", s.Size()-pos)
	}
	return nil
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
	switch {
	case a.Env != b.Env:
		return fmt.Errorf("env %s cannot change to %s on resume", a.Env, b.Env)
	case a.Sampler != b.Sampler:
		return fmt.Errorf("sampler %s cannot change to %s on resume", a.Sampler, b.Sampler)
	case a.Algo != b.Algo && b.Algo != "":
		return fmt.Errorf("algo %s cannot change to %s on resume", a.Algo, b.Algo)
	case a.Loss != b.Loss, a.LAPAlpha != b.LAPAlpha, a.LAPK != b.LAPK, a.Tau != b.Tau, a.NoIS != b.NoIS,
		a.TEREta != b.TEREta, a.TERRoots != b.TERRoots, a.TERPreds != b.TERPreds, a.REFERC != b.REFERC, a.REFERD != b.REFERD, a.REFERA != b.REFERA,
		a.NERSAlpha != b.NERSAlpha, a.NERSInterval != b.NERSInterval, a.NERSSample != b.NERSSample:
		return errors.New("the method's settings (loss, lap alpha and k, tau, no-is, ter eta/roots/preds, refer c/d/a, ners alpha/interval/sample) cannot change on resume")
	case a.Capacity != b.Capacity, a.Dueling != b.Dueling, fmt.Sprint(a.Hidden) != fmt.Sprint(b.Hidden),
		a.Batch != b.Batch, a.LR != b.LR, a.Seed != b.Seed, a.NStep != b.NStep, a.Gamma != b.Gamma:
		return errors.New("the replay, model and learner settings (capacity, hidden, dueling, batch, lr, seed, n-step, gamma) cannot change on resume")
	case a.ReplayRatio != b.ReplayRatio, a.MinSizeToSample != b.MinSizeToSample:
		return errors.New("the rate limiter's settings (replay ratio, minimum size to sample) cannot change on resume: its saved balance is in their terms")
	case a.Deterministic != b.Deterministic:
		return errors.New("the deterministic mode cannot be switched on or off on resume")
	}
	return nil
}
