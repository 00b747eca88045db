package sampler_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/checkpoint"
	"github.com/apexrl/apex/internal/cktest"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// allocated returns the bytes f allocated (every goroutine's: callers keep
// the test single-threaded).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// loadBudget is the most a Load may allocate for an input of n bytes.
func loadBudget(n int) uint64 { return 64*uint64(n) + 64<<20 }

// fixNERS returns a copy of a NERS checkpoint (or of a scorer's) with
// every section's checksums recomputed, so that a fuzzer's mutations get
// past them.
func fixNERS(data []byte) []byte { return cktest.Reseal(data) }

var nersFuzzCfg = sampler.NERSConfig{Interval: 3, TrainSize: 8, History: 32, Seed: 11}

// fuzzNERS is a NERS stage over a 64-slot buffer that has scored batches,
// taken REINFORCE steps and holds a pending evaluation.
func fuzzNERS(t testing.TB) *sampler.NERS {
	t.Helper()
	buf := samplertest.NewBuffer(t, 64)
	samplertest.Insert(t, buf, 0, 64, nil)
	s := newNERS(t, buf, nersFuzzCfg)
	rng := rand.New(rand.NewPCG(12, 12))
	for k := range 8 {
		nersReport(t, s, buf, rng, 8)
		if k%3 == 0 {
			if err := s.Evaluated(float64(10 * k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Evaluated(123); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkStateLoad runs one fuzz input through load: no panic, at most
// loadBudget allocated, an error wraps one of want and leaves the state
// (its Save) unchanged, and a state that loaded saves a checkpoint that
// loads again and re-saves to the same bytes.
func checkStateLoad(t *testing.T, data []byte, save func(*bytes.Buffer) error, load func([]byte) error, want ...error) {
	var before bytes.Buffer
	if err := save(&before); err != nil {
		t.Fatal(err)
	}
	var err error
	alloc := allocated(func() { err = load(data) })
	if alloc > loadBudget(len(data)) {
		t.Fatalf("Load allocated %d bytes for %d input bytes", alloc, len(data))
	}
	var after bytes.Buffer
	if serr := save(&after); serr != nil {
		t.Fatalf("Save after Load (%v): %v", err, serr)
	}
	if err != nil {
		ok := false
		for _, w := range want {
			ok = ok || errors.Is(err, w)
		}
		if !ok {
			t.Fatalf("Load: %v wraps none of %v", err, want)
		}
		if !bytes.Equal(before.Bytes(), after.Bytes()) {
			t.Fatalf("a failed Load (%v) changed the state", err)
		}
		return
	}
	if err := load(after.Bytes()); err != nil {
		t.Fatalf("the re-saved checkpoint does not load: %v", err)
	}
	var again bytes.Buffer
	if err := save(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after.Bytes(), again.Bytes()) {
		t.Fatal("Save∘Load is not the identity on a saved checkpoint")
	}
}

// FuzzNERSLoad: NERS.Load never panics, refuses with buffer.ErrCorrupt or
// ErrConfig (leaving the stage as it was), stays within loadBudget, and
// what it loads re-saves to a checkpoint that loads to the same state.
// With fix set the state's and the scorer's checksums are recomputed
// first. Seeds: a real checkpoint, a truncation, edits.
func FuzzNERSLoad(f *testing.F) {
	var ck bytes.Buffer
	if err := fuzzNERS(f).Save(&ck); err != nil {
		f.Fatal(err)
	}
	real := ck.Bytes()
	f.Add(real, false)
	f.Add(real, true)
	f.Add(real[:len(real)/3], false)
	for _, at := range []int{12, 30, 60, 200, 400} {
		bad := slices.Clone(real)
		bad[at] ^= 0x41
		f.Add(bad, true)
	}
	target := fuzzNERS(f)
	if err := target.Load(bytes.NewReader(real)); err != nil {
		f.Fatalf("the real checkpoint does not load: %v", err)
	}
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = fixNERS(data)
		}
		checkStateLoad(t, data, func(b *bytes.Buffer) error { return target.Save(b) },
			func(d []byte) error { return target.Load(bytes.NewReader(d)) }, buffer.ErrCorrupt, buffer.ErrConfig)
		if err := sampler.CheckNERS(target); err != nil {
			t.Fatalf("the stage breaks an invariant after Load: %v", err)
		}
	})
}

// FuzzNERSNetLoad: as FuzzNERSLoad for the scorer alone (errors wrap
// model.ErrCorrupt or buffer.ErrConfig).
func FuzzNERSNetLoad(f *testing.F) {
	src := fuzzNERS(f).Net()
	var ck bytes.Buffer
	if err := src.Save(&ck); err != nil {
		f.Fatal(err)
	}
	real := ck.Bytes()
	f.Add(real, false)
	f.Add(real[:len(real)-9], false)
	f.Add(bytes.Replace(real, []byte(`"hidden":[`), []byte(`"hidden":[9`), 1), true)
	f.Add(bytes.Replace(real, []byte(`"len":`), []byte(`"len":2`), 1), true)
	target := newNERS(f, samplertest.NewBuffer(f, 64), sampler.NERSConfig{Seed: 4}).Net()
	if err := target.Load(bytes.NewReader(real)); err != nil {
		f.Fatalf("the real checkpoint does not load: %v", err)
	}
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = fixNERS(data)
		}
		checkStateLoad(t, data, func(b *bytes.Buffer) error { return target.Save(b) },
			func(d []byte) error { return target.Load(bytes.NewReader(d)) }, model.ErrCorrupt, buffer.ErrConfig)
	})
}

// TestNERSLoadRefusesNonFinite: a stage whose per-slot reports or scorer
// hold a NaN is refused with ErrCorrupt naming what; a state length far
// beyond what the stream holds is refused without allocating it.
func TestNERSLoadRefusesNonFinite(t *testing.T) {
	src := fuzzNERS(t)
	sampler.NERSSetReport(src, 5, float32(math.NaN()))
	var ck bytes.Buffer
	if err := src.Save(&ck); err != nil {
		t.Fatal(err)
	}
	dst := fuzzNERS(t)
	err := dst.Load(bytes.NewReader(ck.Bytes()))
	if !errors.Is(err, buffer.ErrCorrupt) || !strings.Contains(err.Error(), "slot 5: reported δ NaN") {
		t.Errorf("Load of a NaN report: %v", err)
	}

	src = fuzzNERS(t)
	src.Net().Params()[0][3] = math.Inf(1)
	ck.Reset()
	if err := src.Save(&ck); err != nil {
		t.Fatal(err)
	}
	err = dst.Load(bytes.NewReader(ck.Bytes()))
	if !errors.Is(err, buffer.ErrCorrupt) || !errors.Is(err, model.ErrNonFinite) || !strings.Contains(err.Error(), "params[3]") || !strings.Contains(err.Error(), "is +Inf") {
		t.Errorf("Load of an infinite scorer parameter: %v", err)
	}

	// A length field claiming the most the stage allows, on a short stream.
	var short bytes.Buffer
	checkpoint.Save(&short, "sampler.NERS", 1, func(w io.Writer) error {
		_, err := w.Write(append(binary.LittleEndian.AppendUint64(nil, 48*64+1<<16), make([]byte, 40)...))
		return err
	})
	real := short.Bytes()
	alloc := allocated(func() { err = dst.Load(bytes.NewReader(real)) })
	if !errors.Is(err, buffer.ErrCorrupt) || !strings.Contains(err.Error(), "truncated state") {
		t.Errorf("Load of a short stream: %v", err)
	}
	if alloc > 1<<16 {
		t.Errorf("Load allocated %d bytes for a %d-byte stream", alloc, len(real))
	}
}
