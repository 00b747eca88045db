package remote

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/grpc"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// twinLayout is the buffer layout of method name over CartPole-like
// rows, with what the method adds.
func twinLayout(t *testing.T, name string, mcfg sampler.MethodConfig) buffer.Config {
	t.Helper()
	spec, ok := sampler.Lookup(name)
	if !ok {
		t.Fatalf("no method %q", name)
	}
	c := buffer.Config{Capacity: 96, Stripes: 2, ObsDim: 3, Action: buffer.Discrete, NumActions: 2}
	if spec.Layout != nil {
		spec.Layout(mcfg, &c)
	}
	return c
}

// twinRows makes n transitions of layout c from rng, with state hashes
// from a small set (so TER's graph has edges) and per-row priorities for
// half of the batches.
func twinRows(rng *rand.Rand, c buffer.Config, n int, withPriority bool) *buffer.Transitions {
	t := &buffer.Transitions{}
	for i := range n {
		for range c.ObsDim {
			t.Obs = append(t.Obs, rng.Float32())
			t.NextObs = append(t.NextObs, rng.Float32())
		}
		t.Action = append(t.Action, int32(rng.IntN(2)))
		t.Reward = append(t.Reward, rng.Float32())
		d := float32(0.99)
		var f uint32
		if i%7 == 6 {
			d, f = 0, buffer.FlagTerminal
		}
		t.Discount = append(t.Discount, d)
		t.Flags = append(t.Flags, f)
		if c.StateHash {
			t.StateHash = append(t.StateHash, uint64(rng.IntN(12)))
			t.NextStateHash = append(t.NextStateHash, uint64(rng.IntN(12)))
		}
		if c.Episode {
			t.EpisodeID = append(t.EpisodeID, uint64(i/7+1))
			t.EpisodeStep = append(t.EpisodeStep, int32(i%7))
		}
		if c.GlobalStep {
			t.GlobalStep = append(t.GlobalStep, int64(i))
		}
		if c.ActorID {
			t.ActorID = append(t.ActorID, 0)
		}
		if withPriority {
			t.Priority = append(t.Priority, 0.1+rng.Float64())
		}
	}
	for _, f := range c.Floats {
		col := make([]float32, n*f.Width)
		for i := range col {
			col[i] = rng.Float32()
		}
		t.Floats = append(t.Floats, col)
	}
	return t
}

// replayServer serves srv (swappable: restart with another Server).
func replayServer(t *testing.T, srv **Server) *bufServer {
	return newBufServer(t, func(s *grpc.Server) { replayv1.RegisterReplayServer(s, *srv) })
}

func sameBatch(a, b *buffer.Batch) error {
	switch {
	case !slices.Equal(a.Refs, b.Refs):
		return fmt.Errorf("refs %v vs %v", a.Refs, b.Refs)
	case !slices.Equal(a.Prob, b.Prob):
		return fmt.Errorf("probs %v vs %v", a.Prob, b.Prob)
	case a.Size != b.Size || a.Total != b.Total || a.MinProb != b.MinProb:
		return fmt.Errorf("size/total/minprob %d %v %v vs %d %v %v", a.Size, a.Total, a.MinProb, b.Size, b.Total, b.MinProb)
	case !slices.Equal(a.Obs, b.Obs) || !slices.Equal(a.NextObs, b.NextObs) || !slices.Equal(a.Action, b.Action) ||
		!slices.Equal(a.Reward, b.Reward) || !slices.Equal(a.Discount, b.Discount) || !slices.Equal(a.Flags, b.Flags) ||
		!slices.Equal(a.StateHash, b.StateHash) || !slices.Equal(a.EpisodeID, b.EpisodeID):
		return fmt.Errorf("rows differ")
	}
	return nil
}

// TestMethodTwins draws through each method's remote stage and through
// the same method in process, over identical data and with one seed, and
// checks that the two agree on every row, probability, weight, write-back
// count and, at the end, every stored priority.
func TestMethodTwins(t *testing.T) {
	for _, name := range []string{"uniform", "per", "rank", "lap", "pal", "ter", "ners"} {
		for _, pipe := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/pipeline=%t", name, pipe), func(t *testing.T) { testMethodTwin(t, name, pipe) })
		}
	}
}

// testMethodTwin is TestMethodTwins for one method, with the remote
// stage pipelining its write-backs or not: its batches are the in-process
// stage's either way; pipelined, each Update returns the previous
// write-back's counts and Settle the last one's.
func testMethodTwin(t *testing.T, name string, pipe bool) {
	checkLeaks(t)
	seed := uint64(20261126)
	defer func() {
		if t.Failed() {
			t.Logf("seed %d", seed)
		}
	}()
	mcfg := sampler.MethodConfig{BetaSteps: 50, Learner: "dqn", Seed: 3}
	layout := twinLayout(t, name, mcfg)
	newMethod := func() (*buffer.Buffer, sampler.Method) {
		buf, err := buffer.New(layout)
		if err != nil {
			t.Fatal(err)
		}
		m, err := sampler.NewMethod(name, buf, mcfg)
		if err != nil {
			t.Fatal(err)
		}
		return buf, m
	}
	inBuf, inM := newMethod()
	inSel := sampler.Reseed(inM.Selector) // an in-process learner's stage
	srvBuf, srvM := newMethod()
	srv, err := NewServer(Table{Buffer: srvBuf, Method: srvM}, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c := replayServer(t, &srv).client(ClientOptions{Pipeline: pipe})
	w := newTestWriterLayout(t, c, "twin", layout)
	_, localM := newMethod()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rm, err := c.Method(ctx, localM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if (rm.Weighter == nil) != (inM.Weighter == nil) || (rm.Features == nil) != (inM.Features == nil) || (rm.Evaluated == nil) != (inM.Evaluated == nil) {
		t.Fatalf("capabilities differ: remote %+v, in process %+v", rm, inM)
	}
	if rm.Selector.String() != inM.Selector.String() || rm.Loss != inM.Loss {
		t.Errorf("remote %v, in process %v", rm, inM)
	}

	data := rand.New(rand.NewPCG(seed, 1))
	insert := func(n int, prio bool) {
		tr := twinRows(data, layout, n, prio)
		if err := inBuf.Insert(tr); err != nil {
			t.Fatal(err)
		}
		if err := w.Insert(tr); err != nil {
			t.Fatal(err)
		}
		flush(t, w)
	}
	insert(40, false)
	insert(30, true)

	rngIn, rngRemote := rand.New(rand.NewPCG(seed, 2)), rand.New(rand.NewPCG(seed, 2))
	td := rand.New(rand.NewPCG(seed, 3))
	const rows = 16
	bIn, _ := inBuf.NewBatch(rows)
	bRemote, _ := inBuf.NewBatch(rows) // any buffer of the layout: the client decodes into it
	var stale []buffer.Ref
	var prevIn, sumIn, sumRemote buffer.UpdateResult
	writeBacks := uint64(12)
	for step := uint64(1); step <= 12; step++ {
		if err := inSel.Sample(rngIn, bIn); err != nil {
			t.Fatalf("step %d: in process: %v", step, err)
		}
		if err := rm.Selector.Sample(rngRemote, bRemote); err != nil {
			t.Fatalf("step %d: remote: %v", step, err)
		}
		if err := sameBatch(bIn, bRemote); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if inM.Weighter != nil {
			if err := inM.Weighter.Weights(bIn, int64(step-1)); err != nil {
				t.Fatal(err)
			}
			if err := rm.Weighter.Weights(bRemote, int64(step-1)); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(bIn.Weight, bRemote.Weight) {
				t.Fatalf("step %d: weights %v vs %v", step, bIn.Weight, bRemote.Weight)
			}
			if err := rm.Weighter.Weights(bRemote, int64(step)); err == nil {
				t.Errorf("step %d: weights for the wrong step: no error", step)
			}
		}
		absTD := make([]float64, rows)
		q := make([]float64, rows)
		y := make([]float64, rows)
		for i := range absTD {
			q[i], y[i] = td.NormFloat64(), td.NormFloat64()
			absTD[i] = max(q[i]-y[i], y[i]-q[i])
		}
		var resIn, resRemote buffer.UpdateResult
		var errIn, errRemote error
		if inM.Features != nil {
			resIn, errIn = inM.Features.UpdateFeatures(bIn.Refs, q, y)
			resRemote, errRemote = rm.Features.UpdateFeatures(bRemote.Refs, q, y)
		} else {
			resIn, errIn = inSel.Update(bIn.Refs, absTD)
			resRemote, errRemote = rm.Selector.Update(bRemote.Refs, absTD)
		}
		wantRemote := resIn
		if pipe {
			wantRemote, prevIn = prevIn, resIn
		}
		sumIn.Applied, sumIn.Stale = sumIn.Applied+resIn.Applied, sumIn.Stale+resIn.Stale
		sumRemote.Applied, sumRemote.Stale = sumRemote.Applied+resRemote.Applied, sumRemote.Stale+resRemote.Stale
		if errIn != nil || errRemote != nil || wantRemote != resRemote {
			t.Fatalf("step %d: write-back %+v, %v (the remote stage should return %+v) vs %+v, %v", step, resIn, errIn, wantRemote, resRemote, errRemote)
		}
		if step == 6 {
			if pipe {
				// The write-back reaches the server before the inserts
				// on another stream only once it is answered: what an
				// unpipelined stage waits for.
				owed, err := Settle(rm)
				if err != nil || owed != prevIn {
					t.Fatalf("step %d: settle: %+v, %v, want %+v", step, owed, err, prevIn)
				}
				sumRemote.Applied, sumRemote.Stale = sumRemote.Applied+owed.Applied, sumRemote.Stale+owed.Stale
				prevIn = buffer.UpdateResult{}
			}
			stale = slices.Clone(bIn.Refs)
			insert(layout.Capacity, false) // overwrites every slot: the refs are stale now
		}
		if inM.Evaluated != nil && step%4 == 0 {
			if err := inM.Evaluated(float64(step)); err != nil {
				t.Fatal(err)
			}
			if err := rm.Evaluated(float64(step)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if inM.Features == nil { // stale keys are dropped, on both sides alike
		absTD := make([]float64, len(stale))
		for i := range absTD {
			absTD[i] = 1
		}
		resIn, _ := inSel.Update(stale, absTD)
		resRemote, err := rm.Selector.Update(stale, absTD)
		wantRemote := resIn
		if pipe {
			wantRemote, prevIn = prevIn, resIn
		}
		sumIn.Applied, sumIn.Stale = sumIn.Applied+resIn.Applied, sumIn.Stale+resIn.Stale
		sumRemote.Applied, sumRemote.Stale = sumRemote.Applied+resRemote.Applied, sumRemote.Stale+resRemote.Stale
		if err != nil || wantRemote != resRemote || resIn.Stale != len(stale) {
			t.Errorf("stale write-back: %+v vs %+v (want %+v), %v", resIn, resRemote, wantRemote, err)
		}
		writeBacks++
	}
	// Settle owes the last write-back's counts when pipelining,
	// nothing otherwise; then the totals are exact.
	owed, err := Settle(rm)
	want := buffer.UpdateResult{}
	if pipe {
		want = prevIn
	}
	if err != nil || owed != want {
		t.Fatalf("settle: %+v, %v, want %+v", owed, err, want)
	}
	sumRemote.Applied, sumRemote.Stale = sumRemote.Applied+owed.Applied, sumRemote.Stale+owed.Stale
	if sumRemote != sumIn {
		t.Errorf("write-back totals: remote %+v, in process %+v", sumRemote, sumIn)
	}
	if st := c.Stats(); st.WriteBacks != writeBacks || st.Applied != uint64(sumIn.Applied) || st.Stale != uint64(sumIn.Stale) || st.WriteBacksLost != 0 {
		t.Errorf("client stats %+v: want %d write-backs, %+v", st, writeBacks, sumIn)
	}
	for slot := range layout.Capacity {
		refA, pA, okA := inBuf.SlotPriority(slot)
		refB, pB, okB := srvBuf.SlotPriority(slot)
		if refA != refB || pA != pB || okA != okB {
			t.Fatalf("slot %d: %v %v %v vs %v %v %v", slot, refA, pA, okA, refB, pB, okB)
		}
	}
	if (rm.Stats == nil) != (inM.Stats == nil) {
		t.Errorf("Stats: remote %t, in process %t", rm.Stats != nil, inM.Stats != nil)
	} else if rm.Stats != nil {
		remote, in := rm.Stats(), inM.Stats()
		if !slices.Equal(slices.Sorted(maps.Keys(remote)), slices.Sorted(maps.Keys(in))) {
			t.Errorf("method stats %v, in process %v", remote, in)
		}
	}
	if st := c.Stats(); st.Draws != 12 || st.WrongIncarnation != 0 {
		t.Errorf("client stats %+v", st)
	}
	cancel()
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func newTestWriterLayout(t *testing.T, c *Client, id string, layout buffer.Config) *Writer {
	t.Helper()
	w, err := c.NewWriter(id, WriterOptions{Layout: layout, MinBackoff: 1e6, MaxBackoff: 4e6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	return w
}
