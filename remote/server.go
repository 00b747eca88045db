package remote

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultTableName names a Table whose Name is empty.
const DefaultTableName = "replay"

// Defaults of ServerOptions.
const (
	// DefaultMaxWriters bounds the writers whose highest stored seq a
	// Server remembers (the idempotency table): 65536 entries of about
	// 100 bytes each.
	DefaultMaxWriters = 1 << 16
	// DefaultWatchMaxBackoff is the longest pause between two polls of an
	// idle Watch stream.
	DefaultWatchMaxBackoff = 100 * time.Millisecond
	// MaxWatchItems is the most items one WatchEvent carries (and the
	// default of WatchRequest.max_items).
	MaxWatchItems = 4096
	// MaxWriterName is the longest writer name an InsertRequest may carry
	// (bytes).
	MaxWriterName = 128
)

// Table is what a Server serves: one buffer with its replay method's
// stage, its rate limiter, the run configuration it was built from and
// how to checkpoint it. A runtime.ReplayCore supplies every piece.
type Table struct {
	// Name names the table in requests and Info; empty selects
	// DefaultTableName. Requests whose table is empty address it too.
	Name string
	// Buffer holds the items. Required.
	Buffer *buffer.Buffer
	// Method is the replay method's stage over Buffer (sampler.NewMethod).
	// Its Selector is required; Weighter, Features, Evaluated, State and
	// Stats are used when set.
	Method sampler.Method
	// Limiter paces inserts against draws; nil: neither waits (a draw
	// from a table holding fewer items than it asks fails with
	// FailedPrecondition).
	Limiter *runtime.RateLimiter
	// Config is the run configuration the table was built from
	// (runtime.TrainConfig as JSON), handed to clients by Info.
	Config []byte
	// Save writes a checkpoint of the table (buffer, stage state, limiter
	// configuration and balance) to w while the server goes on serving:
	// stage is the lock that serializes the stage's calls, which Save
	// holds only to copy the stage's state and the limiter's balance
	// (runtime.ReplayCore.SaveStriped, which then writes the buffer
	// stripe by stripe). nil: Checkpoint fails with FailedPrecondition.
	Save func(w io.Writer, stage sync.Locker) error
	// CheckpointDir is the folder Checkpoint writes into (file
	// CheckpointFile, through a temporary file renamed over it); empty:
	// Checkpoint fails with FailedPrecondition.
	CheckpointDir string
	// CheckpointFile is the checkpoint's file name in CheckpointDir;
	// empty selects Name + ".ckpt".
	CheckpointFile string
}

// ServerOptions tune a Server; zero values select the defaults.
type ServerOptions struct {
	// Version is the server binary's version string (InfoReply.version).
	Version string
	// MaxWriters bounds the idempotency table (DefaultMaxWriters): an
	// Insert from a new writer beyond it fails with ResourceExhausted.
	MaxWriters int
	// WatchMaxBackoff is the longest pause between polls of an idle Watch
	// stream (DefaultWatchMaxBackoff); pauses start at 1 ms and double.
	WatchMaxBackoff time.Duration
	// Writers is the writer table restored with a checkpoint
	// (ReadWriterTable): each writer id's highest stored seq, so batches
	// the checkpoint holds are acknowledged as duplicates when resent,
	// and the counts of what was stored under each id, its evicted
	// writers and whether its counts are partial, which Info's writer
	// table goes on from. nil: a fresh table. At most MaxWriters writers.
	// A server restored from a checkpoint without a table file passes
	// &WriterTable{CountsPartial: true}. An id that is empty or over
	// MaxWriterName bytes is refused (ReadWriterTable drops those a
	// version-1 file holds). The table's Lineage, when not 0, is the data
	// lineage the server keeps (Server.Lineage); 0 (nil Writers, a table
	// without one) starts a new lineage.
	//
	// Changed for embedders with writer table version 2: Writers was a
	// map[string]uint64 of seqs; a caller that built one passes
	// &WriterTable{Writers: map[string]WriterRecord{id: {High: seq}},
	// CountsPartial: true} (CountsPartial: those seqs carry no counts).
	Writers *WriterTable
}

// Server serves one Table over the Replay service of api/replay/v1 (see
// replay.proto for the contract of every call). The replay stage runs
// here: a learner sends draws (with a seed and a step) and write-backs,
// actors send batches.
//
// Concurrency: every method is safe for concurrent use, and gRPC calls
// them from one goroutine per call or stream. The stage's Sample, Update
// and UpdateFeatures run one at a time (a mutex: the stage's contract);
// inserts run concurrently with draws and with each other (the buffer's
// contract); Checkpoint holds the stage only while it copies the stage's
// own state, and each stripe of the buffer only while it copies that
// stripe (Table.Save). Each stream handler is one goroutine that waits
// plus one worker that reads each message and handles it (serveStream);
// every handler returns when its client goes, when its context ends or
// when Close is called, once the message in hand (if any) is answered.
type Server struct {
	replayv1.UnimplementedReplayServer

	t           Table
	cfg         buffer.Config
	opts        ServerOptions
	incarnation uint64
	lineage     uint64 // see Lineage

	// stage serializes the stage's single-goroutine calls (Sample,
	// Weights, Update, UpdateFeatures) and the checkpoint's copy of the
	// stage's state (Table.Save takes it). Buffer writes need no lock of
	// the server's: a checkpoint holds one stripe at a time inside the
	// buffer (buffer.Buffer.SaveStriped).
	stage sync.Mutex
	// ckpt serializes Checkpoint calls.
	ckpt sync.Mutex
	// feed is the observer of an episode stage (Method.Episodes; nil
	// without), guarded by stage (server_episodes.go).
	feed *episodeFeed

	writersMu sync.Mutex
	writers   map[string]*writerState
	// evictedBefore and countsPartial are the restored writer table's
	// (ServerOptions.Writers): writers evicted before this process, and
	// whether its counts miss what a restored checkpoint held.
	evictedBefore uint64
	countsPartial bool

	base   context.Context // canceled by Close: ends every handler
	cancel context.CancelFunc

	c counters

	clock func() time.Time // nil: time.Now (tests set it)
	// storedHook, when set (tests), runs between a batch's buffer insert
	// and its record (recordStored), under the writer's sem.
	storedHook func()
}

// writerState is one writer's idempotency record. A checkpoint writes the
// table beside it (writer_table.go); a restore starts from that.
type writerState struct {
	// sem (capacity 1) serializes the writer's batches across streams (a
	// reconnect may overlap the old stream), so "store iff seq > high" is
	// atomic with the store.
	sem  chan struct{}
	high atomic.Uint64 // the highest seq stored; written under sem and mu (the insert path reads it under sem alone)
	used time.Time     // the latest batch's arrival; guarded by sem

	// mu guards the counts below and the writes of high, so that a
	// writer table's snapshot (writerTable) sees a batch's seq and its
	// counts together: held for a few stores per stored batch, never
	// across a wait.
	mu sync.Mutex
	// items and batches count what was stored under the id, restores
	// included (the restored table's counts plus those stored since).
	items, batches uint64
	// uItems and uBatches count the batches stored while a checkpoint
	// this server was restored from was copied (in it or not); set at
	// construction, read-only after.
	uItems, uBatches uint64
	// inflight is the item count of the batch going into the buffer now
	// (0: none; at most one, under sem): set before the buffer's insert,
	// cleared when the batch is recorded or refused, so a checkpoint's
	// snapshot after its copy counts a batch the copy may hold but not
	// yet recorded as uncertain (writerTable).
	inflight uint64
}

// beginStore marks a batch of n items as going into the buffer (called
// under sem, before the buffer's insert).
func (w *writerState) beginStore(n int) {
	w.mu.Lock()
	w.inflight = uint64(n)
	w.mu.Unlock()
}

// abortStore clears what beginStore marked: the buffer refused the batch.
func (w *writerState) abortStore() {
	w.mu.Lock()
	w.inflight = 0
	w.mu.Unlock()
}

// recordStored records a stored batch of n items with seq: its counts,
// then its seq, under mu (called under sem), and clears what beginStore
// marked.
func (w *writerState) recordStored(seq uint64, n int) {
	w.mu.Lock()
	w.items += uint64(n)
	w.batches++
	w.inflight = 0
	w.high.Store(seq)
	w.mu.Unlock()
}

// counters are the Server's counters (Counters in Info, ServerStats).
type counters struct {
	insertedBatches, insertedItems, duplicateBatches atomic.Uint64
	draws, sampledItems                              atomic.Uint64
	wbApplied, wbStale, wbWrongIncarnation           atomic.Uint64
	writersEvicted                                   atomic.Uint64
	rejected, checkpoints                            atomic.Uint64
	episodeSubscriptions, episodeFeedsLost           atomic.Uint64
	insertReceived                                   atomic.Uint64 // InsertRequests read off streams
	insertStreams, sampleStreams, watchStreams       atomic.Int64
	insertsWaiting, drawsWaiting                     atomic.Int64
}

// NewServer validates t and returns a Server for it with a fresh
// incarnation (a random nonzero uint64 from crypto/rand). Errors: no
// buffer, an invalid method, a method built over another buffer's
// layout cannot be detected and is the caller's to avoid.
func NewServer(t Table, opts ServerOptions) (*Server, error) {
	if t.Buffer == nil {
		return nil, errors.New("remote: server: nil Buffer")
	}
	if err := t.Method.Validate(); err != nil {
		return nil, fmt.Errorf("remote: server: %w", err)
	}
	if t.Name == "" {
		t.Name = DefaultTableName
	}
	if t.CheckpointFile == "" {
		t.CheckpointFile = t.Name + ".ckpt"
	}
	if opts.MaxWriters <= 0 {
		opts.MaxWriters = DefaultMaxWriters
	}
	if opts.WatchMaxBackoff <= 0 {
		opts.WatchMaxBackoff = DefaultWatchMaxBackoff
	}
	inc, err := newIncarnation()
	if err != nil {
		return nil, err
	}
	var restored WriterTable
	if opts.Writers != nil {
		restored = *opts.Writers
	}
	lineage := restored.Lineage
	if lineage == 0 {
		if lineage, err = newIncarnation(); err != nil {
			return nil, err
		}
	}
	if len(restored.Writers) > opts.MaxWriters {
		return nil, fmt.Errorf("remote: server: a writer table of %d writers, more than MaxWriters %d", len(restored.Writers), opts.MaxWriters)
	}
	s := &Server{t: t, cfg: t.Buffer.Config(), opts: opts, incarnation: inc, lineage: lineage, writers: make(map[string]*writerState, len(restored.Writers)),
		evictedBefore: restored.Evicted, countsPartial: restored.CountsPartial}
	now := s.now()
	for name, r := range restored.Writers {
		if len(name) == 0 || len(name) > MaxWriterName {
			return nil, fmt.Errorf("remote: server: a writer table entry named with %d bytes (want 1-%d)", len(name), MaxWriterName)
		}
		w := &writerState{sem: make(chan struct{}, 1), used: now, items: r.Items, batches: r.Batches,
			uItems: r.UncertainItems, uBatches: r.UncertainBatches}
		w.high.Store(r.High)
		s.writers[name] = w
	}
	if e := t.Method.Episodes; e != nil {
		s.feed = newEpisodeFeed(e, t.Buffer.Capacity())
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// newIncarnation draws a random nonzero uint64.
func newIncarnation() (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("remote: server: incarnation: %w", err)
		}
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v, nil
		}
	}
}

// Incarnation is the server's incarnation: keys it hands out are valid
// only with it. O(1).
func (s *Server) Incarnation() uint64 { return s.incarnation }

// Lineage is the server's data lineage (InfoReply.lineage): a random
// nonzero uint64 drawn when the server starts without a lineage to go on
// from, kept in each checkpoint's writer table (WriterTable.Lineage) and
// taken back by a server restored from it (ServerOptions.Writers). So a
// shard restarted from its checkpoint keeps its lineage, and one whose
// writer table starts empty (no checkpoint, or one without a table) has
// a new one. A fleet's clients (ShardedWriter, ShardedMethod,
// ShardTracker) tell its shards apart by it: a writer table deduplicates
// a writer's seqs only against batches of the same lineage. O(1).
func (s *Server) Lineage() uint64 { return s.lineage }

// Close ends every stream handler and every wait (a limiter wait, a Watch
// poll) with Unavailable; calls made afterwards fail the same way.
// NewGRPCServer's Shutdown calls it. Idempotent; safe for concurrent use.
func (s *Server) Close() { s.cancel() }

// ServerStats is a snapshot of a Server's counters for metrics (cmd/apex
// exports them). Each field is read atomically on its own, so a snapshot
// under load may mix moments.
type ServerStats struct {
	// Incarnation and Lineage are the server's (Server.Lineage).
	Incarnation, Lineage uint64
	// The wire's Counters.
	InsertedBatches, InsertedItems, DuplicateBatches uint64
	Draws, SampledItems                              uint64
	WriteBacksApplied, WriteBacksStale               uint64
	WriteBacksWrongIncarnation                       uint64
	RejectedMessages, Checkpoints                    uint64
	// EpisodeSubscriptions counts ObserveEpisodes answered (an episode
	// stage's feed subscribed); EpisodeFeedsLost the feeds taken over by
	// another stream or fallen behind, as their streams' draws found.
	EpisodeSubscriptions, EpisodeFeedsLost uint64
	// Writers is the size of the idempotency table; WritersEvicted counts
	// the idle writers a full table forgot (WriterIdle).
	Writers        int
	WritersEvicted uint64
	// Open streams, by call.
	InsertStreams, SampleStreams, WatchStreams int64
	// InsertsWaiting and DrawsWaiting count the batches and draws held by
	// the rate limiter now.
	InsertsWaiting, DrawsWaiting int64
	// StaleFleetInserts and StaleFleetItems count the insert batches, and
	// their items, that the limiter of a fleet's shard admitted on stale
	// fleet counts (the learner's lease on them passed without a renewal:
	// FleetCounts.lease_ms, runtime.RateLimiter.RenewFleetCounts).
	StaleFleetInserts, StaleFleetItems int64
	// Size is the table's item count.
	Size int
}

// Stats returns a snapshot of the counters. O(1) plus a lock to count
// the writers and the limiter's to read its counters; safe for concurrent
// use.
func (s *Server) Stats() ServerStats {
	s.writersMu.Lock()
	w := len(s.writers)
	s.writersMu.Unlock()
	c := &s.c
	var lim runtime.RateLimiterStats
	if s.t.Limiter != nil {
		lim = s.t.Limiter.Stats()
	}
	return ServerStats{
		Incarnation: s.incarnation, Lineage: s.lineage,
		InsertedBatches: c.insertedBatches.Load(), InsertedItems: c.insertedItems.Load(),
		DuplicateBatches: c.duplicateBatches.Load(), Draws: c.draws.Load(), SampledItems: c.sampledItems.Load(),
		WriteBacksApplied: c.wbApplied.Load(), WriteBacksStale: c.wbStale.Load(),
		WriteBacksWrongIncarnation: c.wbWrongIncarnation.Load(),
		RejectedMessages:           c.rejected.Load(), Checkpoints: c.checkpoints.Load(),
		EpisodeSubscriptions: c.episodeSubscriptions.Load(), EpisodeFeedsLost: c.episodeFeedsLost.Load(),
		Writers: w, WritersEvicted: c.writersEvicted.Load(),
		InsertStreams: c.insertStreams.Load(), SampleStreams: c.sampleStreams.Load(), WatchStreams: c.watchStreams.Load(),
		InsertsWaiting: c.insertsWaiting.Load(), DrawsWaiting: c.drawsWaiting.Load(),
		StaleFleetInserts: lim.StaleInserts, StaleFleetItems: lim.StaleItems,
		Size: s.t.Buffer.Size(),
	}
}

// wireCounters is Stats in the wire's form.
func (s *Server) wireCounters() *replayv1.Counters {
	c := &s.c
	return &replayv1.Counters{
		InsertedBatches: c.insertedBatches.Load(), InsertedItems: c.insertedItems.Load(),
		DuplicateBatches: c.duplicateBatches.Load(), Draws: c.draws.Load(), SampledItems: c.sampledItems.Load(),
		WriteBacksApplied: c.wbApplied.Load(), WriteBacksStale: c.wbStale.Load(),
		WriteBacksWrongIncarnation: c.wbWrongIncarnation.Load(),
		RejectedMessages:           c.rejected.Load(), Checkpoints: c.checkpoints.Load(),
		EpisodeSubscriptions: c.episodeSubscriptions.Load(), EpisodeFeedsLost: c.episodeFeedsLost.Load(),
	}
}

// reject counts a refused request and returns its status.
func (s *Server) reject(code codes.Code, format string, args ...any) error {
	s.c.rejected.Add(1)
	return status.Errorf(code, format, args...)
}

// table checks a request's table name.
func (s *Server) table(name string) error {
	if name != "" && name != s.t.Name {
		return s.reject(codes.NotFound, "remote: no table %q (this server serves %q)", name, s.t.Name)
	}
	return nil
}

// needDeadline refuses a unary call without a deadline.
func (s *Server) needDeadline(ctx context.Context, call string) error {
	if _, ok := ctx.Deadline(); !ok {
		return s.reject(codes.InvalidArgument, "remote: %s needs a deadline (every unary call of apex.replay.v1 carries one)", call)
	}
	return nil
}

// handlerCtx is a handler's context: parent, also canceled by Close.
func (s *Server) handlerCtx(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(s.base, cancel)
	return ctx, func() { stop(); cancel() }
}

// ctxErr is the status of a handler whose context ended: Unavailable
// after Close, else the context's own (Canceled, DeadlineExceeded).
func (s *Server) ctxErr(ctx context.Context) error {
	if s.base.Err() != nil {
		return status.Error(codes.Unavailable, "remote: replay server shutting down")
	}
	return status.FromContextError(ctx.Err()).Err()
}

// waitErr maps an error of a limiter wait to a status.
func (s *Server) waitErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return s.ctxErr(ctx)
	}
	if errors.Is(err, runtime.ErrRateLimited) {
		return s.reject(codes.ResourceExhausted, "remote: %s: %v", what, err)
	}
	return status.Errorf(codes.Internal, "remote: %s: %v", what, err)
}

// serveStream runs a stream's loop: a worker goroutine reads each message
// with recv and hands it to handle on the same goroutine (no hand-over
// per message), until recv fails (io.EOF, the client's clean end: nil),
// handle returns an error, or ctx ends (the client went, or Close). The
// handler's goroutine (the caller) only waits, so that Close ends a
// stream whose worker is blocked in Recv: gRPC's Recv ends with the
// stream, not with ctx, and the stream ends when its handler returns.
//
// The caller returns when ctx ends only once the worker is between
// messages (in Recv, or about to read another): a message being handled
// finishes, its reply included, so nothing touches the stream after the
// handler returned and nothing is left half done; the worker then finds
// the stream ended (or stop set) and exits. A message over
// MaxMessageBytes, which gRPC refuses (ResourceExhausted, ending the
// stream), is counted as rejected here, where its error shows.
//
// Cost per message: an uncontended mutex; no allocation, no goroutine
// switch beyond gRPC's own.
func serveStream[T any](s *Server, ctx context.Context, recv func() (*T, error), handle func(*T) error) error {
	var (
		mu   sync.Mutex // held while a message is handled
		stop bool       // guarded by mu: the handler has returned
	)
	done := make(chan error, 1)
	go func() {
		for {
			m, err := recv()
			if err != nil {
				switch {
				case err == io.EOF:
					err = nil
				case status.Code(err) == codes.ResourceExhausted:
					s.c.rejected.Add(1)
				}
				done <- err
				return
			}
			mu.Lock()
			if stop {
				mu.Unlock()
				return
			}
			err = handle(m)
			mu.Unlock()
			if err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		mu.Lock()
		stop = true
		mu.Unlock()
		return s.ctxErr(ctx)
	}
}

// now is the server's clock (writer idleness); tests move it.
func (s *Server) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}
