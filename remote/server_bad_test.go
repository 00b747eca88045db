package remote

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
	"google.golang.org/grpc/codes"
)

// TestBadInsert: each malformed batch ends its stream with its status,
// naming what was wrong, is counted, and stores nothing.
func TestBadInsert(t *testing.T) {
	cfg := smallCfg(64, 4)
	h := serve(t, testTable(t, "per", cfg, nil), ServerOptions{MaxWriters: 3}) // "w" below, w1 and w2
	rng := rand.New(rand.NewPCG(4, 4))
	good := func() *replayv1.Columns { _, c := batchOf(t, rng, cfg, 2); return c }
	nanReward := func() *replayv1.Columns {
		tr := randomTransitions(rng, cfg, 2)
		tr.Reward[1] = float32(math.NaN())
		var c replayv1.Columns
		if err := EncodeTransitions(&c, cfg, tr); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	negPriority := func() *replayv1.Columns {
		tr := randomTransitions(rng, cfg, 2)
		tr.Priority[0] = -1
		var c replayv1.Columns
		if err := EncodeTransitions(&c, cfg, tr); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	short := good()
	short.Obs = short.Obs[:3]
	huge := good()
	huge.Obs = make([]byte, 2<<20) // over MaxMessageBytes
	cases := []struct {
		name string
		req  *replayv1.InsertRequest
		code codes.Code
		says string
	}{
		{"unknown table", &replayv1.InsertRequest{Table: "nope", Writer: "w", Seq: 1, Data: good()}, codes.NotFound, `no table "nope"`},
		{"no writer", &replayv1.InsertRequest{Seq: 1, Data: good()}, codes.InvalidArgument, "writer name of 0 bytes"},
		{"long writer", &replayv1.InsertRequest{Writer: string(make([]byte, 129)), Seq: 1, Data: good()}, codes.InvalidArgument, "129 bytes"},
		{"seq 0", &replayv1.InsertRequest{Writer: "w", Data: good()}, codes.InvalidArgument, "seq 0"},
		{"no data", &replayv1.InsertRequest{Writer: "w", Seq: 1}, codes.InvalidArgument, "no data"},
		{"empty batch", &replayv1.InsertRequest{Writer: "w", Seq: 1, Data: &replayv1.Columns{}}, codes.InvalidArgument, "empty batch"},
		{"short column", &replayv1.InsertRequest{Writer: "w", Seq: 1, Data: short}, codes.InvalidArgument, "column obs has 3 bytes, want 16"},
		{"NaN reward", &replayv1.InsertRequest{Writer: "w", Seq: 1, Data: nanReward()}, codes.InvalidArgument, "Reward[1]"},
		{"negative priority", &replayv1.InsertRequest{Writer: "w", Seq: 1, Data: negPriority()}, codes.InvalidArgument, "Priority[0]"},
		{"oversize", &replayv1.InsertRequest{Writer: "w", Seq: 1, Data: huge}, codes.ResourceExhausted, "larger than max"},
	}
	for i, tc := range cases {
		before := h.srv.Stats().RejectedMessages
		st := h.insertStream(ctx(t))
		if err := st.Send(tc.req); err != nil {
			t.Fatalf("%s: Send: %v", tc.name, err)
		}
		_, err := st.Recv()
		wantCode(t, tc.name, err, tc.code)
		if !contains(err, tc.says) {
			t.Errorf("%s: %v does not say %q", tc.name, err, tc.says)
		}
		eventually(t, tc.name+" counted", func() bool { return h.srv.Stats().RejectedMessages == before+1 })
		if s := h.srv.Stats(); s.InsertedBatches != 0 || s.Size != 0 {
			t.Fatalf("case %d %s stored something: %+v", i, tc.name, s)
		}
	}
	// The writer table is bounded: a third writer is refused.
	st := h.insertStream(ctx(t))
	insert(t, st, "w1", 1, good())
	insert(t, st, "w2", 1, good())
	if err := st.Send(&replayv1.InsertRequest{Writer: "w3", Seq: 1, Data: good()}); err != nil {
		t.Fatal(err)
	}
	_, err := st.Recv()
	wantCode(t, "a writer beyond MaxWriters", err, codes.ResourceExhausted)

	// Once the known writers have been idle longer than WriterIdle, a
	// full table forgets them to make room for a new writer.
	later := time.Now().Add(WriterIdle + time.Minute)
	h.srv.clock = func() time.Time { return later }
	st = h.insertStream(ctx(t))
	insert(t, st, "w4", 1, good())
	if s := h.srv.Stats(); s.WritersEvicted != 3 || s.Writers != 1 {
		t.Fatalf("after the idle time, %d writers evicted and %d known; want 3 and 1 (w4)", s.WritersEvicted, s.Writers)
	}
}

// sampleErr sends req on a fresh Sample stream and returns the stream's
// error.
func sampleErr(t *testing.T, h *srvHarness, req *replayv1.SampleRequest) error {
	t.Helper()
	st := h.sampleStream(ctx(t))
	if err := st.Send(req); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err == nil {
		t.Fatalf("%v answered %v, want an error", req, r)
	}
	return err
}

func drawReq(d *replayv1.Draw) *replayv1.SampleRequest {
	return &replayv1.SampleRequest{Kind: &replayv1.SampleRequest_Draw{Draw: d}}
}

func wbReq(wb *replayv1.WriteBack) *replayv1.SampleRequest {
	return &replayv1.SampleRequest{Kind: &replayv1.SampleRequest_WriteBack{WriteBack: wb}}
}

// TestBadSample: each bad draw or write-back ends the stream with its
// status and reason, is counted, and applies nothing.
func TestBadSample(t *testing.T) {
	cfg := buffer.Config{Capacity: 1 << 16, Stripes: 4, ObsDim: 64, Action: buffer.Discrete}
	lim, err := runtime.NewRateLimiter(runtime.RateLimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 100, ErrorBuffer: 10})
	if err != nil {
		t.Fatal(err)
	}
	h := serve(t, testTable(t, "per", cfg, lim), ServerOptions{})
	inc := h.srv.Incarnation()
	key := Key(buffer.Ref{Slot: 1, Gen: 2})
	cases := []struct {
		name string
		req  *replayv1.SampleRequest
		code codes.Code
		says string
	}{
		{"empty request", &replayv1.SampleRequest{}, codes.InvalidArgument, "neither a draw nor a write-back"},
		{"unknown table", drawReq(&replayv1.Draw{Table: "x", Batch: 1, Step: 1}), codes.NotFound, `no table "x"`},
		{"batch 0", drawReq(&replayv1.Draw{Batch: 0, Step: 1}), codes.InvalidArgument, "batch 0"},
		{"step 0", drawReq(&replayv1.Draw{Batch: 1}), codes.InvalidArgument, "step 0"},
		{"reply over the limit", drawReq(&replayv1.Draw{Batch: 4000, Step: 1}), codes.InvalidArgument, "1048576-byte message limit"},
		{"no_wait held", drawReq(&replayv1.Draw{Batch: 1, Step: 1, NoWait: true}), codes.ResourceExhausted, "no_wait"},
		{"no keys", wbReq(&replayv1.WriteBack{Incarnation: inc, AbsTd: []float64{1}}), codes.InvalidArgument, "no keys"},
		{"NaN abs_td", wbReq(&replayv1.WriteBack{Incarnation: inc, Keys: []uint64{key, key}, AbsTd: []float64{1, math.NaN()}}), codes.InvalidArgument, "abs_td[1] = NaN"},
		{"negative abs_td", wbReq(&replayv1.WriteBack{Incarnation: inc, Keys: []uint64{key}, AbsTd: []float64{-1}}), codes.InvalidArgument, "abs_td[0] = -1"},
		{"infinite abs_td", wbReq(&replayv1.WriteBack{Incarnation: inc, Keys: []uint64{key}, AbsTd: []float64{math.Inf(1)}}), codes.InvalidArgument, "abs_td[0] = +Inf"},
		{"length mismatch", wbReq(&replayv1.WriteBack{Incarnation: inc, Keys: []uint64{key, key}, AbsTd: []float64{1}}), codes.InvalidArgument, "2 keys but 1 abs_td"},
		{"both", wbReq(&replayv1.WriteBack{Incarnation: inc, Keys: []uint64{key}, AbsTd: []float64{1}, Q: []float64{1}, Target: []float64{1}}), codes.InvalidArgument, "both"},
		{"neither", wbReq(&replayv1.WriteBack{Incarnation: inc, Keys: []uint64{key}}), codes.InvalidArgument, "neither"},
		{"features to per", wbReq(&replayv1.WriteBack{Incarnation: inc, Keys: []uint64{key}, Q: []float64{1}, Target: []float64{1}}), codes.InvalidArgument, "takes abs_td"},
		{"slot out of range", wbReq(&replayv1.WriteBack{Incarnation: inc, Keys: []uint64{Key(buffer.Ref{Slot: 1 << 20, Gen: 2})}, AbsTd: []float64{1}}), codes.InvalidArgument, "capacity"},
	}
	for _, tc := range cases {
		before := h.srv.Stats().RejectedMessages
		err := sampleErr(t, h, tc.req)
		wantCode(t, tc.name, err, tc.code)
		if !contains(err, tc.says) {
			t.Errorf("%s: %v does not say %q", tc.name, err, tc.says)
		}
		if got := h.srv.Stats().RejectedMessages; got != before+1 {
			t.Errorf("%s: %d rejections counted, want %d", tc.name, got, before+1)
		}
	}
	if s := h.srv.Stats(); s.WriteBacksApplied+s.WriteBacksStale != 0 || s.Draws != 0 {
		t.Fatalf("something was applied: %+v", s)
	}
}

// TestBadUnary: unary calls' refusals, each with its code, counted.
func TestBadUnary(t *testing.T) {
	h := serve(t, testTable(t, "per", smallCfg(16, 1), nil), ServerOptions{})
	c := ctx(t)
	cases := []struct {
		name string
		call func() error
		code codes.Code
		says string
	}{
		{"fetch unknown table", func() error { _, err := h.cli.Fetch(c, &replayv1.FetchRequest{Table: "t"}); return err }, codes.NotFound, `no table "t"`},
		{"fetch too many keys", func() error {
			_, err := h.cli.Fetch(c, &replayv1.FetchRequest{Keys: make([]uint64, 100000)})
			return err
		}, codes.InvalidArgument, "message limit"},
		{"evaluated without a hook", func() error { _, err := h.cli.Evaluated(c, &replayv1.EvaluatedRequest{MeanReturn: 1}); return err }, codes.FailedPrecondition, "no evaluation returns"},
		{"checkpoint without a folder", func() error { _, err := h.cli.Checkpoint(c, &replayv1.CheckpointRequest{}); return err }, codes.FailedPrecondition, "checkpoint folder"},
		{"set limiter without one", func() error {
			_, err := h.cli.SetLimiter(c, &replayv1.SetLimiterRequest{Limiter: &replayv1.LimiterConfig{SamplesPerInsert: 1, MinSizeToSample: 1, ErrorBuffer: 1}})
			return err
		}, codes.FailedPrecondition, "without a rate limiter"},
		{"watch unknown table", func() error {
			st, err := h.cli.Watch(c, &replayv1.WatchRequest{Table: "t"})
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		}, codes.NotFound, `no table "t"`},
	}
	for _, tc := range cases {
		before := h.srv.Stats().RejectedMessages
		err := tc.call()
		wantCode(t, tc.name, err, tc.code)
		if !contains(err, tc.says) {
			t.Errorf("%s: %v does not say %q", tc.name, err, tc.says)
		}
		if got := h.srv.Stats().RejectedMessages; got != before+1 {
			t.Errorf("%s: %d rejections counted, want %d", tc.name, got, before+1)
		}
	}
}

// TestSetLimiter: a valid change is in force (Info shows it), an invalid
// one is refused naming the field and changes nothing.
func TestSetLimiter(t *testing.T) {
	lim, err := runtime.NewRateLimiter(runtime.RateLimiterConfig{SamplesPerInsert: 2, MinSizeToSample: 10, ErrorBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	h := serve(t, testTable(t, "uniform", smallCfg(16, 1), lim), ServerOptions{})
	c := ctx(t)
	want := &replayv1.LimiterConfig{SamplesPerInsert: 4, MinSizeToSample: 3, ErrorBuffer: 8}
	got, err := h.cli.SetLimiter(c, &replayv1.SetLimiterRequest{Limiter: want})
	if err != nil || got.SamplesPerInsert != 4 || got.MinSizeToSample != 3 || got.ErrorBuffer != 8 {
		t.Fatalf("SetLimiter: %v, %v", got, err)
	}
	for _, bad := range []*replayv1.LimiterConfig{
		{SamplesPerInsert: 0, MinSizeToSample: 1, ErrorBuffer: 1},
		{SamplesPerInsert: 4, MinSizeToSample: 1, ErrorBuffer: 2},
		{SamplesPerInsert: 1, MinSizeToSample: 0, ErrorBuffer: 1},
		{SamplesPerInsert: math.NaN(), MinSizeToSample: 1, ErrorBuffer: 1},
		nil,
	} {
		_, err := h.cli.SetLimiter(c, &replayv1.SetLimiterRequest{Limiter: bad})
		wantCode(t, "SetLimiter invalid", err, codes.InvalidArgument)
	}
	info, err := h.cli.Info(c, &replayv1.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if l := info.Tables[0].Limiter; l.SamplesPerInsert != 4 || l.MinSizeToSample != 3 || l.ErrorBuffer != 8 {
		t.Fatalf("Info's limiter %v after refused changes, want %v", l, want)
	}
}
