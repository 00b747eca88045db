package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// streamOpenAttempts bounds the attempts to open the Sample stream in one
// call (with backoff from streamBackoff, doubling): a server that is
// restarting gets about a second and a half.
const (
	streamOpenAttempts = 5
	streamBackoff      = 50 * time.Millisecond
)

// statsRefresh is how old the cached method statistics may get before
// Stats asks the server again, and statsTimeout that call's deadline.
const (
	statsRefresh = time.Second
	statsTimeout = 250 * time.Millisecond
)

// Method returns the learner's replay method with its stage behind the
// server: a sampler.Method whose Selector, Weighter, Features and
// Evaluated are remote, and whose Loss, Normalizer, Name and Warnings are
// local's (local is the same method built in the learner's process, over
// any buffer of the table's layout: NewMethod with the server's
// configuration). priorSteps is the learner steps already taken (a
// resumed learner's count): the first draw serves step priorSteps+1.
//
// The remote Selector's Sample draws seed := rng.Uint64() (exactly one
// draw, as sampler.Reseed does in process, so a learner consumes its
// generator identically in and out of process), sends a Draw with the
// seed, the batch size dst.Len() and the step (priorSteps + the draws
// that succeeded + 1) on one long-lived Sample stream, waits for the batch
// and fills dst: rows decoded into dst's own columns (dst must be a
// NewBatch of a buffer with the table's layout: its columns are the
// layout), Refs from the keys, Prob, Size, Total and MinProb; the stage's
// weights are kept for Weighter.Weights, which copies them into b.Weight
// and checks that it is asked for step = the draw's step − 1 (what
// learners ask). Update sends the |δ| write-back with the incarnation of
// the latest batch and returns its counts: keys of overwritten slots and
// of an earlier server incarnation are both Stale (the latter also counted
// in ClientStats.WrongIncarnation). Features (when the server's stage
// takes features, NERS) sends Q and targets instead; Evaluated (when the
// stage has an evaluation hook) calls the Evaluated RPC; Stats reads the
// server's method statistics (cached for a second, refreshed with a short
// deadline). Selector.Priority and String are local's. When the server's
// stage keeps whole episodes (the ReF-ER methods: TableInfo.episodes),
// Episodes is a remote sampler.EpisodeSource (its Buffer local's, its
// Config and Slots the server stage's): its observer, the learner's
// REFERController, hears the server stage's episode events inside each
// Sample, in the order the stage made them (the episode feed; see
// episodes.go); local must then be the same ReF-ER variant, and a local
// twin with Episodes against a stage without (or the reverse) is refused.
//
// A broken stream is re-opened by the next call (up to 5 attempts with
// backoff), and a call that finds the stream ended before its request
// went out re-sends it on a new one; a call whose request went out and
// whose reply was lost in a break returns the error: a draw or write-back
// the server may have acted on is never silently replayed. ctx bounds the stage's life: cancel it to end the
// stream (a waiting draw then returns). A draw waits as long as the
// server's rate limiter holds it (ClientOptions.DrawTimeout bounds it);
// write-backs are bounded by CallTimeout.
//
// With ClientOptions.Pipeline, Update and UpdateFeatures send the
// write-back and return without its result; the next Sample sends its
// draw behind it and reads the result, then the batch (one round trip per
// learner step; the server applies the write-back before it samples, so
// the batches are the unpipelined stage's). Update then returns the
// counts of the write-backs answered since the previous Update (the
// previous write-back's: a lag of one), and Settle returns the last one's
// once the learner stops. A pipelined write-back whose result is lost
// with the stream is counted (ClientStats.WriteBacksLost) and returned as
// the next call's error (a Sample that finds one draws nothing), never
// re-sent; the call after that opens a new stream.
//
// Cost per draw: one round trip and a decode of the rows into dst (no
// allocation once the stage's buffers have grown). Concurrency: like any
// Selector, Sample, Update, Features and Weights are called by one
// goroutine (the learner's); Priority, Evaluated and Stats from any.
func (c *Client) Method(ctx context.Context, local sampler.Method, priorSteps uint64) (sampler.Method, error) {
	if c.isClosed() {
		return sampler.Method{}, ErrClientClosed
	}
	if err := local.Validate(); err != nil {
		return sampler.Method{}, fmt.Errorf("remote: method: the local twin: %w", err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return sampler.Method{}, fmt.Errorf("remote: method %q: %w", local.Name, err)
	}
	if len(info.GetTables()) != 1 {
		return sampler.Method{}, fmt.Errorf("remote: method %q: the server has %d tables; a remote stage serves a one-table server", local.Name, len(info.GetTables()))
	}
	tab := info.GetTables()[0]
	if name, _, _ := strings.Cut(tab.GetMethod(), ":"); name != local.Name {
		return sampler.Method{}, fmt.Errorf("remote: method %q: the server's table runs %q: build the local twin from the server's configuration (Client.Config)", local.Name, tab.GetMethod())
	}
	if tab.GetFeatures() != (local.Features != nil) {
		return sampler.Method{}, fmt.Errorf("remote: method %q: the server's stage takes feature write-backs: %t, the local twin: %t", local.Name, tab.GetFeatures(), local.Features != nil)
	}
	if (tab.GetEpisodes() != nil) != (local.Episodes != nil) {
		return sampler.Method{}, fmt.Errorf("remote: method %q: the server's stage keeps episodes: %t, the local twin: %t", local.Name, tab.GetEpisodes() != nil, local.Episodes != nil)
	}
	s := &stage{
		c: c, ctx: ctx, table: tab.GetName(), local: local,
		steps: priorSteps, incarnation: info.GetIncarnation(),
		stats: tab.GetMethodStats(), statsAt: time.Now(),
	}
	m := sampler.Method{
		Name:       local.Name,
		Selector:   s,
		Normalizer: local.Normalizer,
		Loss:       local.Loss,
		Warnings:   local.Warnings,
	}
	if local.Weighter != nil {
		m.Weighter = s
	}
	if tab.GetFeatures() {
		m.Features = s
	}
	if tab.GetEvaluated() {
		m.Evaluated = s.evaluated
	}
	if local.Stats != nil {
		m.Stats = s.methodStats
	}
	if w := tab.GetEpisodes(); w != nil {
		cfg, err := referConfig(w)
		if err != nil {
			return sampler.Method{}, fmt.Errorf("remote: method %q: %w", local.Name, err)
		}
		if lv := local.Episodes.Config().Variant; cfg.Variant != lv {
			return sampler.Method{}, fmt.Errorf("remote: method %q: the server's episode stage runs variant %v, the local twin %v", local.Name, cfg.Variant, lv)
		}
		if tab.GetCapacity() < 1 || tab.GetCapacity() > 1<<31 {
			return sampler.Method{}, fmt.Errorf("remote: method %q: the server's table has capacity %d", local.Name, tab.GetCapacity())
		}
		s.ep = &episodes{s: s, buf: local.Episodes.Buffer(), cfg: cfg, slots: int(tab.GetCapacity())}
		m.Episodes = s.ep
	}
	return m, nil
}

// stage is the remote half of a Method: Selector, Weighter and
// FeatureUpdater over the Sample stream.
type stage struct {
	c     *Client
	ctx   context.Context
	table string
	local sampler.Method

	// The learner goroutine's state.
	stream      grpc.BidiStreamingClient[replayv1.SampleRequest, replayv1.SampleReply]
	cancel      context.CancelFunc // ends stream
	gen         uint64             // the client's connection the latest stream opened on, best effort (Client.connGen; kept after the stream breaks; a probe's own connGen covers a miss)
	nextID      uint64
	steps       uint64 // draws that succeeded, priorSteps included
	drawStep    uint64 // the latest batch's step (0: none)
	weights     []float64
	incarnation uint64 // the latest batch's (Info's before the first)
	keys        []uint64
	req         replayv1.SampleRequest
	ep          *episodes // the episode source (nil: the stage keeps none)
	openTries   int       // attempts to open the stream per call (0: streamOpenAttempts)

	// Pipelining (ClientOptions.Pipeline): the write-back sent and not
	// yet answered (pending.id 0: none; at most one), the counts of
	// answered write-backs that Update has not returned yet, and the
	// error of a pending write-back lost with its stream, which the next
	// call reports.
	pending pendingWriteBack
	owed    buffer.UpdateResult
	lost    error

	statsMu sync.Mutex
	stats   map[string]float64
	statsAt time.Time
}

var (
	_ sampler.Selector       = (*stage)(nil)
	_ sampler.Weighter       = (*stage)(nil)
	_ sampler.FeatureUpdater = (*stage)(nil)
)

// Sample draws a batch from the server's stage into dst.
func (s *stage) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	if rng == nil || dst == nil {
		return fmt.Errorf("remote: sample: %w: nil generator or batch", buffer.ErrNil)
	}
	seed := rng.Uint64()
	n := dst.Len()
	if n == 0 {
		return fmt.Errorf("remote: sample: %w: a batch of 0 rows", buffer.ErrBatchSize)
	}
	step := s.steps + 1
	s.nextID++
	draw := &replayv1.Draw{Table: s.table, Id: s.nextID, Batch: uint32(n), Seed: seed, Step: step}
	s.req.Kind = &replayv1.SampleRequest_Draw{Draw: draw}
	if err := s.takeLost(); err != nil {
		if s.ep != nil {
			s.ep.sampled(nil)
		}
		return fmt.Errorf("remote: draw for step %d: %w", step, err)
	}
	if s.ep != nil {
		return s.drawEpisodes(dst, draw)
	}
	reply, err := s.drawExchange(nil, nil)
	if err != nil {
		return fmt.Errorf("remote: draw for step %d: %w", step, err)
	}
	return s.batch(dst, draw, reply)
}

// drawExchange sends the draw in s.req (prepare and events as exchange's)
// and returns its reply. With a write-back pending (pipelining) the draw
// goes out right behind it on the same stream, the write-back's result
// is read first (the server answers in order, so it applied the
// write-back before it sampled) and then the draw's reply: one round
// trip for both. A failure that loses the pending write-back's result is
// part of the error returned.
func (s *stage) drawExchange(prepare func() error, events func(*replayv1.EpisodeEvents) (done bool, err error)) (*replayv1.SampleReply, error) {
	err := s.sendPrepared(&s.req, prepare)
	if err == nil {
		err = s.settle()
	}
	if err != nil {
		return nil, s.withLost(err)
	}
	reply, err := s.recv(s.c.opts.DrawTimeout, events)
	if err != nil {
		return nil, s.withLost(err)
	}
	return reply, nil
}

// drawEpisodes sends draw (in s.req) for a stage with an episode feed:
// the stream it goes out on is subscribed first, the events ahead of the
// Batch are reported to the observer as they come, and Sampled ends the
// draw (with no rows when it failed), as in process.
func (s *stage) drawEpisodes(dst *buffer.Batch, draw *replayv1.Draw) error {
	prepare := func() error { return s.ep.beforeDraw(draw.Id) }
	reply, err := s.drawExchange(prepare, s.ep.events)
	if err == nil && s.ep.inPart {
		err = s.broken(fmt.Errorf("the server's events for draw %d left an episode unfinished", draw.Id))
	}
	if err != nil {
		s.ep.sampled(nil)
		return fmt.Errorf("remote: draw for step %d: %w", draw.Step, err)
	}
	if err := s.batch(dst, draw, reply); err != nil {
		s.ep.sampled(nil)
		return err
	}
	s.ep.sampled(dst.Refs)
	return nil
}

// batch fills dst from the reply to draw and counts it.
func (s *stage) batch(dst *buffer.Batch, draw *replayv1.Draw, reply *replayv1.SampleReply) error {
	b := reply.GetBatch()
	if b == nil || b.GetId() != draw.Id {
		return s.broken(fmt.Errorf("remote: draw %d: the reply is %s", draw.Id, describe(reply)))
	}
	step, n := draw.Step, dst.Len()
	if err := s.fill(dst, b); err != nil {
		return fmt.Errorf("remote: draw for step %d: %w", step, err)
	}
	s.steps, s.drawStep, s.incarnation = step, step, b.GetIncarnation()
	s.weights = append(s.weights[:0], b.GetWeight()...)
	s.c.count(func(st *ClientStats) { st.Draws++; st.Rows += uint64(n) })
	return nil
}

// fill copies batch b's rows and metadata into dst (n rows).
func (s *stage) fill(dst *buffer.Batch, b *replayv1.Batch) error {
	n := dst.Len()
	if len(b.GetKeys()) != n || len(b.GetProb()) != n || (len(b.GetWeight()) != 0 && len(b.GetWeight()) != n) || b.GetData().GetRows() != uint32(n) {
		return fmt.Errorf("the server's batch has %d keys, %d probabilities, %d weights and %d rows for a draw of %d",
			len(b.GetKeys()), len(b.GetProb()), len(b.GetWeight()), b.GetData().GetRows(), n)
	}
	if err := DecodeTransitions(&dst.Transitions, batchLayout(dst, n), b.GetData()); err != nil {
		return err
	}
	dst.Refs = AppendRefs(dst.Refs[:0], b.GetKeys())
	dst.Prob = append(dst.Prob[:0], b.GetProb()...)
	dst.Size, dst.Total, dst.MinProb = int(b.GetSize()), b.GetTotal(), b.GetMinProb()
	return nil
}

// batchLayout is the table layout dst's columns (n rows, as NewBatch made
// them) spell out: what decoding into dst needs.
func batchLayout(dst *buffer.Batch, n int) buffer.Config {
	t := &dst.Transitions
	cfg := buffer.Config{
		ObsDim:     len(t.Obs) / n,
		Action:     buffer.Discrete,
		Episode:    len(t.EpisodeID) > 0,
		GlobalStep: len(t.GlobalStep) > 0,
		ActorID:    len(t.ActorID) > 0,
		StateHash:  len(t.StateHash) > 0,
	}
	if len(t.ActionVec) > 0 {
		cfg.Action, cfg.ActionDim = buffer.Continuous, len(t.ActionVec)/n
	}
	for i, f := range t.Floats {
		cfg.Floats = append(cfg.Floats, buffer.FloatColumn{Name: fmt.Sprint(i), Width: len(f) / n})
	}
	return cfg
}

// Weights copies the latest batch's weights from the server's stage into
// b.Weight (all 1 when the stage sent none). step must be the draw's step
// − 1, the learner step the weights were computed for.
func (s *stage) Weights(b *buffer.Batch, step int64) error {
	if s.drawStep == 0 {
		return errors.New("remote: weights: no batch drawn yet")
	}
	if step != int64(s.drawStep)-1 {
		return fmt.Errorf("remote: weights for step %d, but the server computed them at the draw for learner step %d, that is for step %d", step, s.drawStep, s.drawStep-1)
	}
	n := b.Len()
	if len(s.weights) != 0 && len(s.weights) != n {
		return fmt.Errorf("remote: weights: a batch of %d rows, the latest draw had %d", n, len(s.weights))
	}
	if cap(b.Weight) < n {
		b.Weight = make([]float64, n)
	}
	b.Weight = b.Weight[:n]
	if len(s.weights) == 0 {
		for i := range b.Weight {
			b.Weight[i] = 1
		}
		return nil
	}
	copy(b.Weight, s.weights)
	return nil
}

// Update writes the learner's |δ| back to the server's stage.
func (s *stage) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	if len(refs) != len(absTD) {
		return buffer.UpdateResult{}, fmt.Errorf("remote: update: %w: %d refs, %d errors", buffer.ErrShape, len(refs), len(absTD))
	}
	for i, d := range absTD {
		if math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
			return buffer.UpdateResult{}, fmt.Errorf("remote: update: %w: |δ| of row %d is %v", buffer.ErrPriority, i, d)
		}
	}
	return s.writeBack(&replayv1.WriteBack{AbsTd: absTD}, refs)
}

// UpdateFeatures writes Q and the targets back to the server's stage.
func (s *stage) UpdateFeatures(refs []buffer.Ref, q, target []float64) (buffer.UpdateResult, error) {
	if len(refs) != len(q) || len(refs) != len(target) {
		return buffer.UpdateResult{}, fmt.Errorf("remote: update features: %w: %d refs, %d Q values, %d targets", buffer.ErrShape, len(refs), len(q), len(target))
	}
	for i := range q {
		if math.IsNaN(q[i]) || math.IsInf(q[i], 0) || math.IsNaN(target[i]) || math.IsInf(target[i], 0) {
			return buffer.UpdateResult{}, fmt.Errorf("remote: update features: %w: row %d has Q %v, target %v", buffer.ErrNonFinite, i, q[i], target[i])
		}
	}
	return s.writeBack(&replayv1.WriteBack{Q: q, Target: target}, refs)
}

func (s *stage) writeBack(wb *replayv1.WriteBack, refs []buffer.Ref) (buffer.UpdateResult, error) {
	if err := s.takeLost(); err != nil {
		return buffer.UpdateResult{}, fmt.Errorf("remote: write-back: %w", err)
	}
	if s.c.opts.Pipeline {
		return s.writeBackPipelined(wb, refs)
	}
	s.nextID++
	s.keys = AppendKeys(s.keys[:0], refs)
	wb.Table, wb.Id, wb.Incarnation, wb.Keys = s.table, s.nextID, s.incarnation, s.keys
	s.req.Kind = &replayv1.SampleRequest_WriteBack{WriteBack: wb}
	reply, err := s.roundTrip(&s.req, s.c.opts.CallTimeout)
	if err != nil {
		return buffer.UpdateResult{}, fmt.Errorf("remote: write-back: %w", err)
	}
	res, err := s.written(reply, pendingWriteBack{id: wb.Id, n: len(refs)})
	if err != nil {
		return buffer.UpdateResult{}, fmt.Errorf("remote: %w", err)
	}
	return res, nil
}

// pendingWriteBack is a write-back sent whose result has not been read:
// its request id and rows.
type pendingWriteBack struct {
	id uint64
	n  int
}

// writeBackPipelined sends wb without waiting for its result (the next
// draw reads it) and returns the counts of the write-backs answered since
// the previous Update: the previous write-back's, read by the draw in
// between. A write-back still pending (two write-backs with no draw
// between) is answered first, so at most one is ever in flight.
func (s *stage) writeBackPipelined(wb *replayv1.WriteBack, refs []buffer.Ref) (buffer.UpdateResult, error) {
	if err := s.settle(); err != nil {
		return buffer.UpdateResult{}, fmt.Errorf("remote: write-back: %w", s.withLost(err))
	}
	s.nextID++
	s.keys = AppendKeys(s.keys[:0], refs)
	wb.Table, wb.Id, wb.Incarnation, wb.Keys = s.table, s.nextID, s.incarnation, s.keys
	s.req.Kind = &replayv1.SampleRequest_WriteBack{WriteBack: wb}
	if err := s.send(&s.req); err != nil {
		// Sent or not, its fate is unknown: like an unpipelined
		// write-back whose reply was lost, it is an error here (and not
		// counted as lost: it never became pending).
		return buffer.UpdateResult{}, fmt.Errorf("remote: write-back: %w", err)
	}
	s.pending = pendingWriteBack{id: wb.Id, n: len(refs)}
	res := s.owed
	s.owed = buffer.UpdateResult{}
	return res, nil
}

// settle reads the pending write-back's result (if one is pending),
// within CallTimeout, and adds its counts to owed. A failure breaks the
// stream (the write-back then counts as lost).
func (s *stage) settle() error {
	if s.pending.id == 0 {
		return nil
	}
	reply, err := s.recv(s.c.opts.CallTimeout, nil)
	if err != nil {
		return err // recv broke the stream: the pending write-back is lost
	}
	p := s.pending
	s.pending = pendingWriteBack{}
	res, err := s.written(reply, p)
	if err != nil {
		return err
	}
	s.owed.Applied += res.Applied
	s.owed.Stale += res.Stale
	return nil
}

// written checks reply as the result of write-back p and counts it.
func (s *stage) written(reply *replayv1.SampleReply, p pendingWriteBack) (buffer.UpdateResult, error) {
	r := reply.GetWritten()
	if r == nil || r.GetId() != p.id {
		return buffer.UpdateResult{}, s.broken(fmt.Errorf("write-back %d: the reply is %s", p.id, describe(reply)))
	}
	res := buffer.UpdateResult{Applied: int(r.GetApplied()), Stale: int(r.GetStale() + r.GetWrongIncarnation())}
	if res.Applied+res.Stale != p.n {
		return buffer.UpdateResult{}, fmt.Errorf("write-back %d: the server counts %d applied and %d dropped of %d", p.id, res.Applied, res.Stale, p.n)
	}
	s.c.count(func(st *ClientStats) {
		st.WriteBacks++
		st.Applied += uint64(r.GetApplied())
		st.Stale += uint64(res.Stale)
		st.WrongIncarnation += uint64(r.GetWrongIncarnation())
	})
	return res, nil
}

// takeLost returns (once) the error of a pending write-back lost with
// its stream that no call has reported yet.
func (s *stage) takeLost() error {
	err := s.lost
	s.lost = nil
	return err
}

// withLost is err with the lost write-back's error (if one was lost and
// not reported yet) ahead of it.
func (s *stage) withLost(err error) error {
	l := s.takeLost()
	switch {
	case l == nil:
		return err
	case errors.Is(l, err): // the break that lost it
		return l
	}
	return fmt.Errorf("%w; then: %w", l, err)
}

// Settle ends pipelining's lag (ClientOptions.Pipeline): it waits for the
// result of the write-back still pending (at most one; none when
// pipelining is off) and returns the counts that Update has not returned
// yet, so that the sum of every Update's and Settle's counts is exact. It
// returns the error of a write-back lost with its stream that no call has
// reported. Cost: at most one wait for a reply, within CallTimeout.
// Concurrency: the learner's goroutine, once the learner stopped calling
// the stage (a Sample after it works as before).
func (s *stage) Settle() (buffer.UpdateResult, error) {
	err := s.settle()
	res := s.owed
	s.owed = buffer.UpdateResult{}
	if err != nil {
		return res, fmt.Errorf("remote: settle: %w", s.withLost(err))
	}
	if err := s.takeLost(); err != nil {
		return res, fmt.Errorf("remote: settle: %w", err)
	}
	return res, nil
}

// Priority is the local twin's.
func (s *stage) Priority(absTD float64) float64 { return s.local.Selector.Priority(absTD) }

// String is the local twin's stage name.
func (s *stage) String() string { return s.local.Selector.String() }

// evaluated hands the server's stage an evaluation's mean return.
func (s *stage) evaluated(meanReturn float64) error {
	if math.IsNaN(meanReturn) || math.IsInf(meanReturn, 0) {
		return fmt.Errorf("remote: evaluated: %w: mean return %v", buffer.ErrNonFinite, meanReturn)
	}
	ctx, cancel := s.c.callCtx(s.ctx)
	defer cancel()
	if _, err := s.c.replay.Evaluated(ctx, &replayv1.EvaluatedRequest{Table: s.table, MeanReturn: meanReturn}); err != nil {
		return fmt.Errorf("remote: evaluated: %w", err)
	}
	return nil
}

// methodStats is the server's method statistics, at most statsRefresh old
// when the server answers within statsTimeout (the cached ones otherwise).
func (s *stage) methodStats() map[string]float64 {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if time.Since(s.statsAt) >= statsRefresh {
		ctx, cancel := context.WithTimeout(s.ctx, statsTimeout)
		info, err := s.c.Info(ctx)
		cancel()
		if err == nil && len(info.GetTables()) == 1 {
			s.stats = info.GetTables()[0].GetMethodStats()
		}
		s.statsAt = time.Now()
	}
	out := make(map[string]float64, len(s.stats))
	for k, v := range s.stats {
		out[k] = v
	}
	return out
}

// roundTrip sends req on the Sample stream (opening it if needed) and
// returns the next reply, waiting at most timeout (0: no limit). A stream
// found ended before req went out (Send reports io.EOF: req was not sent)
// is re-opened and req sent again, within open's attempts. Any failure
// after req went out leaves the stream closed for the next call to
// re-open, and is returned, never retried: the server may have acted on
// req.
func (s *stage) roundTrip(req *replayv1.SampleRequest, timeout time.Duration) (*replayv1.SampleReply, error) {
	return s.exchange(req, timeout, nil, nil)
}

// exchange is roundTrip for a request whose answer may be preceded by
// EpisodeEvents messages (a draw on a stream that observes the episode
// feed, an ObserveEpisodes): each is handed to events, within the same
// timeout, until events reports done or another reply comes, which is
// returned. An events error (a malformed message) breaks the stream.
// prepare, if not nil, runs on every stream req is about to go out on
// (the first, and one re-opened because the stream had ended): a draw
// subscribes a new stream to the episode feed there before it is sent.
func (s *stage) exchange(req *replayv1.SampleRequest, timeout time.Duration, prepare func() error,
	events func(*replayv1.EpisodeEvents) (done bool, err error)) (*replayv1.SampleReply, error) {
	if err := s.sendPrepared(req, prepare); err != nil {
		return nil, err
	}
	return s.recv(timeout, events)
}

// send is exchange's first half: req sent on the stream (opened, or
// re-opened once found ended before req went out). A failure leaves the
// stream closed.
func (s *stage) send(req *replayv1.SampleRequest) error { return s.sendPrepared(req, nil) }

// sendPrepared is send with prepare, when not nil, run on the stream
// before req goes out on it (each time it is opened or re-opened).
func (s *stage) sendPrepared(req *replayv1.SampleRequest, prepare func() error) error {
	var err error
	for tries := 0; ; tries++ {
		if err := s.open(); err != nil {
			return err
		}
		if prepare != nil {
			if err := prepare(); err != nil {
				return err
			}
		}
		if err = s.stream.Send(req); err != io.EOF || tries == s.attempts() {
			break
		}
		// A write-back pending on the ended stream: its result may have
		// come before the end (then req is re-sent on a new stream);
		// otherwise it is lost, and that is this call's error.
		if err := s.settle(); err != nil {
			return err
		}
		_, rerr := s.stream.Recv() // why the stream had ended
		s.broken(fmt.Errorf("the stream had ended: %w", rerr))
	}
	if err == io.EOF {
		if err := s.settle(); err != nil {
			return err
		}
		if _, err = s.stream.Recv(); err == nil {
			err = errors.New("a reply on a stream that had ended")
		}
	}
	if err != nil {
		return s.broken(err)
	}
	return nil
}

// recv is exchange's second half: the next reply (after the episode
// events handed to events, when not nil), waiting at most timeout (0: no
// limit). A failure leaves the stream closed.
func (s *stage) recv(timeout time.Duration, events func(*replayv1.EpisodeEvents) (done bool, err error)) (*replayv1.SampleReply, error) {
	var timer *time.Timer
	var timedOut atomic.Bool
	if timeout > 0 {
		cancel := s.cancel
		timer = time.AfterFunc(timeout, func() { timedOut.Store(true); cancel() })
	}
	reply, err := s.stream.Recv()
	for err == nil && events != nil && reply.GetEpisodes() != nil {
		done, herr := events(reply.GetEpisodes())
		if herr != nil {
			err = fmt.Errorf("the server's episode events: %w", herr)
		} else if !done {
			reply, err = s.stream.Recv()
			continue
		}
		break
	}
	if timer != nil && !timer.Stop() && timedOut.Load() {
		err = fmt.Errorf("no reply within %v: %w", timeout, context.DeadlineExceeded)
	}
	if err != nil {
		if err == io.EOF {
			err = errors.New("the server ended the stream")
		}
		return nil, s.broken(err)
	}
	return reply, nil
}

// attempts is how many times a call tries to open the stream.
func (s *stage) attempts() int {
	if s.openTries > 0 {
		return s.openTries
	}
	return streamOpenAttempts
}

// broken closes the stream (the next call re-opens it) and returns err.
func (s *stage) broken(err error) error {
	if s.cancel != nil {
		s.cancel()
	}
	s.stream, s.cancel = nil, nil
	s.c.count(func(st *ClientStats) { st.StreamErrors++ })
	if p := s.pending; p.id != 0 {
		// Its result went with the stream: the server may or may not
		// have applied it; never re-sent, reported by the next call.
		s.pending = pendingWriteBack{}
		s.c.count(func(st *ClientStats) { st.WriteBacksLost++ })
		lost := fmt.Errorf("write-back %d (%d rows): its result was lost with the stream (the server may or may not have applied it): %w", p.id, p.n, err)
		if s.lost == nil {
			s.lost = lost
		}
	}
	return err
}

// open opens the Sample stream unless it is open, trying
// streamOpenAttempts times with backoff.
func (s *stage) open() error {
	if s.stream != nil {
		return nil
	}
	if s.c.isClosed() {
		return ErrClientClosed
	}
	backoff := streamBackoff
	var err error
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithCancel(s.ctx)
		var st grpc.BidiStreamingClient[replayv1.SampleRequest, replayv1.SampleReply]
		if st, err = s.c.replay.Sample(ctx); err == nil {
			s.stream, s.cancel = st, cancel
			s.gen, _ = s.c.connGen() // a stream opens on a ready connection
			s.c.count(func(st *ClientStats) { st.StreamOpens++ })
			return nil
		}
		cancel()
		if attempt >= s.attempts() || s.ctx.Err() != nil {
			return fmt.Errorf("open the sample stream (%d attempts): %w", attempt, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-s.ctx.Done():
			t.Stop()
		case <-t.C:
		}
		backoff *= 2
	}
}

// describe names a reply's kind for an error.
func describe(r *replayv1.SampleReply) string {
	switch k := r.GetKind().(type) {
	case *replayv1.SampleReply_Batch:
		return fmt.Sprintf("batch %d", k.Batch.GetId())
	case *replayv1.SampleReply_Written:
		return fmt.Sprintf("write-back result %d", k.Written.GetId())
	case *replayv1.SampleReply_Episodes:
		return fmt.Sprintf("episode events for %d", k.Episodes.GetId())
	}
	return "empty"
}

// Settle ends a pipelined remote stage's lag (ClientOptions.Pipeline):
// for a Method that Client.Method made, it reads the result of the
// write-back still in flight and returns the write-back counts its
// Update and UpdateFeatures have not returned yet, so that their sum
// with every earlier Update's is exact; with it, the error of a
// write-back lost with its stream that no call has reported yet. For any
// other Method (in process, sharded, or a stage that does not pipeline
// and so owes nothing) it returns zero counts and nil. Call it on the
// learner's goroutine once the learner stopped (the stage's context
// still live). Cost: at most one wait for a reply, within CallTimeout.
func Settle(m sampler.Method) (buffer.UpdateResult, error) {
	s, ok := m.Selector.(*stage)
	if !ok {
		return buffer.UpdateResult{}, nil
	}
	return s.Settle()
}
