package loadtest

// The parts of a fleet load test (`apex loadtest -shards=N`): an actor
// host of many simulated actors inserting over the shards, and a sampling
// learner drawing from them. `apex loadtest` runs each in its own process
// (a hidden role of the same binary) next to N apex replay processes; the
// parts report their counters as snapshots, which the orchestrator turns
// into rates, phases and the report.
//
// Insert path: an actor host's simulated actors share one
// remote.ShardedWriter, as apex actor -replay=a,b does. Sample path: the
// learner draws through remote.ShardedMethod (exact cross-shard sampling,
// or one shard per batch), as apex learner -replay=a,b does, and writes
// random priorities back; per shard, a probe stream of one-row draws
// checks that a restarted shard refuses write-backs of its earlier
// incarnation.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/meter"
	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/sampler"
	"google.golang.org/grpc"
)

// ActorsConfig is one actor host's share of a fleet load test.
type ActorsConfig struct {
	// Table names the shards' table (empty: their only table).
	Table string
	// Actors is the simulated actors on this host (1..MaxStreams); First
	// the fleet-wide index of its first one, Total the fleet's actors
	// (pacing staggers the actors over the fleet).
	Actors, First, Total int
	// InsertBatch is the transitions per batch (1..MaxBatch); Window the
	// batches each shard's writer keeps unacknowledged (1..MaxWindow).
	InsertBatch, Window int
	// InsertRate paces this host's actors to this many transitions/s in
	// all (0: as fast as the writers take them).
	InsertRate float64
	// Seed seeds the synthetic transitions; Nonce makes the writer ids
	// unique to this run.
	Seed, Nonce uint64
}

func (c ActorsConfig) validate(shards int) error {
	switch {
	case shards < 1 || shards > remote.MaxShards:
		return fmt.Errorf("loadtest: %d shards, want 1..%d", shards, remote.MaxShards)
	case c.Actors < 1 || c.Actors > MaxStreams:
		return fmt.Errorf("loadtest: %d actors, want 1..%d", c.Actors, MaxStreams)
	case c.First < 0 || c.Total < c.First+c.Actors:
		return fmt.Errorf("loadtest: actors %d..%d of %d", c.First, c.First+c.Actors, c.Total)
	case c.InsertBatch < 1 || c.InsertBatch > MaxBatch:
		return fmt.Errorf("loadtest: insert batch %d, want 1..%d", c.InsertBatch, MaxBatch)
	case c.Window < 1 || c.Window > MaxWindow:
		return fmt.Errorf("loadtest: window %d, want 1..%d", c.Window, MaxWindow)
	case !(c.InsertRate >= 0):
		return fmt.Errorf("loadtest: insert rate %v, want >= 0", c.InsertRate)
	}
	return nil
}

// ShardInserts are one shard's insert counters on one host.
type ShardInserts struct {
	// Writer is the host's writer id, the same on every shard: the shard's
	// writer table (Info's WriterPage) counts what it stored under it,
	// against AckedItems and AckedBatches.
	Writer       string `json:"writer,omitempty"`
	AckedItems   uint64 `json:"acked_items"`
	AckedBatches uint64 `json:"acked_batches"`
	LostItems    uint64 `json:"lost_items"`
	Resent       uint64 `json:"resent"`
	Duplicates   uint64 `json:"duplicates"`
	Reconnects   uint64 `json:"reconnects"`
	Incarnations uint64 `json:"incarnations"`
	Pending      int    `json:"pending"`
	// Moved counts batches taken off the shard when it died, Adopted
	// those it took over from dead shards; Deaths and Rejoins its
	// alive→dead and dead→alive transitions.
	Moved   uint64 `json:"moved"`
	Adopted uint64 `json:"adopted"`
	Deaths  uint64 `json:"deaths"`
	Rejoins uint64 `json:"rejoins"`
}

// Actors is a running actor host: Actors goroutines, each a simulated
// actor inserting paced batches through the host's one
// remote.ShardedWriter over every shard.
type Actors struct {
	cfg   ActorsConfig
	id    string // the writer id
	w     *remote.ShardedWriter
	stop  chan struct{}
	wg    sync.WaitGroup
	errMu sync.Mutex
	err   error
}

// StartActors starts an actor host over clients (one per shard, in the
// order of remote.ResolveShards): one remote.ShardedWriter that the
// simulated actors share (batches placed by rendezvous hashing, a dead
// shard's batches moved to the live ones, its probes every 50-200 ms).
// Stop ends it. Cost: one goroutine per simulated actor plus the writer's,
// 16 prepared batches shared read-only, and at most shards × Window
// batches held by the writer. Its methods are safe for concurrent use
// (Stop once).
func StartActors(clients []*remote.Client, cfg ActorsConfig) (*Actors, error) {
	if err := cfg.validate(len(clients)); err != nil {
		return nil, err
	}
	batches, err := rawBatches(cfg.InsertBatch, 16, cfg.Seed+uint64(cfg.First))
	if err != nil {
		return nil, err
	}
	id := fmt.Sprintf("loadtest-%016x-a%d", cfg.Nonce, cfg.First)
	w, err := remote.NewShardedWriter(clients, id, remote.ShardedWriterOptions{
		WriterOptions: remote.WriterOptions{Layout: Layout, Table: cfg.Table, Window: cfg.Window,
			MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}})
	if err != nil {
		return nil, err
	}
	a := &Actors{cfg: cfg, id: id, w: w, stop: make(chan struct{})}
	var every time.Duration
	if cfg.InsertRate > 0 {
		every = time.Duration(float64(time.Second) * float64(cfg.Actors*cfg.InsertBatch) / cfg.InsertRate)
	}
	start := time.Now()
	for i := range cfg.Actors {
		g := cfg.First + i
		a.wg.Go(func() {
			var pace *time.Timer
			due := start
			if every > 0 {
				due = start.Add(every * time.Duration(g) / time.Duration(cfg.Total))
				pace = time.NewTimer(0)
				defer pace.Stop()
			}
			for k := 0; ; k++ {
				if pace != nil {
					if d := time.Until(due); d > 0 {
						pace.Reset(d)
						select {
						case <-pace.C:
						case <-a.stop:
							return
						}
					} else if d < -time.Second {
						due = time.Now() // behind by over a second (every shard was down): no burst to catch up
					}
					due = due.Add(every)
				}
				select {
				case <-a.stop:
					return
				default:
				}
				if err := w.Insert(batches[(g+k)%len(batches)]); err != nil {
					select {
					case <-a.stop: // Stop's Close ended the wait
					default:
						a.errMu.Lock()
						a.err = errors.Join(a.err, fmt.Errorf("loadtest: actor %d: %w", g, err))
						a.errMu.Unlock()
					}
					return
				}
			}
		})
	}
	return a, nil
}

// Stats snapshots the host's per-shard insert counters (in the order of
// the clients). Safe for concurrent use.
func (a *Actors) Stats() []ShardInserts {
	st := a.w.Stats()
	out := make([]ShardInserts, len(st.Shards))
	for i, s := range st.Shards {
		out[i] = ShardInserts{Writer: a.id, AckedItems: s.AckedItems, AckedBatches: s.Acked, LostItems: s.LostItems, Resent: s.Resent,
			Duplicates: s.Duplicates, Reconnects: s.Reconnects, Incarnations: s.Incarnations, Pending: s.Pending,
			Moved: s.Moved, Adopted: s.Adopted, Deaths: s.Deaths, Rejoins: s.Rejoins}
	}
	return out
}

// Stop stops the actors, waits up to ctx for the writer to have every
// batch acknowledged (what is not is counted lost) and closes it. It
// returns the first failure of an actor or the writer. Call once.
func (a *Actors) Stop(ctx context.Context) error {
	close(a.stop)
	cerr := a.w.Close(ctx) // also ends an Insert waiting for window space
	a.wg.Wait()
	a.errMu.Lock()
	defer a.errMu.Unlock()
	if cerr != nil {
		cerr = fmt.Errorf("loadtest: the sharded writer: %w", cerr)
	}
	return errors.Join(a.err, cerr)
}

// rawBatches makes n distinct batches of rows random CartPole transitions
// with random priorities in (0, 1], for a remote.Writer to encode.
func rawBatches(rows, n int, seed uint64) ([]*buffer.Transitions, error) {
	rng := rand.New(rand.NewPCG(seed, 0x10ad))
	out := make([]*buffer.Transitions, n)
	for i := range out {
		t := &buffer.Transitions{}
		for range rows {
			for range ObsDim {
				t.Obs = append(t.Obs, float32(rng.NormFloat64()))
				t.NextObs = append(t.NextObs, float32(rng.NormFloat64()))
			}
			t.Action = append(t.Action, int32(rng.IntN(2)))
			t.Reward = append(t.Reward, 1)
			d := float32(0.99)
			if rng.IntN(50) == 0 {
				d = 0
			}
			t.Discount = append(t.Discount, d)
			t.Priority = append(t.Priority, 1-rng.Float64())
		}
		out[i] = t
	}
	return out, nil
}

// LearnerConfig is the fleet load test's sampling learner.
type LearnerConfig struct {
	// SampleRate paces the draws to this many rows/s (0: one draw after
	// another, as fast as the shards answer).
	SampleRate float64
	// ProbeEvery is the period of each shard's probe draws (one row, on a
	// stream of their own; 250 ms when 0): after a shard restarts, the
	// probe writes the previous incarnation's row back, which the shard
	// must not apply.
	ProbeEvery time.Duration
	Table      string
	Seed       uint64
}

// ShardSamples are the learner's view of one shard.
type ShardSamples struct {
	// Rows counts the rows the sharded method drew from the shard;
	// Dropped the write-back values it dropped for the shard (down, or
	// restarted since the draw); Downs and Rejoins its transitions; Up
	// whether it is in the masses now; Incarnation its latest.
	Rows        uint64 `json:"rows"`
	Dropped     uint64 `json:"dropped"`
	Downs       uint64 `json:"downs"`
	Rejoins     uint64 `json:"rejoins"`
	Up          bool   `json:"up"`
	Incarnation uint64 `json:"incarnation"`
	// Probes counts write-backs of a row drawn from an earlier
	// incarnation, sent on purpose by the probe stream after the shard
	// restarted; StaleApplied the values of them the shard applied (must
	// be 0: a stale write applied), WrongIncarnation those it refused.
	Probes           uint64 `json:"probes"`
	StaleApplied     uint64 `json:"stale_applied"`
	WrongIncarnation uint64 `json:"wrong_incarnation"`
	ProbeReconnects  uint64 `json:"probe_reconnects"`
	LastError        string `json:"last_error,omitempty"`
}

// LearnerTotals are the sharded method's counters over every shard.
type LearnerTotals struct {
	// Draws and Rows are the batches and rows drawn; Applied and Stale
	// the write-back values the shards applied and dropped (Stale
	// includes Dropped: values the learner dropped unsent); Replans the
	// batches planned again without a shard that failed mid-draw;
	// Errors the draws that failed; Prefetched the draws served from a
	// draw sent right after the previous write-back
	// (remote.ShardOptions.Prefetch: their round trip is then only the
	// receipt of a draw already sent).
	Draws      uint64 `json:"draws"`
	Rows       uint64 `json:"rows"`
	Applied    uint64 `json:"applied"`
	Stale      uint64 `json:"stale"`
	Dropped    uint64 `json:"dropped"`
	Replans    uint64 `json:"replans"`
	Errors     uint64 `json:"errors"`
	Prefetched uint64 `json:"prefetched"`
	// LastError is the latest failed draw's error.
	LastError string `json:"last_error,omitempty"`
}

// RTT is a phase's draw round trips.
type RTT struct {
	Count uint64  `json:"count"`
	P50US float64 `json:"p50_us"`
	P90US float64 `json:"p90_us"`
	P99US float64 `json:"p99_us"`
	MaxUS float64 `json:"max_us"`
}

// Learner is a running fleet learner: one goroutine drawing batches
// through a sharded method (remote.ShardedMethod), weighting them and
// writing random priorities back, as a learner step would around its
// gradient; and per shard a probe stream.
type Learner struct {
	cfg      LearnerConfig
	m        sampler.Method
	batch    *buffer.Batch
	counters *remote.ShardCounters
	ctx      context.Context
	cancel   context.CancelFunc
	stop     chan struct{}
	wg       sync.WaitGroup
	shards   []*learnerShard

	every time.Duration

	totMu  sync.Mutex
	errs   uint64
	lastEr string

	histMu sync.Mutex
	phase  string
	hists  map[string]*meter.Histogram // by phase, and "measured": every phase but "warmup"
}

type learnerShard struct {
	mu sync.Mutex
	st ShardSamples
	// last is the newest probe row (its key and incarnation), written
	// back after a reconnect to another incarnation.
	lastKeys []uint64
	lastInc  uint64
}

// StartLearner starts the learner: m is the sharded method (its counters
// in counters) and batch its batch (the rows per draw); probeConns are
// one connection per shard, in the order of m's clients, for the probe
// streams. Its round trips count in phase "warmup" until Phase names
// another. Stop ends it. Cost: one drawing goroutine, and two per shard
// for the probe streams (each one row every ProbeEvery); the round-trip
// histograms are fixed-size, one per phase. Its methods are safe for
// concurrent use (Stop once).
func StartLearner(m sampler.Method, batch *buffer.Batch, counters *remote.ShardCounters, probeConns []*grpc.ClientConn, cfg LearnerConfig) (*Learner, error) {
	switch {
	case len(probeConns) < 1 || len(probeConns) > remote.MaxShards:
		return nil, fmt.Errorf("loadtest: %d shards, want 1..%d", len(probeConns), remote.MaxShards)
	case m.Selector == nil || batch.Len() < 1 || counters == nil:
		return nil, errors.New("loadtest: the learner needs a method, a batch of at least one row and the method's counters")
	case !(cfg.SampleRate >= 0):
		return nil, fmt.Errorf("loadtest: sample rate %v, want >= 0", cfg.SampleRate)
	case cfg.ProbeEvery < 0:
		return nil, fmt.Errorf("loadtest: probe period %v, want >= 0", cfg.ProbeEvery)
	}
	if cfg.ProbeEvery == 0 {
		cfg.ProbeEvery = 250 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Learner{cfg: cfg, m: m, batch: batch, counters: counters, ctx: ctx, cancel: cancel, stop: make(chan struct{}),
		phase: "warmup", hists: map[string]*meter.Histogram{}}
	if cfg.SampleRate > 0 {
		l.every = time.Duration(float64(time.Second) * float64(batch.Len()) / cfg.SampleRate)
	}
	for i, c := range probeConns {
		s := &learnerShard{}
		l.shards = append(l.shards, s)
		client := replayv1.NewReplayClient(c)
		l.wg.Go(func() { l.runProbe(client, s, i) })
	}
	l.wg.Go(l.run)
	return l, nil
}

// run is the learner's loop: pace, draw (timed), weigh, write back.
func (l *Learner) run() {
	rng := rand.New(rand.NewPCG(l.cfg.Seed, 0x1ea7))
	n := l.batch.Len()
	prios := make([]float64, 4*n)
	for i := range prios {
		prios[i] = rng.ExpFloat64()
	}
	due := time.Now()
	var pace *time.Timer
	if l.every > 0 {
		pace = time.NewTimer(0)
		defer pace.Stop()
	}
	for step := int64(1); !l.stopped(); {
		if pace != nil {
			if d := time.Until(due); d > 0 {
				pace.Reset(d)
				select {
				case <-pace.C:
				case <-l.stop:
					return
				}
			} else if d < -time.Second {
				due = time.Now() // behind by over a second: no burst to catch up
			}
			due = due.Add(l.every)
		}
		t := time.Now()
		err := l.m.Selector.Sample(rng, l.batch)
		if err == nil {
			l.record(time.Since(t))
			if l.m.Weighter != nil {
				err = l.m.Weighter.Weights(l.batch, step)
			}
		}
		if err == nil {
			off := rng.IntN(len(prios) - n + 1)
			_, err = l.m.Selector.Update(l.batch.Refs, prios[off:off+n])
		}
		if err != nil {
			l.totMu.Lock()
			l.errs++
			l.lastEr = err.Error()
			l.totMu.Unlock()
			select { // a failed draw (every shard down): try again shortly
			case <-l.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		step++
	}
}

// Phase starts recording round trips under name (a later call with the
// same name goes on adding to it). O(1); safe for concurrent use.
func (l *Learner) Phase(name string) {
	l.histMu.Lock()
	defer l.histMu.Unlock()
	l.phase = name
}

func (l *Learner) record(d time.Duration) {
	l.histMu.Lock()
	defer l.histMu.Unlock()
	h := l.hists[l.phase]
	if h == nil {
		h = &meter.Histogram{}
		l.hists[l.phase] = h
	}
	h.Record(d)
	if l.phase != "warmup" {
		m := l.hists["measured"]
		if m == nil {
			m = &meter.Histogram{}
			l.hists["measured"] = m
		}
		m.Record(d)
	}
}

// RTTs returns each phase's round trips so far, by phase name. O(phases ×
// histogram size); safe for concurrent use.
func (l *Learner) RTTs() map[string]RTT {
	l.histMu.Lock()
	defer l.histMu.Unlock()
	out := map[string]RTT{}
	for name, h := range l.hists {
		out[name] = RTT{Count: h.Count(), P50US: us(h.Quantile(0.5)), P90US: us(h.Quantile(0.9)), P99US: us(h.Quantile(0.99)), MaxUS: us(h.Max())}
	}
	return out
}

// Stats snapshots the per-shard view and the totals. Safe for
// concurrent use.
func (l *Learner) Stats() ([]ShardSamples, LearnerTotals) {
	cs := l.counters.Snapshot()
	out := make([]ShardSamples, len(l.shards))
	for i, s := range l.shards {
		s.mu.Lock()
		out[i] = s.st
		s.mu.Unlock()
		if i < len(cs.Shards) {
			c := cs.Shards[i]
			out[i].Rows, out[i].Dropped, out[i].Downs, out[i].Rejoins, out[i].Up, out[i].Incarnation = c.Rows, c.Dropped, c.Downs, c.Rejoins, c.Up, c.Incarnation
		}
	}
	t := LearnerTotals{Draws: cs.Draws, Rows: cs.Rows, Applied: cs.Applied, Stale: cs.Stale, Dropped: cs.Dropped, Replans: cs.Replans, Prefetched: cs.Prefetched}
	l.totMu.Lock()
	t.Errors, t.LastError = l.errs, l.lastEr
	l.totMu.Unlock()
	return out, t
}

// Stop ends the drawing loop (after its current draw, which the sharded
// method's deadline bounds) and the probe streams (cancelled after grace
// when a shard does not answer) and waits for them. Call once; the
// caller then ends the sharded method's context.
func (l *Learner) Stop(grace time.Duration) {
	close(l.stop)
	t := time.AfterFunc(grace, l.cancel)
	l.wg.Wait()
	t.Stop()
	l.cancel()
}

func (l *Learner) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// runProbe keeps shard i's probe stream open until Stop, re-opening it
// 100 ms after a failure.
func (l *Learner) runProbe(client replayv1.ReplayClient, s *learnerShard, i int) {
	rng := rand.New(rand.NewPCG(l.cfg.Seed, uint64(i)))
	for first := true; !l.stopped(); first = false {
		if !first {
			s.mu.Lock()
			s.st.ProbeReconnects++
			s.mu.Unlock()
		}
		if err := l.probe(client, s, rng); err != nil && !l.stopped() {
			s.mu.Lock()
			s.st.LastError = err.Error()
			s.mu.Unlock()
			select {
			case <-l.stop:
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// probe runs one probe stream: a one-row draw every ProbeEvery, its key
// and incarnation remembered; when a draw comes from another incarnation
// than the one before, the previous incarnation's row is written back
// once (the shard must refuse it: wrong incarnation).
func (l *Learner) probe(client replayv1.ReplayClient, s *learnerShard, rng *rand.Rand) error {
	ctx, cancel := context.WithCancel(l.ctx)
	defer cancel()
	st, err := client.Sample(ctx)
	if err != nil {
		return err
	}
	got := make(chan answer, 4)
	var recv sync.WaitGroup
	defer recv.Wait()
	defer cancel()
	recv.Go(func() {
		for {
			rep, err := st.Recv()
			if err != nil {
				select {
				case got <- answer{err: err}:
				case <-ctx.Done():
				}
				return
			}
			switch m := rep.GetKind().(type) {
			case *replayv1.SampleReply_Batch:
				select {
				case got <- answer{b: m.Batch}:
				case <-ctx.Done():
					return
				}
			case *replayv1.SampleReply_Written:
				w := m.Written
				s.mu.Lock()
				s.st.StaleApplied += uint64(w.GetApplied())
				s.st.WrongIncarnation += uint64(w.GetWrongIncarnation())
				s.mu.Unlock()
			}
		}
	})
	tick := time.NewTicker(l.cfg.ProbeEvery)
	defer tick.Stop()
	draw := &replayv1.Draw{Table: l.cfg.Table, Batch: 1}
	for id := uint64(1); ; id++ {
		draw.Id, draw.Seed, draw.Step = id, rng.Uint64(), id
		if err := st.Send(&replayv1.SampleRequest{Kind: &replayv1.SampleRequest_Draw{Draw: draw}}); err != nil {
			return err
		}
		var a answer
		select {
		case a = <-got:
		case <-l.stop:
			return closeStream(ctx, st, got, errStopped)
		}
		if a.err != nil {
			return a.err
		}
		b := a.b
		s.mu.Lock()
		stale := s.lastInc != 0 && s.lastInc != b.GetIncarnation()
		oldKeys, oldInc := s.lastKeys, s.lastInc
		s.lastKeys, s.lastInc = append(s.lastKeys[:0:0], b.GetKeys()...), b.GetIncarnation()
		if stale {
			s.st.Probes++
		}
		s.mu.Unlock()
		if stale {
			wb := &replayv1.WriteBack{Table: l.cfg.Table, Id: probeBase + id, Incarnation: oldInc, Keys: oldKeys, AbsTd: make([]float64, len(oldKeys))}
			for i := range wb.AbsTd {
				wb.AbsTd[i] = 1
			}
			if err := st.Send(&replayv1.SampleRequest{Kind: &replayv1.SampleRequest_WriteBack{WriteBack: wb}}); err != nil {
				return err
			}
		}
		select {
		case <-tick.C:
		case <-l.stop:
			return closeStream(ctx, st, got, errStopped)
		}
	}
}

var errStopped = errors.New("loadtest: stopped")

// probeBase is added to the probe write-backs' ids.
const probeBase = uint64(1) << 63

// answer is a stream's next batch, or the error that ended it.
type answer struct {
	b   *replayv1.Batch
	err error
}

// closeStream ends the sending side after a stop (why is errStopped; any
// other error is returned as is) and waits for the receiver to see the
// stream end, so the shard answers the write-backs sent; Stop's grace
// cancels a shard that does not answer.
func closeStream(ctx context.Context, st grpc.BidiStreamingClient[replayv1.SampleRequest, replayv1.SampleReply], got <-chan answer, why error) error {
	if !errors.Is(why, errStopped) {
		return why
	}
	if err := st.CloseSend(); err != nil {
		return nil
	}
	for {
		select {
		case a := <-got:
			if a.err != nil {
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}
