package remote

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
)

// episodeLayout is testLayout with episode ids.
var episodeLayout = func() buffer.Config { c := testLayout; c.Episode = true; return c }()

// fakeShard is one replay shard for the sharded writer's tests: Insert
// stores batches by (writer, seq) as the contract says and records every
// stored row (by its reward, unique in a test) with its episode; Info
// answers with the shard's incarnation and config. It can hold its
// acknowledgements (batches stored, not acknowledged) and hang its Info
// calls (a shard cut off the network).
type fakeShard struct {
	replayv1.UnimplementedReplayServer
	layout buffer.Config

	mu          sync.Mutex
	incarnation uint64
	config      []byte
	highest     map[string]uint64
	stored      map[float32]uint64 // reward → episode, of every row stored
	dupRows     int                // rows stored twice on this shard (must stay 0)
	batches     int
	holdAcks    bool // store, do not acknowledge
	breaks      int  // break this many streams, each after storing a batch and before acknowledging it
	refuse      error
	hangInfo    bool // Info waits for its context
	changed     chan struct{}
}

func newFakeShard(layout buffer.Config, incarnation uint64) *fakeShard {
	return &fakeShard{layout: layout, incarnation: incarnation, config: []byte(`{"env":"test"}`),
		highest: map[string]uint64{}, stored: map[float32]uint64{}, changed: make(chan struct{})}
}

func (f *fakeShard) Insert(stream grpc.BidiStreamingServer[replayv1.InsertRequest, replayv1.InsertAck]) error {
	f.mu.Lock()
	refuse := f.refuse
	f.mu.Unlock()
	if refuse != nil {
		return refuse
	}
	var tr buffer.Transitions
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := DecodeTransitions(&tr, f.layout, req.GetData()); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		f.mu.Lock()
		dup := req.GetSeq() <= f.highest[req.GetWriter()]
		if !dup {
			f.highest[req.GetWriter()] = req.GetSeq()
			f.batches++
			for i, r := range tr.Reward {
				if _, ok := f.stored[r]; ok {
					f.dupRows++
				}
				f.stored[r] = tr.EpisodeID[i]
			}
		}
		hold, inc, brk := f.holdAcks, f.incarnation, !dup && f.breaks > 0
		if brk {
			f.breaks--
		}
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()
		if brk {
			return status.Error(codes.Unavailable, "fake: stream broken on purpose")
		}
		if hold {
			<-stream.Context().Done()
			return stream.Context().Err()
		}
		if err := stream.Send(&replayv1.InsertAck{Seq: req.GetSeq(), Duplicate: dup, Incarnation: inc}); err != nil {
			return err
		}
	}
}

func (f *fakeShard) Info(ctx context.Context, _ *replayv1.InfoRequest) (*replayv1.InfoReply, error) {
	f.mu.Lock()
	hang, inc, cfg := f.hangInfo, f.incarnation, f.config
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &replayv1.InfoReply{Incarnation: inc, Config: cfg}, nil
}

func (f *fakeShard) set(fn func(f *fakeShard)) {
	f.mu.Lock()
	fn(f)
	f.mu.Unlock()
}

// rows returns a copy of the shard's stored rows (reward → episode).
func (f *fakeShard) rows() map[float32]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[float32]uint64, len(f.stored))
	for k, v := range f.stored {
		out[k] = v
	}
	return out
}

// testFleet is n fake shards, each behind its own restartable bufconn
// server, and a client per shard with its own target name.
type testFleet struct {
	fakes   []*fakeShard
	servers []*bufServer
	clients []*Client
}

func newTestFleet(t *testing.T, n int) *testFleet {
	t.Helper()
	fl := &testFleet{}
	for i := range n {
		f := newFakeShard(episodeLayout, uint64(100+i))
		fl.fakes = append(fl.fakes, f)
		b := newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, f) })
		fl.servers = append(fl.servers, b)
		c, err := Dial(context.Background(), fmt.Sprintf("passthrough:///shard-%d", i),
			ClientOptions{Insecure: true, DialOptions: []grpc.DialOption{grpc.WithContextDialer(b.dial)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		fl.clients = append(fl.clients, c)
	}
	return fl
}

func TestShardedWriterHashing(t *testing.T) {
	checkLeaks(t)
	mk := func(names ...string) []*wshard {
		var out []*wshard
		for _, n := range names {
			out = append(out, &wshard{name: n, seed: hashString(n)})
		}
		return out
	}
	shards := mk("10.0.0.1:7700", "10.0.0.2:7700", "10.0.0.3:7700")
	all := func(int) bool { return true }
	// Deterministic: the same (writer, episode) and shards give the same
	// shard, whatever else was placed before.
	if a, b := rendezvous(episodeKey(hashString("host-a"), 42), shards, all), rendezvous(episodeKey(hashString("host-a"), 42), mk("10.0.0.1:7700", "10.0.0.2:7700", "10.0.0.3:7700"), all); a != b {
		t.Fatalf("placement of one key differs: %d, %d", a, b)
	}
	// Balanced: 4 writers × 6000 episodes over 3 shards, a chi-square test
	// of uniformity (2 degrees of freedom; 13.8 is the 0.1% critical
	// value; the keys are fixed, so the test is deterministic).
	const writers, episodes = 4, 6000
	counts := make([]int, 3)
	before := map[uint64]int{}
	for w := range writers {
		wh := hashString(fmt.Sprintf("host-%d/actor-host-%d/0a1b2c3d", w, w))
		for e := range episodes {
			ep := uint64(e%64)<<32 | uint64(e/64) // actor e%64's episode e/64, as actors number them
			key := episodeKey(wh, ep)
			i := rendezvous(key, shards, all)
			counts[i]++
			before[key] = i
		}
	}
	n := float64(writers * episodes)
	chi := 0.0
	for _, c := range counts {
		d := float64(c) - n/3
		chi += d * d / (n / 3)
	}
	if chi > 13.8 {
		t.Errorf("placement counts %v: chi-square %.2f over 13.8 (not uniform)", counts, chi)
	}
	// Losing shard 1 moves only its keys, and spreads them over both others.
	moved := make([]int, 3)
	for key, was := range before {
		now := rendezvous(key, shards, func(i int) bool { return i != 1 })
		if was != 1 && now != was {
			t.Fatalf("key of shard %d moved to %d when shard 1 was lost", was, now)
		}
		if was == 1 {
			moved[now]++
		}
	}
	if moved[0] == 0 || moved[2] == 0 || moved[0]+moved[2] != counts[1] {
		t.Errorf("shard 1's %d keys went %v", counts[1], moved)
	}
	if math.Abs(float64(moved[0]-moved[2])) > 0.1*float64(counts[1]) {
		t.Errorf("shard 1's keys split unevenly: %v", moved)
	}
	if i := rendezvous(1, shards, func(int) bool { return false }); i != -1 {
		t.Errorf("no live shard: %d, want -1", i)
	}
}

// episodeRows makes n transitions of episodeLayout of episode ep whose
// rewards are from, from+1, ...
func episodeRows(n int, from float32, ep uint64) *buffer.Transitions {
	t := rows(n, from)
	for range n {
		t.EpisodeID = append(t.EpisodeID, ep)
		t.EpisodeStep = append(t.EpisodeStep, 0)
	}
	return t
}

func newTestShardedWriter(t *testing.T, fl *testFleet, id string, opts ShardedWriterOptions) *ShardedWriter {
	t.Helper()
	opts.Layout = episodeLayout
	if opts.MinBackoff == 0 {
		opts.MinBackoff, opts.MaxBackoff = time.Millisecond, 20*time.Millisecond
	}
	s, err := NewShardedWriter(fl.clients, id, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Bounded: a shard the test left holding batches must not hang
		// the cleanup (what it holds is then counted lost).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

func flushSharded(t *testing.T, s *ShardedWriter) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("flush: %v (stats %+v)", err, s.Stats())
	}
}

// checkBalance asserts the sharded writer's accounting identity.
func checkBalance(t *testing.T, st ShardedWriterStats) {
	t.Helper()
	var acked, pending uint64
	for _, sh := range st.Shards {
		acked += sh.Acked
		pending += uint64(sh.Pending)
		if sh.Batches != sh.Acked+uint64(sh.Pending)+sh.Lost+sh.Moved {
			t.Errorf("shard %s: batches %d != acked %d + pending %d + lost %d + moved %d", sh.Shard, sh.Batches, sh.Acked, sh.Pending, sh.Lost, sh.Moved)
		}
	}
	if st.Batches != acked+pending+uint64(st.Orphans)+st.Lost {
		t.Errorf("batches %d != acked %d + pending %d + orphans %d + lost %d", st.Batches, acked, pending, st.Orphans, st.Lost)
	}
}

// TestShardedWriterEpisodesWhole interleaves 8 actors' episodes (batches
// that cross episode boundaries) over 3 live shards: every row is stored
// once, each episode whole on one shard, every shard takes a share.
func TestShardedWriterEpisodesWhole(t *testing.T) {
	checkLeaks(t)
	fl := newTestFleet(t, 3)
	s := newTestShardedWriter(t, fl, "host-0/actor-host-0/feed", ShardedWriterOptions{WriterOptions: WriterOptions{Window: 4}})
	const actors, batches, per = 8, 40, 7
	next := float32(0)
	for b := range batches {
		for a := range actors {
			// Actor a's episodes are 5 rows long: a batch of 7 crosses one.
			tr := &buffer.Transitions{}
			for range per {
				step := int(next) / actors // this actor's row count so far, roughly
				part := episodeRows(1, next, uint64(a)<<32|uint64(step/5))
				tr.Obs = append(tr.Obs, part.Obs...)
				tr.NextObs = append(tr.NextObs, part.NextObs...)
				tr.Action = append(tr.Action, part.Action...)
				tr.Reward = append(tr.Reward, part.Reward...)
				tr.Discount = append(tr.Discount, part.Discount...)
				tr.EpisodeID = append(tr.EpisodeID, part.EpisodeID...)
				tr.EpisodeStep = append(tr.EpisodeStep, part.EpisodeStep...)
				next++
			}
			if err := s.Insert(tr); err != nil {
				t.Fatalf("batch %d of actor %d: %v", b, a, err)
			}
		}
	}
	flushSharded(t, s)
	home := map[uint64]int{}
	total := 0
	for i, f := range fl.fakes {
		r := f.rows()
		if len(r) == 0 {
			t.Errorf("shard %d stored nothing", i)
		}
		total += len(r)
		for _, ep := range r {
			if h, ok := home[ep]; ok && h != i {
				t.Fatalf("episode %#x on shards %d and %d", ep, h, i)
			}
			home[ep] = i
		}
		if f.dupRows != 0 {
			t.Errorf("shard %d stored %d rows twice", i, f.dupRows)
		}
	}
	if total != int(next) {
		t.Errorf("stored %d rows, inserted %d", total, int(next))
	}
	st := s.Stats()
	checkBalance(t, st)
	if st.Items != uint64(next) || st.Lost != 0 || st.Live != 3 {
		t.Errorf("stats %+v", st)
	}
	for _, sh := range st.Shards {
		if sh.Deaths != 0 || sh.Moved != 0 || sh.Adopted != 0 {
			t.Errorf("shard %s: %+v with every shard alive", sh.Shard, sh)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Insert(episodeRows(1, -1, 1)); err != ErrWriterClosed {
		t.Errorf("Insert after Close: %v, want ErrWriterClosed", err)
	}
}

// insertEpisodes inserts eps episodes of n rows (one batch each) from
// episode id first on, rewards from *next on.
func insertEpisodes(t *testing.T, s *ShardedWriter, first uint64, eps, n int, next *float32) {
	t.Helper()
	for e := range eps {
		if err := s.Insert(episodeRows(n, *next, first+uint64(e))); err != nil {
			t.Fatalf("episode %d: %v (stats %+v)", first+uint64(e), err, s.Stats())
		}
		*next += float32(n)
	}
}

// waitStats polls the writer's stats until cond holds (false after
// limit).
func waitStats(s *ShardedWriter, limit time.Duration, cond func(ShardedWriterStats) bool) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if cond(s.Stats()) {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return cond(s.Stats())
}

// TestShardedWriterShardKilled stops one of 3 shards' gRPC servers while
// it holds stored, unacknowledged batches: the writer marks it dead
// within the probe deadline, moves its window to the two others, which
// store every row exactly once; nothing is lost; the others' episodes
// stay where they were. The shard restarts with a new incarnation and
// rejoins, taking new episodes.
func TestShardedWriterShardKilled(t *testing.T) {
	checkLeaks(t)
	fl := newTestFleet(t, 3)
	const probe = 200 * time.Millisecond
	s := newTestShardedWriter(t, fl, "host-1/actor-host-0/beef", ShardedWriterOptions{
		WriterOptions: WriterOptions{Window: 4}, AckTimeout: time.Second, ProbeTimeout: probe})
	var next float32
	insertEpisodes(t, s, 1, 60, 3, &next)
	flushSharded(t, s)
	before := make([]map[float32]uint64, 3)
	for i, f := range fl.fakes {
		before[i] = f.rows()
	}
	// Shard 1 stores but no longer acknowledges; its episodes' batches
	// pile up in its window.
	const victim = 1
	fl.fakes[victim].set(func(f *fakeShard) { f.holdAcks = true })
	for e := uint64(1000); s.Stats().Shards[victim].Pending < 3; e++ {
		insertEpisodes(t, s, e, 1, 3, &next)
		if e > 1000+10000 {
			t.Fatal("no episode went to shard 1")
		}
	}
	stopped := time.Now()
	fl.servers[victim].stop()
	if !waitStats(s, 10*time.Second, func(st ShardedWriterStats) bool { return st.Shards[victim].Deaths == 1 }) {
		t.Fatalf("shard 1 not marked dead: %+v", s.Stats())
	}
	if d := time.Since(stopped); d > probe+time.Second {
		t.Errorf("shard 1 marked dead %v after its server stopped, want within the probe deadline %v (+1 s slack)", d, probe)
	}
	insertEpisodes(t, s, 5000, 60, 3, &next)
	flushSharded(t, s)
	st := s.Stats()
	checkBalance(t, st)
	if st.Lost != 0 || st.Live != 2 || st.Shards[victim].Live || st.Shards[victim].Moved == 0 {
		t.Fatalf("stats %+v", st)
	}
	// Every row is on a surviving shard exactly once, or only on the dead
	// one (acknowledged there before it died, back with its checkpoint);
	// the rows on both are the moved window's, at most Window batches.
	dead := fl.fakes[victim].rows()
	both := 0
	for r := float32(0); r < next; r++ {
		n := 0
		for i, f := range fl.fakes {
			if i == victim {
				continue
			}
			f.mu.Lock()
			if _, ok := f.stored[r]; ok {
				n++
			}
			f.mu.Unlock()
		}
		_, onDead := dead[r]
		switch {
		case n > 1:
			t.Fatalf("row %v stored on %d surviving shards", r, n)
		case n == 0 && !onDead:
			t.Fatalf("row %v stored nowhere", r)
		case n == 1 && onDead:
			both++
		}
	}
	if both > 4*3 {
		t.Errorf("%d rows on the dead shard and a surviving one: more than its window (4 batches of 3)", both)
	}
	for i, f := range fl.fakes {
		if i != victim && f.dupRows != 0 {
			t.Errorf("shard %d stored %d rows twice", i, f.dupRows)
		}
	}
	// Losing shard 1 moved only its episodes: each episode inserted since
	// is on the shard the full fleet would have given it, unless that was
	// shard 1.
	all := func(int) bool { return true }
	for i, f := range fl.fakes {
		if i == victim {
			continue
		}
		for r, ep := range f.rows() {
			if _, old := before[i][r]; old || ep < 5000 || ep >= 5060 {
				continue
			}
			if home := rendezvous(episodeKey(s.idHash, ep), s.shards, all); home != victim && home != i {
				t.Fatalf("episode %d on shard %d, its shard %d is alive", ep, i, home)
			}
		}
	}
	// Restart shard 1 as a new incarnation that lost its writer table:
	// it rejoins and takes new episodes.
	fl.fakes[victim].set(func(f *fakeShard) {
		f.holdAcks, f.incarnation, f.highest = false, 999, map[string]uint64{}
	})
	fl.servers[victim].start()
	if !waitStats(s, 10*time.Second, func(st ShardedWriterStats) bool { return st.Shards[victim].Live }) {
		t.Fatalf("shard 1 did not rejoin: %+v", s.Stats())
	}
	had := len(fl.fakes[victim].rows())
	insertEpisodes(t, s, 9000, 60, 3, &next)
	flushSharded(t, s)
	st = s.Stats()
	checkBalance(t, st)
	sh := st.Shards[victim]
	t.Logf("after the rejoin: %+v", st)
	if got := len(fl.fakes[victim].rows()); got <= had || sh.Rejoins != 1 || sh.Incarnation != 999 || st.Lost != 0 {
		t.Errorf("after the rejoin shard 1 has %d rows (had %d), stats %+v", got, had, sh)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestShardedWriterStreamBreaks breaks each shard's stream twice after
// it stored a batch and before the acknowledgement: the shards answer
// their probes, so each is resumed and gets its window again (the
// stored batch acknowledged as a duplicate); no shard dies, no episode
// moves, every row is stored once.
func TestShardedWriterStreamBreaks(t *testing.T) {
	checkLeaks(t)
	fl := newTestFleet(t, 2)
	for _, f := range fl.fakes {
		f.set(func(f *fakeShard) { f.breaks = 2 })
	}
	s := newTestShardedWriter(t, fl, "breaks", ShardedWriterOptions{WriterOptions: WriterOptions{Window: 3}})
	var next float32
	insertEpisodes(t, s, 1, 50, 4, &next)
	flushSharded(t, s)
	st := s.Stats()
	checkBalance(t, st)
	total := 0
	for i, f := range fl.fakes {
		total += len(f.rows())
		sh := st.Shards[i]
		if f.dupRows != 0 || sh.Deaths != 0 || sh.Reconnects != 2 || sh.Duplicates != 2 || sh.Resent < 2 || !sh.Live {
			t.Errorf("shard %d: %d rows stored twice, stats %+v", i, f.dupRows, sh)
		}
		for _, ep := range f.rows() {
			if home := rendezvous(episodeKey(s.idHash, ep), s.shards, func(int) bool { return true }); home != i {
				t.Fatalf("episode %d on shard %d, its shard is %d", ep, i, home)
			}
		}
	}
	if total != int(next) || st.Lost != 0 {
		t.Errorf("stored %d rows of %d, stats %+v", total, int(next), st)
	}
}

// TestShardedWriterSilentShard cuts a shard off (it stops acknowledging
// and its Info hangs): it is marked dead within AckTimeout + AckTimeout/4
// + ProbeTimeout. A shard that holds acknowledgements but answers Info
// (its limiter's backpressure) is not.
func TestShardedWriterSilentShard(t *testing.T) {
	checkLeaks(t)
	fl := newTestFleet(t, 2)
	// A probe that takes longer than ProbeTimeout fails: on a loaded
	// machine under -race 100 ms is not enough for an Info to a live shard.
	const ack, probe = 300 * time.Millisecond, 500 * time.Millisecond
	s := newTestShardedWriter(t, fl, "silent", ShardedWriterOptions{WriterOptions: WriterOptions{Window: 2}, AckTimeout: ack, ProbeTimeout: probe})
	var next float32
	insertEpisodes(t, s, 1, 20, 2, &next)
	flushSharded(t, s)
	// Slow: acknowledgements held, Info answers: probed, not dead.
	fl.fakes[0].set(func(f *fakeShard) { f.holdAcks = true })
	for e := uint64(100); s.Stats().Shards[0].Pending == 0; e++ {
		insertEpisodes(t, s, e, 1, 2, &next)
	}
	if !waitStats(s, 10*time.Second, func(st ShardedWriterStats) bool { return st.Shards[0].Probes >= 2 }) {
		t.Fatalf("a shard holding batches was not probed: %+v", s.Stats())
	}
	if st := s.Stats(); st.Shards[0].Deaths != 0 || !st.Shards[0].Live {
		t.Fatalf("a slow shard that answers was marked dead: %+v", st.Shards[0])
	}
	// Silent: Info hangs as well.
	cut := time.Now()
	fl.fakes[0].set(func(f *fakeShard) { f.hangInfo = true })
	if !waitStats(s, 10*time.Second, func(st ShardedWriterStats) bool { return st.Shards[0].Deaths == 1 }) {
		t.Fatalf("a silent shard was not marked dead: %+v", s.Stats())
	}
	if d, bound := time.Since(cut), ack+ack/4+probe; d > bound+time.Second {
		t.Errorf("marked dead after %v, want within %v (+1 s slack)", d, bound)
	}
	if st := s.Stats(); !strings.Contains(st.Shards[0].DownError, "unacknowledged") {
		t.Errorf("down error %q", st.Shards[0].DownError)
	}
	flushSharded(t, s) // the moved batches are stored on shard 1
	st := s.Stats()
	checkBalance(t, st)
	if st.Lost != 0 || st.Shards[1].Adopted == 0 || len(fl.fakes[1].rows())+len(fl.fakes[0].rows()) < int(next) {
		t.Errorf("stats %+v", st)
	}
	fl.fakes[0].set(func(f *fakeShard) { f.hangInfo, f.holdAcks = false, false })
	if !waitStats(s, 10*time.Second, func(st ShardedWriterStats) bool { return st.Shards[0].Live }) {
		t.Fatalf("shard 0 did not rejoin: %+v", s.Stats())
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestShardedWriterAllDown stops every shard: Insert blocks, then fails
// with an error naming each shard after AllDownTimeout, and the batches
// held are counted lost.
func TestShardedWriterAllDown(t *testing.T) {
	checkLeaks(t)
	fl := newTestFleet(t, 2)
	const allDown = 300 * time.Millisecond
	s := newTestShardedWriter(t, fl, "all-down", ShardedWriterOptions{WriterOptions: WriterOptions{Window: 2},
		AckTimeout: 100 * time.Millisecond, ProbeTimeout: 50 * time.Millisecond, AllDownTimeout: allDown})
	var next float32
	insertEpisodes(t, s, 1, 10, 2, &next)
	flushSharded(t, s)
	for _, f := range fl.fakes {
		f.set(func(f *fakeShard) { f.holdAcks = true })
	}
	insertEpisodes(t, s, 100, 2, 2, &next) // held: they will be lost
	for _, b := range fl.servers {
		b.stop()
	}
	start := time.Now()
	var err error
	for e := uint64(200); err == nil; e++ {
		err = s.Insert(episodeRows(2, next, e))
		next += 2
		if time.Since(start) > 20*time.Second {
			t.Fatal("Insert still taking batches 20 s after every shard stopped")
		}
	}
	if d := time.Since(start); d > allDown+2*time.Second {
		t.Errorf("Insert failed after %v, want about %v", d, allDown)
	}
	for _, want := range []string{"every replay shard has been down", "shard-0", "shard-1", "lost"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	st := s.Stats()
	checkBalance(t, st)
	if st.Lost == 0 || st.Live != 0 {
		t.Errorf("stats %+v", st)
	}
	if err2 := s.Insert(episodeRows(1, next, 1)); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("a later Insert: %v", err2)
	}
	if err2 := s.Close(context.Background()); err2 == nil {
		t.Error("Close after giving up: no error")
	}
}

func TestShardedWriterBadInput(t *testing.T) {
	checkLeaks(t)
	fl := newTestFleet(t, 2)
	if _, err := NewShardedWriter(nil, "w", ShardedWriterOptions{WriterOptions: WriterOptions{Layout: episodeLayout}}); err == nil {
		t.Error("no shards: no error")
	}
	if _, err := NewShardedWriter([]*Client{fl.clients[0], fl.clients[0]}, "w", ShardedWriterOptions{WriterOptions: WriterOptions{Layout: episodeLayout}}); err == nil {
		t.Error("a shard given twice: no error")
	}
	if _, err := NewShardedWriter(fl.clients, "", ShardedWriterOptions{WriterOptions: WriterOptions{Layout: episodeLayout}}); err == nil {
		t.Error("empty id: no error")
	}
	if _, err := NewShardedWriter(fl.clients, "w", ShardedWriterOptions{}); err == nil {
		t.Error("no layout: no error")
	}
	if _, err := NewShardedWriter(fl.clients, "w", ShardedWriterOptions{WriterOptions: WriterOptions{Layout: episodeLayout}, AckTimeout: -1}); err == nil {
		t.Error("negative AckTimeout: no error")
	}
	closed, err := Dial(context.Background(), "passthrough:///closed", ClientOptions{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	if _, err := NewShardedWriter([]*Client{fl.clients[0], closed}, "w", ShardedWriterOptions{WriterOptions: WriterOptions{Layout: episodeLayout}}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a closed client: %v", err) // and no goroutine left for the first shard (checkLeaks)
	}
	s := newTestShardedWriter(t, fl, "w", ShardedWriterOptions{})
	bad := episodeRows(3, 0, 1)
	bad.Obs = bad.Obs[:5]
	if err := s.Insert(bad); err == nil || !strings.Contains(err.Error(), "rows") {
		t.Errorf("ragged batch: %v", err)
	}
	if st := s.Stats(); st.Batches != 0 {
		t.Errorf("a malformed batch was taken: %+v", st)
	}
}

func TestConfigDiffAndFleetConfig(t *testing.T) {
	checkLeaks(t)
	if d := ConfigDiff([]byte(`{"a":1,"b":[1, 2]}`), []byte(`{"b":[1,2],"a":1}`)); d != "" {
		t.Errorf("equal configs: %q", d)
	}
	if d := ConfigDiff([]byte(`{"a":1,"b":2,"c":3}`), []byte(`{"a":1,"b":3,"d":3}`)); d != "b, c, d differ" {
		t.Errorf("diff %q", d)
	}
	if d := ConfigDiff([]byte(`{`), []byte(`{}`)); !strings.Contains(d, "not a JSON object") {
		t.Errorf("bad JSON: %q", d)
	}
	fl := newTestFleet(t, 3)
	names := []string{"a:1", "b:1", "c:1"}
	cfg, infos, err := FleetConfig(context.Background(), fl.clients, names)
	if err != nil || string(cfg) != `{"env":"test"}` {
		t.Fatalf("FleetConfig: %q, %v", cfg, err)
	}
	for i, info := range infos {
		if info.GetIncarnation() != uint64(100+i) {
			t.Errorf("infos[%d]: incarnation %d, want %d", i, info.GetIncarnation(), 100+i)
		}
	}
	// One server listed twice (its two entries report one incarnation):
	// refused, naming both entries.
	fl.fakes[2].set(func(f *fakeShard) { f.incarnation = 100 })
	if _, _, err = FleetConfig(context.Background(), fl.clients, names); err == nil || !strings.Contains(err.Error(), "a:1 and c:1 are one server") {
		t.Errorf("one server twice: %v", err)
	}
	fl.fakes[2].set(func(f *fakeShard) { f.incarnation, f.config = 102, []byte(`{"env":"other"}`) })
	_, _, err = FleetConfig(context.Background(), fl.clients, names)
	if err == nil || !strings.Contains(err.Error(), "a:1 and c:1") || !strings.Contains(err.Error(), "env differ") {
		t.Errorf("mismatch: %v", err)
	}
	fl.servers[1].stop()
	if _, _, err = FleetConfig(context.Background(), fl.clients, names); err == nil || !strings.Contains(err.Error(), "b:1") {
		t.Errorf("a shard down: %v", err)
	}
}

// TestShardedWriterStickyAfterRejoin: episodes moved off a dead shard
// stay on their new shard when it rejoins; new episodes of the rejoined
// shard's share go to it.
func TestShardedWriterStickyAfterRejoin(t *testing.T) {
	checkLeaks(t)
	fl := newTestFleet(t, 2)
	s := newTestShardedWriter(t, fl, "sticky", ShardedWriterOptions{WriterOptions: WriterOptions{Window: 2}})
	all := func(int) bool { return true }
	var mine, theirs []uint64 // episodes whose shard is 0, 1 with both alive
	for ep := uint64(1); len(mine) < 10 || len(theirs) < 10; ep++ {
		if rendezvous(episodeKey(s.idHash, ep), s.shards, all) == 0 {
			mine = append(mine, ep)
		} else {
			theirs = append(theirs, ep)
		}
	}
	fl.servers[0].stop()
	var next float32
	// The first rows of shard 0's episodes: the first batch finds the
	// shard dead (its stream breaks, the probe fails) and goes to shard 1.
	for _, ep := range mine[:5] {
		if err := s.Insert(episodeRows(2, next, ep)); err != nil {
			t.Fatal(err)
		}
		next += 2
	}
	flushSharded(t, s)
	if st := s.Stats(); st.Shards[0].Live || st.Shards[0].Deaths != 1 {
		t.Fatalf("shard 0 not dead: %+v", st.Shards[0])
	}
	fl.servers[0].start()
	if !waitStats(s, 10*time.Second, func(st ShardedWriterStats) bool { return st.Shards[0].Live }) {
		t.Fatalf("shard 0 did not rejoin: %+v", s.Stats())
	}
	// Their next rows stay on shard 1; shard 0's new episodes go to it.
	for _, ep := range mine {
		if err := s.Insert(episodeRows(2, next, ep)); err != nil {
			t.Fatal(err)
		}
		next += 2
	}
	flushSharded(t, s)
	on0, on1 := fl.fakes[0].rows(), fl.fakes[1].rows()
	if len(on0)+len(on1) != int(next) {
		t.Fatalf("stored %d+%d rows of %d", len(on0), len(on1), int(next))
	}
	eps0 := map[uint64]bool{}
	for _, ep := range on0 {
		eps0[ep] = true
	}
	for i, ep := range mine {
		if moved := i < 5; moved == eps0[ep] {
			t.Errorf("episode %d (moved off shard 0: %t) on shard 0: %t", ep, moved, eps0[ep])
		}
	}
}

// TestShardedWriterRefusal: a refusal that resending cannot cure
// (PermissionDenied) from one shard gives the whole writer up, naming the
// shard; what it held is counted lost.
func TestShardedWriterRefusal(t *testing.T) {
	checkLeaks(t)
	fl := newTestFleet(t, 2)
	fl.fakes[1].set(func(f *fakeShard) { f.refuse = status.Error(codes.PermissionDenied, "fake: no insert for you") })
	s := newTestShardedWriter(t, fl, "refused", ShardedWriterOptions{})
	var err error
	var next float32
	for ep := uint64(1); err == nil && ep < 1000; ep++ {
		err = s.Insert(episodeRows(2, next, ep))
		next += 2
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = s.Flush(ctx)
		cancel()
	}
	if err == nil || !strings.Contains(err.Error(), "shard-1") || !strings.Contains(err.Error(), "PermissionDenied") {
		t.Fatalf("error %v", err)
	}
	st := s.Stats()
	checkBalance(t, st)
	if st.Lost == 0 {
		t.Errorf("nothing counted lost: %+v", st)
	}
}

// TestShardedWriterConcurrentKill inserts from 4 goroutines while one of
// 3 shards, holding unacknowledged batches, is stopped and restarted
// twice: every row inserted is stored (on a live shard, or acknowledged
// by the stopped one before), no shard stores a row twice, nothing is
// lost.
func TestShardedWriterConcurrentKill(t *testing.T) {
	checkLeaks(t)
	fl := newTestFleet(t, 3)
	s := newTestShardedWriter(t, fl, "concurrent", ShardedWriterOptions{WriterOptions: WriterOptions{Window: 3},
		AckTimeout: 5 * time.Second, ProbeTimeout: time.Second})
	const goroutines, most = 4, 20000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	counts := make([]int, goroutines)
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for e := 0; e < most; e++ {
				select {
				case <-stop:
					return
				default:
				}
				ep := uint64(g)<<32 | uint64(e/3) // 3 batches per episode
				if err := s.Insert(episodeRows(2, float32((g*most+e)*2), ep)); err != nil {
					errs <- err
					return
				}
				counts[g]++
			}
		})
	}
	victim := fl.fakes[2]
	for k := range uint64(2) {
		victim.set(func(f *fakeShard) { f.holdAcks = true })
		if !waitStats(s, 10*time.Second, func(st ShardedWriterStats) bool { return st.Shards[2].Pending > 0 }) {
			t.Fatalf("no batch waits on shard 2: %+v", s.Stats())
		}
		fl.servers[2].stop()
		if !waitStats(s, 10*time.Second, func(st ShardedWriterStats) bool { return st.Shards[2].Deaths == k+1 }) {
			t.Fatalf("shard 2 not marked dead: %+v", s.Stats())
		}
		victim.set(func(f *fakeShard) { f.holdAcks = false })
		fl.servers[2].start()
		if !waitStats(s, 10*time.Second, func(st ShardedWriterStats) bool { return st.Shards[2].Live }) {
			t.Fatalf("shard 2 did not rejoin: %+v", s.Stats())
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	flushSharded(t, s)
	st := s.Stats()
	checkBalance(t, st)
	rows := 0
	for _, c := range counts {
		rows += 2 * c
	}
	if st.Lost != 0 || st.Items != uint64(rows) || st.Shards[2].Moved == 0 || st.Shards[2].Rejoins != 2 {
		t.Fatalf("stats %+v", st)
	}
	seen := map[float32]bool{}
	for i, f := range fl.fakes {
		if f.dupRows != 0 {
			t.Errorf("shard %d stored %d rows twice", i, f.dupRows)
		}
		for r := range f.rows() {
			seen[r] = true
		}
	}
	if len(seen) != rows {
		t.Errorf("%d distinct rows stored, inserted %d", len(seen), rows)
	}
	t.Logf("%d rows; shard 2: %d deaths, %d rejoins, %d batches moved", rows, st.Shards[2].Deaths, st.Shards[2].Rejoins, st.Shards[2].Moved)
}

// TestShardedWriterCloseUnblocks: Close with a context that has ended
// (apex actor's stop grace run out) while an Insert waits for a held
// shard's window: the Insert returns the loss, Close says how many
// batches were lost, and the counts add up.
func TestShardedWriterCloseUnblocks(t *testing.T) {
	checkLeaks(t)
	fl := newTestFleet(t, 2)
	for _, f := range fl.fakes {
		f.set(func(f *fakeShard) { f.holdAcks = true })
	}
	s := newTestShardedWriter(t, fl, "close", ShardedWriterOptions{WriterOptions: WriterOptions{Window: 1}, AckTimeout: time.Minute})
	done := make(chan error, 1)
	go func() {
		var next float32
		for ep := uint64(1); ; ep++ {
			if err := s.Insert(episodeRows(2, next, ep)); err != nil {
				done <- err
				return
			}
			next += 2
		}
	}()
	// The Insert goroutine ends up waiting for a full window (of one
	// shard; Inserts are serialized, so the other may be empty).
	if !waitStats(s, 10*time.Second, func(st ShardedWriterStats) bool { return st.Shards[0].Blocked+st.Shards[1].Blocked > 0 }) {
		t.Fatalf("no Insert waits: %+v", s.Stats())
	}
	held := s.Stats().Shards[0].Pending + s.Stats().Shards[1].Pending
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Close(expired)
	if want := fmt.Sprintf("%d batches (%d items) lost", held, 2*held); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Close: %v, want %q", err, want)
	}
	select {
	case ierr := <-done:
		if ierr == nil {
			t.Error("the waiting Insert returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Insert did not return after Close")
	}
	st := s.Stats()
	checkBalance(t, st)
	if st.Lost != uint64(held) || st.LostItems != uint64(2*held) {
		t.Errorf("stats %+v, %d batches held", st, held)
	}
}

// TestShardedWriterSplitsMovedMessage: one Insert of two episodes that
// both live on shard X travels as one message; X dies holding it
// unacknowledged. The message is split by episode: each episode's rows
// go to the shard its own placement now names (they differ), and the
// running episode's later rows follow them there, so on the surviving
// shards each episode is whole on one shard.
func TestShardedWriterSplitsMovedMessage(t *testing.T) {
	checkLeaks(t)
	fl := newTestFleet(t, 3)
	s := newTestShardedWriter(t, fl, "host-2/actor-host-0/split", ShardedWriterOptions{
		WriterOptions: WriterOptions{Window: 4}, AckTimeout: time.Second, ProbeTimeout: 200 * time.Millisecond})
	all := func(int) bool { return true }
	// Episodes a and b: both on shard x with every shard alive, on two
	// different shards once x is gone.
	var a, b uint64
	x := -1
	found := false
	for e := uint64(1); e < 100000 && !found; e++ {
		xe := rendezvous(episodeKey(s.idHash, e), s.shards, all)
		if x < 0 {
			x, a = xe, e
			continue
		}
		if xe != x {
			continue
		}
		without := func(i int) bool { return i != x }
		if rendezvous(episodeKey(s.idHash, a), s.shards, without) != rendezvous(episodeKey(s.idHash, e), s.shards, without) {
			b, found = e, true
		}
	}
	if !found {
		t.Fatal("no two episodes of one shard that part when it dies")
	}
	fl.fakes[x].set(func(f *fakeShard) { f.holdAcks = true })
	var next float32
	tr := episodeRows(3, next, a)
	next += 3
	pb := episodeRows(3, next, b)
	next += 3
	tr.Obs, tr.NextObs, tr.Action = append(tr.Obs, pb.Obs...), append(tr.NextObs, pb.NextObs...), append(tr.Action, pb.Action...)
	tr.Reward, tr.Discount = append(tr.Reward, pb.Reward...), append(tr.Discount, pb.Discount...)
	tr.EpisodeID, tr.EpisodeStep = append(tr.EpisodeID, pb.EpisodeID...), append(tr.EpisodeStep, pb.EpisodeStep...)
	if err := s.Insert(tr); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Shards[x].Batches != 1 {
		t.Fatalf("the two episodes took %d messages to shard %d, want one: %+v", st.Shards[x].Batches, x, st)
	}
	fl.servers[x].stop()
	if !waitStats(s, 10*time.Second, func(st ShardedWriterStats) bool { return st.Shards[x].Deaths == 1 }) {
		t.Fatalf("shard %d not marked dead: %+v", x, s.Stats())
	}
	// Episode a goes on (its next rows), then b.
	for _, ep := range []uint64{a, b} {
		if err := s.Insert(episodeRows(2, next, ep)); err != nil {
			t.Fatal(err)
		}
		next += 2
	}
	flushSharded(t, s)
	st := s.Stats()
	checkBalance(t, st)
	if st.Splits != 1 || st.Batches != 4 {
		t.Errorf("splits %d batches %d, want 1 split and 4 batches (1 inserted, 1 extra piece, 2 inserted)", st.Splits, st.Batches)
	}
	where := map[uint64]map[int]int{a: {}, b: {}} // episode → shard → rows
	for i, f := range fl.fakes {
		if i == x {
			continue
		}
		for _, ep := range f.rows() {
			where[ep][i]++
		}
	}
	for _, ep := range []uint64{a, b} {
		want := rendezvous(episodeKey(s.idHash, ep), s.shards, func(i int) bool { return i != x })
		if len(where[ep]) != 1 || where[ep][want] != 5 {
			t.Errorf("episode %d on the surviving shards: %v (shard → rows), want all 5 rows on shard %d", ep, where[ep], want)
		}
	}
}
