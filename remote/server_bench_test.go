package remote

import (
	"fmt"
	"math/rand/v2"
	"testing"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
)

// cartPole is the layout of CartPole's transitions (44 bytes of columns).
var cartPole = buffer.Config{Capacity: 1 << 20, ObsDim: 4, Action: buffer.Discrete, NumActions: 2}

// BenchmarkServerInsert streams CartPole batches (256 rows, 11 KiB, and
// 8192 rows, 352 KiB) through one Insert stream over bufconn, sends
// pipelined against the acks (no limiter): items/s is the server's
// insert rate with one writer.
func BenchmarkServerInsert(b *testing.B) {
	for _, rows := range []int{256, 8192} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) { benchInsert(b, rows) })
	}
}

func benchInsert(b *testing.B, rows int) {
	h := serve(b, testTable(b, "per", cartPole, nil), ServerOptions{})
	_, c := batchOf(b, rand.New(rand.NewPCG(1, 1)), cartPole, rows)
	st := h.insertStream(ctx(b))
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() {
		for seq := 1; seq <= b.N; seq++ {
			if err := st.Send(&replayv1.InsertRequest{Writer: "w", Seq: uint64(seq), Data: c}); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for range b.N {
		if _, err := st.Recv(); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "items/s")
	st.CloseSend()
}

// BenchmarkServerSampleWriteBack draws 512-row PER batches from a table
// of 100 000 CartPole items and writes a priority back for every row, one
// round trip each over bufconn: items/s is sampled-and-updated rows.
func BenchmarkServerSampleWriteBack(b *testing.B) {
	tab := testTable(b, "per", cartPole, nil)
	rng := rand.New(rand.NewPCG(2, 2))
	for range 100 {
		tr := randomTransitions(rng, cartPole, 1000)
		tr.Flags, tr.Priority = nil, nil
		if err := tab.Buffer.Insert(tr); err != nil {
			b.Fatal(err)
		}
	}
	h := serve(b, tab, ServerOptions{})
	const rows = 512
	ss := h.sampleStream(ctx(b))
	td := make([]float64, rows)
	for i := range td {
		td[i] = rng.Float64()
	}
	b.ResetTimer()
	for i := range b.N {
		got := draw(b, ss, &replayv1.Draw{Id: uint64(i), Batch: rows, Seed: uint64(i), Step: uint64(i + 1)})
		writeBack(b, ss, &replayv1.WriteBack{Id: uint64(i), Incarnation: got.Incarnation, Keys: got.Keys, AbsTd: td})
	}
	b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "items/s")
	ss.CloseSend()
}

// BenchmarkInProcessSampleWriteBack is BenchmarkServerSampleWriteBack's
// baseline: the same draws and write-backs on the method in process.
func BenchmarkInProcessSampleWriteBack(b *testing.B) {
	tab := testTable(b, "per", cartPole, nil)
	rng := rand.New(rand.NewPCG(2, 2))
	for range 100 {
		tr := randomTransitions(rng, cartPole, 1000)
		tr.Flags, tr.Priority = nil, nil
		if err := tab.Buffer.Insert(tr); err != nil {
			b.Fatal(err)
		}
	}
	const rows = 512
	bt, err := tab.Buffer.NewBatch(rows)
	if err != nil {
		b.Fatal(err)
	}
	td := make([]float64, rows)
	for i := range td {
		td[i] = rng.Float64()
	}
	b.ResetTimer()
	for i := range b.N {
		if err := SampleSeeded(tab.Method.Selector, uint64(i), bt); err != nil {
			b.Fatal(err)
		}
		if err := tab.Method.Weighter.Weights(bt, int64(i)); err != nil {
			b.Fatal(err)
		}
		if _, err := tab.Method.Selector.Update(bt.Refs, td); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "items/s")
}
