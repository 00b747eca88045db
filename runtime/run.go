package runtime

import (
	"context"
	"fmt"

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
	schedule := Concurrent
	if t.cfg.Deterministic {
		schedule = Lockstep
	}
	return t.lh.run(ctx, t.buf, t.ah.Sources(), schedule)
}

// evaluator plays the agent's greedy policy on an environment and a
// network of its own: the periodic evaluations (a Task of the run's
// pipeline, on either schedule), the confirmation of a reached target and
// the final evaluation. Used by one goroutine at a time.
type evaluator struct {
	t   *LearnerHost
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

func (t *LearnerHost) newEvaluator() (*evaluator, error) {
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
