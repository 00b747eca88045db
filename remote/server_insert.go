package remote

import (
	"context"
	"errors"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// Insert serves one writer stream (see replay.proto): each batch is
// decoded and shape-checked, then stored iff its seq is above the
// writer's highest stored seq (else acknowledged as a duplicate), after
// the rate limiter admits it: while the limiter holds a batch the stream
// is not read (no message is read ahead), so HTTP/2 flow control
// pushes back to the client. A batch is acknowledged only once stored.
// A malformed batch ends the stream with InvalidArgument (counted), one
// that expects another data lineage (InsertRequest.lineage: it was meant
// for another shard) with Aborted (counted, before the writer table is
// consulted), a new writer beyond MaxWriters with ResourceExhausted, a
// vanished client or
// Close ends it with the context's status; nothing half-done is left:
// a reservation of the limiter is settled whatever happens.
//
// Cost per batch: one decode into the stream's reused columns (no
// allocation once grown), the buffer's Insert, a map lookup for the
// writer, two short holds of the writer's own lock (the in-flight mark
// and the record) and the limiter's O(1) calls.
func (s *Server) Insert(stream grpc.BidiStreamingServer[replayv1.InsertRequest, replayv1.InsertAck]) error {
	s.c.insertStreams.Add(1)
	defer s.c.insertStreams.Add(-1)
	ctx, done := s.handlerCtx(stream.Context())
	defer done()
	var t buffer.Transitions
	ack := &replayv1.InsertAck{}
	return serveStream(s, ctx, stream.Recv, func(req *replayv1.InsertRequest) error {
		s.c.insertReceived.Add(1)
		dup, size, err := s.insertOne(ctx, req, &t)
		if err != nil {
			return err
		}
		ack.Seq, ack.Duplicate, ack.Incarnation, ack.Size = req.Seq, dup, s.incarnation, uint64(size)
		return stream.Send(ack)
	})
}

// insertOne stores one InsertRequest (decoded into t) or recognises a
// resend; it returns whether it was a duplicate and the table's size.
func (s *Server) insertOne(ctx context.Context, req *replayv1.InsertRequest, t *buffer.Transitions) (dup bool, size int, err error) {
	if err := s.table(req.Table); err != nil {
		return false, 0, err
	}
	if l := req.Lineage; l != 0 && l != s.lineage {
		// Before the writer table: another shard's batch is no duplicate here.
		return false, 0, s.reject(codes.Aborted, "remote: insert: writer %q seq %d expects data lineage %016x, this server's is %016x: it is another shard's (addresses swapped?)", req.Writer, req.Seq, l, s.lineage)
	}
	switch {
	case len(req.Writer) == 0 || len(req.Writer) > MaxWriterName:
		return false, 0, s.reject(codes.InvalidArgument, "remote: insert: writer name of %d bytes (want 1-%d)", len(req.Writer), MaxWriterName)
	case req.Seq == 0:
		return false, 0, s.reject(codes.InvalidArgument, "remote: insert: writer %q: seq 0 (seqs number a writer's batches from 1)", req.Writer)
	case req.Data == nil:
		return false, 0, s.reject(codes.InvalidArgument, "remote: insert: writer %q seq %d: no data", req.Writer, req.Seq)
	}
	if err := DecodeTransitions(t, s.cfg, req.Data); err != nil {
		return false, 0, s.reject(codes.InvalidArgument, "remote: insert: writer %q seq %d: %v", req.Writer, req.Seq, err)
	}
	n := t.Len()
	if n == 0 {
		return false, 0, s.reject(codes.InvalidArgument, "remote: insert: writer %q seq %d: an empty batch (rows 0)", req.Writer, req.Seq)
	}
	w, err := s.writer(req.Writer)
	if err != nil {
		return false, 0, err
	}
	select {
	case w.sem <- struct{}{}:
	case <-ctx.Done():
		return false, 0, s.ctxErr(ctx)
	}
	defer func() { <-w.sem }()
	w.used = s.now()
	if req.Seq <= w.high.Load() {
		s.c.duplicateBatches.Add(1)
		return true, s.t.Buffer.Size(), nil
	}
	if lim := s.t.Limiter; lim != nil {
		s.c.insertsWaiting.Add(1)
		err := lim.ReserveInsert(ctx, n)
		s.c.insertsWaiting.Add(-1)
		if err != nil {
			if errors.Is(err, runtime.ErrRateLimited) && ctx.Err() == nil {
				// The limiter's wait timed out (no learner drained it for
				// that long): a condition that passes, so Unavailable, which
				// a writer retries, not a refusal it gives up on.
				return false, 0, s.reject(codes.Unavailable, "remote: insert: writer %q seq %d: %v", req.Writer, req.Seq, err)
			}
			return false, 0, s.waitErr(ctx, "insert", err)
		}
	}
	w.beginStore(n)
	err = s.t.Buffer.Insert(t)
	if lim := s.t.Limiter; lim != nil {
		if err != nil {
			_ = lim.AbortInsert(n) // settles exactly what ReserveInsert reserved
		} else {
			_ = lim.CommitInsert(n)
		}
	}
	if err != nil {
		w.abortStore()
		return false, 0, s.reject(codes.InvalidArgument, "remote: insert: writer %q seq %d: %v", req.Writer, req.Seq, err)
	}
	if s.storedHook != nil {
		s.storedHook()
	}
	w.recordStored(req.Seq, n)
	s.c.insertedBatches.Add(1)
	s.c.insertedItems.Add(uint64(n))
	return false, s.t.Buffer.Size(), nil
}

// writer returns name's idempotency record, making it if the table has
// room (ResourceExhausted otherwise). O(1) under a short lock.
func (s *Server) writer(name string) (*writerState, error) {
	s.writersMu.Lock()
	defer s.writersMu.Unlock()
	w, ok := s.writers[name]
	if !ok {
		if len(s.writers) >= s.opts.MaxWriters {
			s.evictIdleWriters()
		}
		if len(s.writers) >= s.opts.MaxWriters {
			return nil, s.reject(codes.ResourceExhausted, "remote: insert: %d writers known, the most this server keeps (a new writer %q is refused)", len(s.writers), name)
		}
		w = &writerState{sem: make(chan struct{}, 1)}
		s.writers[name] = w
	}
	return w, nil
}

// WriterIdle is how long a writer may stay idle (no batch) before a full
// writer table forgets it to make room for a new one. A forgotten writer
// that comes back starts a new record: batches it resends after that long
// would be stored again, which a writer with a window of unacknowledged
// batches never does after minutes of silence.
const WriterIdle = 10 * time.Minute

// evictIdleWriters forgets the writers idle longer than WriterIdle and not
// in an insert now; called with writersMu held when the table is full.
// O(writers), only then.
func (s *Server) evictIdleWriters() {
	now := s.now()
	for name, w := range s.writers {
		select {
		case w.sem <- struct{}{}: // not inserting: its used is stable
			if now.Sub(w.used) > WriterIdle {
				delete(s.writers, name)
				s.c.writersEvicted.Add(1)
			}
			<-w.sem
		default:
		}
	}
}
