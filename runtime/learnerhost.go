package runtime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/checkpoint"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// LearnerHost is the learner side of a run, built from the run's
// TrainConfig exactly as a Trainer builds it: the agent (networks and the
// learner over a replay method), the model.Store it publishes its
// parameters to, the evaluator and the periodic checkpoints (as Tasks)
// and the stop rules (Steps, Duration, TargetReturn). An `apex learner`
// process holds one over a method whose stage runs in a replay server; a
// Trainer holds one over its ReplayCore's method.
//
// The method's Selector is wrapped in sampler.Reseed, in every run: a
// learner step draws one seed from the learner's generator and the stage
// samples with it, so a stage behind the network (sending the seed to
// the server's Reseeder) draws exactly the batches it draws in process.
//
// Concurrency: Run once; Stats, Policy, Store, Config and SaveCheckpoint
// from any goroutine, also while it runs. The Stepper is driven by one
// goroutine at a time.
type LearnerHost struct {
	ran     atomic.Bool // Run or Tasks was called
	cfg     TrainConfig
	agent   agent
	store   *model.Store
	limiter *RateLimiter
	pipe    Pipeline
	// gate is held shared by each learner step and each evaluation handed
	// to the stage, exclusively by a checkpoint (the learner at rest).
	gate  sync.RWMutex
	steps atomic.Int64 // steps taken through Stepper by this host
	// envSteps, if set, reports the run's environment steps and episodes
	// (this segment's) for Stats and the evaluation curve.
	envSteps func() (steps, episodes int64)
	// saveTo writes the checkpoint its Tasks and Run write (the host's own
	// SaveCheckpoint, or a Trainer's whole run).
	saveTo   func(path string) error
	ev       *evaluator
	start    atomic.Pointer[time.Time] // set by Run or Tasks; read by Stats from any goroutine
	lastEval atomic.Pointer[EvalPoint]
	evals    atomic.Int64 // evaluations recorded by this host
	base     counterBase  // what earlier segments of a resumed run did

	ck checkpointCounters

	mu    sync.Mutex
	curve []EvalPoint
}

// LearnerOption configures NewLearnerHost.
type LearnerOption func(*learnerOptions)

type learnerOptions struct {
	seeded   bool
	buf      *buffer.Buffer
	limiter  *RateLimiter
	envSteps func() (int64, int64)
}

// SeededRemotely leaves the method's Selector as it is instead of
// wrapping it in sampler.Reseed: for a remote stage that draws the seed
// from the learner's generator itself and sends it to the server's
// Reseeder (remote.Client.Method), so the learner samples exactly what
// an in-process one does.
func SeededRemotely() LearnerOption {
	return func(o *learnerOptions) { o.seeded = true }
}

// WithReplayBuffer builds the learner over buf, the buffer the method
// samples (in process; needed by vracer, whose learner checks that the
// method's episodes are buf's). Without it the learner gets the buffer of
// the method's Episodes when it has some (a remote ReF-ER stage's local
// buffer of the table's layout), else a small buffer of the run's layout
// for its batches alone: a remote stage fills them.
func WithReplayBuffer(buf *buffer.Buffer) LearnerOption {
	return func(o *learnerOptions) { o.buf = buf }
}

// WithLimiter paces Run's learner steps with lim (AwaitSample before each
// step), the limiter the run's inserts go through in this process. A
// learner whose stage is remote takes none: the server paces its samples.
func WithLimiter(lim *RateLimiter) LearnerOption {
	return func(o *learnerOptions) { o.limiter = lim }
}

// WithEnvCounter has Stats and the evaluation curve report f's
// environment steps and episodes (the actors' so far; earlier segments of
// a resumed run are added). f is called from any goroutine.
func WithEnvCounter(f func() (envSteps, episodes int64)) LearnerOption {
	return func(o *learnerOptions) { o.envSteps = f }
}

// NewLearnerHost validates cfg as NewTrainer does and builds the learner
// over m: the run's networks (seeded from cfg.Seed), the learner cfg.Algo
// names with m's Selector Reseed-wrapped, its store (the learner
// publishes its initial parameters there) and, with LearnerWorkers > 1,
// its worker pool (started by Run). m is the run's method: in process a
// ReplayCore's; remotely one whose Selector, Weighter, Features and
// Evaluated are adaptors, and whose Loss and Normalizer come from the same
// method built locally. With cfg.Checkpoint set, its folder must be
// writable. Cost: the networks and the learner's batch; with no
// WithReplayBuffer, a buffer of at most max(Batch, 1024) items.
func NewLearnerHost(cfg TrainConfig, m sampler.Method, opts ...LearnerOption) (*LearnerHost, error) {
	p, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	var o learnerOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkMemory(0, p.cfg, p.netBytes(0)); err != nil {
		return nil, err
	}
	h, err := newLearnerHost(p, m, o)
	if err != nil {
		return nil, err
	}
	if err := prepareCheckpoint(p.cfg.Checkpoint); err != nil {
		return nil, err
	}
	return h, nil
}

// prepareCheckpoint fails now, not when the run first saves, if path
// (when set) cannot be written, and clears what saves interrupted by a
// crash left behind.
func prepareCheckpoint(path string) error {
	if path == "" {
		return nil
	}
	if err := probeWritable(path); err != nil {
		return fmt.Errorf("runtime: train: the checkpoint %s cannot be written: %w", path, err)
	}
	if _, err := removeStaleTemps(path); err != nil {
		return fmt.Errorf("runtime: train: removing stale temporary files of the checkpoint %s: %w", path, err)
	}
	return nil
}

func newLearnerHost(p *plan, m sampler.Method, o learnerOptions) (*LearnerHost, error) {
	cfg := p.cfg
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("runtime: learner host: %w", err)
	}
	buf := o.buf
	if buf == nil && m.Episodes != nil {
		// A remote episode source's buffer (the table's layout), which
		// the learner's controller checks its batches come from.
		buf = m.Episodes.Buffer()
	}
	if buf == nil {
		lc := p.layout
		lc.Capacity = min(lc.Capacity, max(cfg.Batch, layoutCapacity))
		var err error
		if buf, err = buffer.New(lc); err != nil {
			return nil, err
		}
	} else if got, want := buf.Config(), p.layout; got.ObsDim != want.ObsDim || got.Action != want.Action ||
		got.NumActions != want.NumActions || (want.Action == buffer.Continuous && got.ActionDim != want.ActionDim) || len(got.Floats) != len(want.Floats) {
		return nil, fmt.Errorf("runtime: learner host: the replay buffer's layout (%d observations, %v actions %d/%d, %d float columns) is not the run's (%d, %v %d/%d, %d)",
			got.ObsDim, got.Action, got.NumActions, got.ActionDim, len(got.Floats),
			want.ObsDim, want.Action, want.NumActions, want.ActionDim, len(want.Floats))
	}
	if !o.seeded {
		m.Selector = sampler.Reseed(m.Selector)
	}
	store := &model.Store{}
	ag, err := newAgent(cfg, buf, m, store, p.obsDim, p.space)
	if err != nil {
		return nil, err
	}
	if ag.batch != cfg.Batch || ag.lr != cfg.LR {
		return nil, fmt.Errorf("runtime: learner host: the %s learner's batch %d and learning rate %g are not the configuration's %d and %g",
			cfg.Algo, ag.batch, ag.lr, cfg.Batch, cfg.LR)
	}
	h := &LearnerHost{cfg: cfg, agent: ag, store: store, limiter: o.limiter, envSteps: o.envSteps}
	h.saveTo = h.SaveCheckpoint
	return h, nil
}

// Config is the run's configuration, defaults filled in.
func (h *LearnerHost) Config() TrainConfig { return h.cfg }

// Store is where the learner publishes its parameters (a parameter
// service reads it; in process the actors do). Safe for concurrent use.
func (h *LearnerHost) Store() *model.Store { return h.store }

// Method is the method the learner replays through (its Selector the
// Reseeder over the one NewLearnerHost was given).
func (h *LearnerHost) Method() sampler.Method { return h.agent.method }

// Warnings are the method's warnings about a biased pairing.
func (h *LearnerHost) Warnings() []string { return h.agent.method.Warnings }

// Batch is the items a learner step samples (for a rate limiter).
func (h *LearnerHost) Batch() int { return h.agent.batch }

// Stepper is the learner step (sample, learn, write back), counted in
// Stats and excluded from checkpoints while it runs, for a caller that
// schedules it in a Pipeline of its own (with Tasks). One goroutine at a
// time. With LearnerWorkers > 1 the caller brackets its use with
// StartWorkers.
func (h *LearnerHost) Stepper() Stepper { return hostStepper{h} }

type hostStepper struct{ h *LearnerHost }

func (s hostStepper) Step(ctx context.Context) error {
	s.h.gate.RLock()
	defer s.h.gate.RUnlock()
	if err := s.h.agent.Step(ctx); err != nil {
		return err
	}
	s.h.steps.Add(1)
	return nil
}

// StartWorkers starts the learner's data-parallel helpers
// (LearnerWorkers > 1; a no-op otherwise) and returns what stops them:
// for a caller that drives Stepper itself (Run does this itself).
func (h *LearnerHost) StartWorkers() (stop func()) {
	w := h.agent.workers
	if w == nil {
		return func() {}
	}
	w.Start()
	return w.Stop
}

// Tasks are the run's Tasks, as Run schedules them: the checkpointer
// (every CheckpointEvery, when Checkpoint is set) and the evaluator
// (every EvalEvery, or every EvalEverySteps learner steps on the
// Lockstep schedule; it stops the run once TargetReturn is confirmed),
// for a caller that schedules the learner itself; Finish ends such a run.
// It starts the run's clock. Once per host (Run calls it): a second call,
// or one after Run, returns ErrRunOnce.
func (h *LearnerHost) Tasks() ([]Task, error) {
	if !h.ran.CompareAndSwap(false, true) {
		return nil, ErrRunOnce
	}
	return h.tasks()
}

func (h *LearnerHost) tasks() ([]Task, error) {
	now := time.Now()
	h.start.Store(&now)
	ev, err := h.newEvaluator()
	if err != nil {
		return nil, err
	}
	h.ev = ev
	var tasks []Task
	if h.cfg.Checkpoint != "" && h.cfg.CheckpointEvery > 0 {
		tasks = append(tasks, Task{Name: "checkpointer", Every: h.cfg.CheckpointEvery,
			Do: func(context.Context) (bool, error) {
				_ = h.save() // counted in Stats; the run goes on
				return false, nil
			}})
	}
	// Evaluations every EvalEvery (concurrent) or EvalEverySteps learner
	// steps (lockstep: a wall-clock period would break determinism).
	tasks = append(tasks, Task{Name: "evaluator", Every: h.cfg.EvalEvery, EverySteps: h.cfg.EvalEverySteps,
		Do: ev.periodic})
	return tasks, nil
}

// remaining is the learner steps left of cfg.Steps (0: no step bound),
// and whether the run already took them all (a resumed run).
func (h *LearnerHost) remaining() (steps int64, done bool) {
	if h.cfg.Steps <= 0 {
		return 0, false
	}
	if h.base.LearnerSteps >= h.cfg.Steps {
		return 0, true
	}
	return h.cfg.Steps - h.base.LearnerSteps, false
}

// Run trains until Steps, Duration, TargetReturn or ctx (a learner-only
// Pipeline on the Concurrent schedule, paced by WithLimiter's limiter if
// given, with Tasks), then runs the final evaluation, writes the
// checkpoint if configured and returns the result, as Trainer.Run does
// (a *CheckpointError together with the result when only the last
// checkpoint failed). Every goroutine it starts has ended when it
// returns. Once per host: a second call returns ErrRunOnce.
func (h *LearnerHost) Run(ctx context.Context) (*TrainResult, error) {
	return h.run(ctx, nil, nil, Concurrent)
}

// run is Run with sources inserting into sink on schedule (a Trainer's
// whole run).
func (h *LearnerHost) run(ctx context.Context, sink Sink, sources []Source, schedule Schedule) (*TrainResult, error) {
	if !h.ran.CompareAndSwap(false, true) {
		return nil, ErrRunOnce
	}
	defer h.StartWorkers()()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	tasks, err := h.tasks()
	if err != nil {
		return nil, err
	}
	if h.cfg.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(runCtx, h.cfg.Duration)
		defer cancel()
	}
	steps, done := h.remaining()
	if done {
		return h.Finish(ctx) // a resumed run that already took its steps
	}
	pc := PipelineConfig{Queue: 2 * len(sources), LearnerBatch: h.agent.batch, Limiter: h.limiter, MaxSteps: steps,
		Inserters: h.cfg.Inserters, PriorSteps: h.base.LearnerSteps, Schedule: schedule, Tasks: tasks}
	if err := h.pipe.Run(runCtx, sink, sources, h.Stepper(), pc); err != nil {
		return nil, h.failed(err)
	}
	return h.Finish(ctx)
}

// Finish ends a run scheduled through Stepper and Tasks: the final
// evaluation (unless the evaluator confirmed the target), the checkpoint
// if configured, and the result. ctx is the run's context: its end means
// the run was interrupted. Run calls it; call it once, after Tasks.
func (h *LearnerHost) Finish(ctx context.Context) (*TrainResult, error) {
	ev := h.ev
	if ev == nil {
		return nil, errors.New("runtime: learner host: Finish before Tasks")
	}
	res := &TrainResult{Config: h.cfg, Build: Build(), Machine: Machine()}
	st := h.Stats()
	switch {
	case ev.solved != nil:
		res.StopReason = StopSolved
	case h.cfg.Steps > 0 && st.LearnerSteps >= h.cfg.Steps:
		res.StopReason = StopSteps
	case h.cfg.Duration > 0 && st.SegmentSeconds >= h.cfg.Duration.Seconds():
		res.StopReason = StopDuration
	case ctx.Err() != nil:
		res.StopReason = StopInterrupted
	default: // the lockstep schedule ends only on Steps, a target or ctx
		res.StopReason = StopSteps
	}
	res.StoppedByTarget = ev.solved != nil
	mean, rets, err := ev.final()
	if err != nil {
		return nil, err
	}
	st = h.Stats()
	res.Seconds, res.LearnerSteps, res.EnvSteps = st.Seconds, st.LearnerSteps, st.EnvSteps
	res.EnvStepsPerSec = float64(st.EnvSteps) / st.Seconds
	res.UpdatesPerSec = float64(st.LearnerSteps) / st.Seconds
	res.FinalReturn, res.FinalReturns = mean, rets
	h.record(mean)
	h.mu.Lock()
	res.Curve = append([]EvalPoint(nil), h.curve...)
	h.mu.Unlock()
	if h.cfg.Checkpoint != "" {
		if err := h.save(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// save writes the run's checkpoint to the configured path and counts it.
func (h *LearnerHost) save() error {
	start := time.Now()
	err := h.saveTo(h.cfg.Checkpoint)
	h.ck.mu.Lock()
	defer h.ck.mu.Unlock()
	if err != nil {
		h.ck.st.Failed++
		h.ck.st.LastError = err.Error()
		return err
	}
	h.ck.st.Saved++
	h.ck.st.LastSeconds, h.ck.st.LastError = time.Since(start).Seconds(), ""
	if fi, err := os.Stat(h.cfg.Checkpoint); err == nil {
		h.ck.st.LastBytes = fi.Size()
	}
	return nil
}

// failed writes the diagnostic checkpoint of a failed run, if configured,
// to Checkpoint + ".failed", so it never replaces the last good checkpoint
// (a resumed run writes back to the file it came from).
func (h *LearnerHost) failed(err error) error {
	if h.cfg.Checkpoint == "" {
		return err
	}
	path := h.cfg.Checkpoint + ".failed"
	if cerr := h.saveTo(path); cerr != nil {
		return fmt.Errorf("%w (and the checkpoint failed: %v)", err, cerr)
	}
	return fmt.Errorf("%w (checkpoint of the failed state written to %s)", err, path)
}

// Policy returns a new network holding the policy the actors run, with
// the learner's latest published parameters (Trainer.Policy says what
// each algorithm's is). Safe for concurrent use. Cost: one network
// allocation and copy.
func (h *LearnerHost) Policy() (*model.Net, error) {
	net, err := model.NewNet(h.agent.policy, nil)
	if err != nil {
		return nil, err
	}
	p := h.store.Load()
	if p == nil {
		p = h.agent.first()
	}
	if err := net.SetParams(p); err != nil {
		return nil, fmt.Errorf("runtime: policy: %w", err)
	}
	return net, nil
}

func (h *LearnerHost) record(mean float64) {
	st := h.Stats()
	p := EvalPoint{Seconds: st.Seconds, LearnerSteps: st.LearnerSteps, EnvSteps: st.EnvSteps, MeanReturn: mean,
		FarFraction: st.Learner.FarFraction, MeanKL: st.Learner.MeanKL}
	if m := st.Learner.Sampled; m.N > 0 {
		p.Sampled = &m
	}
	h.mu.Lock()
	h.curve = append(h.curve, p)
	h.mu.Unlock()
	h.lastEval.Store(&p)
	h.evals.Add(1)
}

// periodic records a periodic evaluation and hands its mean return to a
// method that learns from evaluations (sampler.Method.Evaluated, NERS). The
// final evaluation is not handed over: it plays other episodes (more, with
// a fixed seed) than the periodic ones the stage's rewards compare.
func (h *LearnerHost) periodic(mean float64) {
	h.record(mean)
	h.gate.RLock() // the stage's state changes: not during a checkpoint
	defer h.gate.RUnlock()
	if evaluated := h.agent.method.Evaluated; evaluated != nil {
		// The evaluator's returns are finite (a non-finite one would be
		// refused here, and the stage keeps its previous baseline).
		_ = evaluated(mean)
	}
}

// Stats returns a snapshot of the learner's side of the run: learner
// steps (earlier segments included), the learner's counters, the
// evaluations, the checkpoints, and the environment steps WithEnvCounter
// reports (else those of earlier segments only). Buffer and Limiter are
// left zero (a Trainer fills them). Safe for concurrent use.
func (h *LearnerHost) Stats() TrainStats {
	st := TrainStats{Pipeline: h.pipe.Stats(), Learner: h.agent.stats()}
	if start := h.start.Load(); start != nil {
		st.SegmentSeconds = time.Since(*start).Seconds()
	}
	st.Seconds = h.base.Seconds + st.SegmentSeconds
	st.EnvSteps, st.Episodes = h.base.EnvSteps, h.base.Episodes
	if h.envSteps != nil {
		s, e := h.envSteps()
		st.EnvSteps += s
		st.Episodes += e
	}
	st.LearnerSteps = h.base.LearnerSteps + h.steps.Load()
	st.Evaluations = h.evals.Load() // before lastEval: a count never runs ahead of its value
	if p := h.lastEval.Load(); p != nil {
		st.LastEval, st.Evaluated = p.MeanReturn, true
	}
	h.ck.mu.Lock()
	st.Checkpoints = h.ck.st
	h.ck.mu.Unlock()
	return st
}

// Learner checkpoint layout: sections of the checkpoint package's format,
//
//	runtime.Learner version 1: JSON (ckHeader: the configuration, the
//	         counters, the evaluation curve, the parts that follow)
//	learner  the learner (networks, optimizer state, step, RNG)
//
// The replay's data and stage state live in the replay server's
// checkpoint (ReplayCore.Save).
const (
	learnerKind    = "runtime.Learner"
	learnerVersion = 1
)

// header is the checkpoint header of the host's state (the learner at
// rest: the caller holds the gate).
func (h *LearnerHost) header() ckHeader {
	st := h.Stats()
	hd := ckHeader{Config: h.cfg, Base: counterBase{Seconds: st.Seconds, EnvSteps: st.EnvSteps,
		Episodes: st.Episodes, LearnerSteps: int64(h.agent.steps())}}
	h.mu.Lock()
	hd.Curve = append([]EvalPoint(nil), h.curve...)
	h.mu.Unlock()
	return hd
}

// Save writes the learner's state to w (configuration, counters, curve,
// and the learner: networks, optimizer, step, RNG), waiting for the step
// in progress and holding the next until it is written. Cost: O(the
// learner's parameters). Safe for concurrent use with Run.
func (h *LearnerHost) Save(w io.Writer) error {
	h.gate.Lock()
	defer h.gate.Unlock()
	hd := h.header()
	hd.Parts = []string{partLearner}
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := checkpoint.Save(bw, learnerKind, learnerVersion, func(w io.Writer) error { return checkpoint.WriteJSON(w, hd) }); err != nil {
		return err
	}
	if err := h.agent.save(bw); err != nil {
		return fmt.Errorf("%s: %w", partLearner, err)
	}
	return bw.Flush()
}

// SaveCheckpoint writes Save's stream to path atomically (a temporary
// file in its folder, synced and renamed over it), as Trainer's does.
func (h *LearnerHost) SaveCheckpoint(path string) error {
	return saveAtomic(path, func(f *os.File) error { return h.Save(f) })
}

// LoadLearnerHost rebuilds a learner saved by Save, for the run cfg
// describes over m (as NewLearnerHost): the learner's networks,
// optimizer, step and RNG, the counters and the curve, exactly. cfg may
// change how the run proceeds (stop rules, evaluation and checkpoint
// settings, LearnerWorkers) but not what the learner was built for (an
// error wrapping ErrResumeConflict); a damaged stream is an error wrapping
// ErrCheckpoint.
func LoadLearnerHost(cfg TrainConfig, m sampler.Method, r io.Reader, opts ...LearnerOption) (*LearnerHost, error) {
	var hd ckHeader
	err := checkpoint.Load(r, learnerKind, learnerVersion, func(_ uint32, r io.Reader) error {
		return checkpoint.ReadJSON(r, &hd, maxHeaderBytes)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: learner header: %w", ErrCheckpoint, err)
	}
	if err := hd.check(); err != nil {
		return nil, fmt.Errorf("%w: learner header: %w", ErrCheckpoint, err)
	}
	if len(hd.Parts) != 1 || hd.Parts[0] != partLearner {
		return nil, fmt.Errorf("%w: the learner checkpoint holds the parts %q, want %q", ErrCheckpoint, hd.Parts, []string{partLearner})
	}
	cfg.Resumes = hd.Config.Resumes + 1
	h, err := NewLearnerHost(cfg, m, opts...)
	if err != nil {
		return nil, err
	}
	if err := sameShape(hd.Config, h.cfg); err != nil {
		return nil, fmt.Errorf("%w: learner: %w", ErrResumeConflict, err)
	}
	if err := h.agent.load(r); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, partLearner, err)
	}
	h.base, h.curve = hd.Base, hd.Curve
	return h, nil
}

// LearnerCheckpointSteps reads the learner steps a learner checkpoint
// (LearnerHost.Save) holds, from its header alone: what a remote stage
// resuming the run needs before LoadLearnerHost (remote.Client.Method's
// priorSteps). Cost: reading the header.
func LearnerCheckpointSteps(r io.Reader) (uint64, error) {
	var hd ckHeader
	err := checkpoint.Load(r, learnerKind, learnerVersion, func(_ uint32, r io.Reader) error {
		return checkpoint.ReadJSON(r, &hd, maxHeaderBytes)
	})
	if err == nil {
		err = hd.check()
	}
	if err != nil {
		return 0, fmt.Errorf("%w: learner header: %w", ErrCheckpoint, err)
	}
	if hd.Base.LearnerSteps < 0 {
		return 0, fmt.Errorf("%w: learner header: %d learner steps", ErrCheckpoint, hd.Base.LearnerSteps)
	}
	return uint64(hd.Base.LearnerSteps), nil
}
