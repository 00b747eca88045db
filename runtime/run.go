package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/apexrl/apex/actor"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
)

// Run trains until Steps, Duration, TargetReturn or ctx, then runs the
// final evaluation and returns the result. Every goroutine it starts has
// ended when it returns. An error from any part (a non-finite loss, an
// invalid action, ...) stops the whole run.
//
// The run is one Pipeline: Deterministic picks its Lockstep schedule,
// otherwise the Concurrent one with Inserters inserters; the evaluator
// and the periodic checkpoints are its Tasks on either.
//
// With Checkpoint set it writes a checkpoint every CheckpointEvery (a
// failed periodic save is counted in Stats().Checkpoints and the run goes
// on) and when it ends. When only that last checkpoint fails, Run returns
// the result together with a *CheckpointError. A second call returns
// ErrRunOnce.
func (t *Trainer) Run(ctx context.Context) (*TrainResult, error) {
	if !t.ran.CompareAndSwap(false, true) {
		return nil, ErrRunOnce
	}
	if w := t.agent.workers; w != nil { // the learner's data-parallel helpers, for this Run
		w.Start()
		defer w.Stop()
	}
	now := time.Now()
	t.start.Store(&now)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if t.cfg.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(runCtx, t.cfg.Duration)
		defer cancel()
	}
	ev, err := t.newEvaluator()
	if err != nil {
		return nil, err
	}
	if t.cfg.Steps > 0 && t.base.LearnerSteps >= t.cfg.Steps {
		return t.finish(ctx, ev) // a resumed run that already took its steps
	}
	steps := t.cfg.Steps
	if steps > 0 {
		steps -= t.base.LearnerSteps // what is left of a resumed run (> 0: checked above)
	}
	pc := PipelineConfig{Queue: 2 * len(t.actors), LearnerBatch: t.agent.batch, Limiter: t.limiter, MaxSteps: steps,
		Inserters: t.cfg.Inserters, PriorSteps: t.base.LearnerSteps}
	if t.cfg.Deterministic {
		pc.Schedule = Lockstep
	}
	if t.cfg.Checkpoint != "" && t.cfg.CheckpointEvery > 0 {
		pc.Tasks = append(pc.Tasks, Task{Name: "checkpointer", Every: t.cfg.CheckpointEvery,
			Do: func(context.Context) (bool, error) {
				_ = t.save() // counted in Stats; the run goes on
				return false, nil
			}})
	}
	// Evaluations every EvalEvery (concurrent) or EvalEverySteps learner
	// steps (lockstep: a wall-clock period would break determinism).
	pc.Tasks = append(pc.Tasks, Task{Name: "evaluator", Every: t.cfg.EvalEvery, EverySteps: t.cfg.EvalEverySteps,
		Do: ev.periodic})
	sources := make([]Source, len(t.actors))
	for i, a := range t.actors {
		sources[i] = a
	}
	if err := t.pipe.Run(runCtx, t.buf, sources, t.agent, pc); err != nil {
		return nil, t.failed(err)
	}
	return t.finish(ctx, ev)
}

// evaluator plays the agent's greedy policy on an environment and a
// network of its own: the periodic evaluations (a Task of the run's
// pipeline, on either schedule), the confirmation of a reached target and
// the final evaluation. Used by one goroutine at a time.
type evaluator struct {
	t   *Trainer
	env envs.Env
	net *model.Net
	// n counts this Run's periodic evaluations; each one's episodes are
	// seeded with Seed^n<<32.
	n uint64
	// solved is the confirming evaluation that reached TargetReturn (nil
	// until one does).
	solved *finalEval
}

// finalEval is an evaluation that confirmed the target.
type finalEval struct {
	mean    float64
	returns []float64
}

// finalSeed seeds the final evaluation's episodes and the confirmation's.
const finalSeed = 0xf1a1

func (t *Trainer) newEvaluator() (*evaluator, error) {
	env, err := envs.Make(t.cfg.Env)
	if err != nil {
		return nil, err
	}
	net, err := model.NewNet(t.agent.policy, nil)
	if err != nil {
		return nil, err
	}
	return &evaluator{t: t, env: env, net: net}, nil
}

// play runs episodes greedy episodes of store's latest parameters (nil:
// the net's current ones) with the agent's evaluation (actor.Evaluate
// unless the agent has its own).
func (e *evaluator) play(ctx context.Context, store *model.Store, episodes int, seed uint64) (float64, []float64, error) {
	if ev := e.t.agent.evaluate; ev != nil {
		return ev(ctx, e.env, e.net, store, episodes, seed)
	}
	return actor.Evaluate(ctx, e.env, e.net, store, episodes, seed)
}

// periodic runs one periodic evaluation of EvalEpisodes episodes and
// records it. When it reaches TargetReturn, a confirming evaluation of
// FinalEpisodes episodes of the same parameters decides: solved reports
// whether it reached the target too (it is then the final result). A Task.
func (e *evaluator) periodic(ctx context.Context) (solved bool, err error) {
	t := e.t
	e.n++
	if t.store.Load() == nil {
		return false, nil // nothing published yet
	}
	mean, _, err := e.play(ctx, t.store, t.cfg.EvalEpisodes, t.cfg.Seed^e.n<<32)
	if err != nil {
		return false, err
	}
	t.periodic(mean)
	if t.cfg.TargetReturn == 0 || mean < t.cfg.TargetReturn {
		return false, nil
	}
	// Confirm on the same parameters (net holds them; no store).
	cmean, crets, err := e.play(ctx, nil, t.cfg.FinalEpisodes, t.cfg.Seed+finalSeed)
	if err != nil {
		return false, err
	}
	if cmean < t.cfg.TargetReturn {
		return false, nil
	}
	e.solved = &finalEval{mean: cmean, returns: crets}
	return true, nil
}

// final returns the run's final evaluation: the confirmation that
// solved it, or FinalEpisodes greedy episodes of the last published
// parameters (the initial ones if learning never started). It runs to
// its end whatever happened to the run's context.
func (e *evaluator) final() (float64, []float64, error) {
	if f := e.solved; f != nil {
		return f.mean, f.returns, nil
	}
	t := e.t
	if t.store.Load() == nil {
		t.store.Publish(t.agent.first()) // learning never started: evaluate the initial net
	}
	mean, rets, err := e.play(context.Background(), t.store, t.cfg.FinalEpisodes, t.cfg.Seed+finalSeed)
	if err != nil {
		return 0, nil, fmt.Errorf("final evaluation: %w", err)
	}
	return mean, rets, nil
}

// finish runs the final evaluation (unless the target was confirmed),
// writes the checkpoint if configured and returns the result. ctx is the
// context Run was given: its end means the run was interrupted.
func (t *Trainer) finish(ctx context.Context, ev *evaluator) (*TrainResult, error) {
	res := &TrainResult{Config: t.cfg, Build: Build(), Machine: Machine()}
	st := t.Stats()
	switch {
	case ev.solved != nil:
		res.StopReason = StopSolved
	case t.cfg.Steps > 0 && st.LearnerSteps >= t.cfg.Steps:
		res.StopReason = StopSteps
	case t.cfg.Duration > 0 && st.SegmentSeconds >= t.cfg.Duration.Seconds():
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
	st = t.Stats()
	res.Seconds, res.LearnerSteps, res.EnvSteps = st.Seconds, st.LearnerSteps, st.EnvSteps
	res.EnvStepsPerSec = float64(st.EnvSteps) / st.Seconds
	res.UpdatesPerSec = float64(st.LearnerSteps) / st.Seconds
	res.FinalReturn, res.FinalReturns = mean, rets
	t.record(mean)
	t.mu.Lock()
	res.Curve = append([]EvalPoint(nil), t.curve...)
	t.mu.Unlock()
	if t.cfg.Checkpoint != "" {
		if err := t.save(); err != nil {
			return res, err
		}
	}
	return res, nil
}
