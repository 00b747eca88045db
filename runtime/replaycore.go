package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/checkpoint"
	"github.com/apexrl/apex/sampler"
)

// ReplayCore is the replay side of a run, built from the run's
// TrainConfig exactly as a Trainer builds it: the replay buffer (the
// layout the method's Spec asks for), the replay method over it (its
// whole stage: Selector, Weighter, Features, Evaluated, State) and the
// rate limiter. A replay server serves one; a Trainer holds one.
//
// The method's Selector is the stage itself, not Reseed-wrapped: a server
// samples with the seeds its learners send (sampler.Reseed over it, one
// Reseeder per sampling stream, and Reseeder.SampleSeed), which draws what
// the learner's own Reseeder would have drawn in process.
//
// Concurrency: Insert, Stats, Config, ConfigJSON and the accessors are
// safe for concurrent use. A caller that samples, writes feedback back or
// hands evaluations to the stage does so inside Shared (and on one
// goroutine per stream for Sample and Update, as the Selector contract
// says), so that Save sees the buffer, the stage and the limiter at rest.
type ReplayCore struct {
	cfg     TrainConfig
	spec    sampler.Spec
	buf     *buffer.Buffer
	method  sampler.Method
	limiter *RateLimiter
	// gate is held shared by every Insert and Shared section, exclusively
	// by Save.
	gate sync.RWMutex
	// notes are RestoreNotes.
	notes []string
}

// NewReplayCore validates cfg as NewTrainer does (every setting is checked
// here, naming its flag; it must describe a whole run, Steps or Duration
// included) and builds the buffer, the method and the limiter. Cost:
// O(Capacity) memory, refused before allocation when the machine lacks it.
func NewReplayCore(cfg TrainConfig) (*ReplayCore, error) {
	p, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	return newReplayCore(p, nil, 0)
}

// newReplayCore builds the core of plan p around buf (a restored buffer)
// or, if buf is nil, a new one; nets is the memory the caller's networks
// will need beside it (checkMemory).
func newReplayCore(p *plan, buf *buffer.Buffer, nets uint64) (*ReplayCore, error) {
	if buf == nil {
		bufBytes, err := p.layout.MemoryBytes()
		if err != nil {
			return nil, err
		}
		if err := checkMemory(bufBytes, p.cfg, nets); err != nil {
			return nil, err
		}
		if buf, err = buffer.New(p.layout); err != nil {
			return nil, err
		}
	} else {
		if err := checkMemory(0, p.cfg, nets); err != nil {
			return nil, err
		}
		if err := p.checkShape(buf); err != nil {
			return nil, err
		}
	}
	method, err := sampler.NewMethod(p.cfg.Sampler, buf, p.mcfg)
	if err != nil {
		return nil, fmt.Errorf("runtime: train: %w", err)
	}
	lim, err := newLimiter(p.cfg)
	if err != nil {
		return nil, err
	}
	return &ReplayCore{cfg: p.cfg, spec: p.spec, buf: buf, method: method, limiter: lim}, nil
}

// Config is the run's configuration, every default filled in (Batch and
// LR the learner's effective values): what learner and actor hosts are
// built from. O(1).
func (c *ReplayCore) Config() TrainConfig { return c.cfg }

// ConfigJSON is Config as JSON, for the hosts (DecodeTrainConfig reads
// it back; NewLearnerHost and NewActorHost build from the decoded
// configuration the same parts as from Config). O(config).
func (c *ReplayCore) ConfigJSON() ([]byte, error) { return json.Marshal(c.cfg) }

// Buffer is the replay buffer. Safe for concurrent inserts, samples and
// write-backs (package buffer).
func (c *ReplayCore) Buffer() *buffer.Buffer { return c.buf }

// Method is the replay method over Buffer (its Selector not
// Reseed-wrapped). Its Selector's Sample and Update, and Features, are
// driven by one goroutine at a time; Priority from any.
func (c *ReplayCore) Method() sampler.Method { return c.method }

// Limiter is the run's rate limiter (shared: Insert reserves and commits
// through it; a sampling stream calls AwaitSample before it samples).
func (c *ReplayCore) Limiter() *RateLimiter { return c.limiter }

// Warnings are the method's warnings about a biased pairing
// (sampler.Method.Warnings).
func (c *ReplayCore) Warnings() []string { return c.method.Warnings }

// Insert stores the complete batch t after the limiter admits it: it
// waits (ReserveInsert) while the limiter refuses inserts, returning ctx's
// error if ctx ends first (nothing stored), then stores t and commits the
// admission (AbortInsert if the buffer refuses t). An empty t is a no-op.
// Safe for concurrent use; t is the caller's again when Insert returns.
// Cost: the buffer's insert, O(t.Len()).
func (c *ReplayCore) Insert(ctx context.Context, t *buffer.Transitions) error {
	n := t.Len()
	if n == 0 {
		return nil
	}
	if err := c.limiter.ReserveInsert(ctx, n); err != nil {
		return err
	}
	c.gate.RLock()
	defer c.gate.RUnlock()
	if err := c.buf.Insert(t); err != nil {
		return errors.Join(err, c.limiter.AbortInsert(n))
	}
	return c.limiter.CommitInsert(n)
}

// Sink is c as a Pipeline's Sink, inserting through the limiter while ctx
// lives (Insert). Once ctx has ended, a batch is stored without waiting
// for the limiter and without being counted by it, as the pipeline's own
// inserts drain at shutdown: every batch handed over is stored.
func (c *ReplayCore) Sink(ctx context.Context) Sink { return coreSink{c, ctx} }

type coreSink struct {
	c   *ReplayCore
	ctx context.Context
}

func (s coreSink) Insert(t *buffer.Transitions) error {
	if err := s.c.Insert(s.ctx, t); err == nil || s.ctx.Err() == nil {
		return err
	}
	s.c.gate.RLock() // stopping: store it anyway, past the limiter
	defer s.c.gate.RUnlock()
	return s.c.buf.Insert(t)
}

// Shared runs f with the core's gate held shared: every sample, priority
// or feature write-back and evaluation handed to the stage runs inside
// it, so that Save never sees one half done. f may block (on the limiter,
// say) only as long as Save may wait.
func (c *ReplayCore) Shared(f func() error) error {
	c.gate.RLock()
	defer c.gate.RUnlock()
	return f()
}

// ReplayStats is a snapshot of a ReplayCore.
type ReplayStats struct {
	Buffer  buffer.Stats
	Limiter RateLimiterStats
	// Method is the method's own counters (sampler.Method.Stats), nil
	// for a method without any.
	Method map[string]float64
}

// Stats returns a snapshot. Safe for concurrent use.
func (c *ReplayCore) Stats() ReplayStats {
	st := ReplayStats{Buffer: c.buf.Stats(), Limiter: c.limiter.Stats()}
	if c.method.Stats != nil {
		st.Method = c.method.Stats()
	}
	return st
}

// Replay checkpoint layout: sections of the checkpoint package's format,
//
//	runtime.Replay version 2: JSON (replayHeader: the configuration,
//	         the limiter's configuration in force and its balance, the
//	         parts that follow)
//	buffer   the replay buffer (buffer.Buffer.Save, or SaveStriped's
//	         version 2 when written by SaveStriped)
//	stage    the method's own state (sampler.Method.State), if it has one
//
// Version 1 lacks the limiter's configuration: its restore takes the one
// its configuration gives.
const (
	replayKind    = "runtime.Replay"
	replayVersion = 2
)

type replayHeader struct {
	Config   TrainConfig `json:"config"`
	Inserted int64       `json:"limiter_inserted"`
	Sampled  int64       `json:"limiter_sampled"`
	// Limiter is the limiter's configuration in force when the
	// checkpoint was taken (a server's -rate-limit=false or SetLimiter
	// included); absent from version 1.
	Limiter *limiterJSON `json:"limiter,omitempty"`
	Parts   []string     `json:"parts"`
}

// limiterJSON is a RateLimiterConfig's restorable fields in a checkpoint.
type limiterJSON struct {
	SamplesPerInsert float64 `json:"samples_per_insert"`
	MinSizeToSample  int64   `json:"min_size_to_sample"`
	ErrorBuffer      float64 `json:"error_buffer"`
}

func limiterOf(c RateLimiterConfig) *limiterJSON {
	return &limiterJSON{SamplesPerInsert: c.SamplesPerInsert, MinSizeToSample: c.MinSizeToSample, ErrorBuffer: c.ErrorBuffer}
}

func (l *limiterJSON) config(timeout time.Duration) RateLimiterConfig {
	return RateLimiterConfig{SamplesPerInsert: l.SamplesPerInsert, MinSizeToSample: l.MinSizeToSample, ErrorBuffer: l.ErrorBuffer, Timeout: timeout}
}

func (l *limiterJSON) String() string {
	return fmt.Sprintf("samples per insert %v, min size to sample %d, error buffer %v", l.SamplesPerInsert, l.MinSizeToSample, l.ErrorBuffer)
}

// parts lists the core's checkpoint parts after the header.
func (c *ReplayCore) parts() []ckPart {
	parts := []ckPart{{partBuffer, c.buf.Save, nil}}
	if stage := c.method.State; stage != nil {
		parts = append(parts, ckPart{partStage, stage.Save, stage.Load})
	}
	return parts
}

// Save writes the core's state to w: the configuration, the buffer, the
// stage's own state (NERS) and the limiter's balance. It holds the gate
// exclusively, so it waits for the Inserts and Shared sections in
// progress and holds new ones until it returns. The balance is the
// limiter's own counts, which include admissions whose operation had not
// run (at most one batch per waiting stream). Cost: O(replay size) time,
// O(64 KiB) memory beyond w's.
func (c *ReplayCore) Save(w io.Writer) error {
	c.gate.Lock()
	defer c.gate.Unlock()
	s := c.limiter.snapshot()
	h := replayHeader{Config: c.cfg, Inserted: s.inserted, Sampled: s.sampled, Limiter: limiterOf(c.limiter.Config())}
	parts := c.parts()
	for _, p := range parts {
		h.Parts = append(h.Parts, p.name)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := checkpoint.Save(bw, replayKind, replayVersion, func(w io.Writer) error { return checkpoint.WriteJSON(w, h) }); err != nil {
		return err
	}
	for _, p := range parts {
		if err := p.save(bw); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
	}
	return bw.Flush()
}

// SaveStriped writes the core's state to w as Save does, while inserts,
// samples and write-backs go on (a replay server's Checkpoint):
//
//  1. With stage held (the lock that serializes the stage's Sample,
//     Update, UpdateFeatures and evaluations; nil: the core's own gate,
//     which Shared sections hold), it copies the stage's own state into
//     memory and reads the limiter's configuration and balance: the
//     committed inserts (reservations whose items are not stored yet
//     left out) and the admitted samples. That is the checkpoint's
//     stated point for the stage and the limiter.
//  2. Without any lock of the caller's, it writes the header and the
//     buffer by buffer.Buffer.SaveStriped: stripe by stripe, each a
//     consistent snapshot at its own instant, all after step 1.
//  3. It writes the stage's state copied in step 1.
//
// So every insert the limiter counted is in the buffer's snapshot (or was
// overwritten there by a later one): the restored limiter never counts
// items the restored buffer lacks (LoadReplayCoreWith also enforces it).
// The stage's state may lag the buffer by the write-backs of the copy's
// duration; NERS's per-slot state carries each slot's generation, so an
// item replaced meanwhile is seen as new, as after any overwrite.
//
// Cost: O(replay size) time; memory: the stage's state (NERS: O(Capacity)
// plus its networks), one stripe's copy and 64 KiB. Not concurrently with
// another SaveStriped or with Save (buffer.ErrSnapshotBusy).
func (c *ReplayCore) SaveStriped(w io.Writer, stage sync.Locker) error {
	if stage == nil {
		stage = &c.gate
	}
	var state bytes.Buffer
	stage.Lock()
	var err error
	if st := c.method.State; st != nil {
		err = st.Save(&state)
	}
	lim := c.limiter.snapshot()
	lcfg := c.limiter.Config()
	stage.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", partStage, err)
	}
	h := replayHeader{Config: c.cfg, Inserted: lim.inserted - lim.pending, Sampled: lim.sampled, Limiter: limiterOf(lcfg)}
	for _, p := range c.parts() {
		h.Parts = append(h.Parts, p.name)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := checkpoint.Save(bw, replayKind, replayVersion, func(w io.Writer) error { return checkpoint.WriteJSON(w, h) }); err != nil {
		return err
	}
	if err := c.buf.SaveStriped(bw); err != nil {
		return fmt.Errorf("%s: %w", partBuffer, err)
	}
	if _, err := bw.Write(state.Bytes()); err != nil {
		return fmt.Errorf("%s: %w", partStage, err)
	}
	return bw.Flush()
}

// LimiterConfigOf is the rate limiter configuration a run of cfg starts
// with (what NewReplayCore builds): samples per insert ReplayRatio,
// minimum size MinSizeToSample, error buffer max(ReplayRatio, 1) × 2 ×
// Batch, defaults filled in. Errors: cfg's, as NewReplayCore reports them.
func LimiterConfigOf(cfg TrainConfig) (RateLimiterConfig, error) {
	p, err := resolve(cfg)
	if err != nil {
		return RateLimiterConfig{}, err
	}
	l, err := newLimiter(p.cfg)
	if err != nil {
		return RateLimiterConfig{}, err
	}
	return l.Config(), nil
}

// Values of RestoreOptions.LimiterFrom.
const (
	// LimiterFromCheckpoint keeps the checkpoint's limiter configuration.
	LimiterFromCheckpoint = "checkpoint"
	// LimiterFromFlags takes the restoring process's configuration.
	LimiterFromFlags = "flags"
)

// ErrLimiterConflict is wrapped (with ErrResumeConflict) by a restore
// whose checkpoint's rate limiter configuration differs from the one
// asked for, when RestoreOptions.LimiterFrom does not say which wins.
var ErrLimiterConflict = errors.New("runtime: restore: rate limiter configuration")

// RestoreOptions tune LoadReplayCoreWith.
type RestoreOptions struct {
	// Limiter is the rate limiter configuration the restoring process
	// was given (a server's flags, -rate-limit=false applied); nil: the
	// one cfg gives. Its Timeout is kept whichever configuration wins.
	Limiter *RateLimiterConfig
	// LimiterFrom says which configuration wins when Limiter and the
	// checkpoint's differ in samples per insert, minimum size to sample
	// or error buffer: LimiterFromCheckpoint or LimiterFromFlags; empty:
	// the restore is refused (ErrLimiterConflict, naming both).
	LimiterFrom string
}

// LoadReplayCore rebuilds a core saved by Save for cfg: cfg may change
// only how the run proceeds (its stop rules, checkpoint and evaluation
// settings, as on a Trainer's resume); settings that shape the replay,
// the method or the limiter must be as saved (an error wrapping
// ErrResumeConflict otherwise). A damaged or foreign stream is an error
// wrapping ErrCheckpoint. Every length is bounded before allocation.
func LoadReplayCore(cfg TrainConfig, r io.Reader) (*ReplayCore, error) {
	return LoadReplayCoreWith(cfg, r, RestoreOptions{})
}

// LoadReplayCoreWith is LoadReplayCore with o's say over the rate limiter.
// It reads checkpoints of Save and SaveStriped. The limiter's
// configuration is the checkpoint's (version 1: the one its
// configuration gives) when it equals o.Limiter, else the one
// o.LimiterFrom names, else the restore is refused with an error
// wrapping ErrLimiterConflict and ErrResumeConflict that names both.
//
// The restored balance never deadlocks the limiter against the restored
// contents: the inserted count is at most the buffer's own count of
// inserts (a limiter that counted items the buffer lacks would admit
// draws that fail while holding inserts), and the balance is clamped
// into the band where both an insert and a sample are admitted under the
// configuration in force — or, when that band is under 1 wide and holds
// no whole sample count, to where the side the checkpoint blocked is
// admitted (see consistentBalance) — (a checkpoint of another ratio would otherwise
// hold one side until the other had made up the difference). With an
// unchanged configuration the clamp moves at most the one batch a
// limiter may overshoot by. RestoreNotes says what was adjusted.
func LoadReplayCoreWith(cfg TrainConfig, r io.Reader, o RestoreOptions) (*ReplayCore, error) {
	switch o.LimiterFrom {
	case "", LimiterFromCheckpoint, LimiterFromFlags:
	default:
		return nil, fmt.Errorf("runtime: restore: LimiterFrom %q (want %q, %q or empty)", o.LimiterFrom, LimiterFromCheckpoint, LimiterFromFlags)
	}
	p, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	var h replayHeader
	err = checkpoint.Load(r, replayKind, replayVersion, func(_ uint32, r io.Reader) error {
		return checkpoint.ReadJSON(r, &h, maxHeaderBytes)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: replay header: %w", ErrCheckpoint, err)
	}
	if h.Inserted < 0 || h.Sampled < 0 {
		return nil, fmt.Errorf("%w: negative rate limiter counts (inserted %d, sampled %d)", ErrCheckpoint, h.Inserted, h.Sampled)
	}
	if err := sameReplayShape(h.Config, p.cfg); err != nil {
		return nil, fmt.Errorf("%w: replay core: %w", ErrResumeConflict, err)
	}
	saved := h.Limiter
	if saved == nil {
		l, err := newLimiter(h.Config)
		if err != nil {
			return nil, fmt.Errorf("%w: the replay header's configuration gives no rate limiter: %w", ErrCheckpoint, err)
		}
		saved = limiterOf(l.Config())
	} else if err := saved.config(0).validate(); err != nil {
		return nil, fmt.Errorf("%w: the replay header's rate limiter: %w", ErrCheckpoint, err)
	}
	asked := o.Limiter
	if asked == nil {
		l, err := newLimiter(p.cfg)
		if err != nil {
			return nil, err
		}
		c := l.Config()
		asked = &c
	}
	use, notes := *asked, []string(nil)
	if flags := limiterOf(*asked); *flags != *saved {
		switch o.LimiterFrom {
		case "":
			return nil, fmt.Errorf("%w: %w: the checkpoint's (%s) differs from the flags' (%s); say which one wins (apex replay -limiter-from=checkpoint or -limiter-from=flags)",
				ErrResumeConflict, ErrLimiterConflict, saved, flags)
		case LimiterFromCheckpoint:
			use = saved.config(asked.Timeout)
			notes = append(notes, fmt.Sprintf("rate limiter: the checkpoint's configuration (%s) wins over the flags' (%s)", saved, flags))
		case LimiterFromFlags:
			notes = append(notes, fmt.Sprintf("rate limiter: the flags' configuration (%s) wins over the checkpoint's (%s)", flags, saved))
		}
	}
	if len(h.Parts) == 0 || h.Parts[0] != partBuffer {
		return nil, fmt.Errorf("%w: the replay header lists the parts %q; this build reads %q first", ErrCheckpoint, h.Parts, partBuffer)
	}
	buf, err := buffer.Load(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, partBuffer, err)
	}
	c, err := newReplayCore(p, buf, 0)
	if err != nil {
		if errors.Is(err, errShape) {
			return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
		}
		return nil, err
	}
	parts := c.parts()
	var want []string
	for _, p := range parts {
		want = append(want, p.name)
	}
	if !slices.Equal(h.Parts, want) {
		return nil, fmt.Errorf("%w: the replay checkpoint holds the parts %q, but this run (sampler %s) has %q", ErrCheckpoint, h.Parts, p.cfg.Sampler, want)
	}
	for _, part := range parts[1:] {
		if err := part.load(r); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, part.name, err)
		}
	}
	if err := c.limiter.SetConfig(use); err != nil {
		return nil, fmt.Errorf("runtime: restore: rate limiter: %w", err)
	}
	ins, smp, adj := consistentBalance(use, h.Inserted, h.Sampled, int64(min(buf.Stats().Inserts, math.MaxInt64)))
	if adj != "" {
		notes = append(notes, adj)
	}
	c.limiter.restore(ins, smp)
	c.notes = notes
	return c, nil
}

// consistentBalance is the balance a restore gives the limiter (see
// LoadReplayCoreWith): inserted at most stored (the buffer's count of
// inserts), then sampled moved toward the band where an insert and a
// sample are both admitted under cfg. When the band is at least 1 wide
// (2·ErrorBuffer ≥ SamplesPerInsert + 2) the balance lands inside it and
// both are admitted. A narrower band may hold no whole sample count for
// the restored inserts (SamplesPerInsert 0.9, ErrorBuffer 1,
// MinSizeToSample 1, inserted 2: none admits both); then the side the
// checkpoint's balance blocked is admitted (inserts when it had too few
// samples, samples when it had too many), and the other side opens after
// that side's next call, as in a live limiter with such a band. note
// says what moved ("" if nothing). O(1).
func consistentBalance(cfg RateLimiterConfig, inserted, sampled, stored int64) (ins, smp int64, note string) {
	ins, smp = min(inserted, stored), sampled
	off := cfg.SamplesPerInsert * float64(cfg.MinSizeToSample)
	lo, hi := off-cfg.ErrorBuffer+1, off+cfg.ErrorBuffer-cfg.SamplesPerInsert // admitted: lo <= ins·spi - smp <= hi
	diff := float64(ins)*cfg.SamplesPerInsert - float64(smp)
	switch {
	case ins < cfg.MinSizeToSample:
		// Inserts are admitted until MinSizeToSample, whatever the balance.
	case diff > hi:
		smp = int64(math.Ceil(float64(ins)*cfg.SamplesPerInsert - hi))
	case diff < lo:
		smp = max(0, int64(math.Floor(float64(ins)*cfg.SamplesPerInsert-lo)))
	}
	if ins == inserted && smp == sampled {
		return ins, smp, ""
	}
	return ins, smp, fmt.Sprintf("rate limiter: the checkpoint's balance (inserted %d, sampled %d) restored as inserted %d, sampled %d (the buffer holds %d inserts; the balance clamped toward where inserts and samples are both admitted)",
		inserted, sampled, ins, smp, stored)
}

// RestoreNotes says what LoadReplayCoreWith chose or adjusted beyond the
// checkpoint's contents (which limiter configuration won, a clamped
// balance); nil for a new core or a restore that took everything as
// saved. O(1).
func (c *ReplayCore) RestoreNotes() []string { return c.notes }

// DecodeTrainConfig reads a TrainConfig written by ReplayCore.ConfigJSON
// (or json.Marshal of one); unknown keys are refused, so a host never
// silently drops a setting of a newer server. O(len(b)).
func DecodeTrainConfig(b []byte) (TrainConfig, error) {
	var c TrainConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return TrainConfig{}, fmt.Errorf("runtime: decoding a TrainConfig: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return TrainConfig{}, fmt.Errorf("runtime: decoding a TrainConfig: %w", err)
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !trainConfigKeys[k] {
			return TrainConfig{}, fmt.Errorf("runtime: decoding a TrainConfig: unknown key %q (a newer server's setting?)", k)
		}
	}
	return c, nil
}

// hostLocal are the settings a learner or actor host may set for its own
// process over the replay server's configuration.
func hostLocal(dst *TrainConfig, src TrainConfig) {
	dst.LearnerWorkers, dst.Float32, dst.Actors = src.LearnerWorkers, src.Float32, src.Actors
	dst.Steps, dst.Duration, dst.TargetReturn, dst.StopWhenSolved = src.Steps, src.Duration, src.TargetReturn, src.StopWhenSolved
	dst.EvalEvery, dst.EvalEpisodes, dst.FinalEpisodes, dst.EvalEverySteps = src.EvalEvery, src.EvalEpisodes, src.FinalEpisodes, src.EvalEverySteps
	dst.Checkpoint, dst.CheckpointEvery, dst.Inserters = src.Checkpoint, src.CheckpointEvery, src.Inserters
}

// CheckHostConfig refuses a host's configuration local that differs from
// the replay server's server in anything but the settings a process may
// set for itself: LearnerWorkers, Float32 (the learner's), Actors (an
// actor host's count), the stop rules (Steps, Duration, TargetReturn,
// StopWhenSolved), the evaluation settings, Checkpoint, CheckpointEvery
// and Inserters. The error names every differing key. O(config).
func CheckHostConfig(server, local TrainConfig) error {
	want := server
	hostLocal(&want, local)
	a, err := json.Marshal(want)
	if err != nil {
		return err
	}
	b, err := json.Marshal(local)
	if err != nil {
		return err
	}
	if bytes.Equal(a, b) {
		return nil
	}
	var ma, mb map[string]json.RawMessage
	if err := json.Unmarshal(a, &ma); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &mb); err != nil {
		return err
	}
	var diff []string
	for _, k := range slices.Sorted(maps.Keys(trainConfigKeys)) {
		if !bytes.Equal(ma[k], mb[k]) {
			diff = append(diff, fmt.Sprintf("%s: server %s, here %s", k, orNone(ma[k]), orNone(mb[k])))
		}
	}
	return fmt.Errorf("runtime: this host's configuration differs from the replay server's in settings only the server sets (%s)", joinComma(diff))
}

func orNone(b json.RawMessage) string {
	if b == nil {
		return "unset"
	}
	return string(b)
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}
