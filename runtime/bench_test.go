package runtime

import (
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"github.com/apexrl/apex/buffer"
)

// BenchmarkSaveCheckpoint saves a CartPole run whose replay holds 2^21
// transitions and reports the checkpoint's size, the bytes the save
// allocates and the peak growth of the heap during the save (sampled
// after it: the save's garbage is not collected until it ends, so the
// growth in HeapInuse bounds its live memory). The baseline built
// the whole checkpoint in memory: about 3.3 times its size at peak.
//
//	go test -run '^$' -bench SaveCheckpoint -benchtime 3x ./runtime
func BenchmarkSaveCheckpoint(b *testing.B) {
	cfg := smallRun("")
	cfg.Capacity = 1 << 21
	tr, err := NewTrainer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	// Fill the replay: a checkpoint's size follows the items stored.
	const n = 1024
	obs := tr.buf.Config().ObsDim
	tt := &buffer.Transitions{Obs: make([]float32, n*obs), NextObs: make([]float32, n*obs), Action: make([]int32, n),
		Reward: make([]float32, n), Discount: make([]float32, n), EpisodeID: make([]uint64, n), EpisodeStep: make([]int32, n)}
	for i := range tt.Obs {
		tt.Obs[i], tt.NextObs[i] = float32(i), float32(i+1)
	}
	for range cfg.Capacity / n {
		if err := tr.buf.Insert(tt); err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(b.TempDir(), "bench.ckpt")
	var before, after goruntime.MemStats
	var alloc, grow uint64
	b.ResetTimer()
	for range b.N {
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		if err := tr.SaveCheckpoint(path); err != nil {
			b.Fatal(err)
		}
		goruntime.ReadMemStats(&after)
		alloc += after.TotalAlloc - before.TotalAlloc
		grow = max(grow, after.HeapInuse-min(after.HeapInuse, before.HeapInuse))
	}
	b.StopTimer()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(fi.Size())/(1<<20), "ckpt-MiB")
	b.ReportMetric(float64(alloc)/float64(b.N)/(1<<20), "alloc-MiB/save")
	b.ReportMetric(float64(grow)/(1<<20), "heap-growth-MiB")
	b.ReportMetric(100*float64(alloc)/float64(b.N)/float64(fi.Size()), "alloc-%-of-ckpt")
}
