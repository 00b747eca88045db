package remote

import (
	"context"
	"errors"
	"fmt"
	"math"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// sampleStream is one Sample stream's reusable state (owned by its
// handler goroutine).
type sampleStream struct {
	batch  *buffer.Batch
	reseed *sampler.Reseeder // the stage, sampled by the draws' seeds (made on the first draw)
	refs   []buffer.Ref
	reply  replayv1.SampleReply
	out    replayv1.Batch
	data   replayv1.Columns
	wrote  replayv1.WriteBackResult
	fleet  fleetStream // positional draws and tallies (server_fleet.go)

	// The episode feed (server_episodes.go), guarded by Server.stage but
	// feedOut, which the handler owns between taking it and sending it.
	observing bool    // the stream subscribed (ObserveEpisodes)
	feedLost  string  // why the stream lost its feed ("": it did not)
	feedOut   feedLog // the events to send ahead of the next reply
}

// Sample serves a learner's stream (see replay.proto): each Draw is
// answered by a Batch once the rate limiter admits it, each WriteBack by
// a WriteBackResult, in the order sent. A draw samples through the
// method's Selector with a generator seeded from the draw's seed (the
// rows, refs and probabilities an in-process learner gets for the same
// seed over the same contents) and weighs rows with the method's Weighter
// at learner step step-1. A write-back for another incarnation is dropped
// whole and counted; one for overwritten slots is counted stale, never
// applied. A malformed message ends the stream with InvalidArgument,
// naming what was wrong (counted); nothing of it is applied.
//
// ObserveEpisodes (a table whose stage keeps episodes, the ReF-ER
// methods) makes the stream the episode feed's owner: answered by the
// stored episodes, and from then on each of the stream's Batches is
// preceded by the stage's episode events since the previous one
// (server_episodes.go).
//
// A draw the limiter admitted counts as sampled there even when the
// sampling then fails (a table holding fewer items than the draw asks,
// FailedPrecondition): the limiter has no way to take samples back.
//
// Cost per draw: the limiter's wait, the stage's Sample and Weights (under
// the stage lock) and an encode into the stream's reused reply (gRPC has
// serialized a message when Send returns; no stats handler that keeps
// messages may be installed); the stream's batch is reallocated only when
// the batch size changes.
func (s *Server) Sample(stream grpc.BidiStreamingServer[replayv1.SampleRequest, replayv1.SampleReply]) error {
	s.c.sampleStreams.Add(1)
	defer s.c.sampleStreams.Add(-1)
	ctx, done := s.handlerCtx(stream.Context())
	defer done()
	st := &sampleStream{}
	defer s.unobserve(st)
	return serveStream(s, ctx, stream.Recv, func(req *replayv1.SampleRequest) error {
		var reply *replayv1.SampleReply
		var err error
		switch k := req.Kind.(type) {
		case *replayv1.SampleRequest_Draw:
			if reply, err = s.draw(ctx, k.Draw, st); err == nil && st.observing {
				err = s.sendFeed(stream, st, k.Draw.Id, false) // the episode events ahead of the Batch
			}
		case *replayv1.SampleRequest_WriteBack:
			reply, err = s.writeBack(k.WriteBack, st)
		case *replayv1.SampleRequest_ObserveEpisodes:
			if err = s.observeEpisodes(k.ObserveEpisodes, st, stream); err == nil {
				return nil // answered by the feed's messages
			}
		case *replayv1.SampleRequest_Tally:
			reply, err = s.tally(k.Tally, st)
		default:
			err = s.reject(codes.InvalidArgument, "remote: sample: a request with neither a draw nor a write-back (nor an observe-episodes)")
		}
		if err != nil {
			return err
		}
		return stream.Send(reply)
	})
}

// drawBytes bounds the encoded size of a Batch reply of rows rows.
func (s *Server) drawBytes(rows int) int {
	const framing = 512 // the Batch's and Columns' tags and lengths
	return rows*(RowBytes(s.cfg)+3*8) + framing + 8*len(s.cfg.Floats)
}

// maxDrawRows is the largest draw whose reply fits MaxMessageBytes.
func (s *Server) maxDrawRows() int {
	return (replayv1.MaxMessageBytes - s.drawBytes(0)) / (RowBytes(s.cfg) + 3*8)
}

// draw answers one Draw.
func (s *Server) draw(ctx context.Context, d *replayv1.Draw, st *sampleStream) (*replayv1.SampleReply, error) {
	if err := s.table(d.Table); err != nil {
		return nil, err
	}
	n := int(d.Batch)
	switch {
	case n < 1:
		return nil, s.reject(codes.InvalidArgument, "remote: draw %d: batch %d (want >= 1)", d.Id, d.Batch)
	case n > s.cfg.Capacity && len(d.At) == 0: // positions may repeat items
		return nil, s.reject(codes.InvalidArgument, "remote: draw %d: batch %d exceeds the table's capacity %d", d.Id, n, s.cfg.Capacity)
	case s.drawBytes(n) > replayv1.MaxMessageBytes:
		return nil, s.reject(codes.InvalidArgument, "remote: draw %d: a batch of %d rows needs about %d bytes, above the %d-byte message limit (MaxMessageBytes): draw at most %d rows",
			d.Id, n, s.drawBytes(n), replayv1.MaxMessageBytes, s.maxDrawRows())
	case d.Step == 0:
		return nil, s.reject(codes.InvalidArgument, "remote: draw %d: step 0 (the learner step a draw serves is 1-based)", d.Id)
	}
	if err := s.checkFleetDraw(d); err != nil {
		return nil, err
	}
	if lim := s.t.Limiter; lim != nil && d.Fleet == nil { // a fleet's learner held the draw
		wctx := ctx
		if d.NoWait {
			c, cancel := context.WithCancel(ctx)
			cancel() // AwaitSample admits at once or returns at once
			wctx = c
		}
		s.c.drawsWaiting.Add(1)
		err := lim.AwaitSample(wctx, n)
		s.c.drawsWaiting.Add(-1)
		if err != nil {
			if d.NoWait && ctx.Err() == nil {
				return nil, s.reject(codes.ResourceExhausted, "remote: draw %d: the rate limiter does not admit %d samples now (no_wait)", d.Id, n)
			}
			return nil, s.waitErr(ctx, fmt.Sprintf("draw %d", d.Id), err)
		}
	}
	if st.batch == nil || st.batch.Len() != n {
		b, err := s.t.Buffer.NewBatch(n)
		if err != nil {
			return nil, s.reject(codes.InvalidArgument, "remote: draw %d: %v", d.Id, err)
		}
		st.batch = b
	}
	b := st.batch
	m := &s.t.Method
	s.stage.Lock()
	if st.reseed == nil {
		st.reseed = sampler.Reseed(m.Selector)
	}
	if err := s.feedBeforeDraw(st, d.Id); err != nil {
		s.stage.Unlock()
		return nil, err
	}
	err := s.sampleDraw(st, d, b)
	s.feedAfterDraw(st)
	weigh := m.Weighter != nil && len(d.At) == 0 // a fleet's learner weighs positional rows itself
	if err == nil && weigh {
		if werr := m.Weighter.Weights(b, int64(d.Step-1)); werr != nil {
			err = fmt.Errorf("weights: %w", werr)
		}
	}
	s.stage.Unlock()
	if err != nil {
		if errors.Is(err, buffer.ErrEmpty) || errors.Is(err, buffer.ErrZeroMass) || errors.Is(err, buffer.ErrBatchSize) {
			return nil, s.reject(codes.FailedPrecondition, "remote: draw %d: %v", d.Id, err)
		}
		return nil, s.reject(codes.Internal, "remote: draw %d: %v", d.Id, err)
	}
	out := &st.out
	out.Id, out.Incarnation = d.Id, s.incarnation
	out.Keys = AppendKeys(out.Keys[:0], b.Refs)
	out.Prob = append(out.Prob[:0], b.Prob...)
	out.Weight = out.Weight[:0]
	if weigh {
		out.Weight = append(out.Weight, b.Weight...)
	}
	out.Size, out.Total, out.MinProb = uint64(b.Size), b.Total, b.MinProb
	out.Mass, out.Inserted = st.fleet.mass, s.limiterInserted()
	if err := EncodeBatch(&st.data, s.cfg, b, n); err != nil {
		return nil, s.reject(codes.Internal, "remote: draw %d: %v", d.Id, err)
	}
	out.Data = &st.data
	st.reply.Kind = &replayv1.SampleReply_Batch{Batch: out}
	s.c.draws.Add(1)
	s.c.sampledItems.Add(uint64(n))
	return &st.reply, nil
}

// writeBack applies one WriteBack.
func (s *Server) writeBack(wb *replayv1.WriteBack, st *sampleStream) (*replayv1.SampleReply, error) {
	if err := s.table(wb.Table); err != nil {
		return nil, err
	}
	res := &st.wrote
	*res = replayv1.WriteBackResult{Id: wb.Id}
	st.reply.Kind = &replayv1.SampleReply_Written{Written: res}
	k := len(wb.Keys)
	if k == 0 {
		return nil, s.reject(codes.InvalidArgument, "remote: write-back %d: no keys", wb.Id)
	}
	if wb.Incarnation != s.incarnation {
		res.WrongIncarnation = uint32(k)
		s.c.wbWrongIncarnation.Add(uint64(k))
		return &st.reply, nil
	}
	m := &s.t.Method
	td, feat := len(wb.AbsTd) > 0, len(wb.Q) > 0 || len(wb.Target) > 0
	switch {
	case td && feat:
		return nil, s.reject(codes.InvalidArgument, "remote: write-back %d: both abs_td and q/target given (send one)", wb.Id)
	case !td && !feat:
		return nil, s.reject(codes.InvalidArgument, "remote: write-back %d: neither abs_td nor q/target given", wb.Id)
	case feat && m.Features == nil:
		return nil, s.reject(codes.InvalidArgument, "remote: write-back %d: q/target given, but the stage %s takes abs_td (it has no feature updates)", wb.Id, m.Selector)
	case td && m.Features != nil:
		return nil, s.reject(codes.InvalidArgument, "remote: write-back %d: abs_td given, but the stage %s takes q and target (feature updates)", wb.Id, m.Selector)
	}
	if td {
		if len(wb.AbsTd) != k {
			return nil, s.reject(codes.InvalidArgument, "remote: write-back %d: %d keys but %d abs_td values", wb.Id, k, len(wb.AbsTd))
		}
		for i, v := range wb.AbsTd {
			if !(v >= 0) || math.IsInf(v, 0) {
				return nil, s.reject(codes.InvalidArgument, "remote: write-back %d: abs_td[%d] = %v (must be finite and >= 0)", wb.Id, i, v)
			}
		}
	} else {
		if len(wb.Q) != k || len(wb.Target) != k {
			return nil, s.reject(codes.InvalidArgument, "remote: write-back %d: %d keys but %d q and %d target values", wb.Id, k, len(wb.Q), len(wb.Target))
		}
		for i := range k {
			if q, y := wb.Q[i], wb.Target[i]; math.IsNaN(q) || math.IsInf(q, 0) || math.IsNaN(y) || math.IsInf(y, 0) {
				return nil, s.reject(codes.InvalidArgument, "remote: write-back %d: q[%d] = %v, target[%d] = %v (must be finite)", wb.Id, i, q, i, y)
			}
		}
	}
	st.refs = AppendRefs(st.refs[:0], wb.Keys)
	s.stage.Lock()
	var ur buffer.UpdateResult
	var err error
	if td {
		ur, err = m.Selector.Update(st.refs, wb.AbsTd)
	} else {
		ur, err = m.Features.UpdateFeatures(st.refs, wb.Q, wb.Target)
	}
	s.stage.Unlock()
	if err != nil {
		return nil, s.reject(codes.InvalidArgument, "remote: write-back %d: %v", wb.Id, err)
	}
	res.Applied, res.Stale = uint32(ur.Applied), uint32(ur.Stale)
	s.c.wbApplied.Add(uint64(ur.Applied))
	s.c.wbStale.Add(uint64(ur.Stale))
	return &st.reply, nil
}

// SampleSeeded draws dst through sel as sampler.Reseed(sel).SampleSeed
// does: what a Draw's seed means (the server keeps one Reseeder per
// sampling stream). An in-process learner, whose Selector is
// Reseed-wrapped, draws the same rows when it draws the same seed from its
// generator over the same contents. Allocates a Reseeder per call (tests
// and tools).
func SampleSeeded(sel sampler.Selector, seed uint64, dst *buffer.Batch) error {
	return sampler.Reseed(sel).SampleSeed(seed, dst)
}
