package remote

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/model"
)

// DefaultParamsPoll is ParamsServerOptions.Poll's default.
const DefaultParamsPoll = 10 * time.Millisecond

// ParamsServerOptions configure NewParamsServer.
type ParamsServerOptions struct {
	// ChunkValues is the most float64 values one ParamsChunk carries
	// (replayv1.MaxChunkValues when 0; more is refused). Tests set it small
	// to exercise chunking.
	ChunkValues int
	// Poll is how often a Watch or Get looks at the store for a version
	// published into it directly (Store.Publish) rather than through
	// ParamsServer.Publish or Notify, which wake every watcher at once:
	// it bounds the extra latency of a direct publish (DefaultParamsPoll
	// when 0; negative: never, only Publish and Notify wake watchers).
	Poll time.Duration
}

// ParamsStats are a ParamsServer's counters, a snapshot for diagnostics.
type ParamsStats struct {
	// Watches and Gets count the calls begun; Streams the open ones.
	Watches, Gets, Streams uint64
	// Versions and Chunks count what was sent, over all calls.
	Versions, Chunks uint64
}

// ParamsServer implements replayv1.ParamsServer over a *model.Store that
// the learner publishes into: Watch pushes the store's newest version to
// each subscriber whenever it is newer than the subscriber's (newest wins:
// a subscriber slower than the learner skips versions, it never queues
// them), Get returns the newest version once it reaches the asked minimum.
// Each version travels as chunks of at most ChunkValues little-endian
// float64 values.
//
// New versions are noticed without busy-spinning: Publish (or Notify after
// a direct Store.Publish) wakes every waiting call at once; a version
// published into the store without either is noticed within Poll.
//
// Cost: per version and subscriber one pass over the parameters (8 bytes
// each into a per-call buffer, reused) plus gRPC's framing; a waiting call
// holds no CPU beyond its poll ticker. Safe for concurrent use; register
// it with replayv1.RegisterParamsServer.
type ParamsServer struct {
	replayv1.UnimplementedParamsServer

	store *model.Store
	chunk int
	poll  time.Duration

	mu      sync.Mutex
	changed chan struct{} // closed and replaced by Notify

	closeOnce sync.Once
	closed    chan struct{} // closed by Close

	watches, gets, streams, versions, chunks atomic.Uint64
}

var _ replayv1.ParamsServer = (*ParamsServer)(nil)

// NewParamsServer serves store's versions. An error names a nil store or
// a ChunkValues outside [0, replayv1.MaxChunkValues].
func NewParamsServer(store *model.Store, opts ParamsServerOptions) (*ParamsServer, error) {
	if store == nil {
		return nil, fmt.Errorf("remote: params server: nil store")
	}
	if opts.ChunkValues < 0 || opts.ChunkValues > replayv1.MaxChunkValues {
		return nil, fmt.Errorf("remote: params server: ChunkValues %d outside [1, %d] (0: the maximum)", opts.ChunkValues, replayv1.MaxChunkValues)
	}
	if opts.ChunkValues == 0 {
		opts.ChunkValues = replayv1.MaxChunkValues
	}
	if opts.Poll == 0 {
		opts.Poll = DefaultParamsPoll
	}
	return &ParamsServer{store: store, chunk: opts.ChunkValues, poll: opts.Poll, changed: make(chan struct{}), closed: make(chan struct{})}, nil
}

// errParamsClosed is what a Watch or Get ends with once the server is
// closed: Unavailable, as from a server that went away (a subscriber
// reconnects with backoff).
var errParamsClosed = status.Error(codes.Unavailable, "remote: the params server is shutting down")

// Close ends every Watch and Get (between two versions: a version being
// sent is not cut) and makes later ones fail the same way, with
// Unavailable. GRPCServer.Shutdown calls it first, so that a graceful stop
// does not wait for subscribers, which never hang up themselves, until its
// deadline. Idempotent; safe for concurrent use.
func (s *ParamsServer) Close() { s.closeOnce.Do(func() { close(s.closed) }) }

// Publish makes p the store's current version and wakes every waiting
// Watch and Get. It panics on a nil p (as Store.Publish does). O(1) plus
// one wake-up per waiting call.
func (s *ParamsServer) Publish(p *model.Params) {
	s.store.Publish(p)
	s.Notify()
}

// Notify wakes every waiting Watch and Get to look at the store: call it
// after publishing into the store directly. O(1) plus one wake-up per
// waiting call; safe from any goroutine.
func (s *ParamsServer) Notify() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// Stats snapshots the server's counters. Safe for concurrent use.
func (s *ParamsServer) Stats() ParamsStats {
	return ParamsStats{
		Watches: s.watches.Load(), Gets: s.gets.Load(), Streams: s.streams.Load(),
		Versions: s.versions.Load(), Chunks: s.chunks.Load(),
	}
}

// wake is the channel the next Notify closes.
func (s *ParamsServer) wake() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Watch pushes every version newer than req.have_version (0 reads as
// "none held": the store's current version is sent whatever its number),
// newest first, until the client goes away or Close is called. A version
// is sent whole before the store is looked at again.
func (s *ParamsServer) Watch(req *replayv1.ParamsRequest, stream grpc.ServerStreamingServer[replayv1.ParamsChunk]) error {
	s.watches.Add(1)
	s.streams.Add(1)
	defer s.streams.Add(^uint64(0))
	ctx := stream.Context()
	have, sent := req.GetHaveVersion(), req.GetHaveVersion() != 0
	var buf []byte
	tick, stop := s.ticker()
	defer stop()
	for {
		select {
		case <-s.closed:
			return errParamsClosed
		default:
		}
		wake := s.wake() // before Load: a Publish after the Load closes this one
		if p := s.store.Load(); p != nil && (!sent || p.Version() > have) {
			if err := s.send(stream, p, &buf); err != nil {
				return err
			}
			have, sent = p.Version(), true
			continue
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.closed:
			return errParamsClosed
		case <-wake:
		case <-tick:
		}
	}
}

// Get sends the newest version once it is at least req.min_version,
// waiting up to the call's deadline (DeadlineExceeded after it; Unavailable
// once Close is called). A call
// without a deadline is refused (InvalidArgument), as the API's
// conventions require.
func (s *ParamsServer) Get(req *replayv1.ParamsRequest, stream grpc.ServerStreamingServer[replayv1.ParamsChunk]) error {
	s.gets.Add(1)
	s.streams.Add(1)
	defer s.streams.Add(^uint64(0))
	ctx := stream.Context()
	if _, ok := ctx.Deadline(); !ok {
		return status.Error(codes.InvalidArgument, "remote: params get: the call has no deadline")
	}
	tick, stop := s.ticker()
	defer stop()
	for {
		select {
		case <-s.closed:
			return errParamsClosed
		default:
		}
		wake := s.wake()
		if p := s.store.Load(); p != nil && p.Version() >= req.GetMinVersion() {
			var buf []byte
			return s.send(stream, p, &buf)
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.closed:
			return errParamsClosed
		case <-wake:
		case <-tick:
		}
	}
}

// ticker returns the poll channel (nil without polling) and its stop.
func (s *ParamsServer) ticker() (<-chan time.Time, func()) {
	if s.poll < 0 {
		return nil, func() {}
	}
	t := time.NewTicker(s.poll)
	return t.C, t.Stop
}

// send streams p as chunks, reusing *buf for the encoded values (gRPC
// serializes a message before Send returns).
func (s *ParamsServer) send(stream grpc.ServerStreamingServer[replayv1.ParamsChunk], p *model.Params, buf *[]byte) error {
	w := p.Weights()
	total := uint64(len(w))
	off := 0
	for {
		n := min(s.chunk, len(w)-off)
		*buf = encodeFloat64s((*buf)[:0], w[off:off+n])
		last := off+n == len(w)
		if err := stream.Send(&replayv1.ParamsChunk{
			Version: p.Version(), Total: total, Offset: uint64(off), Values: *buf, Last: last,
		}); err != nil {
			return err
		}
		s.chunks.Add(1)
		off += n
		if last {
			s.versions.Add(1)
			return nil
		}
	}
}

// encodeFloat64s appends v to dst as little-endian float64 bytes.
func encodeFloat64s(dst []byte, v []float64) []byte {
	for _, x := range v {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(x))
	}
	return dst
}

// appendFloat64s decodes little-endian float64 bytes b onto dst. b's
// length must be a multiple of 8 (the caller checks).
func appendFloat64s(dst []float64, b []byte) []float64 {
	for i := 0; i+8 <= len(b); i += 8 {
		dst = append(dst, math.Float64frombits(binary.LittleEndian.Uint64(b[i:])))
	}
	return dst
}
