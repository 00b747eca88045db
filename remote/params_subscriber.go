package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/model"
)

// SubscriberOptions configure SubscribeParams. Zero values select the
// defaults noted on each field.
type SubscriberOptions struct {
	// MinBackoff and MaxBackoff bound the wait before re-opening a broken
	// Watch stream: it starts at MinBackoff (50 ms), doubles per failed
	// attempt up to MaxBackoff (2 s), and starts over once a version
	// arrives. The subscriber never gives up: an actor host keeps acting
	// with the newest version it has while the learner is away.
	MinBackoff, MaxBackoff time.Duration
	// MaxValues refuses a version with more parameters than this (1<<27,
	// 1 GiB of float64, when 0): a bound on what a faulty server can make
	// the subscriber allocate.
	MaxValues uint64
}

func (o *SubscriberOptions) fill() {
	if o.MinBackoff <= 0 {
		o.MinBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(2*time.Second, o.MinBackoff)
	}
	if o.MaxValues == 0 {
		o.MaxValues = 1 << 27
	}
}

// SubscriberStats are a ParamsSubscriber's counters, a snapshot for
// diagnostics.
type SubscriberStats struct {
	// Version is the newest version published into the local store (0
	// before the first; see Versions).
	Version uint64
	// Versions counts the versions published into the local store; Chunks
	// the chunks received.
	Versions, Chunks uint64
	// Discarded counts partial versions dropped because a newer version
	// began before they were complete.
	Discarded uint64
	// Reconnects counts re-opened Watch streams; Errors the stream
	// errors and malformed chunks that broke a stream. LastError is the
	// latest of them ("" when none).
	Reconnects, Errors uint64
	LastError          string
}

// ParamsSubscriber keeps a local *model.Store up to date with a learner's
// parameters: one goroutine holds a Watch stream on the learner's Params
// service, assembles each version from its chunks (a partial version is
// discarded when a newer one starts) and publishes it into the store, where
// the host's actors Load it as they would in process. A broken stream is
// re-opened with backoff, asking only for versions newer than the one held.
//
// Cost: per version one copy of the parameters into the assembly buffer
// (reused) and one into the published model.Params. Safe for concurrent
// use; Close ends the goroutine.
type ParamsSubscriber struct {
	c     *Client
	store *model.Store
	opts  SubscriberOptions

	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each publish
	lastErr string

	version, versions, chunks, discarded, reconnects, errs atomic.Uint64
}

// SubscribeParams starts a subscriber that publishes the server's
// parameter versions into store (c must be dialed to a learner's Params
// service). A version already in store counts as held: only newer ones
// are asked for. An error names a nil store or a closed client.
func (c *Client) SubscribeParams(store *model.Store, opts SubscriberOptions) (*ParamsSubscriber, error) {
	if store == nil {
		return nil, errors.New("remote: subscribe params: nil store")
	}
	if c.isClosed() {
		return nil, ErrClientClosed
	}
	opts.fill()
	ctx, cancel := context.WithCancel(context.Background())
	s := &ParamsSubscriber{c: c, store: store, opts: opts, cancel: cancel, done: make(chan struct{}), changed: make(chan struct{})}
	if p := store.Load(); p != nil {
		s.version.Store(p.Version())
	}
	go s.run(ctx)
	return s, nil
}

// WaitVersion blocks until the local store holds version v or newer, ctx
// ends (its error) or the subscriber is closed (ErrClientClosed). Safe
// for concurrent use.
func (s *ParamsSubscriber) WaitVersion(ctx context.Context, v uint64) error {
	for {
		wake := s.wake()
		if p := s.store.Load(); p != nil && p.Version() >= v {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("remote: wait for params version %d: %w", v, ctx.Err())
		case <-s.done:
			return fmt.Errorf("remote: wait for params version %d: %w", v, ErrClientClosed)
		case <-wake:
		}
	}
}

// Stats snapshots the subscriber's counters. Safe for concurrent use.
func (s *ParamsSubscriber) Stats() SubscriberStats {
	s.mu.Lock()
	last := s.lastErr
	s.mu.Unlock()
	return SubscriberStats{
		Version: s.version.Load(), Versions: s.versions.Load(), Chunks: s.chunks.Load(),
		Discarded: s.discarded.Load(), Reconnects: s.reconnects.Load(), Errors: s.errs.Load(),
		LastError: last,
	}
}

// Close ends the stream and the goroutine and waits for it. Idempotent.
// The local store keeps the newest version.
func (s *ParamsSubscriber) Close() error {
	s.cancel()
	<-s.done
	return nil
}

func (s *ParamsSubscriber) wake() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *ParamsSubscriber) run(ctx context.Context) {
	defer close(s.done)
	backoff := s.opts.MinBackoff
	for first := true; ; first = false {
		if !first {
			s.reconnects.Add(1)
		}
		progress, err := s.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		s.errs.Add(1)
		s.mu.Lock()
		s.lastErr = err.Error()
		s.mu.Unlock()
		if progress {
			backoff = s.opts.MinBackoff
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
	}
}

// watch holds one Watch stream until it breaks; progress tells whether a
// version was published through it.
func (s *ParamsSubscriber) watch(ctx context.Context) (progress bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	held := uint64(0)
	if p := s.store.Load(); p != nil {
		held = p.Version()
	}
	stream, err := s.c.params.Watch(ctx, &replayv1.ParamsRequest{HaveVersion: held})
	if err != nil {
		return false, fmt.Errorf("remote: params watch: %w", err)
	}
	var a assembly
	for {
		ch, err := stream.Recv()
		if err != nil {
			if err == io.EOF {
				err = errors.New("the server ended the stream")
			}
			return progress, fmt.Errorf("remote: params watch: %w", err)
		}
		s.chunks.Add(1)
		done, discarded, err := a.add(ch, s.opts.MaxValues)
		if discarded {
			s.discarded.Add(1)
		}
		if err != nil {
			return progress, fmt.Errorf("remote: params watch: %w", err)
		}
		if done {
			s.publish(a.version, a.values)
			progress = true
		}
	}
}

// publish makes version v (values copied) the store's current one, unless
// the store already holds it or a newer one.
func (s *ParamsSubscriber) publish(v uint64, values []float64) {
	if p := s.store.Load(); p != nil && p.Version() >= v {
		return
	}
	s.store.Publish(model.NewParams(v, values))
	s.version.Store(v)
	s.versions.Add(1)
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// assembly collects one version's chunks in order.
type assembly struct {
	active  bool // a version is being assembled
	version uint64
	total   uint64
	values  []float64 // reused across versions
}

// add takes the next chunk. done reports a complete version (in
// a.version, a.values); discarded a partial version dropped for a newer
// one. A chunk out of order, of another length than announced, of a
// version older than the partial one, or larger than maxValues is an
// error.
func (a *assembly) add(ch *replayv1.ParamsChunk, maxValues uint64) (done, discarded bool, err error) {
	if len(ch.GetValues())%8 != 0 {
		return false, false, fmt.Errorf("version %d: chunk of %d bytes, not a whole number of float64 values", ch.GetVersion(), len(ch.GetValues()))
	}
	n := uint64(len(ch.GetValues()) / 8)
	if a.active && ch.GetVersion() != a.version {
		if ch.GetVersion() < a.version {
			return false, false, fmt.Errorf("version %d began before version %d was complete", ch.GetVersion(), a.version)
		}
		a.active, discarded = false, true
	}
	if !a.active {
		if ch.GetOffset() != 0 {
			return false, discarded, fmt.Errorf("version %d: first chunk at offset %d, want 0", ch.GetVersion(), ch.GetOffset())
		}
		if ch.GetTotal() > maxValues {
			return false, discarded, fmt.Errorf("version %d: %d values, more than the %d allowed (SubscriberOptions.MaxValues)", ch.GetVersion(), ch.GetTotal(), maxValues)
		}
		a.active, a.version, a.total, a.values = true, ch.GetVersion(), ch.GetTotal(), a.values[:0]
	}
	switch {
	case ch.GetTotal() != a.total:
		return false, discarded, fmt.Errorf("version %d: chunk says %d values in all, its first said %d", a.version, ch.GetTotal(), a.total)
	case ch.GetOffset() != uint64(len(a.values)):
		return false, discarded, fmt.Errorf("version %d: chunk at offset %d, want %d", a.version, ch.GetOffset(), len(a.values))
	case ch.GetOffset()+n > a.total:
		return false, discarded, fmt.Errorf("version %d: chunk [%d, %d) past the %d values", a.version, ch.GetOffset(), ch.GetOffset()+n, a.total)
	case ch.GetLast() != (ch.GetOffset()+n == a.total):
		return false, discarded, fmt.Errorf("version %d: chunk [%d, %d) of %d values has last=%t", a.version, ch.GetOffset(), ch.GetOffset()+n, a.total, ch.GetLast())
	}
	a.values = appendFloat64s(a.values, ch.GetValues())
	if ch.GetLast() {
		a.active = false
		return true, discarded, nil
	}
	return false, discarded, nil
}

// GetParams returns the server's newest parameter version once it is at
// least minVersion (the Params service's Get), waiting up to ctx's
// deadline or CallTimeout, whichever is earlier. Cost: one call and one
// assembly of the version. Safe for concurrent use.
func (c *Client) GetParams(ctx context.Context, minVersion uint64) (*model.Params, error) {
	if c.isClosed() {
		return nil, ErrClientClosed
	}
	ctx, cancel := c.callCtx(ctx)
	defer cancel()
	stream, err := c.params.Get(ctx, &replayv1.ParamsRequest{MinVersion: minVersion})
	if err != nil {
		return nil, fmt.Errorf("remote: params get: %w", err)
	}
	var a assembly
	for {
		ch, err := stream.Recv()
		if err != nil {
			if err == io.EOF {
				err = errors.New("the server ended the call before a whole version")
			}
			return nil, fmt.Errorf("remote: params get: %w", err)
		}
		done, _, err := a.add(ch, math.MaxUint64)
		if err != nil {
			return nil, fmt.Errorf("remote: params get: %w", err)
		}
		if done {
			return model.NewParams(a.version, a.values), nil
		}
	}
}
