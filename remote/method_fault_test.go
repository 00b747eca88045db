package remote

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// fakeSample is a Replay server whose Sample answers draws with rows of
// testLayout (keys = row numbers) and write-backs with counts, and
// breaks streams on request.
type fakeSample struct {
	replayv1.UnimplementedReplayServer
	method string

	mu          sync.Mutex
	incarnation uint64
	breakNext   bool     // break the stream at the next request, unanswered
	stall       bool     // leave draws unanswered until the stream ends
	steps       []uint64 // of the draws received
	seeds       []uint64
}

func (f *fakeSample) Info(context.Context, *replayv1.InfoRequest) (*replayv1.InfoReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &replayv1.InfoReply{Incarnation: f.incarnation, Tables: []*replayv1.TableInfo{{Name: "replay", Method: f.method}}}, nil
}

func (f *fakeSample) Sample(stream grpc.BidiStreamingServer[replayv1.SampleRequest, replayv1.SampleReply]) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		f.mu.Lock()
		brk, inc := f.breakNext, f.incarnation
		f.breakNext = false
		if d := req.GetDraw(); d != nil {
			f.steps = append(f.steps, d.GetStep())
			f.seeds = append(f.seeds, d.GetSeed())
		}
		f.mu.Unlock()
		if brk {
			return status.Error(codes.Unavailable, "fake: stream broken on purpose")
		}
		f.mu.Lock()
		stall := f.stall && req.GetDraw() != nil
		f.mu.Unlock()
		if stall {
			<-stream.Context().Done()
			return stream.Context().Err()
		}
		var reply replayv1.SampleReply
		if d := req.GetDraw(); d != nil {
			n := int(d.GetBatch())
			b := &replayv1.Batch{Id: d.GetId(), Incarnation: inc, Size: 100, Total: 100, MinProb: 0.01, Data: &replayv1.Columns{}}
			for i := range n {
				b.Keys = append(b.Keys, Key(buffer.Ref{Slot: uint32(i), Gen: 2}))
				b.Prob = append(b.Prob, 0.01)
				b.Weight = append(b.Weight, 0.5)
			}
			tr := rows(n, float32(d.GetStep()))
			tr.Flags = make([]uint32, n)
			if err := EncodeTransitions(b.Data, testLayout, tr); err != nil {
				return err
			}
			reply.Kind = &replayv1.SampleReply_Batch{Batch: b}
		} else {
			wb := req.GetWriteBack()
			r := &replayv1.WriteBackResult{Id: wb.GetId()}
			if wb.GetIncarnation() != inc {
				r.WrongIncarnation = uint32(len(wb.GetKeys()))
			} else {
				r.Applied = uint32(len(wb.GetKeys()))
			}
			reply.Kind = &replayv1.SampleReply_Written{Written: r}
		}
		if err := stream.Send(&reply); err != nil {
			return err
		}
	}
}

func perTwin(t *testing.T) (sampler.Method, *buffer.Buffer) {
	t.Helper()
	buf, err := buffer.New(testLayout)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sampler.NewMethod("per", buf, sampler.MethodConfig{BetaSteps: 10})
	if err != nil {
		t.Fatal(err)
	}
	return m, buf
}

func TestStageBrokenStream(t *testing.T) {
	checkLeaks(t)
	local, buf := perTwin(t)
	f := &fakeSample{method: local.String(), incarnation: 11}
	c := newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, f) }).client(ClientOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := c.Method(ctx, local, 100)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := buf.NewBatch(4)
	rng := rand.New(rand.NewPCG(1, 2))
	want := rand.New(rand.NewPCG(1, 2))
	if err := m.Selector.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	if b.Reward[0] != 101 || b.Refs[3] != (buffer.Ref{Slot: 3, Gen: 2}) || b.Prob[0] != 0.01 || b.Size != 100 {
		t.Fatalf("batch %+v", b)
	}
	if err := m.Weighter.Weights(b, 100); err != nil || !slices.Equal(b.Weight, []float64{0.5, 0.5, 0.5, 0.5}) {
		t.Fatalf("weights %v, %v", b.Weight, err)
	}
	if err := m.Weighter.Weights(b, 101); err == nil || !strings.Contains(err.Error(), "step 101") {
		t.Errorf("weights for the wrong step: %v", err)
	}
	// The stream breaks under the next draw: its error comes back, the next call re-opens the stream.
	f.mu.Lock()
	f.breakNext = true
	f.mu.Unlock()
	if err := m.Selector.Sample(rng, b); status.Code(errors.Unwrap(err)) != codes.Unavailable {
		t.Fatalf("draw lost in a break: %v", err)
	}
	if err := m.Selector.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	if b.Reward[0] != 102 {
		t.Errorf("the redrawn batch serves step %v, want 102", b.Reward[0])
	}
	f.mu.Lock()
	steps, seeds := slices.Clone(f.steps), slices.Clone(f.seeds)
	f.mu.Unlock()
	if !slices.Equal(steps, []uint64{101, 102, 102}) {
		t.Errorf("draw steps %v, want 101 102 102", steps)
	}
	if !slices.Equal(seeds, []uint64{want.Uint64(), want.Uint64(), want.Uint64()}) {
		t.Errorf("seeds %v: one rng draw per Sample", seeds)
	}
	// A server restart (new incarnation): the old batch's keys are dropped as stale.
	f.mu.Lock()
	f.incarnation = 12
	f.mu.Unlock()
	res, err := m.Selector.Update(b.Refs, []float64{1, 2, 3, 4})
	if err != nil || res.Applied != 0 || res.Stale != 4 {
		t.Fatalf("write-back to an earlier incarnation: %+v, %v", res, err)
	}
	if err := m.Selector.Sample(rng, b); err != nil {
		t.Fatal(err)
	}
	if res, err := m.Selector.Update(b.Refs, []float64{1, 2, 3, 4}); err != nil || res.Applied != 4 {
		t.Fatalf("write-back: %+v, %v", res, err)
	}
	if _, err := m.Selector.Update(b.Refs, []float64{1, 2, -3, 4}); !errors.Is(err, buffer.ErrPriority) {
		t.Errorf("negative |δ|: %v", err)
	}
	if _, err := m.Selector.Update(b.Refs, []float64{1}); !errors.Is(err, buffer.ErrShape) {
		t.Errorf("length mismatch: %v", err)
	}
	st := c.Stats()
	if st.Draws != 3 || st.Rows != 12 || st.WriteBacks != 2 || st.Applied != 4 || st.Stale != 4 || st.WrongIncarnation != 4 || st.StreamOpens != 2 || st.StreamErrors != 1 {
		t.Errorf("client stats %+v", st)
	}
	if m.Selector.Priority(2) != local.Selector.Priority(2) || m.Selector.String() != local.Selector.String() {
		t.Error("Priority or String is not the local twin's")
	}
	cancel()
	if err := m.Selector.Sample(rng, b); err == nil {
		t.Error("draw after the stage's context ended: no error")
	}
}

func TestMethodRefusesAnotherMethod(t *testing.T) {
	checkLeaks(t)
	local, _ := perTwin(t)
	f := &fakeSample{method: "rank: rank(alpha=0.7) + huber(k=1)", incarnation: 1}
	c := newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, f) }).client(ClientOptions{})
	if _, err := c.Method(context.Background(), local, 0); err == nil || !strings.Contains(err.Error(), `runs "rank`) {
		t.Errorf("per against a rank server: %v", err)
	}
}

func TestStageDrawTimeout(t *testing.T) {
	checkLeaks(t)
	local, buf := perTwin(t)
	f := &fakeSample{method: local.String(), incarnation: 1, stall: true}
	c := newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, f) }).client(ClientOptions{DrawTimeout: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := c.Method(ctx, local, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := buf.NewBatch(2)
	if err := m.Selector.Sample(rand.New(rand.NewPCG(1, 1)), b); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a draw past DrawTimeout: %v", err)
	}
	f.mu.Lock()
	f.stall = false
	f.mu.Unlock()
	if err := m.Selector.Sample(rand.New(rand.NewPCG(1, 1)), b); err != nil {
		t.Fatalf("the next draw: %v", err)
	}
}

// TestStagePipelinedWriteBackLost: a pipelined stage's Update returns the
// counts answered since the previous Update; a write-back whose stream
// breaks before its result comes is counted lost and is the next draw's
// error (never re-sent), and the draw after that works on a new stream;
// Settle makes the totals exact.
func TestStagePipelinedWriteBackLost(t *testing.T) {
	checkLeaks(t)
	local, buf := perTwin(t)
	f := &fakeSample{method: local.String(), incarnation: 11}
	c := newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, f) }).client(ClientOptions{Pipeline: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := c.Method(ctx, local, 100)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := buf.NewBatch(4)
	rng := rand.New(rand.NewPCG(1, 2))
	td := []float64{1, 2, 3, 4}
	sample := func(what string) {
		t.Helper()
		if err := m.Selector.Sample(rng, b); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	update := func(what string, want buffer.UpdateResult) {
		t.Helper()
		if res, err := m.Selector.Update(b.Refs, td); err != nil || res != want {
			t.Fatalf("%s: update %+v, %v; want %+v", what, res, err, want)
		}
	}
	four := buffer.UpdateResult{Applied: 4}
	sample("first draw")
	update("first write-back: nothing answered yet", buffer.UpdateResult{})
	sample("second draw")
	update("second write-back: the first's counts", four)
	update("a write-back with no draw between: the previous one is answered first", four)
	if owed, err := Settle(m); err != nil || owed != four {
		t.Fatalf("settle: %+v, %v; want the third write-back's %+v", owed, err, four)
	}
	sample("a draw after the third write-back")

	// The server breaks the stream on the next write-back, unanswered.
	f.mu.Lock()
	f.breakNext = true
	f.mu.Unlock()
	update("the fourth write-back: nothing owed after Settle", buffer.UpdateResult{})
	err = m.Selector.Sample(rng, b)
	if err == nil || !strings.Contains(err.Error(), "result was lost with the stream") || status.Code(errors.Unwrap(err)) != codes.Unavailable {
		t.Fatalf("a draw behind a lost write-back: %v", err)
	}
	if st := c.Stats(); st.WriteBacksLost != 1 || st.WriteBacks != 3 || st.Applied != 12 || st.StreamErrors != 1 {
		t.Fatalf("after the break: client stats %+v", st)
	}
	sample("the draw after the break, on a new stream")
	if b.Reward[0] != 104 {
		t.Errorf("the draw after the break serves step %v, want 104", b.Reward[0])
	}
	update("the write-back after the break: the lost one is not counted", buffer.UpdateResult{})
	owed, err := Settle(m)
	if err != nil || owed != four {
		t.Fatalf("settle: %+v, %v; want %+v", owed, err, four)
	}
	if owed, err := Settle(m); err != nil || owed != (buffer.UpdateResult{}) {
		t.Fatalf("settle again: %+v, %v", owed, err)
	}
	f.mu.Lock()
	steps := slices.Clone(f.steps)
	f.mu.Unlock()
	if !slices.Equal(steps, []uint64{101, 102, 103, 104}) {
		t.Errorf("draw steps %v: the lost write-back's draw never reached the server, nothing re-sent", steps)
	}
	st := c.Stats()
	if st.Draws != 4 || st.WriteBacks != 4 || st.Applied != 16 || st.WriteBacksLost != 1 || st.StreamOpens != 2 || st.StreamErrors != 1 {
		t.Errorf("client stats %+v", st)
	}
	// Stream broken with a write-back pending, found by Settle: counted
	// and reported there.
	sample("a draw the server takes")
	f.mu.Lock()
	f.breakNext = true
	f.mu.Unlock()
	update("a write-back the server breaks the stream on", buffer.UpdateResult{})
	if _, err := Settle(m); err == nil || !strings.Contains(err.Error(), "result was lost") {
		t.Errorf("settle after a lost write-back: %v", err)
	}
	if st := c.Stats(); st.WriteBacksLost != 2 {
		t.Errorf("client stats %+v: want 2 lost", st)
	}
	cancel()
}
