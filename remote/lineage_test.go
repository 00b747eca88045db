package remote

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
)

// TestShardLineagesRule: lineage 0 is always taken; a shard's own
// lineage is taken; another shard's is refused (ErrShardSwapped); a
// never-seen lineage on a known shard is a reset and becomes its own;
// every lineage a shard had stays its own.
func TestShardLineagesRule(t *testing.T) {
	l := newShardLineages(2)
	step := func(i int, lin uint64, wantReset, wantSwap bool) {
		t.Helper()
		reset, err := l.check(i, lin, nil)
		if reset != wantReset || errors.Is(err, ErrShardSwapped) != wantSwap || (err != nil) != wantSwap {
			t.Fatalf("check(%d, %d): reset %v, err %v; want reset %v, swapped %v", i, lin, reset, err, wantReset, wantSwap)
		}
	}
	step(0, 0, false, false)
	step(0, 10, false, false)
	step(1, 20, false, false)
	step(0, 10, false, false)
	step(1, 10, false, true) // shard 0's
	step(0, 20, false, true) // shard 1's
	step(1, 0, false, false) // an old server
	step(0, 11, true, false) // shard 0 lost its data
	step(1, 10, false, true) // still shard 0's
	if l.get(0) != 11 || l.get(1) != 20 || l.ownerOf(10) != 0 || l.ownerOf(99) != -1 {
		t.Fatalf("lineages %v", l.of)
	}
}

// TestWriterTableLineageRoundTrip: a server's lineage is saved in its
// checkpoint's writer table and taken back by a server restored from it;
// a server without one (nil Writers, or a table without a lineage: a
// version-1 file or one written before lineages) draws a new one.
func TestWriterTableLineageRoundTrip(t *testing.T) {
	dir := t.TempDir()
	tab := testTable(t, "per", smallCfg(16, 1), nil)
	tab.CheckpointDir = dir
	h := serve(t, tab, ServerOptions{})
	lin := h.srv.Lineage()
	if lin == 0 || h.srv.Stats().Lineage != lin {
		t.Fatalf("lineage %d, stats %d", lin, h.srv.Stats().Lineage)
	}
	info, err := h.cli.Info(ctx(t), &replayv1.InfoRequest{})
	if err != nil || info.GetLineage() != lin {
		t.Fatalf("Info lineage %d, %v; want %d", info.GetLineage(), err, lin)
	}
	path := filepath.Join(dir, "table.ckpt")
	if err := writeWriterTable(path, h.srv.writerTable(false)); err != nil {
		t.Fatal(err)
	}
	wt, err := ReadWriterTable(path)
	if err != nil || wt.Lineage != lin {
		t.Fatalf("read back lineage %+v, %v; want %d", wt, err, lin)
	}
	restored, err := NewServer(testTable(t, "per", smallCfg(16, 1), nil), ServerOptions{Writers: wt})
	if err != nil {
		t.Fatal(err)
	}
	if restored.Lineage() != lin || restored.Incarnation() == h.srv.Incarnation() {
		t.Fatalf("restored lineage %d incarnation %d; want lineage %d and a new incarnation", restored.Lineage(), restored.Incarnation(), lin)
	}
	fresh, err := NewServer(testTable(t, "per", smallCfg(16, 1), nil), ServerOptions{Writers: &WriterTable{CountsPartial: true}})
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Lineage() == 0 || fresh.Lineage() == lin {
		t.Fatalf("a server without a lineage to go on from has %d (the other's %d)", fresh.Lineage(), lin)
	}
	v1 := filepath.Join(dir, "v1.ckpt")
	if err := os.WriteFile(WriterTableFile(v1), []byte(`{"version":1,"writers":{"w":3}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if wt, err := ReadWriterTable(v1); err != nil || wt.Lineage != 0 || wt.Writers["w"].High != 3 {
		t.Fatalf("version 1: %+v, %v", wt, err)
	}
}

// lineageShard is a real replay server on a TCP address, restartable.
type lineageShard struct {
	srv  *Server
	gs   *GRPCServer
	done chan error
	once sync.Once
}

func startLineageShard(t *testing.T, addr string, restored *WriterTable) *lineageShard {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if goruntime.GOOS != "linux" {
			t.Skipf("listen %s: %v (127.0.0.0/8 beyond 127.0.0.1 is routed to loopback on Linux)", addr, err)
		}
		t.Fatal(err)
	}
	srv, err := NewServer(testTable(t, "uniform", episodeLayout, nil), ServerOptions{Writers: restored})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := NewGRPCServer(srv, GRPCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := &lineageShard{srv: srv, gs: gs, done: make(chan error, 1)}
	go func() { s.done <- gs.Serve(ln) }()
	t.Cleanup(s.stopNow)
	return s
}

// stopNow stops the server (once) and waits for Serve to return.
func (s *lineageShard) stopNow() {
	s.once.Do(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.gs.Shutdown(c)
		<-s.done
	})
}

// TestShardTrackerLineageSwap reproduces the review's swap: shards A (on
// 127.0.0.1) and B (on 127.0.0.2) of one DNS name both restart from their
// checkpoints' writer tables; A comes back on B's old address, B on a new
// one (127.0.0.3). The address rule alone pairs them the wrong way round
// (A moves to B's new address, B stays on its old one, now A's), which
// sent each shard's batches to the other's writer table, deduplicated
// there as already stored. With lineages the tracker pairs them right
// and the writer goes on with no loss; without the tracker's lineages it
// pairs them wrong and the writer refuses both (ErrShardSwapped, counted)
// and gives up, its unstored batches counted lost. Either way nothing is
// acknowledged without being stored: every batch the writer had acked is
// stored on some server and no restored server deduplicated one.
func TestShardTrackerLineageSwap(t *testing.T) {
	for _, withLineage := range []bool{true, false} {
		name := "paired"
		if !withLineage {
			name = "refused"
		}
		t.Run(name, func(t *testing.T) { testLineageSwap(t, withLineage) })
	}
}

func testLineageSwap(t *testing.T, withLineage bool) {
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(probe.Addr().String())
	probe.Close()
	a := startLineageShard(t, "127.0.0.1:"+port, nil)
	b := startLineageShard(t, "127.0.0.2:"+port, nil)

	dns := &fakeDNS{answers: map[string][]string{"fleet.test": {"127.0.0.2", "127.0.0.1"}}}
	shards, err := ResolveShards(context.Background(), "fleet.test:"+port, dns.lookup)
	if err != nil {
		t.Fatal(err)
	}
	var ev trackerEvents
	topts := ev.opts(dns)
	topts.Interval = 10 * time.Millisecond
	copts := ClientOptions{CallTimeout: time.Second}
	if withLineage {
		topts.Lineage = InfoLineage(copts)
	}
	tr := NewShardTracker(shards, topts)
	var clients []*Client
	for i, sa := range shards {
		o := copts
		o.Dialer = tr.Dialer(i)
		c, err := DialShard(context.Background(), sa, o)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	// Refused, the writer gives up 3 s after both shards died; paired, a
	// loaded machine's reconnections get 20 s.
	wopts := ShardedWriterOptions{WriterOptions: WriterOptions{Layout: episodeLayout}, AllDownTimeout: 3 * time.Second,
		ProbeTimeout: 2 * time.Second}
	if withLineage {
		wopts.AllDownTimeout = 20 * time.Second
	}
	wopts.MinBackoff, wopts.MaxBackoff = time.Millisecond, 50*time.Millisecond
	w, err := NewShardedWriter(clients, "actor-0", wopts)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			w.Close(c)
		}
	}()
	flush := func() error {
		c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return w.Flush(c)
	}
	// Phase 1: episodes on both shards, until their writers' seqs differ
	// (a wrong pairing then has one shard's seqs under the other's high).
	ep := uint64(0)
	for {
		ep++
		if err := w.Insert(episodeRows(3, float32(ep), ep)); err != nil {
			t.Fatal(err)
		}
		if err := flush(); err != nil {
			t.Fatal(err)
		}
		st := w.Stats()
		if ep >= 20 && st.Shards[0].Acked != st.Shards[1].Acked && st.Shards[0].Acked > 0 && st.Shards[1].Acked > 0 {
			break
		}
		if ep > 500 {
			t.Fatalf("placement: %+v", st.Shards)
		}
	}
	linA, linB := a.srv.Lineage(), b.srv.Lineage()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("after 10 s: %s (shards at %s and %s; tracker %+v; writer %+v)", what, tr.Addr(0), tr.Addr(1), tr.Stats(), w.Stats().Shards)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the writer learns the lineages", func() bool {
		st := w.Stats()
		return st.Shards[0].Lineage == linA && st.Shards[1].Lineage == linB
	})
	if withLineage && (tr.Lineage(0) != linA || tr.Lineage(1) != linB) {
		t.Fatalf("tracker lineages %x %x, want %x %x", tr.Lineage(0), tr.Lineage(1), linA, linB)
	}

	// Both restart from their checkpoints' writer tables: A on B's old
	// address, B on a new one.
	tabA, tabB := a.srv.writerTable(false), b.srv.writerTable(false)
	a.stopNow()
	b.stopNow()
	dns.set("fleet.test", "127.0.0.2", "127.0.0.3")
	a2 := startLineageShard(t, "127.0.0.2:"+port, tabA)
	b2 := startLineageShard(t, "127.0.0.3:"+port, tabB)
	if a2.srv.Lineage() != linA || b2.srv.Lineage() != linB {
		t.Fatal("restored servers lost their lineages")
	}

	// Phase 2: more episodes at once (the writer's streams reconnect as
	// they send); with lineages, again once both shards are live (so each
	// restored server takes some).
	insertErr := insertN(w, &ep, 40)
	if insertErr == nil {
		insertErr = flush()
	}
	if withLineage && insertErr == nil {
		waitFor("both shards live again", func() bool {
			st := w.Stats()
			return st.Live == 2
		})
		if insertErr = insertN(w, &ep, 40); insertErr == nil {
			insertErr = flush()
		}
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	closeErr := w.Close(c)
	cancel()
	closed = true
	st := w.Stats()

	var stored, dups uint64
	for _, s := range []*lineageShard{a, b, a2, b2} {
		ss := s.srv.Stats()
		stored += ss.InsertedItems
		dups += ss.DuplicateBatches
	}
	var acked uint64
	for _, sh := range st.Shards {
		acked += sh.AckedItems
	}
	if dups != 0 {
		t.Errorf("%d batches acknowledged as duplicates: another shard's writer table deduplicated them (silent loss)", dups)
	}
	if stored < acked {
		t.Errorf("%d items stored on all servers, %d acknowledged: silent loss", stored, acked)
	}
	if stored+st.LostItems < st.Items {
		t.Errorf("%d items inserted, %d stored and %d counted lost", st.Items, stored, st.LostItems)
	}
	if withLineage {
		if insertErr != nil || closeErr != nil {
			t.Fatalf("insert %v, close %v; want none (paired by lineage)", insertErr, closeErr)
		}
		if tr.Addr(0) != "127.0.0.2:"+port || tr.Addr(1) != "127.0.0.3:"+port {
			t.Errorf("shards at %s and %s, want A on 127.0.0.2 and B on 127.0.0.3", tr.Addr(0), tr.Addr(1))
		}
		if ts := tr.Stats(); ts.LineageMoves != 2 {
			t.Errorf("tracker stats %+v, want 2 lineage moves", ts)
		}
		if a2.srv.Stats().InsertedItems == 0 || b2.srv.Stats().InsertedItems == 0 {
			t.Errorf("restored shards stored %d and %d items, want both some", a2.srv.Stats().InsertedItems, b2.srv.Stats().InsertedItems)
		}
		for i, sh := range st.Shards {
			if sh.SwapRefusals != 0 {
				t.Errorf("shard %d: %d swap refusals, want 0", i, sh.SwapRefusals)
			}
		}
		return
	}
	if insertErr == nil || !strings.Contains(insertErr.Error(), ErrShardSwapped.Error()) {
		t.Errorf("insert error %v, want the writer to give up on swapped shards (ErrShardSwapped)", insertErr)
	}
	if st.Shards[0].SwapRefusals == 0 || st.Shards[1].SwapRefusals == 0 {
		t.Errorf("swap refusals %d and %d, want both > 0 (shards at %s and %s)", st.Shards[0].SwapRefusals, st.Shards[1].SwapRefusals, tr.Addr(0), tr.Addr(1))
	}
}

// insertN inserts n one-batch episodes of 3 rows after *ep.
func insertN(w *ShardedWriter, ep *uint64, n int) error {
	for range n {
		*ep++
		if err := w.Insert(episodeRows(3, float32(*ep), *ep)); err != nil {
			return err
		}
	}
	return nil
}

// TestShardedMethodLineage: the learner records each shard's lineage; a
// shard whose new incarnation reports another shard's lineage (a swap)
// is refused, counted in SwapRefused and wrapping ErrShardSwapped; one
// restarted without its checkpoint (a lineage never seen) is taken back,
// counted in LineageResets.
func TestShardedMethodLineage(t *testing.T) {
	checkLeaks(t)
	layout := shardLayout(16)
	const cfg = `{"run":1,"sampler":"per"}`
	ones := []float64{1, 1, 1, 1, 1, 1, 1, 1}
	a, b, local := filledShards(t, layout, cfg, ones)
	c, cancel := context.WithCancel(context.Background())
	defer cancel()
	counters := &ShardCounters{}
	var refusals []error
	m, err := ShardedMethod(c, clientsOf(a, b), local, 0, ShardOptions{Deadline: 300 * time.Millisecond, ProbeMin: 5 * time.Millisecond, ProbeMax: 20 * time.Millisecond,
		Counters: counters, OnRefused: func(_ string, _ uint64, err error) { refusals = append(refusals, err) }})
	if err != nil {
		t.Fatal(err)
	}
	if st := counters.Snapshot(); st.Shards[0].Lineage != a.srv.Lineage() || st.Shards[1].Lineage != b.srv.Lineage() {
		t.Fatalf("lineages %x %x, want %x %x", st.Shards[0].Lineage, st.Shards[1].Lineage, a.srv.Lineage(), b.srv.Lineage())
	}
	s := m.Selector.(*sharded)
	sh := s.shards[1]
	// Shard b's probe reaches a server with shard a's lineage (a's
	// checkpoint restored where b was): refused.
	sh.up = false
	sh.probe.Store(&replayv1.InfoReply{Incarnation: 77, Lineage: a.srv.Lineage(), Config: []byte(cfg), Tables: []*replayv1.TableInfo{s.tab}})
	s.rejoin()
	st := counters.Snapshot().Shards[1]
	if sh.up || st.Refused != 1 || st.SwapRefused != 1 || !strings.Contains(st.Refusal, "lineage") || len(refusals) != 1 || !errors.Is(refusals[0], ErrShardSwapped) {
		t.Fatalf("a probe reaching shard a's lineage: up %v, %+v, told %v", sh.up, st, refusals)
	}
	// Restarted without a checkpoint (a new lineage): taken back.
	sh.up = true
	rng := rand.New(rand.NewPCG(5, 6))
	dst, _ := a.buf.NewBatch(8)
	b.restart(t, "per", layout, nil, cfg, ones, 1)
	deadline := time.Now().Add(5 * time.Second)
	for counters.Snapshot().Shards[1].LineageResets == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("shard b restarted with a new lineage not taken back within 5 s: %+v", counters.Snapshot().Shards[1])
		}
		if err := m.Selector.Sample(rng, dst); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if st := counters.Snapshot().Shards[1]; st.Lineage != b.srv.Lineage() || st.SwapRefused != 1 {
		t.Fatalf("after the reset: %+v (lineage want %x)", st, b.srv.Lineage())
	}
	cancel()
}

// TestShardTrackerLineageRule: with lineages the tracker pairs shards
// with the addresses their lineages answer at, however many moved (an
// exact swap of two addresses, which the address rule does not even
// notice); a shard whose lineage is known does not take part in the
// address rule while an address did not answer; a never-seen lineage on
// a lone gone shard is paired by the address rule; a connection to
// another shard's server is refused (ErrShardSwapped).
func TestShardTrackerLineageRule(t *testing.T) {
	dns := &fakeDNS{answers: map[string][]string{"fleet.test": {"10.0.0.1", "10.0.0.2", "10.0.0.3"}}}
	var mu sync.Mutex
	lins := map[string]uint64{"10.0.0.1:7700": 11, "10.0.0.2:7700": 22, "10.0.0.3:7700": 33}
	set := func(m map[string]uint64) {
		mu.Lock()
		defer mu.Unlock()
		lins = m
	}
	var ev trackerEvents
	opts := ev.opts(dns)
	opts.Lineage = func(_ context.Context, host, addr string) (uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		if host != "fleet.test" {
			t.Errorf("Lineage asked for host %q", host)
		}
		if l, ok := lins[addr]; ok {
			return l, nil
		}
		return 0, errors.New("connection refused")
	}
	shards, err := ResolveShards(context.Background(), "fleet.test:7700", dns.lookup)
	if err != nil {
		t.Fatal(err)
	}
	tr := NewShardTracker(shards, opts)
	c := context.Background()
	for i := range shards { // first contact
		if err := tr.verify(c, i, tr.Addr(i)); err != nil {
			t.Fatal(err)
		}
	}
	if tr.Lineage(0) != 11 || tr.Lineage(1) != 22 || tr.Lineage(2) != 33 {
		t.Fatalf("lineages %d %d %d", tr.Lineage(0), tr.Lineage(1), tr.Lineage(2))
	}
	addrs := func() string { return tr.Addr(0) + " " + tr.Addr(1) + " " + tr.Addr(2) }
	// Shards 0 and 1 swap addresses exactly.
	set(map[string]uint64{"10.0.0.1:7700": 22, "10.0.0.2:7700": 11, "10.0.0.3:7700": 33})
	if err := tr.verify(c, 0, "10.0.0.1:7700"); !errors.Is(err, ErrShardSwapped) {
		t.Fatalf("a connection of shard 0 to shard 1's server: %v", err)
	}
	tr.Refresh(c, 0)
	if got := addrs(); got != "10.0.0.2:7700 10.0.0.1:7700 10.0.0.3:7700" {
		t.Fatalf("after the swap: %s", got)
	}
	if moves, _ := ev.take(); len(moves) != 2 {
		t.Fatalf("moves %v", moves)
	}
	// Shard 2 moves to a new address that does not answer yet, and shard
	// 0 restarts without its checkpoint (a new lineage) at its address:
	// both wait while an address is unanswered (shard 0's own lineage
	// might be there).
	dns.set("fleet.test", "10.0.0.1", "10.0.0.2", "10.0.0.9")
	set(map[string]uint64{"10.0.0.1:7700": 22, "10.0.0.2:7700": 44})
	tr.Refresh(c, 2)
	if got := addrs(); got != "10.0.0.2:7700 10.0.0.1:7700 10.0.0.3:7700" || tr.Lineage(0) != 11 {
		t.Fatalf("with 10.0.0.9 unanswered: %s, shard 0's lineage %d", got, tr.Lineage(0))
	}
	// It answers with shard 2's lineage: paired; shard 0's lineage is
	// nowhere, so the new one at its address is its own (it lost its data).
	set(map[string]uint64{"10.0.0.1:7700": 22, "10.0.0.2:7700": 44, "10.0.0.9:7700": 33})
	tr.Refresh(c, 2)
	if got := addrs(); got != "10.0.0.2:7700 10.0.0.1:7700 10.0.0.9:7700" || tr.Lineage(0) != 44 {
		t.Fatalf("after shard 2 answered: %s, shard 0's lineage %d", got, tr.Lineage(0))
	}
	// Shard 2 restarts without its checkpoint on another new address: the
	// address rule pairs the lone gone shard with the lone new address.
	dns.set("fleet.test", "10.0.0.1", "10.0.0.2", "10.0.0.8")
	set(map[string]uint64{"10.0.0.1:7700": 22, "10.0.0.2:7700": 44, "10.0.0.8:7700": 55})
	tr.Refresh(c, 2)
	if got := addrs(); got != "10.0.0.2:7700 10.0.0.1:7700 10.0.0.8:7700" || tr.Lineage(2) != 55 {
		t.Fatalf("after shard 2 lost its data: %s, lineage %d", got, tr.Lineage(2))
	}
	if st := tr.Stats(); st.LineageMoves != 3 || st.Moves != 4 || st.SwapRefusals != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestInsertLineageChecked: a batch that expects another data lineage is
// refused with Aborted before the writer table is consulted (no
// duplicate acknowledged, nothing stored, counted as rejected); one that
// expects the server's, or none, is stored.
func TestInsertLineageChecked(t *testing.T) {
	cfg := smallCfg(64, 1)
	h := serve(t, testTable(t, "per", cfg, nil), ServerOptions{})
	lin := h.srv.Lineage()
	_, cols := batchOf(t, rand.New(rand.NewPCG(1, 2)), cfg, 4)
	st := h.insertStream(ctx(t))
	if err := st.Send(&replayv1.InsertRequest{Writer: "w", Seq: 1, Data: cols, Lineage: lin}); err != nil {
		t.Fatal(err)
	}
	if ack, err := st.Recv(); err != nil || ack.GetDuplicate() {
		t.Fatalf("the server's own lineage: %v, %v", ack, err)
	}
	if ack := insert(t, st, "w", 2, cols); ack.GetDuplicate() {
		t.Fatalf("no lineage: %v", ack)
	}
	if err := st.Send(&replayv1.InsertRequest{Writer: "w", Seq: 1, Data: cols, Lineage: lin ^ 1}); err != nil {
		t.Fatal(err)
	}
	_, err := st.Recv()
	wantCode(t, "another lineage", err, codes.Aborted)
	if s := h.srv.Stats(); s.InsertedItems != 8 || s.DuplicateBatches != 0 || s.RejectedMessages != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestShardLineagesPeek checks that peek answers as check would but
// records nothing: a server the learner refuses for another reason (its
// configuration) must not leave its lineage owned by the shard whose
// address reached it, or that lineage's real shard would later be refused
// as a swap.
func TestShardLineagesPeek(t *testing.T) {
	l := newShardLineages(2)
	if _, err := l.check(0, 0xa, nil); err != nil {
		t.Fatal(err)
	}
	reset, err := l.peek(0, 0xb, nil) // shard 0's address reaches lineage b, then refused
	if err != nil || !reset {
		t.Fatalf("peek(0, b) = %v, %v; want a reset and no error", reset, err)
	}
	if got := l.get(0); got != 0xa {
		t.Fatalf("after peek, shard 0's lineage is %x, want a", got)
	}
	if _, err := l.check(1, 0xb, nil); err != nil {
		t.Fatalf("lineage b on its own shard 1 after a peek on shard 0: %v", err)
	}
	if _, err := l.peek(0, 0xb, nil); !errors.Is(err, ErrShardSwapped) {
		t.Fatalf("peek(0, b) once b is shard 1's: %v, want ErrShardSwapped", err)
	}
}
