package buffer

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/apexrl/apex/internal/badinput"
)

// TestBadInputReturnsErrors calls every exported entry point that takes
// caller input with bad input and checks it returns the documented error,
// naming what was wrong, instead of panicking.
func TestBadInputReturnsErrors(t *testing.T) {
	cfg := Config{Capacity: 64, ObsDim: 2, NumActions: 3}
	b := mustNew(t, cfg)
	if err := b.Insert(items(cfg, 0, 8, nil)); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	good := mustBatch(t, b, 4)
	cases := []struct {
		name string
		f    func() error
		is   error
		text string
	}{
		{"Insert(nil)", func() error { return b.Insert(nil) }, ErrNil, "nil *Transitions"},
		{"Insert mismatched Obs", func() error {
			tr := items(cfg, 0, 4, nil)
			tr.Obs = tr.Obs[:3]
			return b.Insert(tr)
		}, ErrShape, "column Obs has 3 values, want 8"},
		{"Insert NaN priority", func() error {
			return b.Insert(items(cfg, 0, 2, func(int) float64 { return math.NaN() }))
		}, ErrPriority, "Priority[0] = NaN"},
		{"Insert -Inf priority", func() error {
			return b.Insert(items(cfg, 0, 2, func(int) float64 { return math.Inf(-1) }))
		}, ErrPriority, "Priority[0] = -Inf"},
		{"Insert negative priority", func() error {
			return b.Insert(items(cfg, 0, 2, func(int) float64 { return -1 }))
		}, ErrPriority, "Priority[0] = -1"},
		{"Insert action out of range", func() error {
			tr := items(cfg, 0, 2, nil)
			tr.Action[1] = 7
			return b.Insert(tr)
		}, ErrShape, "Action[1] = 7"},
		{"NewBatch(-1)", func() error { _, err := b.NewBatch(-1); return err }, ErrBatchSize, "-1 rows"},
		{"NewBatch(MinInt)", func() error { _, err := b.NewBatch(math.MinInt); return err }, ErrBatchSize, "must not be negative"},
		{"NewBatch(MaxInt)", func() error { _, err := b.NewBatch(math.MaxInt); return err }, ErrBatchSize, "exceeds the maximum"},
		{"Sample nil rng", func() error { return b.Sample(nil, good) }, ErrNil, "*rand.Rand"},
		{"Sample nil batch", func() error { return b.Sample(rng, nil) }, ErrNil, "nil *Batch"},
		{"SampleRefs nil rng", func() error { return b.SampleRefs(nil, good) }, ErrNil, "*rand.Rand"},
		{"SampleRefs nil batch", func() error { return b.SampleRefs(rng, nil) }, ErrNil, "nil *Batch"},
		{"SampleUniform nil rng", func() error { return b.SampleUniform(nil, good) }, ErrNil, "*rand.Rand"},
		{"SampleUniform nil batch", func() error { return b.SampleUniform(rng, nil) }, ErrNil, "nil *Batch"},
		{"Sample zero Batch", func() error { return b.Sample(rng, &Batch{}) }, ErrBatchSize, "batch of 0"},
		{"Sample foreign-shaped Batch", func() error {
			return b.Sample(rng, &Batch{Refs: make([]Ref, 2), Prob: make([]float64, 2)})
		}, ErrShape, "make batches with NewBatch"},
		{"UpdatePriorities length mismatch", func() error {
			_, err := b.UpdatePriorities(make([]Ref, 2), []float64{1})
			return err
		}, ErrShape, "2 refs but 1 priorities"},
		{"UpdatePriorities NaN", func() error {
			_, err := b.UpdatePriorities(make([]Ref, 1), []float64{math.NaN()})
			return err
		}, ErrPriority, "priority[0] = NaN"},
		{"UpdatePriorities +Inf", func() error {
			_, err := b.UpdatePriorities(make([]Ref, 1), []float64{math.Inf(1)})
			return err
		}, ErrPriority, "priority[0] = +Inf"},
		{"UpdatePriorities slot out of range", func() error {
			_, err := b.UpdatePriorities([]Ref{{Slot: 1 << 31}}, []float64{1})
			return err
		}, ErrSlot, "refs[0].Slot = 2147483648"},
		{"ImportanceWeights nil batch", func() error { return (*Batch)(nil).ImportanceWeights(0.5, NormalizeBatch) }, ErrNil, "nil *Batch"},
		{"ImportanceWeights Size 0", func() error {
			return (&Batch{Prob: []float64{0.5}}).ImportanceWeights(0.5, NormalizeBatch)
		}, ErrBatchSize, "Size = 0"},
		{"ImportanceWeights NaN beta", func() error {
			return (&Batch{Prob: []float64{0.5}, Size: 2}).ImportanceWeights(math.NaN(), NormalizeBatch)
		}, nil, "beta must be in [0, 1], got NaN"},
		{"ImportanceWeights Prob +Inf", func() error {
			return (&Batch{Prob: []float64{math.Inf(1)}, Size: 2}).ImportanceWeights(0.5, NormalizeBatch)
		}, nil, "probability +Inf"},
		{"ImportanceWeights MinProb NaN", func() error {
			return (&Batch{Prob: []float64{0.5}, Size: 2, MinProb: math.NaN()}).ImportanceWeights(0.5, NormalizeBuffer)
		}, nil, "minimum priority"},
		{"ImportanceWeights MinProb 2", func() error {
			return (&Batch{Prob: []float64{0.5}, Size: 2, MinProb: 2}).ImportanceWeights(0.5, NormalizeBuffer)
		}, nil, "MinProb = 2"},
		{"ImportanceWeights bad norm", func() error {
			return (&Batch{Prob: []float64{0.5}, Size: 2}).ImportanceWeights(0.5, Normalization(9))
		}, nil, "unknown normalization 9"},
		{"New huge", func() error { _, err := New(Config{Capacity: MaxCapacity, ObsDim: MaxWidth}); return err }, ErrConfig, "above the size limit MaxBytes"},
		{"New too many float columns", func() error {
			c := Config{Capacity: MaxCapacity, ObsDim: 1}
			for i := range 300 {
				c.Floats = append(c.Floats, FloatColumn{Name: string(rune('a'+i%26)) + strings.Repeat("x", i/26), Width: 1000})
			}
			_, err := New(c)
			return err
		}, ErrConfig, "above the size limit MaxBytes"},
		{"New negative Capacity", func() error { _, err := New(Config{Capacity: -1, ObsDim: 1}); return err }, ErrConfig, "Capacity must be positive, got -1"},
		{"New negative Stripes", func() error { _, err := New(Config{Capacity: 8, Stripes: -4, ObsDim: 1}); return err }, ErrConfig, "Stripes must be a power of two, got -4"},
		{"New negative float width", func() error {
			_, err := New(Config{Capacity: 8, ObsDim: 1, Floats: []FloatColumn{{Name: "m", Width: -2}}})
			return err
		}, ErrConfig, "Width must be in [1, 1048576], got -2"},
		{"MemoryBytes huge", func() error { _, err := Config{Capacity: MaxCapacity, ObsDim: MaxWidth}.MemoryBytes(); return err }, ErrConfig, "above the size limit MaxBytes"},
	}
	for _, c := range cases {
		err := badinput.NoPanic(t, c.name, c.f)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v, want %v", c.name, err, c.is)
		}
		if !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %q does not say %q", c.name, err, c.text)
		}
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatalf("after the bad calls: %v", err)
	}
	if got := b.Size(); got != 8 {
		t.Fatalf("Size = %d after rejected inserts, want 8", got)
	}
}

// TestBadInputNilSafeReaders: the readers of a nil Transitions or Batch and
// a nil Poll callback do not panic.
func TestBadInputNilSafeReaders(t *testing.T) {
	var tr *Transitions
	var bt *Batch
	_ = badinput.NoPanic(t, "nil readers", func() error {
		if tr.Len() != 0 || bt.Len() != 0 {
			t.Errorf("Len of nil = %d, %d, want 0", tr.Len(), bt.Len())
		}
		tr.Reset()
		return nil
	})
	cfg := Config{Capacity: 16, ObsDim: 1}
	b := mustNew(t, cfg)
	w := b.NewWatcher()
	if err := b.Insert(items(cfg, 0, 5, nil)); err != nil {
		t.Fatal(err)
	}
	_ = badinput.NoPanic(t, "Poll(nil)", func() error {
		if n := w.Poll(nil); n != 5 {
			t.Errorf("Poll(nil) = %d, want 5", n)
		}
		return nil
	})
}

// TestBadInputGatherPanicsClearly: Gather* keep their documented panic for
// a batch that cannot take the row (the bool result is the hot path's
// re-draw signal), but a nil batch gets the same clear message rather than
// a nil dereference.
func TestBadInputGatherPanicsClearly(t *testing.T) {
	b := mustNew(t, Config{Capacity: 16, ObsDim: 1})
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, "nil *Batch") {
			t.Fatalf("GatherSlot(nil): recovered %v, want a message naming the nil *Batch", r)
		}
	}()
	b.GatherSlot(nil, 0, 0)
}

// TestConfigRefusesNonFiniteFloats sets each float field of Config to NaN
// and ±Inf and checks that Validate names it.
func TestConfigRefusesNonFiniteFloats(t *testing.T) {
	base := Config{Capacity: 16, ObsDim: 1}
	typ := reflect.TypeOf(base)
	n := 0
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.Float64 {
			continue
		}
		n++
		for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			c := base
			reflect.ValueOf(&c).Elem().Field(i).SetFloat(v)
			err := badinput.NoPanic(t, f.Name, c.Validate)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), f.Name) {
				t.Errorf("%s = %v: Validate gave %v, want ErrConfig naming the field", f.Name, v, err)
			}
		}
	}
	if n != 2 {
		t.Fatalf("found %d float fields, want 2 (MaxPriority, InitialPriority): update the test", n)
	}
}

// TestMemoryBytes: MemoryBytes is within 1% of what New allocates for
// buffers of megabytes, and agrees with New about what is too large.
func TestMemoryBytes(t *testing.T) {
	for _, cfg := range []Config{
		{Capacity: 1 << 16, ObsDim: 8},
		{Capacity: 100_000, Stripes: 4, ObsDim: 3, Action: Continuous, ActionDim: 2, Episode: true, GlobalStep: true,
			ActorID: true, StateHash: true, Floats: []FloatColumn{{Name: "mean", Width: 2}, {Name: "std", Width: 2}}},
		{Capacity: 50_000, ObsDim: 17, NoMinTree: true},
		{Capacity: 1 << 14, Stripes: 1 << 14, ObsDim: 1}, // trees and stripe headers dominate
	} {
		want, err := cfg.MemoryBytes()
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b, err := New(cfg)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		got := after.TotalAlloc - before.TotalAlloc
		runtime.KeepAlive(b)
		if d := math.Abs(float64(got) - float64(want)); d > 0.01*float64(got) { // the documented 1%
			t.Errorf("%+v: MemoryBytes = %d, New allocated %d", cfg, want, got)
		}
		t.Logf("capacity %d: MemoryBytes %d, New allocated %d", cfg.Capacity, want, got)
	}
	// The bound (computed, not allocated): 2^30 items of 816+ bytes fit
	// in MaxBytes, of 1040 bytes do not.
	c := Config{Capacity: MaxCapacity, ObsDim: 100}
	n, err := c.MemoryBytes()
	if err != nil || n > MaxBytes || n < MaxBytes/2 {
		t.Fatalf("ObsDim 100 at MaxCapacity: %d bytes, %v; want an estimate under MaxBytes", n, err)
	}
	c.ObsDim = 128
	if _, err := c.MemoryBytes(); !errors.Is(err, ErrConfig) {
		t.Fatalf("ObsDim 128 at MaxCapacity (over 1 TiB): %v, want ErrConfig", err)
	}
	if _, err := (Config{Capacity: 0, ObsDim: 1}).MemoryBytes(); !errors.Is(err, ErrConfig) {
		t.Fatalf("an invalid config: %v, want ErrConfig", err)
	}
}

// TestNewBatchBounds: NewBatch accepts 0 and more rows than Capacity (for
// GatherRef), and refuses a batch above MaxBytes without allocating it.
func TestNewBatchBounds(t *testing.T) {
	b := mustNew(t, Config{Capacity: 8, ObsDim: MaxWidth})
	for _, n := range []int{0, 1, 9} {
		bt, err := b.NewBatch(n)
		if err != nil || bt.Len() != n || len(bt.Obs) != n*MaxWidth {
			t.Fatalf("NewBatch(%d): %v", n, err)
		}
	}
	// 2^20 values of 8 bytes per row: 2^17 rows is 1 TiB of observations.
	if _, err := b.NewBatch(1 << 17); !errors.Is(err, ErrBatchSize) || !strings.Contains(err.Error(), "MaxBytes") {
		t.Fatalf("NewBatch over MaxBytes: %v", err)
	}
}

// FuzzInsertShapes inserts Transitions whose column lengths and values
// come from the input: Insert must accept or refuse each whole, never
// panic, and leave the buffer consistent.
func FuzzInsertShapes(f *testing.F) {
	f.Add([]byte{4, 8, 8, 4, 0, 4, 4, 4, 0, 0, 0, 1, 2, 3, 4})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 6, 5, 3, 3, 3, 3, 3, 3, 3, 3, 255, 255, 255, 255, 255, 255, 255, 127})
	cfg := Config{Capacity: 32, Stripes: 2, ObsDim: 2, NumActions: 4, Episode: true, Floats: []FloatColumn{{Name: "m", Width: 2}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := mustNew(t, cfg)
		at := 0
		next := func() int {
			if at >= len(data) {
				return 0
			}
			at++
			return int(data[at-1] % 24)
		}
		val := func() float32 {
			if at >= len(data) {
				return 0
			}
			at++
			return float32(int8(data[at-1]))
		}
		tr := &Transitions{
			Obs: make([]float32, next()), NextObs: make([]float32, next()), Action: make([]int32, next()),
			Reward: make([]float32, next()), Discount: make([]float32, next()), Flags: make([]uint32, next()),
			EpisodeID: make([]uint64, next()), EpisodeStep: make([]int32, next()),
		}
		if n := next(); n > 0 {
			tr.Floats = [][]float32{make([]float32, n)}
		}
		if n := next(); n > 0 {
			tr.Priority = make([]float64, n)
			for i := range tr.Priority {
				tr.Priority[i] = float64(val()) / 4
			}
		}
		for i := range tr.Action {
			tr.Action[i] = int32(val())
		}
		for i := range tr.Obs {
			tr.Obs[i] = val()
		}
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("Insert panicked: %v", r)
				}
			}()
			err = b.Insert(tr)
		}()
		if err != nil && !errors.Is(err, ErrShape) && !errors.Is(err, ErrPriority) {
			t.Fatalf("Insert: %v, want ErrShape or ErrPriority", err)
		}
		want := 0
		if err == nil {
			want = min(tr.Len(), 32)
		}
		if got := b.Size(); got > want || (err == nil && tr.Len() <= 16 && got != want) {
			t.Fatalf("Size = %d after Insert of %d items (%v)", got, tr.Len(), err)
		}
		if err := b.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNilReaderWriter: Save to a nil writer and Load from a nil reader
// are errors, not panics.
func TestNilReaderWriter(t *testing.T) {
	b, err := New(Config{Capacity: 8, ObsDim: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := badinput.NoPanic(t, "Save(nil)", func() error { return b.Save(nil) }); !errors.Is(err, ErrNil) {
		t.Errorf("Save(nil): %v, want ErrNil", err)
	}
	if err := badinput.NoPanic(t, "Load(nil)", func() error { _, err := Load(nil); return err }); !errors.Is(err, ErrNil) {
		t.Errorf("Load(nil): %v, want ErrNil", err)
	}
}
