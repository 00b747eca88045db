package runtime

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// ErrCheckpoint is wrapped by every error about a checkpoint file that
// cannot be used: missing, truncated, damaged, or written for another
// configuration.
var ErrCheckpoint = errors.New("runtime: bad checkpoint")

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

// SaveCheckpoint writes the run's state to path atomically (a temporary
// file in the same directory, fsync, rename, fsync of the directory), so a
// crash leaves either the old checkpoint or the new one. It needs
// quiescence: call it when Run is not running (Run calls it itself when
// TrainConfig.Checkpoint is set). Cost: O(replay size).
func (t *Trainer) SaveCheckpoint(path string) error {
	st := t.Stats()
	ls := t.limiter.snapshot()
	h := ckHeader{Config: t.cfg, Base: counterBase{Seconds: st.Seconds, EnvSteps: st.EnvSteps,
		Episodes: st.Episodes, LearnerSteps: int64(t.agent.steps())}, Inserted: ls.inserted, Sampled: ls.sampled}
	t.mu.Lock()
	h.Curve = append([]EvalPoint(nil), t.curve...)
	t.mu.Unlock()
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	var lb, bb, sb bytes.Buffer
	if err := t.agent.save(&lb); err != nil {
		return fmt.Errorf("runtime: checkpoint: learner: %w", err)
	}
	if err := t.buf.Save(&bb); err != nil {
		return fmt.Errorf("runtime: checkpoint: replay buffer: %w", err)
	}
	if st, ok := t.agent.method.Selector.(sampler.Stateful); ok {
		if err := st.Save(&sb); err != nil {
			return fmt.Errorf("runtime: checkpoint: sampler stage: %w", err)
		}
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	var hdr [16]byte
	copy(hdr[:8], ckMagic)
	binary.LittleEndian.PutUint32(hdr[8:], ckVersion)
	binary.LittleEndian.PutUint32(hdr[12:], uint32(len(js)))
	var crc [4]byte
	binary.LittleEndian.PutUint32(crc[:], crc32.Checksum(js, crc32.MakeTable(crc32.Castagnoli)))
	var ll, bl, sl [8]byte
	binary.LittleEndian.PutUint64(ll[:], uint64(lb.Len()))
	binary.LittleEndian.PutUint64(bl[:], uint64(bb.Len()))
	binary.LittleEndian.PutUint64(sl[:], uint64(sb.Len()))
	for _, part := range [][]byte{hdr[:], js, crc[:], ll[:], lb.Bytes(), bl[:], bb.Bytes(), sl[:], sb.Bytes()} {
		if _, err := f.Write(part); err != nil {
			f.Close()
			return fmt.Errorf("runtime: checkpoint: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("runtime: checkpoint: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("runtime: checkpoint: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("runtime: checkpoint: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the rename durable where the OS allows
		d.Close()
	}
	return nil
}

// ResumeTrainer rebuilds the Trainer saved in path: its replay buffer
// (contents, priorities, generations, counters), learner (networks,
// optimizer, step, RNG) and run counters, exactly. override, if not nil, may
// change how the resumed run proceeds (Steps, Duration, TargetReturn,
// Actors, EvalEvery, Checkpoint); fields that shape the model or the replay
// must stay as saved. Actors start new episodes with fresh seeds: their
// mid-episode state is not part of a checkpoint.
func ResumeTrainer(path string, override func(*TrainConfig)) (*Trainer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCheckpoint, path, fmt.Sprintf(format, args...))
	}
	if len(data) < 16 || string(data[:8]) != ckMagic {
		return nil, bad("not an apex training checkpoint (bad magic)")
	}
	version := binary.LittleEndian.Uint32(data[8:])
	if version != 1 && version != ckVersion {
		return nil, bad("version %d, this build reads 1 and %d", version, ckVersion)
	}
	n := int(binary.LittleEndian.Uint32(data[12:]))
	rest := data[16:]
	if n > len(rest)-4 {
		return nil, bad("truncated header")
	}
	js := rest[:n]
	if binary.LittleEndian.Uint32(rest[n:]) != crc32.Checksum(js, crc32.MakeTable(crc32.Castagnoli)) {
		return nil, bad("header checksum mismatch")
	}
	rest = rest[n+4:]
	var h ckHeader
	if err := json.Unmarshal(js, &h); err != nil {
		return nil, bad("header: %v", err)
	}
	section := func(name string) ([]byte, error) {
		if len(rest) < 8 {
			return nil, bad("truncated before the %s section", name)
		}
		l := binary.LittleEndian.Uint64(rest)
		if l > uint64(len(rest)-8) {
			return nil, bad("truncated %s section (%d of %d bytes)", name, len(rest)-8, l)
		}
		s := rest[8 : 8+l]
		rest = rest[8+l:]
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
	var ssec []byte
	if version >= 2 {
		if ssec, err = section("sampler stage"); err != nil {
			return nil, err
		}
	}
	if len(rest) != 0 {
		return nil, bad("%d bytes after the last section", len(rest))
	}
	buf, err := buffer.Load(bytes.NewReader(bsec))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, path, err)
	}
	// A run saved before ignored settings were refused may carry some:
	// they did nothing then, and are dropped now.
	h.Config = dropIgnored(h.Config)
	cfg := h.Config
	if override != nil {
		override(&cfg)
		if err := sameShape(h.Config, cfg); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, path, err)
		}
		if err := checkApplies(cfg, cfg.Algo); err != nil { // a setting of this resume's, not the file's
			return nil, err
		}
	}
	cfg.Resumes = h.Config.Resumes + 1
	t, err := newTrainer(cfg, buf)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, path, err)
	}
	if err := t.agent.load(bytes.NewReader(lsec)); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, path, err)
	}
	st, stateful := t.agent.method.Selector.(sampler.Stateful)
	switch {
	case stateful && len(ssec) == 0:
		return nil, bad("the %s stage keeps state, and the checkpoint has none for it", cfg.Sampler)
	case !stateful && len(ssec) != 0:
		return nil, bad("a %d-byte sampler stage section, but the %s stage keeps no state", len(ssec), cfg.Sampler)
	case stateful:
		r := bytes.NewReader(ssec)
		if err := st.Load(r); err != nil {
			return nil, fmt.Errorf("%w: %s: sampler stage: %w", ErrCheckpoint, path, err)
		}
		if r.Len() != 0 {
			return nil, bad("%d bytes after the sampler stage's state", r.Len())
		}
	}
	t.base = h.Base
	t.curve = h.Curve
	t.limiter.restore(h.Inserted, h.Sampled)
	return t, nil
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
