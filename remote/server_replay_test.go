package remote

import (
	"bytes"
	"context"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
)

// TestDrawsMatchInProcess: a draw's rows, keys, probabilities and weights
// are those the same method gives in process for the same seed over the
// same contents, draw after draw with write-backs in between.
func TestDrawsMatchInProcess(t *testing.T) {
	for _, name := range []string{"per", "uniform", "rank", "ter"} {
		t.Run(name, func(t *testing.T) {
			const seed = 42
			cfg := smallCfg(256, 4)
			served := testTable(t, name, cfg, nil)
			local := testTable(t, name, cfg, nil)
			h := serve(t, served, ServerOptions{})
			rng := rand.New(rand.NewPCG(seed, 0))
			st := h.insertStream(ctx(t))
			for seq := uint64(1); seq <= 10; seq++ {
				tr, c := batchOf(t, rng, cfg, 30)
				chainHashes(rng, tr)
				if err := EncodeTransitions(c, cfg, tr); err != nil {
					t.Fatal(err)
				}
				insert(t, st, "w", seq, c)
				if err := local.Buffer.Insert(tr); err != nil {
					t.Fatal(err)
				}
			}
			ss := h.sampleStream(ctx(t))
			const rows = 16
			lb, err := local.Buffer.NewBatch(rows)
			if err != nil {
				t.Fatal(err)
			}
			for step := uint64(1); step <= 6; step++ {
				s := rng.Uint64()
				got := draw(t, ss, &replayv1.Draw{Id: step, Batch: rows, Seed: s, Step: step})
				if err := SampleSeeded(local.Method.Selector, s, lb); err != nil {
					t.Fatal(err)
				}
				if local.Method.Weighter != nil {
					if err := local.Method.Weighter.Weights(lb, int64(step-1)); err != nil {
						t.Fatal(err)
					}
				}
				if !slices.Equal(got.Keys, AppendKeys(nil, lb.Refs)) {
					t.Fatalf("seed %d step %d: keys %v, in process %v", seed, step, got.Keys, AppendKeys(nil, lb.Refs))
				}
				if !slices.Equal(got.Prob, lb.Prob) || got.Total != lb.Total || got.Size != uint64(lb.Size) || got.MinProb != lb.MinProb {
					t.Fatalf("seed %d step %d: probabilities differ: %v vs %v", seed, step, got.Prob, lb.Prob)
				}
				if local.Method.Weighter != nil && !slices.Equal(got.Weight, lb.Weight) {
					t.Fatalf("seed %d step %d: weights %v, in process %v", seed, step, got.Weight, lb.Weight)
				}
				if local.Method.Weighter == nil && len(got.Weight) != 0 {
					t.Fatalf("weights sent for a stage without a Weighter")
				}
				var dec buffer.Transitions
				if err := DecodeTransitions(&dec, cfg, got.Data); err != nil {
					t.Fatal(err)
				}
				want := lb.Transitions
				want.Priority = nil
				if !sameColumns(&dec, &want) {
					t.Fatalf("seed %d step %d: rows differ", seed, step)
				}
				td := make([]float64, rows)
				for i := range td {
					td[i] = rng.Float64() * 3
				}
				res := writeBack(t, ss, &replayv1.WriteBack{Id: step, Incarnation: got.Incarnation, Keys: got.Keys, AbsTd: td})
				lr, err := local.Method.Selector.Update(lb.Refs, td)
				if err != nil {
					t.Fatal(err)
				}
				if int(res.Applied) != lr.Applied || int(res.Stale) != lr.Stale {
					t.Fatalf("write-back %v, in process %+v", res, lr)
				}
			}
		})
	}
}

// chainHashes links tr's states into short episodes (each next state the
// following item's state, every fifth item terminal), so TER's graph has
// edges to sweep.
func chainHashes(rng *rand.Rand, tr *buffer.Transitions) {
	for i := range tr.Len() {
		tr.Flags[i] = 0
		if i > 0 && tr.Flags[i-1]&buffer.FlagTerminal == 0 {
			tr.StateHash[i] = tr.NextStateHash[i-1]
		}
		if i%5 == 4 {
			tr.Flags[i] = buffer.FlagTerminal
		}
		tr.NextStateHash[i] = rng.Uint64()
	}
}

// TestStaleAndWrongIncarnation: a write-back for overwritten slots is
// counted stale and not applied; one for an earlier incarnation (a
// restarted server over the same data) is dropped whole and counted.
func TestStaleAndWrongIncarnation(t *testing.T) {
	cfg := smallCfg(8, 1)
	tab := testTable(t, "per", cfg, nil)
	h := serve(t, tab, ServerOptions{})
	rng := rand.New(rand.NewPCG(5, 5))
	ins := h.insertStream(ctx(t))
	_, c := batchOf(t, rng, cfg, 8)
	insert(t, ins, "w", 1, c)
	ss := h.sampleStream(ctx(t))
	b := draw(t, ss, &replayv1.Draw{Id: 1, Batch: 4, Seed: 1, Step: 1})
	_, c = batchOf(t, rng, cfg, 8) // overwrites every slot
	insert(t, ins, "w", 2, c)
	before := priorities(tab.Buffer)
	td := []float64{50, 50, 50, 50}
	res := writeBack(t, ss, &replayv1.WriteBack{Id: 1, Incarnation: b.Incarnation, Keys: b.Keys, AbsTd: td})
	if res.Applied != 0 || res.Stale != 4 || res.WrongIncarnation != 0 {
		t.Fatalf("write-back over overwritten slots: %v, want 4 stale", res)
	}
	if after := priorities(tab.Buffer); !slices.Equal(before, after) {
		t.Fatalf("a stale write-back changed priorities: %v → %v", before, after)
	}
	fresh := draw(t, ss, &replayv1.Draw{Id: 2, Batch: 4, Seed: 2, Step: 2})
	h.stop()

	h2 := serve(t, tab, ServerOptions{}) // restarted over the same buffer
	if h2.srv.Incarnation() == h.srv.Incarnation() {
		t.Fatal("a restarted server kept its incarnation")
	}
	ss2 := h2.sampleStream(ctx(t))
	res = writeBack(t, ss2, &replayv1.WriteBack{Id: 2, Incarnation: fresh.Incarnation, Keys: fresh.Keys, AbsTd: td})
	if res.Applied != 0 || res.Stale != 0 || res.WrongIncarnation != 4 {
		t.Fatalf("write-back of the earlier incarnation: %v, want 4 wrong_incarnation", res)
	}
	if after := priorities(tab.Buffer); !slices.Equal(before, after) {
		t.Fatalf("a wrong-incarnation write-back changed priorities")
	}
	if s := h2.srv.Stats(); s.WriteBacksWrongIncarnation != 4 || s.WriteBacksApplied != 0 {
		t.Fatalf("stats %+v", s)
	}
	// The same keys with the new incarnation apply (the slots still hold
	// those items).
	res = writeBack(t, ss2, &replayv1.WriteBack{Id: 3, Incarnation: h2.srv.Incarnation(), Keys: fresh.Keys, AbsTd: td})
	if res.Applied != 4 {
		t.Fatalf("write-back with the current incarnation: %v, want 4 applied", res)
	}
}

func priorities(b *buffer.Buffer) []float64 {
	p := make([]float64, b.Capacity())
	for i := range p {
		_, p[i], _ = b.SlotPriority(i)
	}
	return p
}

// TestWatchAndFetch: Watch reports every inserted item (events bounded by
// max_items), and Fetch returns them by key, with stale and unknown keys
// not found.
func TestWatchAndFetch(t *testing.T) {
	cfg := smallCfg(64, 4)
	h := serve(t, testTable(t, "per", cfg, nil), ServerOptions{})
	rng := rand.New(rand.NewPCG(6, 6))
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws, err := h.cli.Watch(wctx, &replayv1.WatchRequest{MaxItems: 3})
	if err != nil {
		t.Fatal(err)
	}
	ins := h.insertStream(ctx(t))
	byHash := map[uint64]int{} // state hash → index in all
	var all []*buffer.Transitions
	for seq := uint64(1); seq <= 2; seq++ {
		tr, c := batchOf(t, rng, cfg, 4+int(seq))
		insert(t, ins, "w", seq, c)
		for i := range tr.Len() {
			byHash[tr.StateHash[i]] = len(all)*100 + i
		}
		all = append(all, tr)
	}
	var keys []uint64
	for len(keys) < 11 {
		ev, err := ws.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Keys) > 3 || len(ev.Keys) == 0 {
			t.Fatalf("an event of %d items (max_items 3)", len(ev.Keys))
		}
		if ev.Incarnation != h.srv.Incarnation() || ev.Lapped != 0 {
			t.Fatalf("event %v", ev)
		}
		for i, k := range ev.Keys {
			at, ok := byHash[ev.StateHash[i]]
			if !ok {
				t.Fatalf("watched item with unknown state hash %x", ev.StateHash[i])
			}
			tr := all[at/100]
			j := at % 100
			if ev.Flags[i] != tr.Flags[j] || ev.Action[i] != tr.Action[j] || ev.NextStateHash[i] != tr.NextStateHash[j] ||
				ev.EpisodeId[i] != tr.EpisodeID[j] || ev.EpisodeStep[i] != tr.EpisodeStep[j] {
				t.Fatalf("watched item %d differs from the inserted one", k)
			}
			keys = append(keys, k)
		}
	}
	cancel()
	if _, err := ws.Recv(); err == nil {
		t.Fatal("the watch went on after its cancel")
	}

	c := ctx(t)
	stale := Key(buffer.Ref{Slot: RefOf(keys[0]).Slot, Gen: RefOf(keys[0]).Gen + 2})
	req := &replayv1.FetchRequest{Incarnation: h.srv.Incarnation(), Keys: []uint64{keys[3], stale, keys[0], Key(buffer.Ref{Slot: 63, Gen: 2})}}
	rep, err := h.cli.Fetch(c, req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Found, []bool{true, false, true, false}) || rep.Data.Rows != 2 {
		t.Fatalf("found %v, %d rows; want [true false true false], 2 rows", rep.Found, rep.Data.Rows)
	}
	var got buffer.Transitions
	if err := DecodeTransitions(&got, cfg, rep.Data); err != nil {
		t.Fatal(err)
	}
	for row := range 2 {
		at := byHash[got.StateHash[row]]
		tr, j := all[at/100], at%100
		if got.Reward[row] != tr.Reward[j] || got.Obs[2*row] != tr.Obs[2*j] {
			t.Fatalf("fetched row %d differs from the inserted item", row)
		}
	}
	req.Incarnation++
	rep, err = h.cli.Fetch(c, req)
	if err != nil || slices.Contains(rep.Found, true) || rep.Incarnation != h.srv.Incarnation() {
		t.Fatalf("fetch with another incarnation: %v, %v; want nothing found", rep, err)
	}
}

// TestCheckpoint: the file is written through a temporary file and
// renamed (it loads, and its size and items are reported); a Save that
// fails in the middle of a stripe leaves the previous file whole, with
// its items, and no temporary file behind; a temporary file a crashed
// process left is removed by the next checkpoint.
func TestCheckpoint(t *testing.T) {
	cfg := smallCfg(64, 4)
	tab := testTable(t, "per", cfg, nil)
	tab.CheckpointDir = t.TempDir()
	stale := filepath.Join(tab.CheckpointDir, "."+DefaultTableName+".ckpt.tmp-123")
	if err := os.WriteFile(stale, []byte("a crashed checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	failAt := -1 // bytes after which the writer fails; -1: never
	tab.Save = func(w io.Writer, stage sync.Locker) error {
		stage.Lock() // the stage's state would be copied here
		stage.Unlock()
		if failAt >= 0 {
			w = &failingWriter{w: w, n: failAt}
		}
		return tab.Buffer.SaveStriped(w)
	}
	h := serve(t, tab, ServerOptions{})
	rng := rand.New(rand.NewPCG(7, 7))
	_, c := batchOf(t, rng, cfg, 9)
	insert(t, h.insertStream(ctx(t)), "w", 1, c)
	rep, err := h.cli.Checkpoint(ctx(t), &replayv1.CheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(tab.CheckpointDir, DefaultTableName+".ckpt")
	data, err := os.ReadFile(want)
	if err != nil || rep.Path != want || rep.Bytes != uint64(len(data)) || rep.Items != 9 {
		t.Fatalf("checkpoint %v (file %d bytes, %v)", rep, len(data), err)
	}
	loaded, err := buffer.Load(bytes.NewReader(data))
	if err != nil || loaded.Size() != 9 {
		t.Fatalf("the checkpoint does not load: %v", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale temporary file is still there: %v", err)
	}
	insert(t, h.insertStream(ctx(t)), "w", 2, c) // 18 items now
	failAt = len(data) / 2                       // within a middle stripe's data
	_, err = h.cli.Checkpoint(ctx(t), &replayv1.CheckpointRequest{})
	wantCode(t, "a failing Save", err, codes.Internal)
	after, err := os.ReadFile(want)
	if err != nil || !bytes.Equal(after, data) {
		t.Fatal("a failed checkpoint changed the previous file")
	}
	if prev, err := buffer.Load(bytes.NewReader(after)); err != nil || prev.Size() != 9 {
		t.Fatalf("the previous checkpoint after a failed one: %v", err)
	}
	ents, err := os.ReadDir(tab.CheckpointDir)
	if err != nil || len(ents) != 2 {
		t.Fatalf("the folder holds %d entries after a failed checkpoint, want the checkpoint and its writer table", len(ents))
	}
	if tbl, err := ReadWriterTable(want); err != nil || len(tbl.Writers) != 1 || tbl.Writers["w"].High != 1 {
		t.Fatalf("the writer table after a failed checkpoint: %v, %v; want the first checkpoint's w: 1", tbl, err)
	}
	if s := h.srv.Stats(); s.Checkpoints != 1 {
		t.Fatalf("%d checkpoints counted, want 1", s.Checkpoints)
	}
}

// recordingFeatures is a FeatureUpdater that records its calls.
type recordingFeatures struct{ refs []buffer.Ref }

func (r *recordingFeatures) UpdateFeatures(refs []buffer.Ref, q, target []float64) (buffer.UpdateResult, error) {
	r.refs = append(r.refs, refs...)
	return buffer.UpdateResult{Applied: len(refs)}, nil
}

// TestFeaturesAndEvaluated: a stage with feature updates takes q/target
// (and refuses abs_td); Evaluated reaches the hook; Info says both.
func TestFeaturesAndEvaluated(t *testing.T) {
	cfg := smallCfg(16, 1)
	tab := testTable(t, "per", cfg, nil)
	feat := &recordingFeatures{}
	var returns []float64
	tab.Method.Features = feat
	tab.Method.Evaluated = func(r float64) error { returns = append(returns, r); return nil }
	tab.Method.Stats = func() map[string]float64 { return map[string]float64{"x": 1} }
	h := serve(t, tab, ServerOptions{Version: "test"})
	c := ctx(t)
	keys := []uint64{Key(buffer.Ref{Slot: 1, Gen: 2}), Key(buffer.Ref{Slot: 2, Gen: 2})}
	res := writeBack(t, h.sampleStream(c), &replayv1.WriteBack{Incarnation: h.srv.Incarnation(), Keys: keys, Q: []float64{1, 2}, Target: []float64{3, 4}})
	if res.Applied != 2 || len(feat.refs) != 2 || feat.refs[1] != (buffer.Ref{Slot: 2, Gen: 2}) {
		t.Fatalf("features write-back: %v, recorded %v", res, feat.refs)
	}
	err := sampleErr(t, h, wbReq(&replayv1.WriteBack{Incarnation: h.srv.Incarnation(), Keys: keys, AbsTd: []float64{1, 2}}))
	wantCode(t, "abs_td to a features stage", err, codes.InvalidArgument)
	err = sampleErr(t, h, wbReq(&replayv1.WriteBack{Incarnation: h.srv.Incarnation(), Keys: keys, Q: []float64{1}, Target: []float64{3, 4}}))
	wantCode(t, "q of the wrong length", err, codes.InvalidArgument)
	if _, err := h.cli.Evaluated(c, &replayv1.EvaluatedRequest{MeanReturn: 1.5}); err != nil || !slices.Equal(returns, []float64{1.5}) {
		t.Fatalf("Evaluated: %v, hook saw %v", err, returns)
	}
	info, err := h.cli.Info(c, &replayv1.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ti := info.Tables[0]
	if !ti.Features || !ti.Evaluated || ti.MethodStats["x"] != 1 || info.Version != "test" || string(info.Config) != `{"test":true}` ||
		info.Incarnation != h.srv.Incarnation() || ti.Name != DefaultTableName || ti.Capacity != 16 {
		t.Fatalf("info %v", info)
	}
}

// TestShutdownEndsStreams: Shutdown ends an idle insert stream, a draw
// waiting on the limiter and a watch (each client sees Unavailable), and
// the health service goes from SERVING to NOT_SERVING; goleak (TestMain)
// checks nothing is left running.
func TestShutdownEndsStreams(t *testing.T) {
	lim, err := runtime.NewRateLimiter(runtime.RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 10, ErrorBuffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := serve(t, testTable(t, "uniform", smallCfg(16, 1), lim), ServerOptions{})
	c := ctx(t)
	hc := healthpb.NewHealthClient(h.conn)
	eventually(t, "SERVING", func() bool {
		r, err := hc.Check(c, &healthpb.HealthCheckRequest{Service: "apex.replay.v1.Replay"})
		return err == nil && r.Status == healthpb.HealthCheckResponse_SERVING
	})
	ins := h.insertStream(c)
	ss := h.sampleStream(c)
	if err := ss.Send(drawReq(&replayv1.Draw{Batch: 1, Step: 1})); err != nil {
		t.Fatal(err)
	}
	ws, err := h.cli.Watch(c, &replayv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the streams are open", func() bool {
		s := h.srv.Stats()
		return s.InsertStreams == 1 && s.DrawsWaiting == 1 && s.WatchStreams == 1
	})
	h.gs.Shutdown(context.Background()) // no deadline: it must end the streams itself
	for name, recv := range map[string]func() error{
		"insert": func() error { _, err := ins.Recv(); return err },
		"sample": func() error { _, err := ss.Recv(); return err },
		"watch":  func() error { _, err := ws.Recv(); return err },
	} {
		wantCode(t, name+" after Shutdown", recv(), codes.Unavailable)
	}
	r, err := h.gs.health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health after Shutdown: %v, %v", r, err)
	}
	if s := h.srv.Stats(); s.InsertStreams+s.SampleStreams+s.WatchStreams != 0 {
		t.Fatalf("streams left open: %+v", s)
	}
}

// failingWriter passes n bytes to w, then fails.
type failingWriter struct {
	w io.Writer
	n int
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k, _ := f.w.Write(p[:f.n])
		f.n = 0
		return k, errTest
	}
	f.n -= len(p)
	return f.w.Write(p)
}

// TestCheckpointDoesNotStopServing: while a checkpoint is being written
// (its file's writer held partway through), inserts are
// acknowledged and a draw and its write-back answered; released, the
// checkpoint completes and loads. The old discipline (the stage and every
// buffer writer held for the whole Save) fails this test by timing out.
func TestCheckpointDoesNotStopServing(t *testing.T) {
	cfg := smallCfg(256, 4)
	tab := testTable(t, "per", cfg, nil)
	tab.CheckpointDir = t.TempDir()
	reached, release := make(chan struct{}), make(chan struct{})
	tab.Save = func(w io.Writer, stage sync.Locker) error {
		stage.Lock() // the stage's state would be copied here
		stage.Unlock()
		return tab.Buffer.SaveStriped(&heldWriter{w: w, after: 2048, reached: reached, release: release})
	}
	h := serve(t, tab, ServerOptions{})
	rng := rand.New(rand.NewPCG(8, 8))
	ins := h.insertStream(ctx(t))
	_, c := batchOf(t, rng, cfg, 64)
	insert(t, ins, "w", 1, c)
	done := make(chan error, 1)
	go func() {
		_, err := h.cli.Checkpoint(ctx(t), &replayv1.CheckpointRequest{})
		done <- err
	}()
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the checkpoint wrote nothing within 30 s")
	}
	for seq := uint64(2); seq < 6; seq++ {
		_, c := batchOf(t, rng, cfg, 32)
		insert(t, ins, "w", seq, c)
	}
	ss := h.sampleStream(ctx(t))
	b := draw(t, ss, &replayv1.Draw{Id: 1, Batch: 8, Seed: 1, Step: 1})
	res := writeBack(t, ss, &replayv1.WriteBack{Id: 1, Incarnation: b.Incarnation, Keys: b.Keys, AbsTd: []float64{1, 2, 3, 4, 5, 6, 7, 8}})
	if res.Applied+res.Stale != 8 {
		t.Fatalf("write-back during a checkpoint: %v", res)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(tab.CheckpointDir, DefaultTableName+".ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := buffer.Load(bytes.NewReader(data))
	if err != nil || got.Size() < 64 || got.Size() > 64+4*32 {
		t.Fatalf("the checkpoint written while serving: %v (size %d)", err, got.Size())
	}
	// The writer table: seq 1 and its 64 items before the copy; the 4
	// batches stored during it counted apart, as uncertain.
	tbl, err := ReadWriterTable(filepath.Join(tab.CheckpointDir, DefaultTableName+".ckpt"))
	want := WriterRecord{High: 1, Items: 64, Batches: 1, UncertainItems: 4 * 32, UncertainBatches: 4}
	if err != nil || tbl.Writers["w"] != want {
		t.Fatalf("the writer table of a checkpoint taken while serving: %+v, %v; want w: %+v", tbl, err, want)
	}
}

// heldWriter passes writes to w; once after bytes have gone through it
// closes reached and waits for release.
type heldWriter struct {
	w         io.Writer
	after     int
	reached   chan struct{}
	release   chan struct{}
	n         int
	signalled bool
}

func (h *heldWriter) Write(p []byte) (int, error) {
	h.n += len(p)
	if h.n >= h.after && !h.signalled {
		h.signalled = true
		close(h.reached)
		<-h.release
	}
	return h.w.Write(p)
}

// TestCheckpointWriterTable: a checkpoint writes the writer table beside
// it (each writer's highest stored seq before the copy); a server started
// with it (ServerOptions.Writers) acknowledges as duplicates the resent
// batches the checkpoint holds and stores the new ones; a checkpoint
// without a table reads as none; a malformed table is an error; a table
// beyond MaxWriters is refused.
func TestCheckpointWriterTable(t *testing.T) {
	cfg := smallCfg(64, 4)
	tab := testTable(t, "per", cfg, nil)
	tab.CheckpointDir = t.TempDir()
	tab.Save = func(w io.Writer, _ sync.Locker) error { return tab.Buffer.SaveStriped(w) }
	h := serve(t, tab, ServerOptions{})
	rng := rand.New(rand.NewPCG(8, 8))
	_, c := batchOf(t, rng, cfg, 5)
	st := h.insertStream(ctx(t))
	for seq := uint64(1); seq <= 3; seq++ {
		insert(t, st, "actor-a", seq, c)
	}
	insert(t, st, "actor-b", 7, c)
	rep, err := h.cli.Checkpoint(ctx(t), &replayv1.CheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := ReadWriterTable(rep.Path)
	if err != nil || len(tbl.Writers) != 2 || tbl.Writers["actor-a"] != (WriterRecord{High: 3, Items: 15, Batches: 3}) ||
		tbl.Writers["actor-b"] != (WriterRecord{High: 7, Items: 5, Batches: 1}) || tbl.CountsPartial || tbl.Evicted != 0 {
		t.Fatalf("writer table %+v, %v; want actor-a 3 (15 items, 3 batches), actor-b 7 (5, 1)", tbl, err)
	}
	data, err := os.ReadFile(rep.Path)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := buffer.Load(bytes.NewReader(data))
	if err != nil || restored.Size() != 20 {
		t.Fatalf("the checkpoint: %v (size %d, want 20)", err, restored.Size())
	}
	tab2 := testTable(t, "per", cfg, nil)
	tab2.Buffer = restored
	h2 := serve(t, tab2, ServerOptions{Writers: tbl})
	st2 := h2.insertStream(ctx(t))
	if ack := insert(t, st2, "actor-a", 3, c); !ack.Duplicate || restored.Size() != 20 {
		t.Fatalf("a resent batch the checkpoint holds: duplicate %v, size %d (want a duplicate, 20)", ack.Duplicate, restored.Size())
	}
	if ack := insert(t, st2, "actor-a", 4, c); ack.Duplicate || restored.Size() != 25 {
		t.Fatalf("a new batch after the restore: duplicate %v, size %d (want stored, 25)", ack.Duplicate, restored.Size())
	}
	if ack := insert(t, st2, "actor-c", 1, c); ack.Duplicate {
		t.Fatal("a writer the table lacks: its first batch taken as a duplicate")
	}
	// The restored server's counts go on from the table's.
	page := writerPage(t, h2.cli, "", 0)
	wantRecs := []*replayv1.WriterRecord{
		{Id: "actor-a", High: 4, Items: 20, Batches: 4}, {Id: "actor-b", High: 7, Items: 5, Batches: 1}, {Id: "actor-c", High: 1, Items: 5, Batches: 1}}
	if !sameRecords(page.Records, wantRecs) || page.More || page.Known != 3 || page.CountsPartial {
		t.Fatalf("the restored server's writer page %v; want %v", page, wantRecs)
	}

	if tbl, err := ReadWriterTable(filepath.Join(t.TempDir(), "none.ckpt")); tbl != nil || err != nil {
		t.Fatalf("no table file: %v, %v; want nil, nil", tbl, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.ckpt")
	if err := os.WriteFile(WriterTableFile(bad), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadWriterTable(bad); err == nil {
		t.Fatal("a malformed table: no error")
	}
	if _, err := NewServer(tab2, ServerOptions{MaxWriters: 1, Writers: tbl}); err == nil {
		t.Fatal("a table of 2 writers with MaxWriters 1: no error")
	}
}

// TestCheckpointWriterTableInFlight: a batch whose buffer insert ended
// before a checkpoint's copy but whose record (recordStored) comes only
// after the copy's second snapshot is in the checkpoint: the table beside
// it counts it as uncertain, so a restore counts the writer's
// acknowledged items as stored or uncertain, none as lost. The insert is
// held between the buffer and its record by storedHook for the whole
// checkpoint, deterministically.
func TestCheckpointWriterTableInFlight(t *testing.T) {
	cfg := smallCfg(64, 4)
	tab := testTable(t, "per", cfg, nil)
	tab.CheckpointDir = t.TempDir()
	tab.Save = func(w io.Writer, _ sync.Locker) error { return tab.Buffer.SaveStriped(w) }
	h := serve(t, tab, ServerOptions{})
	_, c := batchOf(t, rand.New(rand.NewPCG(10, 10)), cfg, 5)
	st := h.insertStream(ctx(t))
	insert(t, st, "actor-a", 1, c)

	inBuffer, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	h.srv.storedHook = func() { close(inBuffer); <-release } // the first batch after this one only
	if err := st.Send(&replayv1.InsertRequest{Writer: "actor-a", Seq: 2, Data: c}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inBuffer:
	case <-time.After(10 * time.Second):
		t.Fatal("the batch never reached the buffer")
	}
	rep, err := h.cli.Checkpoint(ctx(t), &replayv1.CheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	free()
	if ack, err := st.Recv(); err != nil || ack.Seq != 2 || ack.Duplicate {
		t.Fatalf("the held batch's ack: %v, %v; want seq 2 stored", ack, err)
	}
	data, err := os.ReadFile(rep.Path)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := buffer.Load(bytes.NewReader(data))
	if err != nil || restored.Size() != 10 {
		t.Fatalf("the checkpoint: %v (size %d, want 10: the held batch is in it)", err, restored.Size())
	}
	tbl, err := ReadWriterTable(rep.Path)
	want := WriterRecord{High: 1, Items: 5, Batches: 1, UncertainItems: 5, UncertainBatches: 1}
	if err != nil || tbl.Writers["actor-a"] != want {
		t.Fatalf("the writer table: %+v, %v; want actor-a %+v (the held batch uncertain)", tbl, err, want)
	}
	// The running server counts the held batch as stored once recorded.
	if p := writerPage(t, h.cli, "", 0); !sameRecords(p.Records, []*replayv1.WriterRecord{{Id: "actor-a", High: 2, Items: 10, Batches: 2}}) {
		t.Fatalf("the server's writer page after the record: %v; want 10 items, 2 batches, none uncertain", p)
	}
	// Restored: the 10 acknowledged items are 5 stored and 5 uncertain.
	tab2 := testTable(t, "per", cfg, nil)
	tab2.Buffer = restored
	h2 := serve(t, tab2, ServerOptions{Writers: tbl})
	p := writerPage(t, h2.cli, "", 0)
	if len(p.Records) != 1 || p.Records[0].Items+p.Records[0].UncertainItems != 10 || p.CountsPartial {
		t.Fatalf("the restored server's writer page: %v; want 10 items stored or uncertain", p)
	}
}

// writerPage asks cli's server for a page of its writer table.
func writerPage(t *testing.T, cli replayv1.ReplayClient, after string, limit uint32) *replayv1.WriterPage {
	t.Helper()
	rep, err := cli.Info(ctx(t), &replayv1.InfoRequest{Writers: true, WritersAfter: after, MaxWriters: limit})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Writers == nil {
		t.Fatal("Info asked for the writer table: none in the reply")
	}
	return rep.Writers
}

// sameRecords compares writer records field by field.
func sameRecords(got, want []*replayv1.WriterRecord) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			return false
		}
	}
	return true
}

// TestInfoWriterPage: Info carries the writer table only when asked, in
// pages sorted by id (writers_after, max_writers; more set while ids
// remain); each record counts the batches and items stored under its id
// (duplicates not counted); evictions are counted.
func TestInfoWriterPage(t *testing.T) {
	cfg := smallCfg(256, 4)
	h := serve(t, testTable(t, "per", cfg, nil), ServerOptions{MaxWriters: 3})
	rng := rand.New(rand.NewPCG(9, 9))
	_, c3 := batchOf(t, rng, cfg, 3)
	_, c5 := batchOf(t, rng, cfg, 5)
	st := h.insertStream(ctx(t))
	insert(t, st, "w-b", 1, c3)
	insert(t, st, "w-b", 2, c5)
	if ack := insert(t, st, "w-b", 2, c5); !ack.Duplicate {
		t.Fatal("a resent batch stored again")
	}
	insert(t, st, "w-a", 4, c5)
	insert(t, st, "w-c", 1, c3)
	rep, err := h.cli.Info(ctx(t), &replayv1.InfoRequest{})
	if err != nil || rep.Writers != nil {
		t.Fatalf("Info without writers: %v, writer page %v (want none)", err, rep.GetWriters())
	}
	all := []*replayv1.WriterRecord{
		{Id: "w-a", High: 4, Items: 5, Batches: 1}, {Id: "w-b", High: 2, Items: 8, Batches: 2}, {Id: "w-c", High: 1, Items: 3, Batches: 1}}
	if p := writerPage(t, h.cli, "", 0); !sameRecords(p.Records, all) || p.More || p.Known != 3 || p.Evicted != 0 || p.CountsPartial {
		t.Fatalf("the whole table: %v; want %v", p, all)
	}
	p := writerPage(t, h.cli, "", 2)
	if !sameRecords(p.Records, all[:2]) || !p.More {
		t.Fatalf("a first page of 2: %v; want w-a, w-b and more", p)
	}
	p = writerPage(t, h.cli, p.Records[1].Id, 2)
	if !sameRecords(p.Records, all[2:]) || p.More {
		t.Fatalf("the second page: %v; want w-c and no more", p)
	}
	if p := writerPage(t, h.cli, "w-c", 0); len(p.Records) != 0 || p.More || p.Known != 3 {
		t.Fatalf("after the last id: %v; want no records", p)
	}
	// An idle table that is full evicts: counted.
	h.srv.clock = func() time.Time { return time.Now().Add(2 * WriterIdle) }
	insert(t, st, "w-d", 1, c3)
	if p := writerPage(t, h.cli, "", 0); p.Evicted != 3 || p.Known != 1 || len(p.Records) != 1 || p.Records[0].Id != "w-d" {
		t.Fatalf("after evictions: %v; want 3 evicted, w-d alone", p)
	}
}

// TestWriterTableVersions: a version-1 table (seqs only) still restores
// its seqs, with zero counts and the table marked partial, which Info
// reports and the next checkpoint's version-2 table keeps; a version-2
// table round-trips its records, evicted count and partiality; a
// version-1 table's entries under ids no insert accepts are skipped and
// counted, the rest restores; an unknown version is refused.
func TestWriterTableVersions(t *testing.T) {
	dir := t.TempDir()
	v1 := filepath.Join(dir, "v1.ckpt")
	if err := os.WriteFile(WriterTableFile(v1), []byte(`{"version":1,"writers":{"a":3,"b":9}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tbl, err := ReadWriterTable(v1)
	if err != nil || !tbl.CountsPartial || tbl.Evicted != 0 || len(tbl.Writers) != 2 ||
		tbl.Writers["a"] != (WriterRecord{High: 3}) || tbl.Writers["b"] != (WriterRecord{High: 9}) {
		t.Fatalf("a version-1 table: %+v, %v; want a: 3, b: 9, zero counts, partial", tbl, err)
	}
	cfg := smallCfg(64, 4)
	tab := testTable(t, "per", cfg, nil)
	tab.CheckpointDir = t.TempDir()
	tab.Save = func(w io.Writer, _ sync.Locker) error { return tab.Buffer.SaveStriped(w) }
	h := serve(t, tab, ServerOptions{Writers: tbl})
	_, c := batchOf(t, rand.New(rand.NewPCG(3, 3)), cfg, 2)
	st := h.insertStream(ctx(t))
	if ack := insert(t, st, "a", 3, c); !ack.Duplicate {
		t.Fatal("a batch the version-1 table covers: stored again")
	}
	insert(t, st, "a", 4, c)
	p := writerPage(t, h.cli, "", 0)
	want := []*replayv1.WriterRecord{{Id: "a", High: 4, Items: 2, Batches: 1}, {Id: "b", High: 9}}
	if !p.CountsPartial || !sameRecords(p.Records, want) {
		t.Fatalf("restored from a version-1 table: %v; want %v, counts partial", p, want)
	}
	rep, err := h.cli.Checkpoint(ctx(t), &replayv1.CheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(WriterTableFile(rep.Path))
	if err != nil || !bytes.Contains(raw, []byte(`"version":2`)) {
		t.Fatalf("the next checkpoint's table: %s, %v; want version 2", raw, err)
	}
	tbl2, err := ReadWriterTable(rep.Path)
	if err != nil || !tbl2.CountsPartial || tbl2.Writers["a"] != (WriterRecord{High: 4, Items: 2, Batches: 1}) || tbl2.Writers["b"] != (WriterRecord{High: 9}) {
		t.Fatalf("the version-2 table after a version-1 restore: %+v, %v; want partial, a: 4 (2 items, 1 batch), b: 9", tbl2, err)
	}

	// A version-2 table round-trips.
	full := &WriterTable{Evicted: 5, Writers: map[string]WriterRecord{
		"x": {High: 7, Items: 70, Batches: 7, UncertainItems: 20, UncertainBatches: 2}, "y": {High: 1, Items: 3, Batches: 1}}}
	v2 := filepath.Join(dir, "v2.ckpt")
	if err := writeWriterTable(v2, full); err != nil {
		t.Fatal(err)
	}
	back, err := ReadWriterTable(v2)
	if err != nil || back.Evicted != 5 || back.CountsPartial || !maps.Equal(back.Writers, full.Writers) {
		t.Fatalf("a version-2 table read back: %+v, %v; want %+v", back, err, full)
	}
	tab3 := testTable(t, "per", cfg, nil)
	h3 := serve(t, tab3, ServerOptions{Writers: back})
	p = writerPage(t, h3.cli, "", 0)
	want = []*replayv1.WriterRecord{{Id: "x", High: 7, Items: 70, Batches: 7, UncertainItems: 20, UncertainBatches: 2}, {Id: "y", High: 1, Items: 3, Batches: 1}}
	if p.Evicted != 5 || p.CountsPartial || !sameRecords(p.Records, want) {
		t.Fatalf("restored from a version-2 table: %v; want %v, 5 evicted", p, want)
	}

	// A version-1 server restored any table given to it unchecked and
	// wrote it back: entries under ids no insert accepts (empty, over
	// MaxWriterName bytes) are dropped and counted, not refused with the
	// whole restore; the others restore. NewServer still refuses such ids
	// in a table given to it.
	odd := filepath.Join(dir, "odd.ckpt")
	long := strings.Repeat("x", MaxWriterName+1)
	if err := os.WriteFile(WriterTableFile(odd), []byte(`{"version":1,"writers":{"":4,"`+long+`":6,"ok":2}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	oddTbl, err := ReadWriterTable(odd)
	if err != nil || oddTbl.Skipped != 2 || len(oddTbl.Writers) != 1 || oddTbl.Writers["ok"] != (WriterRecord{High: 2}) || !oddTbl.CountsPartial {
		t.Fatalf("a version-1 table with an empty and an over-long id: %+v, %v; want ok: 2 alone, 2 skipped, partial", oddTbl, err)
	}
	hOdd := serve(t, testTable(t, "per", cfg, nil), ServerOptions{Writers: oddTbl})
	if ack := insert(t, hOdd.insertStream(ctx(t)), "ok", 2, c); !ack.Duplicate {
		t.Fatal("a batch the version-1 table covers, restored beside dropped ids: stored again")
	}
	bad2 := &WriterTable{Writers: map[string]WriterRecord{long: {High: 1}}}
	if _, err := NewServer(testTable(t, "per", cfg, nil), ServerOptions{Writers: bad2}); err == nil {
		t.Fatal("NewServer with an over-long writer id: no error")
	}

	v3 := filepath.Join(dir, "v3.ckpt")
	if err := os.WriteFile(WriterTableFile(v3), []byte(`{"version":3,"writers":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadWriterTable(v3); err == nil {
		t.Fatal("a version-3 table: no error")
	}
}
