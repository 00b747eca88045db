// Package loadtest drives one apex replay server (the Replay service of
// api/replay/v1) over gRPC and measures it: the harness behind
// `apex loadtest`. Its fleet parts (StartActors, StartLearner; fleet.go)
// are the actor hosts and the learner of `apex loadtest -shards=N`, which
// runs each in a process of its own against N servers.
//
// The load is Config.Streams simulated actors, each one Insert stream
// sending batches of Config.InsertBatch synthetic CartPole transitions
// (44-byte rows: 4+4 float32 observations, an int32 action, float32 reward
// and discount; no flags column; and a random float64 priority each,
// encoded by remote.EncodeTransitions) with at most
// Config.Window batches unacknowledged (as fast as the server takes them,
// or paced to Config.InsertRate in all), and one learner on
// Config.SampleStreams Sample streams (one by default, all on the
// learner's connection), each keeping Config.SampleInflight draws of
// Config.SampleBatch rows in flight, and answers each batch it receives with a priority write-back
// of random |δ| for every row. After Config.Warmup (and once the first
// draw has been answered) the figures are counted for Config.Duration:
// acknowledged inserts, drawn batches, written-back rows, the round trip
// of each draw (draw sent → batch received) and the CPU time of both
// processes.
//
// # Memory and goroutines
//
// The insert batches are encoded once, before the load starts, and shared
// read-only by every stream; latencies go to a fixed-size histogram; every
// channel is bounded by the window or the draws in flight. Run starts two
// goroutines per insert stream and two for the learner, all in one
// errgroup, and one that waits for the group; it returns only after every
// one has ended and every connection it opened is closed.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/meter"
	"github.com/apexrl/apex/remote"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
)

// CartPole's layout, the only one the load test sends.
const (
	ObsDim = 4
)

// Bounds of the configuration. A row of a drawn batch costs about 68 bytes
// on the wire (44 bytes of columns, a key, a probability and a weight), so
// MaxBatch rows stay well under the API's 1 MiB message limit.
const (
	MaxStreams  = 4096
	MaxBatch    = 8192
	MaxWindow   = 1024
	MaxInflight = 64
	// MaxSampleStreams bounds Config.SampleStreams.
	MaxSampleStreams = 16
)

// Config is one load test. The zero value is not valid: start from
// DefaultConfig.
type Config struct {
	// Table names the server's table; empty means its only table.
	Table string
	// Streams is the number of simulated actors, each with its own Insert
	// stream and writer id (1..MaxStreams).
	Streams int
	// InsertBatch is the number of transitions per insert batch
	// (1..MaxBatch).
	InsertBatch int
	// Window is the number of batches a stream keeps unacknowledged
	// (1..MaxWindow).
	Window int
	// Conns is the number of client connections the insert streams are
	// spread over, round robin (0..Streams; 0 means one per stream, as
	// separate actor hosts would have). The learner always has its own.
	Conns int
	// InsertRate paces the streams to this many transitions per second in
	// all (each stream an equal share, >= 0); 0 sends as fast as the
	// server acknowledges.
	InsertRate float64
	// SampleBatch is the number of rows per draw (1..MaxBatch).
	SampleBatch int
	// SampleStreams is the number of Sample streams the learner runs, all
	// on its one connection, each keeping SampleInflight draws in flight
	// (1..MaxSampleStreams): one learner process whose sampling is spread
	// over several streams, so the server serves them in parallel up to
	// its stage lock.
	SampleStreams int
	// SampleInflight is the number of draws the learner keeps in flight
	// (1..MaxInflight).
	SampleInflight int
	// Warmup runs the load unmeasured first (>= 0). Measuring also waits
	// for the first answered draw, at most WarmupLimit past Warmup.
	Warmup time.Duration
	// Duration is the measured window (> 0).
	Duration time.Duration
	// Seed seeds the synthetic data, the priorities and the draws' seeds.
	Seed uint64
	// ServerCPU, if set, reports the server process's CPU time so far; it
	// is read at the window's start and end. Nil: the server's CPU time is
	// not reported.
	ServerCPU func() (time.Duration, error)
	// Progress, if set, receives a line at each phase.
	Progress func(string)
}

// WarmupLimit bounds the wait for the first answered draw after Warmup.
const WarmupLimit = 30 * time.Second

// stopLimit bounds the graceful end of the streams (the server's answers
// to what is in flight) before Run cancels them.
const stopLimit = 10 * time.Second

// DefaultConfig is the load of `apex loadtest` without flags: 64 streams of
// 64-row batches, window 8, one connection per stream, 512-row draws with
// 4 in flight, 2 s of warm-up and 10 s measured.
func DefaultConfig() Config {
	return Config{Streams: 64, InsertBatch: 64, Window: 8, SampleBatch: 512, SampleStreams: 1, SampleInflight: 4,
		Warmup: 2 * time.Second, Duration: 10 * time.Second, Seed: 1}
}

// Validate reports the first field out of its range, named as the
// command's flag.
func (c Config) Validate() error {
	switch {
	case c.Streams < 1 || c.Streams > MaxStreams:
		return fmt.Errorf("-streams=%d must be in 1..%d", c.Streams, MaxStreams)
	case c.InsertBatch < 1 || c.InsertBatch > MaxBatch:
		return fmt.Errorf("-insert-batch=%d must be in 1..%d", c.InsertBatch, MaxBatch)
	case c.Window < 1 || c.Window > MaxWindow:
		return fmt.Errorf("-window=%d must be in 1..%d", c.Window, MaxWindow)
	case c.Conns < 0 || c.Conns > c.Streams:
		return fmt.Errorf("-conns=%d must be in 0..%d (-streams; 0: one per stream)", c.Conns, c.Streams)
	case !(c.InsertRate >= 0) || math.IsInf(c.InsertRate, 0):
		return fmt.Errorf("-insert-rate=%v must be a finite rate >= 0 (0: unpaced)", c.InsertRate)
	case c.SampleBatch < 1 || c.SampleBatch > MaxBatch:
		return fmt.Errorf("-sample-batch=%d must be in 1..%d", c.SampleBatch, MaxBatch)
	case c.SampleStreams < 1 || c.SampleStreams > MaxSampleStreams:
		return fmt.Errorf("-sample-streams=%d must be in 1..%d", c.SampleStreams, MaxSampleStreams)
	case c.SampleInflight < 1 || c.SampleInflight > MaxInflight:
		return fmt.Errorf("-sample-inflight=%d must be in 1..%d", c.SampleInflight, MaxInflight)
	case c.Warmup < 0:
		return fmt.Errorf("-warmup=%v must not be negative", c.Warmup)
	case c.Duration <= 0:
		return fmt.Errorf("-duration=%v must be positive", c.Duration)
	}
	return nil
}

// Dialer opens one client connection to the server. Run calls it
// Config.Conns+1 times (Streams+1 when Conns is 0) and closes every
// connection it got.
type Dialer func() (*grpc.ClientConn, error)

// Report is a load test's figures. Rates are per second of the measured
// window; "sampled" counts rows drawn whose write-back the server
// answered.
type Report struct {
	Server      string `json:"server,omitempty"`
	Method      string `json:"method"`
	Capacity    uint64 `json:"capacity"`
	Streams     int    `json:"streams"`
	InsertBatch int    `json:"insert_batch"`
	Window      int    `json:"window"`
	Conns       int    `json:"conns"`
	// InsertRate is the paced rate asked for (0: unpaced).
	InsertRate     float64 `json:"insert_rate"`
	SampleBatch    int     `json:"sample_batch"`
	SampleStreams  int     `json:"sample_streams"`
	SampleInflight int     `json:"sample_inflight"`
	Seed           uint64  `json:"seed"`

	WarmupSec   float64 `json:"warmup_s"`
	DurationSec float64 `json:"duration_s"`

	Inserted       uint64  `json:"inserted"`
	InsertsPerSec  float64 `json:"inserts_per_s"`
	Sampled        uint64  `json:"sampled"`
	SampledPerSec  float64 `json:"sampled_per_s"`
	Draws          uint64  `json:"draws"`
	DrawsPerSec    float64 `json:"draws_per_s"`
	StaleWrites    uint64  `json:"stale_write_backs"`
	SampleRTTP50US float64 `json:"sample_rtt_p50_us"`
	SampleRTTP90US float64 `json:"sample_rtt_p90_us"`
	SampleRTTP99US float64 `json:"sample_rtt_p99_us"`
	SampleRTTMaxUS float64 `json:"sample_rtt_max_us"`
	TableSize      uint64  `json:"table_size"`

	// CPU seconds over the measured window: the load test's own process
	// (getrusage) and the server's (Config.ServerCPU; absent without it).
	LoadtestCPUSec float64  `json:"loadtest_cpu_s"`
	ServerCPUSec   *float64 `json:"server_cpu_s,omitempty"`
	// Figures per CPU-second of the server, and of both processes.
	InsertsPerServerCPUSec *float64 `json:"inserts_per_server_cpu_s,omitempty"`
	SampledPerServerCPUSec *float64 `json:"sampled_per_server_cpu_s,omitempty"`
	InsertsPerCPUSec       *float64 `json:"inserts_per_cpu_s,omitempty"`
	SampledPerCPUSec       *float64 `json:"sampled_per_cpu_s,omitempty"`
}

// counters are the figures the streams count as answers arrive.
type counters struct {
	inserted, draws, sampled, stale atomic.Uint64
}

type snapshot struct{ inserted, draws, sampled, stale uint64 }

func (c *counters) snap() snapshot {
	return snapshot{c.inserted.Load(), c.draws.Load(), c.sampled.Load(), c.stale.Load()}
}

// run is one Run's shared state.
type run struct {
	cfg     Config
	batches []*replayv1.Columns // encoded insert batches, read-only
	count   counters
	stop    chan struct{} // closed: senders stop and close their streams
	first   chan struct{} // closed at the first answered draw
	filled  chan struct{} // closed once the table holds SampleBatch items
	fillOne atomic.Bool   // whether filled is closed
	// window bounds (UnixNano) of the latencies recorded; set by Run.
	from, to atomic.Int64
	histMu   sync.Mutex // guards hist (the learner's receivers record into it)
	hist     meter.Histogram
	firstOne atomic.Bool   // whether first is closed
	size     atomic.Uint64 // table size from the latest ack or batch
}

// Run connects (dial), checks the server (Info), runs the load and returns
// the report. It returns early with ctx's error if ctx ends, and with the
// first stream's error if a stream fails (a status from the server, an
// acknowledgement out of order, a batch of the wrong size).
//
// It blocks for Warmup + Duration, plus the wait for the first answered
// draw (at most WarmupLimit) and the streams' graceful end (at most 10 s).
// Calls are independent: each has its own connections and goroutines.
// Memory: the encoded batches (16 × InsertBatch rows) and the streams'
// windows; nothing grows with Duration.
func Run(ctx context.Context, dial Dialer, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	say := func(format string, a ...any) {
		if cfg.Progress != nil {
			cfg.Progress(fmt.Sprintf(format, a...))
		}
	}
	nconn := cfg.Conns
	if nconn == 0 {
		nconn = cfg.Streams
	}
	conns := make([]*grpc.ClientConn, 0, nconn+1)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range nconn + 1 {
		c, err := dial()
		if err != nil {
			return nil, fmt.Errorf("loadtest: dialing the server: %w", err)
		}
		conns = append(conns, c)
	}
	learner := replayv1.NewReplayClient(conns[0])
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	info, err := learner.Info(ictx, &replayv1.InfoRequest{})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("loadtest: the server's Info: %w", err)
	}
	tab, err := findTable(info, cfg.Table)
	if err != nil {
		return nil, err
	}
	rep := &Report{Method: tab.GetMethod(), Capacity: tab.GetCapacity(), Streams: cfg.Streams,
		InsertBatch: cfg.InsertBatch, Window: cfg.Window, Conns: nconn, InsertRate: cfg.InsertRate, SampleBatch: cfg.SampleBatch,
		SampleStreams: cfg.SampleStreams, SampleInflight: cfg.SampleInflight, Seed: cfg.Seed}

	r := &run{cfg: cfg, stop: make(chan struct{}), first: make(chan struct{}), filled: make(chan struct{})}
	if tab.GetSize() >= uint64(cfg.SampleBatch) {
		r.fill(tab.GetSize())
	}
	if r.batches, err = encodeBatches(cfg.InsertBatch, 16, cfg.Seed); err != nil {
		return nil, err
	}
	// No round trip counts until the measured window opens (from is set
	// then): a warm-up draw, such as the first one, which waits for the
	// table to fill, must not land in the window's percentiles.
	r.from.Store(math.MaxInt64)
	r.to.Store(math.MaxInt64)
	nonce := rand.Uint64() // writer ids differ from any earlier run's on the same server

	// The streams run under their own context: cancelled when Run returns,
	// or when the graceful stop takes too long.
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	g, gctx := errgroup.WithContext(sctx)
	for i := range cfg.Streams {
		client := replayv1.NewReplayClient(conns[1+i%nconn])
		writer := fmt.Sprintf("loadtest-%016x-%d", nonce, i)
		g.Go(func() error { return r.insertStream(gctx, g, client, writer, i) })
	}
	for i := range cfg.SampleStreams {
		g.Go(func() error { return r.learner(gctx, g, learner, i) })
	}
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	// finish stops the streams (gracefully, then by cancelling) and
	// returns the group's error.
	stopped := false
	finish := func() error {
		if !stopped {
			close(r.stop)
			stopped = true
		}
		t := time.NewTimer(stopLimit)
		defer t.Stop()
		select {
		case err := <-done:
			return err
		case <-t.C:
			scancel()
			return errors.Join(errors.New("loadtest: the server did not answer the streams' last messages within "+stopLimit.String()), <-done)
		}
	}
	fail := func(err error) (*Report, error) {
		if ferr := finish(); ferr != nil && ferr != err && !errors.Is(ferr, context.Canceled) {
			err = errors.Join(err, ferr)
		}
		return nil, err
	}
	wait := func(d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case err := <-done:
			done <- err // finish reads it again
			if err == nil {
				err = errors.New("loadtest: the streams ended early")
			}
			return err
		}
	}

	say("warming up for %v: %d insert streams (batches of %d, window %d, %d connections), draws of %d, %d in flight",
		cfg.Warmup, cfg.Streams, cfg.InsertBatch, cfg.Window, nconn, cfg.SampleBatch, cfg.SampleInflight)
	start := time.Now()
	if err := wait(cfg.Warmup); err != nil {
		return fail(err)
	}
	limit := time.NewTimer(WarmupLimit)
	select {
	case <-r.first:
	case <-limit.C:
		limit.Stop()
		return fail(fmt.Errorf("loadtest: no draw answered within %v after the warm-up (table size %d): is the server's rate limiter off?", WarmupLimit, r.size.Load()))
	case <-ctx.Done():
		limit.Stop()
		return fail(ctx.Err())
	case err := <-done:
		limit.Stop()
		done <- err
		return fail(errors.Join(errors.New("loadtest: the streams ended during the warm-up"), err))
	}
	limit.Stop()
	rep.WarmupSec = time.Since(start).Seconds()

	say("measuring for %v", cfg.Duration)
	srv0, srvErr := serverCPU(cfg)
	cpu0 := meter.ProcessCPU()
	t0 := time.Now()
	c0 := r.count.snap()
	r.from.Store(t0.UnixNano())
	if err := wait(cfg.Duration); err != nil {
		return fail(err)
	}
	t1 := time.Now()
	r.to.Store(t1.UnixNano())
	c1 := r.count.snap()
	cpu1 := meter.ProcessCPU()
	srv1, srvErr1 := serverCPU(cfg)
	say("stopping the streams")
	if err := finish(); err != nil {
		return nil, err
	}

	el := t1.Sub(t0).Seconds()
	rep.DurationSec = el
	rep.Inserted = c1.inserted - c0.inserted
	rep.Sampled = c1.sampled - c0.sampled
	rep.Draws = c1.draws - c0.draws
	rep.StaleWrites = c1.stale - c0.stale
	rep.InsertsPerSec = float64(rep.Inserted) / el
	rep.SampledPerSec = float64(rep.Sampled) / el
	rep.DrawsPerSec = float64(rep.Draws) / el
	r.histMu.Lock() // the receivers may still record (outside the window, so not)
	rep.SampleRTTP50US = us(r.hist.Quantile(0.5))
	rep.SampleRTTP90US = us(r.hist.Quantile(0.9))
	rep.SampleRTTP99US = us(r.hist.Quantile(0.99))
	rep.SampleRTTMaxUS = us(r.hist.Max())
	r.histMu.Unlock()
	rep.TableSize = r.size.Load()
	rep.LoadtestCPUSec = (cpu1 - cpu0).Seconds()
	if srvErr == nil && srvErr1 == nil && cfg.ServerCPU != nil {
		s := (srv1 - srv0).Seconds()
		rep.ServerCPUSec = &s
		if s > 0 {
			rep.InsertsPerServerCPUSec = ptr(float64(rep.Inserted) / s)
			rep.SampledPerServerCPUSec = ptr(float64(rep.Sampled) / s)
		}
		if all := s + rep.LoadtestCPUSec; all > 0 {
			rep.InsertsPerCPUSec = ptr(float64(rep.Inserted) / all)
			rep.SampledPerCPUSec = ptr(float64(rep.Sampled) / all)
		}
	} else if err := errors.Join(srvErr, srvErr1); err != nil {
		say("the server's CPU time is not reported: %v", err)
	}
	return rep, nil
}

func serverCPU(cfg Config) (time.Duration, error) {
	if cfg.ServerCPU == nil {
		return 0, nil
	}
	return cfg.ServerCPU()
}

func ptr(v float64) *float64 { return &v }

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// findTable picks the table the load goes to: name, or the server's only
// table when name is empty.
func findTable(info *replayv1.InfoReply, name string) (*replayv1.TableInfo, error) {
	tabs := info.GetTables()
	var names []string
	for _, t := range tabs {
		if name != "" && t.GetName() == name {
			return t, nil
		}
		names = append(names, t.GetName())
	}
	switch {
	case name == "" && len(tabs) == 1:
		return tabs[0], nil
	case name == "":
		return nil, fmt.Errorf("loadtest: the server has %d tables %q: name one (-table)", len(tabs), names)
	}
	return nil, fmt.Errorf("loadtest: the server has no table %q (it has %q)", name, names)
}

// Layout is the table layout the load test's transitions have: CartPole's
// (4 float32 observations, a discrete action of 2).
var Layout = buffer.Config{Capacity: 1, ObsDim: ObsDim, Action: buffer.Discrete, NumActions: 2}

// encodeBatches makes n distinct insert batches of rows random CartPole
// transitions each, with random priorities in (0, 1], encoded for the wire
// by the server's own codec (remote.EncodeTransitions).
func encodeBatches(rows, n int, seed uint64) ([]*replayv1.Columns, error) {
	rng := rand.New(rand.NewPCG(seed, 0x10ad))
	out := make([]*replayv1.Columns, n)
	var t buffer.Transitions
	for i := range out {
		t.Reset()
		for range rows {
			for range ObsDim {
				t.Obs = append(t.Obs, float32(rng.NormFloat64()))
			}
			for range ObsDim {
				t.NextObs = append(t.NextObs, float32(rng.NormFloat64()))
			}
			t.Action = append(t.Action, int32(rng.IntN(2)))
			t.Reward = append(t.Reward, 1)
			// No flags column (all 0): the rows stay the 44 bytes.
			t.Discount = append(t.Discount, 0.99)
			if rng.IntN(50) == 0 {
				t.Discount[len(t.Discount)-1] = 0 // an episode's end, now and then
			}
			t.Priority = append(t.Priority, 1-rng.Float64())
		}
		out[i] = &replayv1.Columns{}
		if err := remote.EncodeTransitions(out[i], Layout, &t); err != nil {
			return nil, fmt.Errorf("loadtest: encoding the insert batches: %w", err)
		}
	}
	return out, nil
}

// insertStream is one simulated actor: a sender (this goroutine) that
// keeps up to Window batches unacknowledged, and a receiver (in g) that
// checks and counts the acknowledgements. It ends after r.stop, once the
// server has acknowledged every batch sent.
func (r *run) insertStream(ctx context.Context, g *errgroup.Group, client replayv1.ReplayClient, writer string, i int) error {
	stream, err := client.Insert(ctx)
	if err != nil {
		return fmt.Errorf("loadtest: stream %d: Insert: %w", i, err)
	}
	window := make(chan struct{}, r.cfg.Window)
	rows := uint64(r.cfg.InsertBatch)
	g.Go(func() error {
		for next := uint64(1); ; next++ {
			ack, err := stream.Recv()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("loadtest: stream %d: %w", i, err)
			}
			if ack.GetSeq() != next || ack.GetDuplicate() {
				return fmt.Errorf("loadtest: stream %d: acknowledgement of seq %d (duplicate %v), want %d", i, ack.GetSeq(), ack.GetDuplicate(), next)
			}
			r.count.inserted.Add(rows)
			r.fill(ack.GetSize())
			<-window
		}
	})
	req := &replayv1.InsertRequest{Table: r.cfg.Table, Writer: writer}
	// With InsertRate, batch k of this stream is due at start + k·every
	// (streams start staggered); a stream behind its schedule sends at
	// once, within its window.
	var every time.Duration
	var due time.Time
	var pace *time.Timer
	if r.cfg.InsertRate > 0 {
		every = time.Duration(float64(time.Second) * float64(r.cfg.Streams*r.cfg.InsertBatch) / r.cfg.InsertRate)
		due = time.Now().Add(every * time.Duration(i) / time.Duration(r.cfg.Streams))
		pace = time.NewTimer(0)
		defer pace.Stop()
	}
	for seq := uint64(1); ; seq++ {
		if pace != nil {
			if d := time.Until(due); d > 0 {
				pace.Reset(d)
				select {
				case <-pace.C:
				case <-r.stop:
					return closeSend(stream, fmt.Sprintf("stream %d", i))
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			due = due.Add(every)
		}
		select {
		case window <- struct{}{}:
		case <-r.stop:
			return closeSend(stream, fmt.Sprintf("stream %d", i))
		case <-ctx.Done():
			return ctx.Err()
		}
		req.Seq = seq
		req.Data = r.batches[(uint64(i)+seq)%uint64(len(r.batches))]
		if err := stream.Send(req); err != nil {
			if err == io.EOF {
				return nil // the receiver reports the stream's status
			}
			return fmt.Errorf("loadtest: stream %d: %w", i, err)
		}
	}
}

// fill records the table's size from an acknowledgement; the first size
// of at least SampleBatch releases the learner.
func (r *run) fill(size uint64) {
	r.size.Store(size)
	if size >= uint64(r.cfg.SampleBatch) && r.fillOne.CompareAndSwap(false, true) {
		close(r.filled)
	}
}

// closeSend ends the sending side of who's stream.
func closeSend(s grpc.ClientStream, who string) error {
	if err := s.CloseSend(); err != nil {
		return fmt.Errorf("loadtest: %s: closing: %w", who, err)
	}
	return nil
}

// learner is one Sample stream of the sampling learner (stream i of
// SampleStreams): a sender (this goroutine) that keeps
// SampleInflight draws in flight and writes back random priorities for
// every batch received, and a receiver (in g) that times the draws and
// counts the answers. It sends its first draws once the table holds
// SampleBatch items. After r.stop it sends no more draws, writes back the
// batches still due, and closes the stream.
func (r *run) learner(ctx context.Context, g *errgroup.Group, client replayv1.ReplayClient, i int) error {
	stream, err := client.Sample(ctx)
	if err != nil {
		return fmt.Errorf("loadtest: learner: Sample: %w", err)
	}
	k := r.cfg.SampleInflight
	n := r.cfg.SampleBatch
	sent := make([]atomic.Int64, k) // UnixNano a draw was sent, by id mod k
	got := make(chan *replayv1.Batch, k)
	g.Go(func() error {
		defer close(got)
		for {
			rep, err := stream.Recv()
			now := time.Now().UnixNano()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("loadtest: learner: %w", err)
			}
			switch m := rep.GetKind().(type) {
			case *replayv1.SampleReply_Batch:
				b := m.Batch
				if len(b.GetKeys()) != n {
					return fmt.Errorf("loadtest: learner: draw %d answered with %d keys, want %d", b.GetId(), len(b.GetKeys()), n)
				}
				if at := sent[b.GetId()%uint64(k)].Load(); at >= r.from.Load() && now <= r.to.Load() {
					r.histMu.Lock()
					r.hist.Record(time.Duration(now - at))
					r.histMu.Unlock()
				}
				r.count.draws.Add(1)
				r.size.Store(b.GetSize())
				if r.firstOne.CompareAndSwap(false, true) {
					close(r.first)
				}
				got <- b // never blocks: at most k draws are in flight
			case *replayv1.SampleReply_Written:
				w := m.Written
				r.count.sampled.Add(uint64(w.GetApplied() + w.GetStale() + w.GetWrongIncarnation()))
				r.count.stale.Add(uint64(w.GetStale() + w.GetWrongIncarnation()))
			default:
				return fmt.Errorf("loadtest: learner: a reply of unknown kind %T", m)
			}
		}
	})

	rng := rand.New(rand.NewPCG(r.cfg.Seed, 0x5a3b1e+uint64(i)))
	prios := make([]float64, 4*n) // written back from a random offset
	for i := range prios {
		prios[i] = rng.ExpFloat64()
	}
	var id uint64
	draw := &replayv1.Draw{Table: r.cfg.Table, Batch: uint32(n)}
	sendDraw := func() error {
		id++
		draw.Id, draw.Seed, draw.Step = id, rng.Uint64(), id
		sent[id%uint64(k)].Store(time.Now().UnixNano())
		return stream.Send(&replayv1.SampleRequest{Kind: &replayv1.SampleRequest_Draw{Draw: draw}})
	}
	sendErr := func(err error) error {
		if err == io.EOF {
			return nil // the receiver reports the stream's status
		}
		return fmt.Errorf("loadtest: learner: %w", err)
	}
	wb := &replayv1.WriteBack{Table: r.cfg.Table}
	wreq := &replayv1.SampleRequest{Kind: &replayv1.SampleRequest_WriteBack{WriteBack: wb}}
	// The first draws wait until the table holds a batch: a server
	// without a rate limiter refuses a draw larger than the table.
	select {
	case <-r.filled:
	case <-r.stop:
		return closeSend(stream, "learner")
	case <-ctx.Done():
		return ctx.Err()
	}
	for range k {
		if err := sendDraw(); err != nil {
			return sendErr(err)
		}
	}
	inflight, stopping, stop := k, false, r.stop
	for inflight > 0 {
		var b *replayv1.Batch
		select {
		case b = <-got:
		case <-stop:
			stopping = true
			stop = nil // a nil channel: this case is not chosen again
			continue
		case <-ctx.Done():
			return ctx.Err()
		}
		if b == nil {
			return nil // the receiver ended; it reports why
		}
		inflight--
		off := rng.IntN(len(prios) - n + 1)
		wb.Id, wb.Incarnation, wb.Keys, wb.AbsTd = b.GetId(), b.GetIncarnation(), b.GetKeys(), prios[off:off+n]
		if err := stream.Send(wreq); err != nil {
			return sendErr(err)
		}
		if !stopping {
			if err := sendDraw(); err != nil {
				return sendErr(err)
			}
			inflight++
		}
	}
	return closeSend(stream, "learner")
}
