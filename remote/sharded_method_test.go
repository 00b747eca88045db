package remote

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// testShard is one replay shard of a test fleet: a server on an
// in-memory listener, its buffer, and a client dialed by its own name.
type testShard struct {
	name string
	srv  *Server
	buf  *buffer.Buffer
	bs   *bufServer
	c    *Client
}

// shardLayout is the layout the sharded tests use.
func shardLayout(capacity int) buffer.Config {
	return buffer.Config{Capacity: capacity, Stripes: 2, ObsDim: 2, Action: buffer.Discrete, NumActions: 2}
}

// newTestShard serves method name over a fresh buffer of layout with lim
// (nil: none) and config as the run configuration.
func newTestShard(t *testing.T, name, method string, layout buffer.Config, lim *runtime.RateLimiter, config string) *testShard {
	t.Helper()
	buf, err := buffer.New(layout)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sampler.NewMethod(method, buf, sampler.MethodConfig{BetaSteps: 100})
	if err != nil {
		t.Fatal(err)
	}
	sh := &testShard{name: name, buf: buf}
	sh.srv, err = NewServer(Table{Buffer: buf, Method: m, Limiter: lim, Config: []byte(config)}, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.srv.Close() })
	sh.bs = newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, sh.srv) })
	sh.c, err = Dial(context.Background(), "passthrough:///"+name, ClientOptions{Insecure: true,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(sh.bs.dial)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.c.Close() })
	return sh
}

// fill inserts one row per priority (obs[0] = its index, obs[1] = tag).
func (sh *testShard) fill(t *testing.T, prios []float64, tag float32) {
	t.Helper()
	tr := &buffer.Transitions{}
	for i, p := range prios {
		tr.Obs = append(tr.Obs, float32(i), tag)
		tr.NextObs = append(tr.NextObs, float32(i), tag)
		tr.Action = append(tr.Action, int32(i%2))
		tr.Reward = append(tr.Reward, float32(i))
		tr.Discount = append(tr.Discount, 0.99)
		tr.Priority = append(tr.Priority, p)
	}
	if err := sh.buf.Insert(tr); err != nil {
		t.Fatal(err)
	}
}

// localTwin is method name over a buffer of layout (the learner's twin).
func localTwin(t *testing.T, method string, layout buffer.Config) (*buffer.Buffer, sampler.Method) {
	t.Helper()
	buf, err := buffer.New(layout)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sampler.NewMethod(method, buf, sampler.MethodConfig{BetaSteps: 100})
	if err != nil {
		t.Fatal(err)
	}
	return buf, m
}

func clientsOf(shards ...*testShard) []*Client {
	out := make([]*Client, len(shards))
	for i, sh := range shards {
		out[i] = sh.c
	}
	return out
}

// TestShardedChiSquare draws many batches across two shards whose masses
// differ 1:100 and checks, with a chi-square test, that every item's
// frequency is p_i/Σp over both shards, in the exact mode and the
// one-shard mode; and that every row's reported probability is that.
func TestShardedChiSquare(t *testing.T) {
	for _, mode := range []ShardSampling{ShardExact, ShardOne} {
		t.Run(mode.String(), func(t *testing.T) {
			checkLeaks(t)
			seed := uint64(time.Now().UnixNano())
			defer func() {
				if t.Failed() {
					t.Logf("seed %d", seed)
				}
			}()
			layout := shardLayout(16)
			a := newTestShard(t, "shard-a", "per", layout, nil, `{"run":1}`)
			b := newTestShard(t, "shard-b", "per", layout, nil, `{"run":1}`)
			// 8 items each: shard a's mass 1, shard b's 100.
			var pa, pb []float64
			for i := range 8 {
				pa = append(pa, float64(i+1)/36)
				pb = append(pb, 100*float64(8-i)/36)
			}
			a.fill(t, pa, 0)
			b.fill(t, pb, 1)
			total := 101.0
			probs := append(scaled(pa, 1/total), scaled(pb, 1/total)...)

			_, local := localTwin(t, "per", layout)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			counters := &ShardCounters{}
			m, err := ShardedMethod(ctx, clientsOf(a, b), local, 0, ShardOptions{Sampling: mode, Counters: counters})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(seed, 7))
			scratch, _ := buffer.New(layout)
			const rows, draws = 32, 1200
			dst, err := scratch.NewBatch(rows)
			if err != nil {
				t.Fatal(err)
			}
			counts := make([]int, 16)
			batches := make([]int, 2) // one mode: the batches drawn from each shard
			for range draws {
				if err := m.Selector.Sample(rng, dst); err != nil {
					t.Fatal(err)
				}
				if dst.Size != 16 || math.Abs(dst.Total-total) > 1e-6*total {
					t.Fatalf("size %d total %v, want 16 and %v", dst.Size, dst.Total, total)
				}
				batches[int(dst.Obs[1])]++
				for j := range rows {
					cell := int(dst.Obs[2*j]) + 8*int(dst.Obs[2*j+1])
					counts[cell]++
					if want := probs[cell]; math.Abs(dst.Prob[j]-want) > 1e-6*want {
						t.Fatalf("row %d (item %d): probability %v, want %v", j, cell, dst.Prob[j], want)
					}
				}
			}
			if mode == ShardExact {
				// Stratified rows vary less than independent ones: the
				// test is conservative for them.
				samplertest.ChiSquare(t, seed, counts, probs)
			} else {
				// A batch's rows share its shard, so rows are not
				// independent: test the shards' choice per batch (M_s/M),
				// then the items within each shard (p_i/M_s).
				samplertest.ChiSquare(t, seed, batches, []float64{1 / total, 100 / total})
				samplertest.ChiSquare(t, seed, counts[:8], scaled(pa, 1))
				samplertest.ChiSquare(t, seed, counts[8:], scaled(pb, 1.0/100))
			}
			st := counters.Snapshot()
			if st.Draws != draws || st.Rows != rows*draws || st.Shards[0].Rows+st.Shards[1].Rows != rows*draws {
				t.Errorf("counters %+v", st)
			}
			cancel()
		})
	}
}

func scaled(xs []float64, f float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * f
	}
	return out
}

// TestShardedWeightsMatchInProcess checks that the importance weights of
// rows drawn across two shards equal those an in-process PER over one
// buffer holding the same items with the same priorities gives the same
// items (NormalizeBuffer: they depend on N, P(i) and the smallest P).
func TestShardedWeightsMatchInProcess(t *testing.T) {
	checkLeaks(t)
	seed := uint64(time.Now().UnixNano())
	defer func() {
		if t.Failed() {
			t.Logf("seed %d", seed)
		}
	}()
	layout := shardLayout(16)
	a := newTestShard(t, "shard-a", "per", layout, nil, `{"run":1}`)
	b := newTestShard(t, "shard-b", "per", layout, nil, `{"run":1}`)
	pa := []float64{0.5, 1, 2, 3}
	pb := []float64{10, 20, 40, 80, 5}
	a.fill(t, pa, 0)
	b.fill(t, pb, 1)
	// The in-process twin: one buffer, the same items (obs[1] = 0 or 1
	// tags the shard, obs[0] the index).
	inBuf, inM := localTwin(t, "per", shardLayout(16))
	one := &testShard{buf: inBuf}
	one.fill(t, pa, 0)
	one.fill(t, pb, 1)
	const rows = 8
	for _, step := range []int64{0, 50, 99} {
		inWeight := map[[2]int]float64{}
		rng := rand.New(rand.NewPCG(seed, 1))
		bIn, _ := inBuf.NewBatch(rows)
		for range 200 {
			if err := inM.Selector.Sample(rng, bIn); err != nil {
				t.Fatal(err)
			}
			if err := inM.Weighter.Weights(bIn, step); err != nil {
				t.Fatal(err)
			}
			for j := range rows {
				inWeight[[2]int{int(bIn.Obs[2*j+1]), int(bIn.Obs[2*j])}] = bIn.Weight[j]
			}
		}
		for _, mode := range []ShardSampling{ShardExact, ShardOne} {
			_, local := localTwin(t, "per", layout)
			ctx, cancel := context.WithCancel(context.Background())
			m, err := ShardedMethod(ctx, clientsOf(a, b), local, 0, ShardOptions{Sampling: mode})
			if err != nil {
				t.Fatal(err)
			}
			dst, _ := inBuf.NewBatch(rows)
			checked := 0
			for range 50 {
				if err := m.Selector.Sample(rng, dst); err != nil {
					t.Fatal(err)
				}
				if err := m.Weighter.Weights(dst, step); err != nil {
					t.Fatal(err)
				}
				for j := range rows {
					key := [2]int{int(dst.Obs[2*j+1]), int(dst.Obs[2*j])}
					want, ok := inWeight[key]
					if !ok {
						continue // not drawn in process
					}
					checked++
					if math.Abs(dst.Weight[j]-want) > 1e-6*want {
						t.Fatalf("%s, step %d: item %v weighs %v across shards, %v in process", mode, step, key, dst.Weight[j], want)
					}
				}
			}
			if checked < 100 {
				t.Errorf("%s: only %d rows compared", mode, checked)
			}
			cancel()
		}
	}
}

// TestShardedWriteBacksRouted draws a batch across two shards and checks
// that each row's |δ| lands in the shard it came from, and nowhere else.
func TestShardedWriteBacksRouted(t *testing.T) {
	checkLeaks(t)
	layout := shardLayout(16)
	a := newTestShard(t, "shard-a", "per", layout, nil, `{"run":1}`)
	b := newTestShard(t, "shard-b", "per", layout, nil, `{"run":1}`)
	a.fill(t, []float64{1, 1, 1, 1, 1, 1, 1, 1}, 0)
	b.fill(t, []float64{1, 1, 1, 1, 1, 1, 1, 1}, 1)
	_, local := localTwin(t, "per", layout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := ShardedMethod(ctx, clientsOf(a, b), local, 0, ShardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	dst, _ := a.buf.NewBatch(8)
	if err := m.Selector.Sample(rng, dst); err != nil {
		t.Fatal(err)
	}
	fromA := 0
	absTD := make([]float64, 8)
	want := map[[2]int]float64{}
	for j := range 8 {
		absTD[j] = float64(j + 2)
		if dst.Obs[2*j+1] == 0 {
			fromA++
		}
		want[[2]int{int(dst.Obs[2*j+1]), int(dst.Refs[j].Slot)}] = m.Selector.Priority(absTD[j])
	}
	if fromA == 0 || fromA == 8 {
		t.Fatalf("%d of 8 rows from shard a: want both shards in the batch", fromA)
	}
	res, err := m.Selector.Update(dst.Refs, absTD)
	if err != nil || res.Applied != 8 || res.Stale != 0 {
		t.Fatalf("write-back %+v, %v", res, err)
	}
	for s, sh := range []*testShard{a, b} {
		for slot := range 8 {
			_, p, ok := sh.buf.SlotPriority(slot)
			w, written := want[[2]int{s, slot}]
			if !written {
				w = 1
			}
			if !ok || math.Abs(p-w) > 1e-6*w {
				t.Errorf("shard %d slot %d: priority %v, want %v", s, slot, p, w)
			}
		}
	}
	// Refs other than the latest batch's are refused, nothing sent.
	other := append([]buffer.Ref(nil), dst.Refs...)
	other[0].Slot ^= 1
	if _, err := m.Selector.Update(other, absTD); err == nil {
		t.Error("a write-back for refs that are not the latest batch's: no error")
	}
}
