package remote

import (
	"context"
	"errors"
	"io"
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
)

// fakeInserts is a Replay server whose Insert stores batches by (writer,
// seq) as the contract says and can break streams, hold acknowledgements
// or refuse.
type fakeInserts struct {
	replayv1.UnimplementedReplayServer
	layout buffer.Config

	mu         sync.Mutex
	highest    map[string]uint64
	batches    int
	duplicates int
	rewards    []float32 // of the stored rows, in order
	breakEvery int       // break each stream after storing this many batches on it, before acking the last (0: never)
	breaks     int       // how many streams to break so
	refuse     error     // the error of every stream, at once
	received   int       // messages received, all streams
	changed    chan struct{}

	hold chan struct{} // when not nil, each ack waits for a value
}

func newFakeInserts(layout buffer.Config) *fakeInserts {
	return &fakeInserts{layout: layout, highest: map[string]uint64{}, changed: make(chan struct{})}
}

func (f *fakeInserts) Insert(stream grpc.BidiStreamingServer[replayv1.InsertRequest, replayv1.InsertAck]) error {
	f.mu.Lock()
	refuse, hold := f.refuse, f.hold
	f.mu.Unlock()
	if refuse != nil {
		return refuse
	}
	var tr buffer.Transitions
	for n := 0; ; {
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
		f.received++
		dup := req.GetSeq() <= f.highest[req.GetWriter()]
		if dup {
			f.duplicates++
		} else {
			f.highest[req.GetWriter()] = req.GetSeq()
			f.batches++
			f.rewards = append(f.rewards, tr.Reward...)
			n++
		}
		brk := f.breaks > 0 && !dup && n == f.breakEvery
		if brk {
			f.breaks--
		}
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()
		if brk {
			return status.Error(codes.Unavailable, "fake: stream broken on purpose")
		}
		if hold != nil {
			select {
			case <-hold:
			case <-stream.Context().Done():
				return stream.Context().Err()
			}
		}
		if err := stream.Send(&replayv1.InsertAck{Seq: req.GetSeq(), Duplicate: dup, Incarnation: 7}); err != nil {
			return err
		}
	}
}

// waitFor waits until cond holds over the fake's state.
func (f *fakeInserts) waitFor(cond func() bool) {
	for {
		f.mu.Lock()
		ok, ch := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		<-ch
	}
}

var testLayout = buffer.Config{Capacity: 1024, ObsDim: 2, Action: buffer.Discrete, NumActions: 2}

// rows makes n transitions of testLayout whose rewards are from, from+1, ...
func rows(n int, from float32) *buffer.Transitions {
	t := &buffer.Transitions{}
	for i := range n {
		r := from + float32(i)
		t.Obs = append(t.Obs, r, -r)
		t.NextObs = append(t.NextObs, r+1, -r-1)
		t.Action = append(t.Action, int32(i%2))
		t.Reward = append(t.Reward, r)
		t.Discount = append(t.Discount, 0.99)
	}
	return t
}

func insertServer(t *testing.T, f *fakeInserts) *bufServer {
	return newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, f) })
}

func newTestWriter(t *testing.T, c *Client, id string, opts WriterOptions) *Writer {
	t.Helper()
	opts.Layout = testLayout
	if opts.MinBackoff == 0 {
		opts.MinBackoff, opts.MaxBackoff = time.Millisecond, 4*time.Millisecond
	}
	w, err := c.NewWriter(id, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	return w
}

func flush(t *testing.T, w *Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("flush: %v (stats %+v)", err, w.Stats())
	}
}

func TestWriterResendIsIdempotent(t *testing.T) {
	checkLeaks(t)
	f := newFakeInserts(testLayout)
	f.breakEvery, f.breaks = 3, 6
	c := insertServer(t, f).client(ClientOptions{})
	w := newTestWriter(t, c, "actor-host-1", WriterOptions{Window: 4})
	const batches, per = 40, 5
	var want []float32
	for i := range batches {
		tr := rows(per, float32(i*per))
		want = append(want, tr.Reward...)
		if err := w.Insert(tr); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, w)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.batches != batches || !slices.Equal(f.rewards, want) {
		t.Fatalf("server stored %d batches (want %d), rows in order: %t", f.batches, batches, slices.Equal(f.rewards, want))
	}
	st := w.Stats()
	if st.Batches != batches || st.Acked != batches || st.AckedItems != batches*per || st.Lost != 0 || st.Pending != 0 {
		t.Errorf("stats %+v", st)
	}
	if st.Reconnects != 6 || st.Resent < 6 || st.Duplicates != 6 || f.duplicates != 6 {
		t.Errorf("stats %+v, server saw %d duplicates: want 6 reconnects, each resending the batch stored and not acknowledged", st, f.duplicates)
	}
	if st.Incarnation != 7 || st.Incarnations != 0 {
		t.Errorf("incarnation %d (%d changes), want 7 (0)", st.Incarnation, st.Incarnations)
	}
}

func TestWriterBackpressure(t *testing.T) {
	checkLeaks(t)
	f := newFakeInserts(testLayout)
	f.hold = make(chan struct{})
	hold := f.hold
	c := insertServer(t, f).client(ClientOptions{})
	w := newTestWriter(t, c, "w", WriterOptions{Window: 2})
	for i := range 2 {
		if err := w.Insert(rows(1, float32(i))); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- w.Insert(rows(1, 2)) }()
	for w.Stats().Blocked == 0 { // the third Insert waits for window space
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Insert returned (%v) with the window full", err)
	default:
	}
	if st := w.Stats(); st.Batches != 2 || st.Pending != 2 {
		t.Fatalf("stats %+v: want 2 batches taken, 2 pending", st)
	}
	hold <- struct{}{} // one acknowledgement frees one place
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(hold)
	flush(t, w)
	if st := w.Stats(); st.Batches != 3 || st.Acked != 3 || st.Blocked != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestWriterSplitsLargeBatches(t *testing.T) {
	checkLeaks(t)
	f := newFakeInserts(testLayout)
	c := insertServer(t, f).client(ClientOptions{})
	// A row is 4·(2·2+3)+4+8 = 40 bytes: 6000 bytes hold 47 rows after the margin.
	w := newTestWriter(t, c, "w", WriterOptions{MaxMessageBytes: messageMargin + 47*40})
	tr := rows(100, 0)
	if err := w.Insert(tr); err != nil {
		t.Fatal(err)
	}
	flush(t, w)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.batches != 3 || !slices.Equal(f.rewards, tr.Reward) {
		t.Errorf("stored %d batches, rows in order: %t; want 3 (47+47+6)", f.batches, slices.Equal(f.rewards, tr.Reward))
	}
	if st := w.Stats(); st.Batches != 3 || st.Items != 100 {
		t.Errorf("stats %+v", st)
	}
	// A column that does not split into whole rows is refused, nothing taken.
	bad := rows(100, 0)
	bad.Obs = bad.Obs[:199]
	if err := w.Insert(bad); !errors.Is(err, ErrColumns) {
		t.Errorf("ragged batch: %v, want ErrColumns", err)
	}
	bad = rows(3, 0)
	bad.Obs = bad.Obs[:5]
	if err := w.Insert(bad); !errors.Is(err, ErrColumns) {
		t.Errorf("short obs: %v, want ErrColumns", err)
	}
	if st := w.Stats(); st.Batches != 3 {
		t.Errorf("malformed batches were taken: %+v", st)
	}
}

func TestWriterGivesUpAndSaysSo(t *testing.T) {
	checkLeaks(t)
	for _, tc := range []struct {
		name       string
		refuse     error
		reconnects uint64
	}{
		{"unavailable", status.Error(codes.Unavailable, "down"), 2},
		{"invalid", status.Error(codes.InvalidArgument, "bad batch"), 0},
	} {
		f := newFakeInserts(testLayout)
		f.refuse = tc.refuse
		c := insertServer(t, f).client(ClientOptions{})
		w := newTestWriter(t, c, "w", WriterOptions{MaxAttempts: 3})
		if err := w.Insert(rows(4, 0)); err != nil {
			t.Fatal(err)
		}
		err := w.Flush(context.Background())
		if err == nil || !strings.Contains(err.Error(), "1 batches (4 items) lost") {
			t.Fatalf("%s: flush: %v", tc.name, err)
		}
		if err2 := w.Insert(rows(1, 0)); !errors.Is(err2, err) && err2.Error() != err.Error() {
			t.Errorf("%s: insert after giving up: %v", tc.name, err2)
		}
		if err3 := w.Close(context.Background()); err3 == nil {
			t.Errorf("%s: close after giving up: no error", tc.name)
		}
		st := w.Stats()
		if st.Lost != 1 || st.LostItems != 4 || st.Pending != 0 || st.Reconnects != tc.reconnects || st.LastError == "" {
			t.Errorf("%s: stats %+v", tc.name, st)
		}
	}
}

func TestWriterIDInUse(t *testing.T) {
	checkLeaks(t)
	f := newFakeInserts(testLayout)
	f.highest["reused"] = 100 // an earlier writer stored batches under the id
	c := insertServer(t, f).client(ClientOptions{})
	w := newTestWriter(t, c, "reused", WriterOptions{})
	if err := w.Insert(rows(2, 0)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(context.Background()); err == nil || !strings.Contains(err.Error(), "writer id is in use") {
		t.Fatalf("flush: %v", err)
	}
}

func TestWriterCloseAndBadInput(t *testing.T) {
	checkLeaks(t)
	f := newFakeInserts(testLayout)
	c := insertServer(t, f).client(ClientOptions{})
	if _, err := c.NewWriter("", WriterOptions{Layout: testLayout}); err == nil {
		t.Error("empty id: no error")
	}
	if _, err := c.NewWriter("w", WriterOptions{}); err == nil {
		t.Error("no layout: no error")
	}
	w := newTestWriter(t, c, "w", WriterOptions{})
	if err := w.Insert(&buffer.Transitions{}); err != nil {
		t.Errorf("empty insert: %v", err)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Errorf("second close: %v", err)
	}
	if err := w.Insert(rows(1, 0)); !errors.Is(err, ErrWriterClosed) {
		t.Errorf("insert after close: %v", err)
	}
	// Close whose context ends before the acknowledgements: the batches are lost, and it says so.
	f.mu.Lock()
	f.hold = make(chan struct{})
	f.mu.Unlock()
	w2 := newTestWriter(t, c, "w2", WriterOptions{})
	if err := w2.Insert(rows(3, 0)); err != nil {
		t.Fatal(err)
	}
	f.waitFor(func() bool { return f.received == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w2.Close(ctx); err == nil || !strings.Contains(err.Error(), "1 batches (3 items) lost") {
		t.Errorf("close with a cancelled context: %v", err)
	}
	if st := w2.Stats(); st.Lost != 1 || st.Batches != st.Acked+st.Lost+uint64(st.Pending) {
		t.Errorf("stats %+v", st)
	}
}

func TestWriterCloseUnblocksInsert(t *testing.T) {
	checkLeaks(t)
	f := newFakeInserts(testLayout)
	f.hold = make(chan struct{}) // never acknowledges
	c := insertServer(t, f).client(ClientOptions{})
	w := newTestWriter(t, c, "w", WriterOptions{Window: 1})
	if err := w.Insert(rows(1, 0)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Insert(rows(1, 1)) }()
	for w.Stats().Blocked == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cerr := w.Close(ctx)
	if cerr == nil || !strings.Contains(cerr.Error(), "1 batches (1 items) lost") {
		t.Fatalf("close: %v", cerr)
	}
	if err := <-done; err == nil || err.Error() != cerr.Error() {
		t.Errorf("the blocked Insert returned %v, want Close's %v", err, cerr)
	}
	if st := w.Stats(); st.Batches != 1 || st.Lost != 1 || st.Pending != 0 {
		t.Errorf("stats %+v", st)
	}
}
