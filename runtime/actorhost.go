package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// ActorHost is a run's actors, or a share of them, built from the run's
// TrainConfig exactly as a Trainer builds them, reading parameters from a
// model.Store and handing their batches to a Sink: an `apex actor`
// process (the store fed by a parameter subscription, the Sink an insert
// stream), or a Trainer's actors (the learner's store, the replay
// buffer).
//
// Concurrency: Run once at a time; Stats and Sources' Stats from any
// goroutine. Each Source is driven by one goroutine at a time.
type ActorHost struct {
	cfg    TrainConfig
	first  int
	actors []actorSource
	sink   Sink
	pipe   Pipeline
	plan   *plan
	sel    sampler.Selector // the dqn actors' stage (nil for the others)
}

// ActorOption configures NewActorHost.
type ActorOption func(*actorOptions)

type actorOptions struct {
	first    int
	selector sampler.Selector
}

// FirstActor makes the host's actors the ids first, first+1, ... of the
// run's cfg.Actors actors (default 0): two hosts with n actors each take
// FirstActor(0) and FirstActor(n), so their streams (exploration rates,
// episode seeds) differ, as those of one host's 2n actors would.
func FirstActor(first int) ActorOption { return func(o *actorOptions) { o.first = first } }

// WithSelector gives the dqn actors the stage whose Priority they store
// with each item (an in-process run passes its replay method's
// Selector). Without it the host builds the run's method itself over a
// small buffer of the run's layout, for Priority alone (the stage's
// Priority depends on its configuration, not on the buffer's contents).
func WithSelector(sel sampler.Selector) ActorOption {
	return func(o *actorOptions) { o.selector = sel }
}

// NewActorHost builds n actors of the run cfg describes (cfg.Actors is
// the run's total, for each actor's exploration schedule; the host's
// actors are ids FirstActor..FirstActor+n−1 of it), reading parameters
// from store and inserting into sink. cfg is validated as NewTrainer
// validates it. Errors: n < 1, ids beyond cfg.Actors, a nil store or
// sink, any configuration error. Cost: n environments and policy
// networks.
func NewActorHost(cfg TrainConfig, n int, store *model.Store, sink Sink, opts ...ActorOption) (*ActorHost, error) {
	p, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	var o actorOptions
	for _, opt := range opts {
		opt(&o)
	}
	return newActorHost(p, n, store, sink, o)
}

func newActorHost(p *plan, n int, store *model.Store, sink Sink, o actorOptions) (*ActorHost, error) {
	cfg := p.cfg
	switch {
	case n < 1:
		return nil, fmt.Errorf("runtime: actor host: needs at least one actor, got %d", n)
	case o.first < 0 || o.first+n > cfg.Actors:
		return nil, fmt.Errorf("runtime: actor host: actors %d..%d do not fit the run's %s = %d (the total over every host)",
			o.first, o.first+n-1, fieldName("Actors"), cfg.Actors)
	case store == nil:
		return nil, errors.New("runtime: actor host: nil parameter store")
	case nilSink(sink):
		return nil, errors.New("runtime: actor host: nil sink (the actors' batches need a buffer or another Sink)")
	}
	sel := o.selector
	if _, discrete := p.space.(envs.Discrete); discrete && sel == nil {
		var err error
		if sel, err = p.localSelector(); err != nil {
			return nil, err
		}
	}
	if err := checkMemory(0, cfg, p.netBytes(n)); err != nil {
		return nil, err
	}
	spawn, err := actorFactory(cfg, p.spec, p.layout, sel, store, p.obsDim, p.space)
	if err != nil {
		return nil, err
	}
	h := &ActorHost{cfg: cfg, first: o.first, sink: sink, plan: p, sel: sel}
	for i := range n {
		env, err := envs.Make(cfg.Env)
		if err != nil {
			return nil, err
		}
		a, err := spawn(o.first+i, env)
		if err != nil {
			return nil, err
		}
		h.actors = append(h.actors, a)
	}
	return h, nil
}

// layoutCapacity is the capacity of the small buffers the hosts build for
// a layout alone (a learner's batches, an actor host's method).
const layoutCapacity = 1024

// Config is the run's configuration, defaults filled in.
func (h *ActorHost) Config() TrainConfig { return h.cfg }

// Sources are the host's actors, for a caller that runs them in a Pipeline
// of its own. Each must be driven by one goroutine at a time.
func (h *ActorHost) Sources() []Source {
	out := make([]Source, len(h.actors))
	for i, a := range h.actors {
		out[i] = a
	}
	return out
}

// Run runs the actors until ctx ends (an actor-only Pipeline on the
// Concurrent schedule, Inserters and a queue of two batches per actor as
// a Trainer has them): every batch an actor completed is handed to the
// sink before Run returns; a batch still being filled is counted in
// Stats().Pipeline.Discarded. It returns the first error of an actor or
// of the sink (nil when ctx ended). Not concurrently with itself.
func (h *ActorHost) Run(ctx context.Context) error {
	return h.pipe.Run(ctx, h.sink, h.Sources(), nil, PipelineConfig{Queue: 2 * len(h.actors), Inserters: h.cfg.Inserters})
}

// ActorHostStats is a snapshot of an ActorHost.
type ActorHostStats struct {
	EnvSteps, Episodes int64
	// Pipeline counts what Run handed to the sink (Batches, Items) and
	// discarded at its end.
	Pipeline PipelineStats
}

// Stats returns a snapshot. Safe for concurrent use.
func (h *ActorHost) Stats() ActorHostStats {
	st := ActorHostStats{Pipeline: h.pipe.Stats()}
	st.EnvSteps, st.Episodes = h.envSteps()
	return st
}

// envSteps sums the actors' environment steps and episodes.
func (h *ActorHost) envSteps() (steps, episodes int64) {
	for _, a := range h.actors {
		as := a.Stats()
		steps += as.Steps
		episodes += as.Episodes
	}
	return steps, episodes
}

// localMethod is the run's method built over a small buffer of the run's
// layout: what a remote learner takes its Loss and Normalizer from, and
// an actor host its stage's Priority (neither depends on the buffer's
// contents, only on the method's configuration).
func (p *plan) localMethod() (sampler.Method, error) {
	lc := p.layout
	lc.Capacity = min(lc.Capacity, max(p.cfg.Batch, layoutCapacity))
	lc.Stripes = 0
	buf, err := buffer.New(lc)
	if err != nil {
		return sampler.Method{}, err
	}
	m, err := sampler.NewMethod(p.cfg.Sampler, buf, p.mcfg)
	if err != nil {
		return sampler.Method{}, fmt.Errorf("runtime: local method: %w", err)
	}
	return m, nil
}

// localSelector is localMethod's Selector, for its Priority alone.
func (p *plan) localSelector() (sampler.Selector, error) {
	m, err := p.localMethod()
	return m.Selector, err
}

// selector is the stage the host's dqn actors take priorities from, or a
// new local one when they take none (tests).
func (h *ActorHost) selector() (sampler.Selector, error) {
	if h.sel != nil {
		return h.sel, nil
	}
	return h.plan.localSelector()
}
