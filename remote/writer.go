package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
)

// ErrWriterClosed is returned by a Writer's Insert after Close.
var ErrWriterClosed = errors.New("remote: writer closed")

// DefaultWindow is WriterOptions.Window's default.
const DefaultWindow = 8

// messageMargin is what a batch leaves of MaxMessageBytes for the
// message's framing: the table and writer names, the sequence number and
// each column's tag and length.
const messageMargin = 4096

// WriterOptions configure NewWriter. Zero values select the defaults
// noted on each field; Layout is required.
type WriterOptions struct {
	// Layout is the table's buffer.Config (its columns and their widths):
	// the rows are encoded for it. Required (ObsDim > 0).
	Layout buffer.Config
	// Table names the server's table (empty: its only table).
	Table string
	// Window is the most batches sent and not yet acknowledged
	// (DefaultWindow when 0): Insert blocks while the window is full.
	Window int
	// MinBackoff and MaxBackoff bound the wait before re-opening a broken
	// stream: from MinBackoff (50 ms), doubling per failed attempt, up to
	// MaxBackoff (2 s).
	MinBackoff, MaxBackoff time.Duration
	// MaxAttempts is how many times in a row the writer re-opens a broken
	// stream without an acknowledgement in between before it gives up (20
	// when 0, about half a minute with the default backoff; negative:
	// never gives up). Giving up abandons the unacknowledged batches,
	// counts them in WriterStats.Lost and fails every later call.
	MaxAttempts int
	// MaxMessageBytes bounds one batch's message
	// (replayv1.MaxMessageBytes when 0): a larger Insert is split into
	// several batches. Tests set it small.
	MaxMessageBytes int
}

func (o *WriterOptions) fill() error {
	if o.Layout.ObsDim <= 0 {
		return fmt.Errorf("remote: writer: WriterOptions.Layout has ObsDim %d: the table's layout is required", o.Layout.ObsDim)
	}
	if o.Window < 0 || o.MaxMessageBytes < 0 {
		return fmt.Errorf("remote: writer: negative Window (%d) or MaxMessageBytes (%d)", o.Window, o.MaxMessageBytes)
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(2*time.Second, o.MinBackoff)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 20
	}
	if o.MaxMessageBytes == 0 || o.MaxMessageBytes > replayv1.MaxMessageBytes {
		o.MaxMessageBytes = replayv1.MaxMessageBytes
	}
	return nil
}

// WriterStats are a Writer's counters, a snapshot for diagnostics. Every
// batch the writer took is, at any time, exactly one of acknowledged,
// pending or lost: Batches == Acked + Pending + Lost.
type WriterStats struct {
	// Batches and Items count what Insert took (after splitting).
	Batches, Items uint64
	// Acked and AckedItems count what the server acknowledged; Duplicates
	// the acknowledgements of batches the server had stored before (a
	// resend after a break).
	Acked, AckedItems, Duplicates uint64
	// Resent counts batches sent again on a re-opened stream.
	Resent uint64
	// Reconnects counts re-opened streams; Errors the stream errors that
	// broke a stream, LastError the latest ("" when none).
	Reconnects, Errors uint64
	LastError          string
	// Lost and LostItems count batches abandoned when the writer gave up
	// (or Close's context ended first): each loss is also the error of
	// every later Insert, Flush and Close.
	Lost, LostItems uint64
	// Pending is the batches taken and not yet acknowledged.
	Pending int
	// Blocked counts the batches whose Insert waited for window space
	// (backpressure from the server).
	Blocked uint64
	// Incarnation is the server incarnation of the latest acknowledgement
	// (0 before the first); Incarnations counts the changes seen (a server
	// restart: batches it acknowledged before may be gone with it, unless
	// it restored a checkpoint).
	Incarnation  uint64
	Incarnations uint64
	// Adopted and Moved are a ShardedWriter's shard writer's: the batches
	// it took over from a shard that died (included in Batches and Items)
	// and the batches taken off it when its own shard died (re-placed on
	// the live shards, no longer its own). For such a writer
	// Batches == Acked + Pending + Lost + Moved. Zero for a Writer of its
	// own.
	Adopted, Moved uint64
}

var _ runtime.Sink = (*Writer)(nil)

// wbatch is one batch in the window.
type wbatch struct {
	req   *replayv1.InsertRequest
	rows  int
	sends int    // times sent, over all streams of the writer that holds it
	key   uint64 // a ShardedWriter's placement key ((writer, episode) hashed); 0 for a Writer of its own
}

// errShardDetached is what a ShardedWriter's shard writer answers while
// its shard is dead: the batch is placed on another shard.
var errShardDetached = errors.New("remote: the replay shard is down")

// Modes of a ShardedWriter's shard writer (a Writer of its own stays
// modeActive).
const (
	modeActive   = iota // sends, reconnects when resumed
	modePaused          // its stream broke: no new stream until the ShardedWriter decides (resume or detach); Inserts wait
	modeDetached        // its shard is dead: its batches were moved; new batches are refused with errShardDetached
)

// writerHooks connect a shard writer to its ShardedWriter. Both are
// called without the writer's lock held.
type writerHooks struct {
	// broke reports a stream error: the writer has paused (it opens no new
	// stream until resume or detach). It must not block.
	broke func(err error)
	// acked reports one acknowledged batch (a window place freed). It must
	// not block.
	acked func()
}

// Writer streams transitions into a replay server's table (the Insert
// call): it implements runtime.Sink for an actor host, whose actors'
// batches then reach the remote buffer instead of a local one.
//
// Insert encodes a batch (split below MaxMessageBytes when larger), numbers
// it and hands it to the writer's goroutine, which sends it; a second
// goroutine per stream reads the acknowledgements. At most Window batches
// are unacknowledged: Insert blocks while the window is full, so a server
// that stops reading (its rate limiter or buffer is full) slows the actors
// down rather than growing a queue. When the stream breaks the writer
// re-opens it with backoff and resends every unacknowledged batch in
// order; the server acknowledges the ones it had stored as duplicates
// (batches are numbered per writer id) and does not store them twice.
// That holds across a restart from a checkpoint too, for the batches
// stored before the checkpoint began: the server writes its writer table
// beside each checkpoint (ReadWriterTable). A batch stored while the
// checkpoint was being copied is not in that table and, resent to the
// restored server, is stored again (at most the window's batches).
// When it gives up (MaxAttempts, a permanent refusal such as a malformed
// batch or a bad token) the unacknowledged batches are counted as lost and
// every later Insert, Flush and Close returns the error. Nothing is
// dropped silently.
//
// The writer id must be unique to this writer instance (host, process and
// actor group, say): a server that already stored batches under the id
// acknowledges the new writer's first batches as duplicates, which the
// writer reports as an error (it never sent them before) rather than as
// stored.
//
// Cost: Insert is O(bytes of t) (one encode into a reused message) plus a
// wait for window space; no allocation per batch once the window's
// messages have grown. Concurrency: Insert, Flush and Stats are safe for
// concurrent use, as a runtime.Sink must be (Inserts are serialized, in
// call order). Close is called once, after the last Insert; it may also
// run while an Insert waits for window space, which then returns Close's
// outcome (the loss error when Close's context ended first).
type Writer struct {
	c       *Client
	id      string
	opts    WriterOptions
	maxRows int // rows per message
	// lineage is the data lineage each batch sent expects of the server
	// (InsertRequest.lineage; 0: any): a ShardedWriter sets its shard's.
	lineage atomic.Uint64

	insertMu sync.Mutex // serializes Insert

	ctx    context.Context // ends the stream (Close's abort, a permanent failure)
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change below
	pending []*wbatch     // unacknowledged, in seq order; len ≤ Window
	sent    int           // pending[:sent] were sent on the current stream
	free    []*replayv1.InsertRequest
	nextSeq uint64
	closing bool
	err     error // set when the writer gives up: every later call returns it
	acks    int   // acknowledgements on the current stream
	stats   WriterStats

	// A ShardedWriter's shard writer only (hooks nil for a Writer of its
	// own, which stays modeActive and reconnects by itself):
	hooks        *writerHooks
	mode         int                // modeActive, modePaused or modeDetached
	serving      bool               // serve is running (a stream may be open)
	streamCancel context.CancelFunc // ends the current stream; nil when none
	progressAt   time.Time          // the last acknowledgement, stream opened, or batch into an empty window
}

// NewWriter starts a writer with id (1-128 bytes, unique to this writer,
// stable across its reconnects) into the table opts name. Its goroutine
// runs until Close. An error names a bad id, a missing layout or a closed
// client.
func (c *Client) NewWriter(id string, opts WriterOptions) (*Writer, error) {
	w, err := c.newWriter(id, opts, nil)
	if err != nil {
		return nil, err
	}
	go w.run()
	return w, nil
}

// newWriter builds a writer without starting its goroutine; hooks, when
// not nil, make it a ShardedWriter's shard writer.
func (c *Client) newWriter(id string, opts WriterOptions, hooks *writerHooks) (*Writer, error) {
	if len(id) == 0 || len(id) > 128 {
		return nil, fmt.Errorf("remote: writer id %q: want 1-128 bytes, got %d", id, len(id))
	}
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if c.isClosed() {
		return nil, ErrClientClosed
	}
	rowBytes := RowBytes(opts.Layout) + 8 // and a priority
	maxRows := (opts.MaxMessageBytes - messageMargin) / rowBytes
	if maxRows < 1 {
		return nil, fmt.Errorf("remote: writer: a row of %d bytes does not fit a message of %d bytes", rowBytes, opts.MaxMessageBytes)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{
		c: c, id: id, opts: opts, maxRows: maxRows,
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
		changed: make(chan struct{}),
		pending: make([]*wbatch, 0, opts.Window),
		hooks:   hooks,
	}
	return w, nil
}

// Insert sends t's rows (split into batches of at most MaxMessageBytes)
// and returns once they are in the window, waiting while it is full. It
// does not wait for the server's acknowledgement (Flush does); t is only
// read and may be reused when Insert returns. An error is a malformed t
// (wrapping ErrColumns; nothing of t was taken), ErrWriterClosed, or the
// error the writer gave up with (batches lost, see WriterStats.Lost).
func (w *Writer) Insert(t *buffer.Transitions) error {
	n := t.Len()
	w.insertMu.Lock()
	defer w.insertMu.Unlock()
	if n == 0 {
		return w.state()
	}
	if n <= w.maxRows {
		return w.insertRows(t, n, 0)
	}
	for _, col := range columnLens(t) {
		if col%n != 0 {
			return fmt.Errorf("remote: writer %q: %w: a column of %d values does not split into %d rows", w.id, ErrColumns, col, n)
		}
	}
	for lo := 0; lo < n; lo += w.maxRows {
		hi := min(n, lo+w.maxRows)
		sub := rowRange(t, lo, hi, n)
		if err := w.insertRows(&sub, hi-lo, 0); err != nil {
			return err
		}
	}
	return nil
}

// insertRows encodes t (rows rows, at most maxRows) into a free message
// and adds it to the window with placement key key, waiting for space. A
// detached shard writer refuses it with errShardDetached (nothing taken).
func (w *Writer) insertRows(t *buffer.Transitions, rows int, key uint64) error {
	req, err := w.reserve()
	if err != nil {
		return err
	}
	if err := EncodeTransitions(req.Data, w.opts.Layout, t); err != nil {
		w.mu.Lock()
		w.freeLocked(req)
		w.mu.Unlock()
		return fmt.Errorf("remote: writer %q: %w", w.id, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.mode == modeDetached {
		w.freeLocked(req)
		return errShardDetached
	}
	w.nextSeq++
	req.Seq = w.nextSeq
	if len(w.pending) == 0 {
		w.progressAt = time.Now()
	}
	w.pending = append(w.pending, &wbatch{req: req, rows: rows, key: key})
	w.stats.Batches++
	w.stats.Items += uint64(rows)
	w.broadcastLocked()
	return nil
}

// reserve waits for window space and returns a message to encode into. A
// shard writer waits while paused and refuses with errShardDetached once
// detached.
func (w *Writer) reserve() (*replayv1.InsertRequest, error) {
	for waited := false; ; waited = true {
		w.mu.Lock()
		if err := w.stateLocked(); err != nil {
			w.mu.Unlock()
			return nil, err
		}
		if w.mode == modeDetached {
			w.mu.Unlock()
			return nil, errShardDetached
		}
		if len(w.pending) < w.opts.Window && w.mode == modeActive {
			var req *replayv1.InsertRequest
			if k := len(w.free); k > 0 {
				req, w.free = w.free[k-1], w.free[:k-1]
			} else {
				req = &replayv1.InsertRequest{Table: w.opts.Table, Writer: w.id, Data: &replayv1.Columns{}}
			}
			w.mu.Unlock()
			return req, nil
		}
		if !waited {
			w.stats.Blocked++
		}
		ch := w.changed
		w.mu.Unlock()
		<-ch
	}
}

// Flush waits until every batch taken so far is acknowledged, the writer
// gives up (its error) or ctx ends (ctx's error; the batches stay pending,
// not lost). Safe for concurrent use.
func (w *Writer) Flush(ctx context.Context) error {
	for {
		w.mu.Lock()
		if w.err != nil {
			w.mu.Unlock()
			return w.err
		}
		if len(w.pending) == 0 {
			w.mu.Unlock()
			return nil
		}
		n, ch := len(w.pending), w.changed
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("remote: writer %q: flush with %d batches unacknowledged: %w", w.id, n, ctx.Err())
		}
	}
}

// Close flushes (waiting for every acknowledgement until ctx ends), ends
// the stream and the writer's goroutines and waits for them. Batches still
// unacknowledged when ctx ends are counted as lost and the error says so.
// Call it once, after the last Insert; later calls return the first's
// result.
func (w *Writer) Close(ctx context.Context) error {
	w.closeOnce.Do(func() {
		ferr := w.Flush(ctx)
		w.mu.Lock()
		w.closing = true
		w.broadcastLocked()
		w.mu.Unlock()
		if ferr != nil {
			w.fail(fmt.Errorf("closed before the server acknowledged them: %w", ferr))
		}
		select {
		case <-w.done: // the stream ended cleanly
		case <-ctx.Done():
			w.fail(fmt.Errorf("closed before the stream ended: %w", ctx.Err()))
		}
		w.cancel()
		<-w.done
		w.mu.Lock()
		w.closeErr = w.err
		w.mu.Unlock()
	})
	return w.closeErr
}

// Stats snapshots the writer's counters. Safe for concurrent use.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Pending = len(w.pending)
	return s
}

// state is the error a call returns now (nil when the writer works).
func (w *Writer) state() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stateLocked()
}

func (w *Writer) stateLocked() error {
	if w.err != nil {
		return w.err
	}
	if w.closing {
		return ErrWriterClosed
	}
	return nil
}

func (w *Writer) broadcastLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// freeLocked keeps req for reuse, at most Window of them (a shard writer
// may be handed more by adoption; the rest go to the collector).
func (w *Writer) freeLocked(req *replayv1.InsertRequest) {
	if len(w.free) < w.opts.Window {
		w.free = append(w.free, req)
	}
}

// fail gives up: the pending batches are lost, err becomes every later
// call's error, the stream is aborted. The first failure wins.
func (w *Writer) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		var items uint64
		for _, b := range w.pending {
			items += uint64(b.rows)
		}
		w.stats.Lost += uint64(len(w.pending))
		w.stats.LostItems += items
		w.err = fmt.Errorf("remote: writer %q: %d batches (%d items) lost: %w", w.id, len(w.pending), items, err)
		w.pending, w.sent = w.pending[:0], 0
		w.broadcastLocked()
	}
	w.cancel()
}

// permanentError marks an error that resending cannot cure.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// permanent reports whether err is a refusal that a retry would meet
// again: a malformed batch, an unknown table, a bad token, a protocol
// violation.
func permanent(err error) bool {
	var p permanentError
	if errors.As(err, &p) {
		return true
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.PermissionDenied, codes.Unauthenticated,
		codes.FailedPrecondition, codes.Unimplemented, codes.ResourceExhausted, codes.OutOfRange, codes.DataLoss:
		return true
	}
	return false
}

// run owns the streams: it opens one when there is work, serves it until
// it breaks or the writer closes, and re-opens it with backoff.
func (w *Writer) run() {
	defer close(w.done)
	attempts, backoff := 0, w.opts.MinBackoff
	for reconnect := false; ; reconnect = true {
		if !w.waitWork() {
			return
		}
		if reconnect {
			w.mu.Lock()
			w.stats.Reconnects++
			w.mu.Unlock()
		}
		progress, err := w.serve()
		if err == nil || w.ctx.Err() != nil {
			return
		}
		if w.hooks != nil {
			// A shard writer does not retry by itself: it pauses and its
			// ShardedWriter probes the shard, then resumes it (the same
			// shard, resending) or detaches it (moving its batches).
			w.mu.Lock()
			report := w.mode == modeActive // not a stream the ShardedWriter ended itself
			if report {
				w.stats.Errors++
				w.stats.LastError = err.Error()
				w.mode = modePaused
				w.broadcastLocked()
			}
			w.mu.Unlock()
			if w.c.isClosed() {
				w.fail(ErrClientClosed)
				return
			}
			if report {
				w.hooks.broke(err)
			}
			continue
		}
		w.mu.Lock()
		w.stats.Errors++
		w.stats.LastError = err.Error()
		w.mu.Unlock()
		if w.c.isClosed() {
			w.fail(ErrClientClosed)
			return
		}
		if permanent(err) {
			w.fail(err)
			return
		}
		if progress {
			attempts, backoff = 0, w.opts.MinBackoff
		}
		attempts++
		if w.opts.MaxAttempts > 0 && attempts >= w.opts.MaxAttempts {
			w.fail(fmt.Errorf("gave up after %d attempts in a row without an acknowledgement: %w", attempts, err))
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-w.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, w.opts.MaxBackoff)
	}
}

// waitWork waits until a batch is pending (true), or the writer is
// closing with nothing pending, has failed or is aborted (false).
func (w *Writer) waitWork() bool {
	for {
		w.mu.Lock()
		ok, stop := len(w.pending) > 0 && w.mode == modeActive, w.err != nil || w.closing && len(w.pending) == 0
		ch := w.changed
		w.mu.Unlock()
		if ok || stop {
			return ok && !stop
		}
		select {
		case <-ch:
		case <-w.ctx.Done():
			return false
		}
	}
}

// serve opens a stream, (re)sends every unacknowledged batch in order and
// then each new one, and returns when the stream breaks (progress: it
// carried an acknowledgement) or, with a nil error, when the writer is
// closing, everything is acknowledged and the server has ended the
// stream.
func (w *Writer) serve() (progress bool, err error) {
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	w.mu.Lock()
	if w.mode != modeActive {
		w.mu.Unlock()
		return false, errShardDetached
	}
	w.serving, w.streamCancel, w.progressAt = true, cancel, time.Now()
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.serving, w.streamCancel = false, nil
		w.broadcastLocked()
		w.mu.Unlock()
	}()
	st, err := w.c.replay.Insert(ctx)
	if err != nil {
		return false, fmt.Errorf("open the insert stream: %w", err)
	}
	w.mu.Lock()
	w.sent, w.acks = 0, 0
	w.mu.Unlock()
	recvDone := make(chan error, 1)
	go func() { recvDone <- w.recv(st, cancel) }()
	madeProgress := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.acks > 0
	}
	closedSend := false
	for {
		w.mu.Lock()
		var req *replayv1.InsertRequest
		closeNow := false
		switch {
		case w.err != nil:
			w.mu.Unlock()
			cancel()
			<-recvDone
			return madeProgress(), w.err
		case w.mode != modeActive:
			w.mu.Unlock()
			cancel()
			<-recvDone
			return madeProgress(), errShardDetached
		case w.sent < len(w.pending):
			b := w.pending[w.sent]
			w.sent++
			if b.sends > 0 {
				w.stats.Resent++
			}
			b.sends++
			b.req.Lineage = w.lineage.Load()
			req = b.req
		case w.closing && len(w.pending) == 0 && !closedSend:
			closeNow = true
		}
		ch := w.changed
		w.mu.Unlock()
		if req != nil {
			if err := st.Send(req); err != nil {
				if err != io.EOF { // a local failure: the stream is done
					cancel()
					<-recvDone
					return madeProgress(), fmt.Errorf("send batch %d: %w", req.Seq, err)
				}
				rerr := <-recvDone // the stream broke: its status comes from Recv
				if rerr == nil || rerr == io.EOF {
					rerr = errors.New("the server ended the stream")
				}
				return madeProgress(), rerr
			}
			continue
		}
		if closeNow {
			if err := st.CloseSend(); err != nil {
				cancel()
				<-recvDone
				return madeProgress(), err
			}
			closedSend = true
		}
		select {
		case err := <-recvDone:
			if err == io.EOF {
				w.mu.Lock()
				n := len(w.pending)
				w.mu.Unlock()
				if closedSend && n == 0 {
					return madeProgress(), nil
				}
				err = fmt.Errorf("the server ended the stream with %d batches unacknowledged", n)
			}
			return madeProgress(), err
		case <-ch:
		}
	}
}

// recv reads acknowledgements until the stream ends (io.EOF when the
// server ended it cleanly) or one is out of order (a permanent error; the
// stream is cancelled).
func (w *Writer) recv(st grpc.BidiStreamingClient[replayv1.InsertRequest, replayv1.InsertAck], cancel context.CancelFunc) error {
	for {
		ack, err := st.Recv()
		if err != nil {
			return err
		}
		if err := w.ack(ack); err != nil {
			cancel()
			return err
		}
		if w.hooks != nil {
			w.hooks.acked()
		}
	}
}

// ack retires the window's oldest batch, which ack must name.
func (w *Writer) ack(a *replayv1.InsertAck) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent == 0 || len(w.pending) == 0 || a.GetSeq() != w.pending[0].req.Seq {
		want := "none"
		if w.sent > 0 && len(w.pending) > 0 {
			want = fmt.Sprint(w.pending[0].req.Seq)
		}
		return permanentError{fmt.Errorf("acknowledgement of batch %d out of order (expected %s)", a.GetSeq(), want)}
	}
	b := w.pending[0]
	if a.GetDuplicate() && b.sends == 1 {
		return permanentError{fmt.Errorf("the server had stored batch %d of writer %q before this writer sent it: the writer id is in use by another writer (or an earlier run): give each writer its own id", b.req.Seq, w.id)}
	}
	copy(w.pending, w.pending[1:])
	w.pending[len(w.pending)-1] = nil
	w.pending = w.pending[:len(w.pending)-1]
	w.sent--
	w.acks++
	w.progressAt = time.Now()
	w.freeLocked(b.req)
	w.stats.Acked++
	w.stats.AckedItems += uint64(b.rows)
	if a.GetDuplicate() {
		w.stats.Duplicates++
	}
	if inc := a.GetIncarnation(); inc != w.stats.Incarnation {
		if w.stats.Incarnation != 0 {
			w.stats.Incarnations++
		}
		w.stats.Incarnation = inc
	}
	w.broadcastLocked()
	return nil
}

// columnLens lists the lengths of t's non-empty columns.
func columnLens(t *buffer.Transitions) []int {
	var out []int
	add := func(n int) {
		if n > 0 {
			out = append(out, n)
		}
	}
	add(len(t.Obs))
	add(len(t.NextObs))
	add(len(t.Action))
	add(len(t.ActionVec))
	add(len(t.Reward))
	add(len(t.Discount))
	add(len(t.Flags))
	add(len(t.EpisodeID))
	add(len(t.EpisodeStep))
	add(len(t.GlobalStep))
	add(len(t.ActorID))
	add(len(t.StateHash))
	add(len(t.NextStateHash))
	add(len(t.Priority))
	for _, f := range t.Floats {
		add(len(f))
	}
	return out
}

// rowRange is rows [lo, hi) of t (n rows, every column a whole number of
// values per row): each column resliced, nothing copied.
func rowRange(t *buffer.Transitions, lo, hi, n int) buffer.Transitions {
	return buffer.Transitions{
		Obs:           cut(t.Obs, lo, hi, n),
		NextObs:       cut(t.NextObs, lo, hi, n),
		Action:        cut(t.Action, lo, hi, n),
		ActionVec:     cut(t.ActionVec, lo, hi, n),
		Reward:        cut(t.Reward, lo, hi, n),
		Discount:      cut(t.Discount, lo, hi, n),
		Flags:         cut(t.Flags, lo, hi, n),
		EpisodeID:     cut(t.EpisodeID, lo, hi, n),
		EpisodeStep:   cut(t.EpisodeStep, lo, hi, n),
		GlobalStep:    cut(t.GlobalStep, lo, hi, n),
		ActorID:       cut(t.ActorID, lo, hi, n),
		StateHash:     cut(t.StateHash, lo, hi, n),
		NextStateHash: cut(t.NextStateHash, lo, hi, n),
		Priority:      cut(t.Priority, lo, hi, n),
		Floats:        cutAll(t.Floats, lo, hi, n),
	}
}

func cut[T any](s []T, lo, hi, n int) []T {
	if len(s) == 0 {
		return nil
	}
	w := len(s) / n
	return s[lo*w : hi*w]
}

func cutAll(fs [][]float32, lo, hi, n int) [][]float32 {
	if fs == nil {
		return nil
	}
	out := make([][]float32, len(fs))
	for i, f := range fs {
		out[i] = cut(f, lo, hi, n)
	}
	return out
}

// The ShardedWriter's side of a shard writer. Each call takes the
// writer's lock briefly; detach also waits for the writer's stream to end.

// detach marks the writer's shard dead: it ends the stream (if one is
// open), waits until serve has returned, and takes every unacknowledged
// batch out of the window (counted in Moved), oldest first, for the
// ShardedWriter to place on other shards. Until resume, new batches are
// refused with errShardDetached. Batches the dead shard stored without
// acknowledging them are sent again elsewhere: they may then be stored
// twice, once on each shard.
func (w *Writer) detach() []*wbatch {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mode = modeDetached
	if w.streamCancel != nil {
		w.streamCancel()
	}
	w.broadcastLocked()
	for w.serving {
		ch := w.changed
		w.mu.Unlock()
		<-ch
		w.mu.Lock()
	}
	out := slices.Clone(w.pending)
	clear(w.pending)
	w.pending, w.sent = w.pending[:0], 0
	w.stats.Moved += uint64(len(out))
	w.broadcastLocked()
	return out
}

// resume lets a paused or detached writer send again: a paused one
// re-opens its stream and resends its window in order (the server
// acknowledges what it had stored as duplicates); a detached one, whose
// window is empty, takes new batches again (its sequence numbers go on
// from where they were; a shard restored from a checkpoint knows them up
// to its checkpoint's writer table).
func (w *Writer) resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mode != modeActive {
		w.mode = modeActive
		w.broadcastLocked()
	}
}

// adopt appends batches taken from a dead shard's writer to the window
// (beyond Window if need be: the ShardedWriter bounds the total), each
// numbered anew in this writer's sequence. It refuses them all with
// errShardDetached unless the writer is active, and with its error once
// it has failed or is closing.
func (w *Writer) adopt(bs []*wbatch) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.stateLocked(); err != nil {
		return err
	}
	if w.mode != modeActive {
		return errShardDetached
	}
	if len(w.pending) == 0 {
		w.progressAt = time.Now()
	}
	for _, b := range bs {
		w.nextSeq++
		b.req.Seq, b.sends = w.nextSeq, 0
		w.pending = append(w.pending, b)
		w.stats.Batches++
		w.stats.Items += uint64(b.rows)
		w.stats.Adopted++
	}
	w.broadcastLocked()
	return nil
}

// progress reports the writer's mode, its unacknowledged batches and the
// time of its last progress (an acknowledgement, a stream opened or a
// batch into an empty window).
func (w *Writer) progress() (mode, pending int, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mode, len(w.pending), w.progressAt
}
