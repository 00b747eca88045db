package remote

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/learner"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// referTwins is a ReF-ER method in process and the same method behind a
// server, fed the same inserts.
type referTwins struct {
	t             *testing.T
	layout        buffer.Config
	inBuf, srvBuf *buffer.Buffer
	inM, srvM, rm sampler.Method
	inSel         sampler.Selector
	srv           *Server
	c             *Client
	bs            *bufServer
	w             *Writer
	cancel        context.CancelFunc
}

func newReferTwins(t *testing.T, name, algo string, capacity int) *referTwins {
	t.Helper()
	layout := buffer.Config{Capacity: capacity, Stripes: 2, ObsDim: 2, Action: buffer.Continuous, ActionDim: 1, Episode: true,
		Floats: sampler.REFERColumns(1)}
	mcfg := sampler.MethodConfig{BetaSteps: 40, Learner: algo}
	newMethod := func(lc buffer.Config) (*buffer.Buffer, sampler.Method) {
		buf, err := buffer.New(lc)
		if err != nil {
			t.Fatal(err)
		}
		m, err := sampler.NewMethod(name, buf, mcfg)
		if err != nil {
			t.Fatal(err)
		}
		return buf, m
	}
	r := &referTwins{t: t, layout: layout}
	r.inBuf, r.inM = newMethod(layout)
	r.inSel = sampler.Reseed(r.inM.Selector)
	r.srvBuf, r.srvM = newMethod(layout)
	srv, err := NewServer(Table{Buffer: r.srvBuf, Method: r.srvM}, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	r.srv = srv
	r.bs = replayServer(t, &r.srv)
	r.c = r.bs.client(ClientOptions{})
	r.w = newTestWriterLayout(t, r.c, "refer", layout)
	small := layout
	small.Capacity = 32 // the learner's local twin: a small buffer of the layout
	_, localM := newMethod(small)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r.cancel = cancel
	if r.rm, err = r.c.Method(ctx, localM, 0); err != nil {
		t.Fatal(err)
	}
	if r.rm.Episodes == nil || r.rm.Episodes.Config() != r.inM.Episodes.Config() || r.rm.Episodes.Slots() != capacity {
		t.Fatalf("remote episodes %v, config %+v, in process %+v", r.rm.Episodes, r.rm.Episodes.Config(), r.inM.Episodes.Config())
	}
	return r
}

// insert stores tr in both buffers (the server's through the writer, one
// acknowledged batch each, so the stripes fill alike).
func (r *referTwins) insert(tr *buffer.Transitions) {
	r.t.Helper()
	if err := r.inBuf.Insert(tr); err != nil {
		r.t.Fatal(err)
	}
	if err := r.w.Insert(tr); err != nil {
		r.t.Fatal(err)
	}
	flush(r.t, r.w)
}

// play inserts n episodes of two interleaved actors, in chunks of up to 3
// steps, so steps of an episode land in both stripes and out of order.
func (r *referTwins) play(rng *rand.Rand, firstID uint64, n, maxLen int) {
	var eps [2]samplertest.Episode
	var at [2]int
	next := firstID
	for done := 0; done < n; {
		a := rng.IntN(2)
		if eps[a].Len() == 0 || at[a] == eps[a].Len() {
			eps[a], at[a] = samplertest.RandEpisode(rng, next, maxLen, 0.9), 0
			next++
		}
		k := min(1+rng.IntN(3), eps[a].Len()-at[a])
		r.insert(eps[a].Rows(at[a], at[a]+k))
		if at[a] += k; at[a] == eps[a].Len() {
			done++
		}
	}
}

// sameReferBatch compares two batches of a ReF-ER layout, every column.
func sameReferBatch(a, b *buffer.Batch) error {
	if err := sameBatch(a, b); err != nil {
		return err
	}
	if !slices.Equal(a.ActionVec, b.ActionVec) || !slices.Equal(a.EpisodeStep, b.EpisodeStep) {
		return fmt.Errorf("actions or steps differ")
	}
	for i := range a.Floats {
		if !slices.Equal(a.Floats[i], b.Floats[i]) {
			return fmt.Errorf("float column %d differs: %v vs %v", i, a.Floats[i], b.Floats[i])
		}
	}
	return nil
}

// ctlStep runs one controller step on both controllers with the same
// fresh values and compares what they give and keep.
func ctlStep(t *testing.T, step uint64, in, rc *learner.REFERController, vals *rand.Rand, rows int) {
	t.Helper()
	if !slices.Equal(in.Targets(), rc.Targets()) {
		t.Fatalf("step %d: targets %v vs %v", step, in.Targets(), rc.Targets())
	}
	rho, v, kl := make([]float64, rows), make([]float64, rows), make([]float64, rows)
	for i := range rows {
		rho[i], v[i], kl[i] = 0.2+3*vals.Float64(), vals.NormFloat64(), vals.Float64()
	}
	aw, kw, aw2, kw2 := make([]float64, rows), make([]float64, rows), make([]float64, rows), make([]float64, rows)
	if err := in.RowWeights(rho, aw, kw); err != nil {
		t.Fatal(err)
	}
	if err := rc.RowWeights(rho, aw2, kw2); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(aw, aw2) || !slices.Equal(kw, kw2) {
		t.Fatalf("step %d: row weights differ", step)
	}
	if err := in.Refresh(rho, v, kl); err != nil {
		t.Fatal(err)
	}
	if err := rc.Refresh(rho, v, kl); err != nil {
		t.Fatal(err)
	}
	for row := range rows {
		vt := vals.NormFloat64()
		a, errA := in.RefreshBootstrap(row, vt)
		b, errB := rc.RefreshBootstrap(row, vt)
		if a != b || errA != nil || errB != nil {
			t.Fatalf("step %d row %d: bootstrap %v %v vs %v %v", step, row, a, errA, b, errB)
		}
	}
	in.AfterStep(step)
	rc.AfterStep(step)
	if a, b := in.Stats(), rc.Stats(); a != b {
		t.Fatalf("step %d: controller state\n in process %+v\n remote     %+v", step, a, b)
	}
}

// TestReferTwins: for each ReF-ER method, the remote stage with its
// episode feed and the in-process REFER stage, each followed by a
// REFERController, draw the same rows, refs, probabilities and column
// contents and keep the same controller state (targets, row weights,
// beta, c_max, far counts, KL, reward scale, stale counts) through
// interleaved inserts, evictions, overwrites of stored episodes and a
// second controller that observes mid-run (the stored episodes reported
// at once, through the feed's subscription).
func TestReferTwins(t *testing.T) {
	for _, tc := range []struct{ name, algo string }{{"refer", "vracer"}, {"refer-1", "vracer"}, {"refer-2", "td3"}, {"er", "vracer"}} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			seed := uint64(20261126)
			r := newReferTwins(t, tc.name, tc.algo, 160)
			data := rand.New(rand.NewPCG(seed, 1))
			newCtl := func(src sampler.EpisodeSource) *learner.REFERController {
				c, err := learner.NewREFERController(src)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			in, rc := newCtl(r.inM.Episodes), newCtl(r.rm.Episodes)
			r.play(data, 1, 12, 9)
			rngIn, rngRemote := rand.New(rand.NewPCG(seed, 2)), rand.New(rand.NewPCG(seed, 2))
			vals := rand.New(rand.NewPCG(seed, 3))
			const rows = 8
			bIn, _ := r.inBuf.NewBatch(rows)
			bRemote, _ := r.rm.Episodes.Buffer().NewBatch(rows)
			id := uint64(100)
			for step := uint64(1); step <= 30; step++ {
				if err := r.inSel.Sample(rngIn, bIn); err != nil {
					t.Fatalf("step %d: in process: %v", step, err)
				}
				if err := r.rm.Selector.Sample(rngRemote, bRemote); err != nil {
					t.Fatalf("step %d: remote: %v", step, err)
				}
				if err := sameReferBatch(bIn, bRemote); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				ctlStep(t, step, in, rc, vals, rows)
				switch {
				case step == 10: // enough to evict the oldest (MaxSteps 140) and overwrite the ring
					r.play(data, id, 25, 9)
					id += 100
				case step == 18: // a new observer: every stored episode is reported at once
					in, rc = newCtl(r.inM.Episodes), newCtl(r.rm.Episodes)
					if a, b := in.Stats(), rc.Stats(); a != b || a.Steps == 0 {
						t.Fatalf("a new observer: %+v vs %+v", a, b)
					}
				case step%3 == 0:
					r.play(data, id, 2, 9)
					id += 10
				}
			}
			if a, b := r.inM.Selector.(*sampler.REFER).Stats(), r.srvM.Selector.(*sampler.REFER).Stats(); a != b || a.Evicted == 0 {
				t.Errorf("stage stats %+v vs %+v (want evictions)", a, b)
			}
			if st := r.srv.Stats(); st.EpisodeSubscriptions != 2 || st.EpisodeFeedsLost != 0 {
				t.Errorf("server stats %+v", st)
			}
			if st := r.c.Stats(); st.EpisodeResyncs != 0 || st.Draws != 30 {
				t.Errorf("client stats %+v", st)
			}
			r.cancel()
			if err := r.w.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReferLongEpisode: an episode whose steps do not fit one message is
// sent in parts, and the controllers still agree.
func TestReferLongEpisode(t *testing.T) {
	checkLeaks(t)
	const n = 90_000                                 // about 1.2 MB of events
	r := newReferTwins(t, "refer", "vracer", 2*n+64) // two stripes: room for n steps in either
	in, err := learner.NewREFERController(r.inM.Episodes)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := learner.NewREFERController(r.rm.Episodes)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	e := samplertest.RandEpisode(rng, 1, 1, 0.99)
	e.Reward = make([]float32, n)
	for i := range e.Reward {
		e.Reward[i] = float32(rng.NormFloat64())
	}
	e.End, e.VBoot = buffer.FlagTruncated, 0.5
	for from := 0; from < n; from += 8192 {
		r.insert(e.Rows(from, min(from+8192, n)))
	}
	rngIn, rngRemote := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
	bIn, _ := r.inBuf.NewBatch(16)
	bRemote, _ := r.rm.Episodes.Buffer().NewBatch(16)
	vals := rand.New(rand.NewPCG(3, 3))
	for step := uint64(1); step <= 2; step++ {
		if err := r.inSel.Sample(rngIn, bIn); err != nil {
			t.Fatal(err)
		}
		if err := r.rm.Selector.Sample(rngRemote, bRemote); err != nil {
			t.Fatal(err)
		}
		if err := sameReferBatch(bIn, bRemote); err != nil {
			t.Fatal(err)
		}
		ctlStep(t, step, in, rc, vals, 16)
	}
	if st := rc.Stats(); st.Steps != n {
		t.Errorf("remote controller %+v, want %d steps", st, n)
	}
	r.cancel()
	if err := r.w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestReferFeedTakeover: a second stream that observes the episodes takes
// the feed over; the first stream's next draw fails with
// FailedPrecondition (counted), and its client subscribes again on a new
// stream, its controller starting over from the stage's stored episodes
// (a resync, counted), consistent with the stage.
func TestReferFeedTakeover(t *testing.T) {
	checkLeaks(t)
	r := newReferTwins(t, "refer", "vracer", 160)
	rc, err := learner.NewREFERController(r.rm.Episodes)
	if err != nil {
		t.Fatal(err)
	}
	data := rand.New(rand.NewPCG(5, 5))
	r.play(data, 1, 10, 9)
	rng := rand.New(rand.NewPCG(1, 1))
	b, _ := r.rm.Episodes.Buffer().NewBatch(4)
	vals := rand.New(rand.NewPCG(2, 2))
	refresh := func() {
		t.Helper()
		rho, v, kl := make([]float64, 4), make([]float64, 4), make([]float64, 4)
		for i := range rho {
			rho[i], v[i], kl[i] = 0.1+5*vals.Float64(), vals.NormFloat64(), vals.Float64()
		}
		if err := rc.Refresh(rho, v, kl); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.rm.Selector.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	refresh()
	rc.AfterStep(1)

	// Another learner (a raw stream) takes the feed over.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other, err := r.c.replay.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Send(&replayv1.SampleRequest{Kind: &replayv1.SampleRequest_ObserveEpisodes{ObserveEpisodes: &replayv1.ObserveEpisodes{Id: 1}}}); err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		m, err := other.Recv()
		if err != nil {
			t.Fatal(err)
		}
		ev := m.GetEpisodes()
		if ev == nil || ev.GetId() != 1 {
			t.Fatalf("the answer to observe episodes: %v", m)
		}
		for _, e := range ev.GetEvents() {
			got += len(e.GetFinished().GetSlots())
		}
		if ev.GetLast() {
			break
		}
	}
	if want := r.srvM.Selector.(*sampler.REFER).Stats().Steps; got != want {
		t.Errorf("the snapshot reports %d steps, the stage stores %d", got, want)
	}
	r.play(data, 100, 4, 9)
	err = r.rm.Selector.Sample(rng, b)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "took the episode feed over") {
		t.Fatalf("a draw after a takeover: %v", err)
	}
	if err := r.rm.Selector.Sample(rng, b); err != nil { // a new stream, subscribed again
		t.Fatalf("the draw after: %v", err)
	}
	refresh()
	rc.AfterStep(2)
	if st, stage := rc.Stats(), r.srvM.Selector.(*sampler.REFER).Stats(); st.Steps != stage.Steps {
		t.Errorf("after the resync the controller holds %d steps, the stage %d", st.Steps, stage.Steps)
	}
	if st := r.c.Stats(); st.EpisodeResyncs != 1 {
		t.Errorf("client stats %+v", st)
	}
	if st := r.srv.Stats(); st.EpisodeSubscriptions != 3 || st.EpisodeFeedsLost != 3 {
		t.Errorf("server stats %+v (want 3 subscriptions, 3 lost: the takeover counted at it and at the draw, the other stream's at the resubscription)", st)
	}
	cancel()
	r.cancel()
	if err := r.w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestObserveEpisodesBadInput: observing a stage without episodes, or
// another table, is refused with a clear status and counted; a local
// ReF-ER twin against a server whose stage keeps no episodes is refused
// by Client.Method.
func TestObserveEpisodesBadInput(t *testing.T) {
	checkLeaks(t)
	local, buf := perTwin(t)
	srv, err := NewServer(Table{Buffer: buf, Method: local}, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c := replayServer(t, &srv).client(ClientOptions{})
	for _, tc := range []struct {
		o    *replayv1.ObserveEpisodes
		code codes.Code
		msg  string
	}{
		{&replayv1.ObserveEpisodes{Id: 1}, codes.FailedPrecondition, "keeps no episodes"},
		{&replayv1.ObserveEpisodes{Id: 2, Table: "other"}, codes.NotFound, `no table "other"`},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := c.replay.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&replayv1.SampleRequest{Kind: &replayv1.SampleRequest_ObserveEpisodes{ObserveEpisodes: tc.o}}); err != nil {
			t.Fatal(err)
		}
		_, err = st.Recv()
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: %v", tc.o, err)
		}
		cancel()
	}
	if st := srv.Stats(); st.RejectedMessages != 2 || st.EpisodeSubscriptions != 0 {
		t.Errorf("server stats %+v", st)
	}
	for _, name := range sampler.REFERMethods {
		mcfg := sampler.MethodConfig{BetaSteps: 50, Learner: "vracer"}
		spec, _ := sampler.Lookup(name)
		layout := buffer.Config{Capacity: 64, ObsDim: 3, Action: buffer.Continuous, ActionDim: 1, Episode: true}
		spec.Layout(mcfg, &layout)
		b, err := buffer.New(layout)
		if err != nil {
			t.Fatal(err)
		}
		m, err := sampler.NewMethod(name, b, mcfg)
		if err != nil {
			t.Fatal(err)
		}
		f := &fakeSample{method: m.String(), incarnation: 1}
		fc := newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, f) }).client(ClientOptions{})
		if _, err := fc.Method(context.Background(), m, 0); err == nil || !strings.Contains(err.Error(), "keeps episodes: false") {
			t.Errorf("%s against a server without episodes: %v", name, err)
		}
	}
}

// badEvents is a Replay server whose table claims a ReF-ER stage and
// answers ObserveEpisodes with the events of its field.
type badEvents struct {
	replayv1.UnimplementedReplayServer
	method string
	cfg    *replayv1.EpisodeConfig
	events []*replayv1.EpisodeEvent
}

func (f *badEvents) Info(context.Context, *replayv1.InfoRequest) (*replayv1.InfoReply, error) {
	return &replayv1.InfoReply{Incarnation: 1, Tables: []*replayv1.TableInfo{{Name: "replay", Method: f.method, Capacity: 64, Episodes: f.cfg}}}, nil
}

func (f *badEvents) Sample(stream grpc.BidiStreamingServer[replayv1.SampleRequest, replayv1.SampleReply]) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		o := req.GetObserveEpisodes()
		if o == nil {
			return status.Error(codes.Unimplemented, "fake: observe only")
		}
		if err := stream.Send(&replayv1.SampleReply{Kind: &replayv1.SampleReply_Episodes{Episodes: &replayv1.EpisodeEvents{
			Id: o.GetId(), Incarnation: 1, Events: f.events, Last: true}}}); err != nil {
			return err
		}
	}
}

// TestEpisodeEventsBadInput: malformed episode events from a server (a
// slot beyond the table, a part out of order or left unfinished, a reward
// missing, NaN or infinite values, a bad handle, an event of no kind)
// fail the client's draw with an error naming them and break the stream
// (counted), and no episode of them reaches the observer.
func TestEpisodeEventsBadInput(t *testing.T) {
	checkLeaks(t)
	layout := buffer.Config{Capacity: 64, ObsDim: 2, Action: buffer.Continuous, ActionDim: 1, Episode: true, Floats: sampler.REFERColumns(1)}
	buf, err := buffer.New(layout)
	if err != nil {
		t.Fatal(err)
	}
	local, err := sampler.NewMethod("refer", buf, sampler.MethodConfig{BetaSteps: 50, Learner: "vracer"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := local.Episodes.Config()
	part := func(h int32, length, first uint32, slots ...uint32) *replayv1.EpisodeEvent {
		p := &replayv1.EpisodePart{Handle: h, EpisodeId: 1, Length: length, FirstStep: first, Slots: slots,
			Reward: make([]float32, len(slots)), Discount: make([]float32, len(slots))}
		return &replayv1.EpisodeEvent{Kind: &replayv1.EpisodeEvent_Finished{Finished: p}}
	}
	noReward := part(0, 2, 0, 1, 2)
	noReward.GetFinished().Reward = nil
	nanReward := part(0, 2, 0, 1, 2)
	nanReward.GetFinished().Reward[1] = float32(math.NaN())
	infBoot := part(0, 1, 0, 5)
	infBoot.GetFinished().Truncated, infBoot.GetFinished().Vboot = true, float32(math.Inf(1))
	for _, tc := range []struct {
		name   string
		events []*replayv1.EpisodeEvent
		msg    string
	}{
		{"slot beyond the table", []*replayv1.EpisodeEvent{part(0, 1, 0, 64)}, "slot 64"},
		{"part out of order", []*replayv1.EpisodeEvent{part(0, 4, 0, 1, 2), part(0, 4, 3, 3)}, "out of order"},
		{"unfinished", []*replayv1.EpisodeEvent{part(0, 4, 0, 1, 2)}, "unfinished"},
		{"interrupted", []*replayv1.EpisodeEvent{part(0, 4, 0, 1, 2), {Kind: &replayv1.EpisodeEvent_Dropped{Dropped: 3}}}, "interrupted"},
		{"missing rewards", []*replayv1.EpisodeEvent{noReward}, "0 rewards"},
		{"NaN reward", []*replayv1.EpisodeEvent{nanReward}, "step 1 has reward NaN"},
		{"infinite V(s_T)", []*replayv1.EpisodeEvent{infBoot}, "V(s_T) is +Inf"},
		{"bad handle", []*replayv1.EpisodeEvent{{Kind: &replayv1.EpisodeEvent_Dropped{Dropped: -1}}}, "handle -1"},
		{"no kind", []*replayv1.EpisodeEvent{{}}, "no known kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &badEvents{method: local.String(), cfg: wireEpisodeConfig(cfg), events: tc.events}
			c := newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, f) }).client(ClientOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			m, err := c.Method(ctx, local, 0)
			if err != nil {
				t.Fatal(err)
			}
			ctl, err := learner.NewREFERController(m.Episodes)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := buf.NewBatch(2)
			err = m.Selector.Sample(rand.New(rand.NewPCG(1, 1)), b)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("a draw after %s: %v", tc.name, err)
			}
			if st := c.Stats(); st.StreamErrors == 0 {
				t.Errorf("the bad stream was not counted: %+v", st)
			}
			if st := ctl.Stats(); st.Steps != 0 {
				t.Errorf("the controller was told of %d steps from a malformed message", st.Steps)
			}
		})
	}
}

// TestReferFeedFallsBehind: while another stream draws and the owner of
// the feed does not, the events pile up to the feed's bound; past it the
// owner loses the feed (its next draw fails with FailedPrecondition,
// counted) and its client resubscribes on a new stream.
func TestReferFeedFallsBehind(t *testing.T) {
	checkLeaks(t)
	r := newReferTwins(t, "refer", "vracer", 160)
	rc, err := learner.NewREFERController(r.rm.Episodes)
	if err != nil {
		t.Fatal(err)
	}
	r.srv.stage.Lock()
	r.srv.feed.limit = 20 // steps or events (2·capacity + 4096 by default)
	r.srv.stage.Unlock()
	data := rand.New(rand.NewPCG(9, 9))
	r.play(data, 1, 6, 9)
	rng := rand.New(rand.NewPCG(1, 1))
	b, _ := r.rm.Episodes.Buffer().NewBatch(4)
	if err := r.rm.Selector.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other, err := r.c.replay.Sample(ctx) // a second learner that does not observe
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		r.play(data, uint64(100+10*i), 1, 9)
		if err := other.Send(&replayv1.SampleRequest{Kind: &replayv1.SampleRequest_Draw{Draw: &replayv1.Draw{Id: uint64(i + 1), Batch: 2, Seed: uint64(i), Step: 1}}}); err != nil {
			t.Fatal(err)
		}
		if m, err := other.Recv(); err != nil || m.GetBatch() == nil {
			t.Fatalf("the other stream's draw: %v, %v", m, err)
		}
	}
	err = r.rm.Selector.Sample(rng, b)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "fell behind") {
		t.Fatalf("the owner's draw after falling behind: %v", err)
	}
	r.srv.stage.Lock()
	r.srv.feed.limit = 2*160 + 4096 // the default again: the stored episodes' snapshot fits
	r.srv.stage.Unlock()
	if err := r.rm.Selector.Sample(rng, b); err != nil {
		t.Fatalf("the draw after: %v", err)
	}
	if st, stage := rc.Stats(), r.srvM.Selector.(*sampler.REFER).Stats(); st.Steps != stage.Steps {
		t.Errorf("after the resync the controller holds %d steps, the stage %d", st.Steps, stage.Steps)
	}
	if st := r.srv.Stats(); st.EpisodeFeedsLost != 1 || st.EpisodeSubscriptions != 2 {
		t.Errorf("server stats %+v", st)
	}
	if st := r.c.Stats(); st.EpisodeResyncs != 1 {
		t.Errorf("client stats %+v", st)
	}
	cancel()
	r.cancel()
	if err := r.w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestReferServerRestart: a replay server restarted under a ReF-ER
// learner (a new incarnation over other contents): the learner's next
// draws re-open the stream, subscribe again and its controller starts
// over from the new server's stored episodes (a resync, counted),
// consistent with the new stage.
func TestReferServerRestart(t *testing.T) {
	checkLeaks(t)
	r := newReferTwins(t, "refer", "vracer", 160)
	rc, err := learner.NewREFERController(r.rm.Episodes)
	if err != nil {
		t.Fatal(err)
	}
	data := rand.New(rand.NewPCG(4, 4))
	r.play(data, 1, 10, 9)
	rng := rand.New(rand.NewPCG(1, 1))
	b, _ := r.rm.Episodes.Buffer().NewBatch(4)
	vals := rand.New(rand.NewPCG(2, 2))
	step := uint64(0)
	learn := func() {
		t.Helper()
		rho, v, kl := make([]float64, 4), make([]float64, 4), make([]float64, 4)
		for i := range rho {
			rho[i], v[i], kl[i] = 0.1+5*vals.Float64(), vals.NormFloat64(), vals.Float64()
		}
		if err := rc.Refresh(rho, v, kl); err != nil {
			t.Fatal(err)
		}
		step++
		rc.AfterStep(step)
	}
	if err := r.rm.Selector.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	learn()

	buf2, err := buffer.New(r.layout)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := sampler.NewMethod("refer", buf2, sampler.MethodConfig{BetaSteps: 40, Learner: "vracer"})
	if err != nil {
		t.Fatal(err)
	}
	srv2, err := NewServer(Table{Buffer: buf2, Method: m2}, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv2.Close)
	old := r.srv
	r.srv = srv2
	r.bs.restart()
	old.Close()
	r.play(data, 500, 6, 9) // the writer re-opens its stream to the new server
	drawn := false
	for try := 0; try < 3 && !drawn; try++ {
		err = r.rm.Selector.Sample(rng, b)
		drawn = err == nil
	}
	if !drawn {
		t.Fatalf("no draw from the restarted server: %v", err)
	}
	learn()
	stage := m2.Selector.(*sampler.REFER).Stats()
	if st := rc.Stats(); st.Steps != stage.Steps || stage.Steps == 0 {
		t.Errorf("after the restart the controller holds %d steps, the new stage %d", st.Steps, stage.Steps)
	}
	for _, ref := range b.Refs {
		if _, _, ok := buf2.SlotPriority(int(ref.Slot)); !ok {
			t.Errorf("row %v is not stored in the new server", ref)
		}
	}
	if st := r.c.Stats(); st.EpisodeResyncs != 1 {
		t.Errorf("client stats %+v", st)
	}
	if st := srv2.Stats(); st.EpisodeSubscriptions != 1 {
		t.Errorf("the new server's stats %+v", st)
	}
	r.cancel()
	if err := r.w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
