package actor

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
)

// vecPolicy is the part of an actor of continuous actions (Continuous,
// Squashed, Gaussian) that the shared Fill loop (runner.fillVec) calls:
// how it acts, what it records beside each transition, and how it hands
// the transitions over. Its methods run on the actor's goroutine.
type vecPolicy interface {
	// choose selects the action for obs: send is what the environment
	// gets, stored what ActionVec stores, and check the values that must
	// be finite (named what in the error).
	choose(obs []float32) (send []float64, stored []float32, check []float64, what string)
	// record runs once the adder has taken the step (its output held
	// before transitions before the step), before the runner's advance.
	record(res envs.StepResult, before int)
	// hand appends the first k pending transitions to t and drops them.
	hand(t *buffer.Transitions, k int)
}

// fillVec is the Fill of the actors of continuous actions: it refuses a
// nil ctx or t, an overlapping call (ErrBusy), a batch with priorities
// (kind names the actor in the error) and, for an actor that writes
// floats float columns, a batch with another number of them; then it
// steps until LocalBatch transitions are ready and hands exactly that
// many to t, or, when ctx ends, the ones completed so far.
func (r *runner) fillVec(ctx context.Context, t *buffer.Transitions, p vecPolicy, kind string, floats int) error {
	if err := checkFill(ctx, t); err != nil {
		return err
	}
	if err := r.enter("Fill"); err != nil {
		return err
	}
	defer r.exit()
	if len(t.Priority) != 0 {
		return fmt.Errorf("actor %d: Fill: the batch holds %d priorities; %s gives none (hand it a batch without)", r.cfg.ID, len(t.Priority), kind)
	}
	if floats > 0 && len(t.Floats) != 0 && len(t.Floats) != floats {
		return fmt.Errorf("actor %d: Fill: the batch has %d float columns, the config %d", r.cfg.ID, len(t.Floats), floats)
	}
	done := ctx.Done()
	for r.adder.Out.Len() < r.cfg.LocalBatch {
		select {
		case <-done:
			p.hand(t, r.adder.Out.Len())
			return nil
		default:
		}
		if err := r.stepVec(p); err != nil {
			return err
		}
	}
	p.hand(t, r.cfg.LocalBatch)
	return nil
}

// stepVec takes one environment step with p's action (starting an episode
// first if none is running), feeds the adder, lets p record its columns
// and advances the runner (which refreshes the parameters when due).
func (r *runner) stepVec(p vecPolicy) error {
	if err := r.ensureEpisode(); err != nil {
		return err
	}
	send, stored, check, what := p.choose(r.obs)
	if err := model.CheckFinite(what, check); err != nil {
		return fmt.Errorf("actor %d (parameters version %d): step %d: %w", r.cfg.ID, r.version, r.steps, err)
	}
	res, err := r.env.Step(envs.Action{Vec: send})
	if err != nil {
		return fmt.Errorf("actor %d: step %d: %w", r.cfg.ID, r.steps, err)
	}
	if err := r.convert(r.next, res.Obs); err != nil {
		return err
	}
	before := r.adder.Out.Len()
	if err := r.adder.AddVec(stored, res.Reward, r.next, res.Terminated, res.Truncated); err != nil {
		return fmt.Errorf("actor %d: %w", r.cfg.ID, err)
	}
	p.record(res, before)
	return r.advance(res, before)
}

// uniformIn sets dst to an action drawn uniformly in box (the warm-up
// steps of Continuous and Squashed), one rng draw per dimension.
func uniformIn(box envs.Box, dst []float64, rng *rand.Rand) {
	for j := range dst {
		dst[j] = box.Low[j] + (box.High[j]-box.Low[j])*rng.Float64()
	}
}

// boundedBox returns env's action space if it is a Box of at least one
// dimension whose bounds are finite and hold a float32 value each
// (actions are stored as float32); who names the actor in the error,
// which wraps ErrConfig.
func boundedBox(env envs.Env, who string) (envs.Box, error) {
	box, ok := env.ActionSpace().(envs.Box)
	if !ok || box.Dim() < 1 || len(box.High) != box.Dim() {
		return box, fmt.Errorf("%w: %s needs a Box action space, got %v", ErrConfig, who, env.ActionSpace())
	}
	for j := range box.Dim() {
		lo, hi := box.Low[j], box.High[j]
		if math.IsInf(lo, 0) || math.IsInf(hi, 0) || !(lo <= hi) {
			return box, fmt.Errorf("%w: the action space %v is not a bounded box (dimension %d)", ErrConfig, box, j)
		}
		if f := float64(round32In(lo, lo, hi)); !(f >= lo && f <= hi) {
			return box, fmt.Errorf("%w: the action space %v holds no float32 value in dimension %d (actions are stored as float32)", ErrConfig, box, j)
		}
	}
	return box, nil
}
