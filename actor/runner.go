package actor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
)

// runner is the part of an actor that does not depend on the action space:
// the environment's episodes, the n-step adder, the parameter refresh from
// the Store, the hand-over of the adder's output and the statistics. Actor
// (discrete), Continuous, Squashed and Gaussian embed it and add their
// policy: each step selects an action, steps env, feeds the adder and
// calls advance. The actors of continuous actions share that step and
// their Fill loop (fillVec, stepVec in vec.go) and differ only in their
// vecPolicy.
//
// Concurrency: everything but stats is called from the actor's goroutine;
// stats reads only atomics.
type runner struct {
	cfg    Config // the fields common to both kinds, validated
	env    envs.Env
	hasher envs.StateHasher // set when cfg.Columns.StateHash and env has exact codes
	proj   *Projection      // set when cfg.Columns.StateHash and it has not
	net    *model.Net
	store  *model.Store
	rng    *rand.Rand
	adder  *NStep
	obsDim int

	// The current episode. obs is s_t (float32, as stored), next the
	// scratch the next observation is converted into; they swap each step.
	obs, next   []float32
	live        bool   // an episode is running
	started     uint64 // episodes started (the low bits of EpisodeID)
	epReturn    float64
	epLen       int   // steps taken in the current episode
	epStart     int64 // steps (below) when the episode started
	steps       int64 // environment steps taken by this actor
	sinceUpdate int   // steps since the last read of the Store
	// hashes[t mod (n+1)] is the state code of s_t for the last n+1 states
	// of the episode (only with Columns.StateHash).
	hashes []uint64

	// Parameters held by the network: loaded is false until the first
	// snapshot was copied (always true without a Store).
	loaded  bool
	version uint64

	// Recent episode returns, a ring of StatsWindow.
	returns          []float64
	retHead, retFull int

	// Published for Stats. Counters are written by the actor goroutine only.
	nSteps, nTrans, nBatches, nReads, nLoads atomic.Int64
	nVersion                                 atomic.Uint64
	nLoaded                                  atomic.Bool
	ep                                       atomic.Pointer[episodeStats]
	busy                                     atomic.Bool // held by a running Fill or Update
}

// init sets r up for a validated cfg; actionDim is 0 for discrete actions
// (the adder stores one int32) or the width of a continuous action. It does
// not read the Store (the caller's constructor calls update last).
func (r *runner) init(cfg Config, env envs.Env, net *model.Net, store *model.Store, obsDim, actionDim int) error {
	*r = runner{
		cfg: cfg, env: env, net: net, store: store,
		rng:    rand.New(rand.NewPCG(splitmix64(cfg.Seed), splitmix64(uint64(cfg.ID)^0x5851f42d4c957f2d))),
		obsDim: obsDim,
		obs:    make([]float32, obsDim), next: make([]float32, obsDim),
		returns: make([]float64, cfg.StatsWindow),
		loaded:  store == nil,
	}
	r.nLoaded.Store(r.loaded)
	if cfg.Columns.StateHash {
		if h, ok := env.(envs.StateHasher); ok {
			r.hasher = h
		} else {
			p, err := NewProjection(obsDim, ProjectionDim, ProjectionSeed)
			if err != nil {
				return err
			}
			r.proj = p
		}
		r.hashes = make([]uint64, cfg.NStep+1)
	}
	var err error
	if actionDim == 0 {
		r.adder, err = NewNStep(cfg.NStep, cfg.Gamma, obsDim)
	} else {
		r.adder, err = NewNStepContinuous(cfg.NStep, cfg.Gamma, obsDim, actionDim)
	}
	return err
}

// stats returns the counters both kinds of actor share.
func (r *runner) stats() Stats {
	s := Stats{
		ID:    r.cfg.ID,
		Steps: r.nSteps.Load(), Transitions: r.nTrans.Load(), Batches: r.nBatches.Load(),
		ParamsLoaded: r.nLoaded.Load(), ParamsVersion: r.nVersion.Load(),
		ParamReads: r.nReads.Load(), ParamLoads: r.nLoads.Load(),
	}
	if e := r.ep.Load(); e != nil {
		s.Episodes, s.LastReturn, s.MeanReturn, s.LastLength = e.episodes, e.last, e.mean, e.lastLen
	}
	return s
}

// update is Actor.Update and Continuous.Update.
func (r *runner) update() (bool, error) {
	if r.store == nil {
		return false, nil
	}
	r.nReads.Add(1)
	p := r.store.Load()
	if p == nil || (r.loaded && p.Version() == r.version) {
		return false, nil
	}
	if err := r.net.SetParams(p); err != nil {
		return false, fmt.Errorf("actor %d: parameters version %d: %w", r.cfg.ID, p.Version(), err)
	}
	r.loaded, r.version = true, p.Version()
	r.nLoads.Add(1)
	r.nVersion.Store(r.version)
	r.nLoaded.Store(true)
	return true, nil
}

// ensureEpisode starts an episode unless one is running.
func (r *runner) ensureEpisode() error {
	if r.live {
		return nil
	}
	return r.begin()
}

// begin resets the environment with a seed from the actor's generator and
// starts an episode in the adder.
func (r *runner) begin() error {
	if err := r.convert(r.obs, r.env.Reset(r.rng.Uint64())); err != nil {
		return err
	}
	id := uint64(r.cfg.ID)<<32 | r.started&(1<<32-1)
	r.started++
	if err := r.adder.AddFirst(id, r.obs); err != nil {
		return err
	}
	r.live, r.epReturn, r.epLen, r.epStart = true, 0, 0, r.steps
	if r.hashes != nil {
		r.hashes[0] = r.stateCode(r.obs)
	}
	return nil
}

// stateCode is the state's code for the StateHash columns: the
// environment's exact code, or the projection of obs (the state's float32
// observation, as stored).
func (r *runner) stateCode(obs []float32) uint64 {
	if r.hasher != nil {
		return r.hasher.StateHash()
	}
	return r.proj.Code(obs)
}

// convert writes the float32 values of an environment observation into dst.
func (r *runner) convert(dst []float32, obs []float64) error {
	if len(obs) != len(dst) {
		return fmt.Errorf("actor %d: the environment returned %d observation values, want %d", r.cfg.ID, len(obs), len(dst))
	}
	for i, v := range obs {
		dst[i] = float32(v)
	}
	return nil
}

// advance finishes a step whose result res the adder has just taken (its
// output held before transitions before): it fills the columns the adder
// does not, counts the step, ends the episode when res does, and refreshes
// the parameters when due.
func (r *runner) advance(res envs.StepResult, before int) error {
	out := &r.adder.Out
	r.epLen++
	r.epReturn += res.Reward
	if r.hashes != nil {
		r.hashes[r.epLen%len(r.hashes)] = r.stateCode(r.next)
	}
	// Columns the adder does not fill, for the transitions it just emitted.
	// Every emitted transition bootstraps from the newest state, s_epLen.
	for i := before; i < out.Len(); i++ {
		ts := out.EpisodeStep[i]
		if r.cfg.Columns.GlobalStep {
			out.GlobalStep = append(out.GlobalStep, r.epStart+int64(ts))
		}
		if r.hashes != nil {
			out.StateHash = append(out.StateHash, r.hashes[int(ts)%len(r.hashes)])
			out.NextStateHash = append(out.NextStateHash, r.hashes[r.epLen%len(r.hashes)])
		}
	}
	r.obs, r.next = r.next, r.obs
	r.steps++
	r.nSteps.Store(r.steps)
	if res.Done() {
		r.live = false
		r.endEpisode()
	}
	if r.sinceUpdate++; r.sinceUpdate >= r.cfg.RefreshEvery {
		r.sinceUpdate = 0
		if _, err := r.update(); err != nil {
			return err
		}
	}
	return nil
}

// endEpisode records the return of the episode that just ended and
// publishes new episode statistics.
func (r *runner) endEpisode() {
	r.returns[r.retHead] = r.epReturn
	r.retHead = (r.retHead + 1) % len(r.returns)
	r.retFull = min(r.retFull+1, len(r.returns))
	var sum float64
	for _, x := range r.returns[:r.retFull] {
		sum += x
	}
	var episodes int64 = 1
	if e := r.ep.Load(); e != nil {
		episodes = e.episodes + 1
	}
	r.ep.Store(&episodeStats{episodes: episodes, last: r.epReturn, mean: sum / float64(r.retFull), lastLen: r.epLen})
}

// appendOut appends every column but Priority of the first k pending
// transitions to t and drops them from the adder's output. Flags are
// appended only when t's Flags column is as long as t (nil stays nil for a
// batch that had none).
func (r *runner) appendOut(t *buffer.Transitions, k int) {
	out := &r.adder.Out
	d := r.obsDim
	n0 := t.Len()
	t.Obs = append(t.Obs, out.Obs[:k*d]...)
	t.NextObs = append(t.NextObs, out.NextObs[:k*d]...)
	if ad := r.adder.actDim; ad > 0 {
		t.ActionVec = append(t.ActionVec, out.ActionVec[:k*ad]...)
	} else {
		t.Action = append(t.Action, out.Action[:k]...)
	}
	t.Reward = append(t.Reward, out.Reward[:k]...)
	t.Discount = append(t.Discount, out.Discount[:k]...)
	if len(t.Flags) == n0 {
		t.Flags = append(t.Flags, out.Flags[:k]...)
	}
	cols := r.cfg.Columns
	if cols.Episode {
		t.EpisodeID = append(t.EpisodeID, out.EpisodeID[:k]...)
		t.EpisodeStep = append(t.EpisodeStep, out.EpisodeStep[:k]...)
	}
	if cols.GlobalStep {
		t.GlobalStep = append(t.GlobalStep, out.GlobalStep[:k]...)
	}
	if cols.ActorID {
		for range k {
			t.ActorID = append(t.ActorID, int32(r.cfg.ID))
		}
	}
	if cols.StateHash {
		t.StateHash = append(t.StateHash, out.StateHash[:k]...)
		t.NextStateHash = append(t.NextStateHash, out.NextStateHash[:k]...)
	}

	out.Obs, out.NextObs = dropFront(out.Obs, k*d), dropFront(out.NextObs, k*d)
	out.Action, out.ActionVec = dropFront(out.Action, k), dropFront(out.ActionVec, k*r.adder.actDim)
	out.Reward, out.Discount = dropFront(out.Reward, k), dropFront(out.Discount, k)
	out.Flags, out.EpisodeID, out.EpisodeStep = dropFront(out.Flags, k), dropFront(out.EpisodeID, k), dropFront(out.EpisodeStep, k)
	out.GlobalStep = dropFront(out.GlobalStep, k)
	out.StateHash, out.NextStateHash = dropFront(out.StateHash, k), dropFront(out.NextStateHash, k)
	if k > 0 {
		r.nTrans.Add(int64(k))
		r.nBatches.Add(1)
	}
}

// dropFront removes the first k values of s in place, keeping its storage.
// A column shorter than k (one that is not filled) is emptied.
func dropFront[T any](s []T, k int) []T {
	if len(s) <= k {
		return s[:0]
	}
	return s[:copy(s, s[k:])]
}

// splitmix64 is Steele, Lea and Flood's SplitMix64 finaliser, used to
// spread (Seed, ID) over the generator's state.
func splitmix64(x uint64) uint64 {
	z := x + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// checkFill refuses a nil ctx or batch before Fill steps anything
// (wrapping ErrConfig).
func checkFill(ctx context.Context, t *buffer.Transitions) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: Fill: nil context", ErrConfig)
	case t == nil:
		return fmt.Errorf("%w: Fill: nil *buffer.Transitions", ErrConfig)
	}
	return nil
}

// enter claims the actor for op (Fill or Update), or refuses the call with
// ErrBusy when another is running; exit releases it. One compare-and-swap
// and one store per call.
func (r *runner) enter(op string) error {
	if !r.busy.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: actor %d: %s called while another Fill or Update is running (call an actor from one goroutine at a time)", ErrBusy, r.cfg.ID, op)
	}
	return nil
}

func (r *runner) exit() { r.busy.Store(false) }

// lockedUpdate is every actor's Update: update while holding the actor
// (ErrBusy when a Fill or Update is running).
func (r *runner) lockedUpdate() (bool, error) {
	if err := r.enter("Update"); err != nil {
		return false, err
	}
	defer r.exit()
	return r.update()
}
