package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/internal/meter"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// fakeServer is a minimal Replay server for the driver's own tests: it
// checks the messages' shapes, acknowledges inserts in order, answers
// draws with random keys over what was inserted, and applies nothing.
type fakeServer struct {
	replayv1.UnimplementedReplayServer
	mu         sync.Mutex
	size       uint64
	insertErr  error // returned by Insert at its first message, if set
	writeBacks uint64
	sampleOpen int // Sample streams opened
}

const fakeIncarnation = 7

func (f *fakeServer) Info(context.Context, *replayv1.InfoRequest) (*replayv1.InfoReply, error) {
	return &replayv1.InfoReply{Incarnation: fakeIncarnation, Tables: []*replayv1.TableInfo{{Name: "replay", Method: "fake", Capacity: 1 << 20}}}, nil
}

func (f *fakeServer) Insert(s grpc.BidiStreamingServer[replayv1.InsertRequest, replayv1.InsertAck]) error {
	var last uint64
	for {
		req, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if f.insertErr != nil {
			return f.insertErr
		}
		d := req.GetData()
		n := int(d.GetRows())
		if req.GetWriter() == "" || req.GetSeq() != last+1 || len(d.GetObs()) != 16*n || len(d.GetNextObs()) != 16*n ||
			len(d.GetAction()) != 4*n || len(d.GetReward()) != 4*n || len(d.GetDiscount()) != 4*n || len(d.GetPriority()) != 8*n {
			return status.Errorf(codes.InvalidArgument, "malformed batch: writer %q seq %d after %d, %d rows", req.GetWriter(), req.GetSeq(), last, n)
		}
		last = req.GetSeq()
		f.mu.Lock()
		f.size = min(f.size+uint64(n), 1<<20)
		size := f.size
		f.mu.Unlock()
		if err := s.Send(&replayv1.InsertAck{Seq: last, Incarnation: fakeIncarnation, Size: size}); err != nil {
			return err
		}
	}
}

func (f *fakeServer) Sample(s grpc.BidiStreamingServer[replayv1.SampleRequest, replayv1.SampleReply]) error {
	f.mu.Lock()
	f.sampleOpen++
	f.mu.Unlock()
	for {
		req, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch m := req.GetKind().(type) {
		case *replayv1.SampleRequest_Draw:
			n := int(m.Draw.GetBatch())
			b := &replayv1.Batch{Id: m.Draw.GetId(), Incarnation: fakeIncarnation, Keys: make([]uint64, n), Prob: make([]float64, n),
				Data: &replayv1.Columns{Rows: uint32(n), Obs: make([]byte, 16*n), NextObs: make([]byte, 16*n), Action: make([]byte, 4*n),
					Reward: make([]byte, 4*n), Discount: make([]byte, 4*n)}}
			for i := range b.Keys {
				b.Keys[i] = m.Draw.GetSeed()%1000 + uint64(i)
			}
			f.mu.Lock()
			b.Size = f.size
			f.mu.Unlock()
			if err := s.Send(&replayv1.SampleReply{Kind: &replayv1.SampleReply_Batch{Batch: b}}); err != nil {
				return err
			}
		case *replayv1.SampleRequest_WriteBack:
			w := m.WriteBack
			if len(w.GetKeys()) != len(w.GetAbsTd()) || w.GetIncarnation() != fakeIncarnation {
				return status.Errorf(codes.InvalidArgument, "write-back of %d keys with %d values, incarnation %d", len(w.GetKeys()), len(w.GetAbsTd()), w.GetIncarnation())
			}
			f.mu.Lock()
			f.writeBacks++
			f.mu.Unlock()
			r := &replayv1.WriteBackResult{Id: w.GetId(), Applied: uint32(len(w.GetKeys()))}
			if err := s.Send(&replayv1.SampleReply{Kind: &replayv1.SampleReply_Written{Written: r}}); err != nil {
				return err
			}
		}
	}
}

// serve starts srv on an in-memory listener; the returned dialer connects
// to it. The server stops when the test ends.
func serve(t *testing.T, srv replayv1.ReplayServer) Dialer {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	replayv1.RegisterReplayServer(gs, srv)
	var wg sync.WaitGroup
	wg.Go(func() { _ = gs.Serve(lis) })
	t.Cleanup(func() { gs.Stop(); wg.Wait() })
	return func() (*grpc.ClientConn, error) {
		return grpc.NewClient("passthrough:///bufconn",
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
}

func smokeConfig() Config {
	cfg := DefaultConfig()
	cfg.Streams, cfg.InsertBatch, cfg.Window, cfg.Conns = 4, 16, 2, 2
	cfg.SampleBatch, cfg.SampleInflight = 32, 2
	cfg.Warmup, cfg.Duration = 50*time.Millisecond, 300*time.Millisecond
	cfg.ServerCPU = func() (time.Duration, error) { return meter.ProcessCPU(), nil }
	return cfg
}

// TestRunFake: a short run against the fake server inserts, draws and
// writes back; the JSON report has every field.
func TestRunFake(t *testing.T) {
	f := &fakeServer{}
	cfg := smokeConfig()
	rep, err := Run(context.Background(), serve(t, f), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, cfg)
	if rep.Method != "fake" || rep.Capacity != 1<<20 || rep.Conns != 2 {
		t.Errorf("report names the table %q capacity %d, %d connections", rep.Method, rep.Capacity, rep.Conns)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Every draw answered (in or out of the window) was written back.
	if f.writeBacks < rep.Draws {
		t.Errorf("%d write-backs for %d draws in the window", f.writeBacks, rep.Draws)
	}
}

// TestRunSampleStreams: with SampleStreams 3 the learner opens 3 Sample
// streams, each drawing and writing back, and the report says so.
func TestRunSampleStreams(t *testing.T) {
	f := &fakeServer{}
	cfg := smokeConfig()
	cfg.SampleStreams = 3
	rep, err := Run(context.Background(), serve(t, f), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, cfg)
	if rep.SampleStreams != 3 {
		t.Errorf("report: %d sample streams, want 3", rep.SampleStreams)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sampleOpen != 3 {
		t.Errorf("the server saw %d Sample streams, want 3", f.sampleOpen)
	}
	if f.writeBacks < rep.Draws {
		t.Errorf("%d write-backs for %d draws in the window", f.writeBacks, rep.Draws)
	}
}

// TestRunPaced: a paced run sends no more than its rate allows. The
// bound holds whatever the machine's speed: acknowledgements counted in
// the window are of batches due by its end, plus those of at most a window
// per stream sent before it.
func TestRunPaced(t *testing.T) {
	cfg := smokeConfig()
	cfg.InsertRate = 2000 // transitions/s in all: 125 batches/s of 16
	rep, err := Run(context.Background(), serve(t, &fakeServer{}), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, cfg)
	bound := cfg.InsertRate*(rep.WarmupSec+rep.DurationSec) + float64(cfg.Streams*cfg.InsertBatch*(cfg.Window+1))
	if float64(rep.Inserted) > bound || rep.InsertRate != cfg.InsertRate {
		t.Errorf("paced to %v/s: %d inserted in %.2f s (bound %.0f); report's rate %v", cfg.InsertRate, rep.Inserted, rep.DurationSec, bound, rep.InsertRate)
	}
}

// checkReport asserts that the load happened and that the report's JSON
// carries every field.
func checkReport(t *testing.T, rep *Report, cfg Config) {
	t.Helper()
	if rep.Inserted == 0 || rep.Draws == 0 || rep.Sampled == 0 {
		t.Fatalf("no load measured: %+v", rep)
	}
	if rep.Inserted%uint64(cfg.InsertBatch) != 0 || rep.InsertsPerSec <= 0 || rep.SampledPerSec <= 0 || rep.DrawsPerSec <= 0 {
		t.Errorf("figures: %+v", rep)
	}
	if rep.SampleRTTP50US <= 0 || rep.SampleRTTP50US > rep.SampleRTTP90US || rep.SampleRTTP90US > rep.SampleRTTP99US || rep.SampleRTTP99US > rep.SampleRTTMaxUS {
		t.Errorf("round-trip percentiles out of order: %+v", rep)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	rt := reflect.TypeFor[Report]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if _, ok := got[name]; !ok && name != "server" { // Server is the command's to fill
			t.Errorf("JSON report lacks %q: %s", name, b)
		}
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"inserted transitions", "sampled + written back", "sample round trip", "CPU seconds"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, text.String())
		}
	}
}

// TestRunServerError: a stream the server ends with an error ends the run
// with that status.
func TestRunServerError(t *testing.T) {
	f := &fakeServer{insertErr: status.Error(codes.ResourceExhausted, "the fake refuses")}
	_, err := Run(context.Background(), serve(t, f), smokeConfig())
	if err == nil || !strings.Contains(err.Error(), "the fake refuses") {
		t.Fatalf("err = %v, want the server's refusal", err)
	}
}

// TestRunCancelled: a cancelled context ends the run with its error, after
// every stream has ended (goleak checks).
func TestRunCancelled(t *testing.T) {
	cfg := smokeConfig()
	cfg.Warmup = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Progress = func(line string) {
		if strings.HasPrefix(line, "warming up") {
			cancel()
		}
	}
	_, err := Run(ctx, serve(t, &fakeServer{}), cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestRunUnknownTable(t *testing.T) {
	cfg := smokeConfig()
	cfg.Table = "nope"
	_, err := Run(context.Background(), serve(t, &fakeServer{}), cfg)
	if err == nil || !strings.Contains(err.Error(), `no table "nope"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for flag, mod := range map[string]func(*Config){
		"-streams":         func(c *Config) { c.Streams = 0 },
		"-insert-batch":    func(c *Config) { c.InsertBatch = MaxBatch + 1 },
		"-window":          func(c *Config) { c.Window = 0 },
		"-conns":           func(c *Config) { c.Conns = c.Streams + 1 },
		"-insert-rate":     func(c *Config) { c.InsertRate = math.Inf(1) },
		"-sample-batch":    func(c *Config) { c.SampleBatch = 0 },
		"-sample-inflight": func(c *Config) { c.SampleInflight = MaxInflight + 1 },
		"-sample-streams":  func(c *Config) { c.SampleStreams = MaxSampleStreams + 1 },
		"-warmup":          func(c *Config) { c.Warmup = -1 },
		"-duration":        func(c *Config) { c.Duration = 0 },
	} {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), flag+"=") {
			t.Errorf("%s: Validate() = %v", flag, err)
		}
	}
}
