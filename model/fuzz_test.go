package model

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

	"github.com/apexrl/apex/checkpoint"
)

// allocated returns the bytes f allocated (runtime.MemStats.TotalAlloc),
// counting every goroutine: callers keep the test single-threaded.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// loadBudget is the most a loader may allocate for an input of n bytes: a
// small multiple of what the input holds plus a constant, whatever its
// length fields say.
func loadBudget(n int) uint64 { return 64*uint64(n) + 64<<20 }

// writeCheckpoint writes a section of the given kind whose payload is
// header as JSON followed by each vector (the layout Save writes), as an
// editor that re-frames the checkpoint would.
func writeCheckpoint(w io.Writer, kind string, header any, vecs ...[]float64) error {
	return checkpoint.Save(w, kind, ckVersion, func(w io.Writer) error {
		if err := checkpoint.WriteJSON(w, header); err != nil {
			return err
		}
		for _, v := range vecs {
			if err := checkpoint.WriteFloat64s(w, v); err != nil {
				return err
			}
		}
		return nil
	})
}

// frame wraps a payload in a valid section of the given kind, so a
// fuzzer's mutations get past the checksums.
func frame(kind string, payload []byte) []byte {
	var b bytes.Buffer
	checkpoint.Save(&b, kind, ckVersion, func(w io.Writer) error { _, err := w.Write(payload); return err })
	return b.Bytes()
}

// payload returns the payload of the section at the start of data.
func payload(t testing.TB, data []byte) []byte {
	r := checkpoint.NewReader(bytes.NewReader(data))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	p, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// craft writes a checkpoint with an arbitrary header (and valid
// checksums), as an editor that re-frames the checkpoint would.
func craft(t testing.TB, kind string, header any, vecs ...[]float64) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := writeCheckpoint(&b, kind, header, vecs...); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// netSeeds are real network checkpoints of a few shapes.
func netSeeds(t testing.TB) [][]byte {
	var out [][]byte
	for i, cfg := range []Config{
		{In: 3, Hidden: []int{5}, Out: 2},
		{In: 2, Hidden: []int{4, 3}, Out: 3, Dueling: true, StreamHidden: []int{2}},
		{In: 1, Out: 1, Act: Tanh, OutAct: Tanh},
	} {
		n, err := NewNet(cfg, rand.New(rand.NewPCG(uint64(i), 1)))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := n.Save(&b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b.Bytes())
	}
	return out
}

// TestLoadNetHugeHeaderRefusedCheaply: a checkpoint whose header was
// edited (checksum recomputed) to declare a network far larger than the
// values it stores, or absurdly deep, is refused before the network is
// built: a clear error, and almost nothing allocated (before the fix, an
// 84-byte file made LoadNet allocate 3.9 GiB).
func TestLoadNetHugeHeaderRefusedCheaply(t *testing.T) {
	deep := make([]int, 5000)
	for i := range deep {
		deep[i] = 1
	}
	for _, c := range []struct {
		name string
		cfg  Config
		vals []float64
		want string
	}{
		{"wide hidden layers", Config{In: 1, Hidden: []int{16000, 16000}, Out: 1}, nil, "parameters: checkpoint: corrupt: 0 values stored, want 256064001"},
		{"wide input", Config{In: 1 << 27, Out: 1}, []float64{1, 2}, "2 values stored, want 134217729"},
		{"beyond the parameter limit", Config{In: 1 << 20, Hidden: []int{1 << 20}, Out: 1}, nil, "more than 268435456 parameters"},
		{"too deep", Config{In: 1, Hidden: deep, Out: 1}, nil, "Hidden has 5000 layers (at most 1024)"},
		{"too deep streams", Config{In: 1, Out: 1, Dueling: true, StreamHidden: deep}, nil, "StreamHidden has 5000 layers (at most 1024)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := craft(t, netKind, netHeader{Config: c.cfg}, c.vals)
			var err error
			alloc := allocated(func() { _, err = LoadNet(bytes.NewReader(data)) })
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("LoadNet of %d bytes: %v, want ErrCorrupt saying %q", len(data), err, c.want)
			}
			if alloc > 1<<20+uint64(64*len(data)) {
				t.Errorf("LoadNet allocated %d bytes to refuse a %d-byte checkpoint", alloc, len(data))
			}
		})
	}
	// A length field beyond the stream: memory grows only with the data.
	var pl bytes.Buffer
	checkpoint.WriteJSON(&pl, netHeader{Config: Config{In: 1 << 13, Hidden: []int{1 << 14}, Out: 1}})
	pl.Write(binary.LittleEndian.AppendUint64(nil, 1<<27+2<<14+1)) // the count the config needs: 1 GiB declared
	pl.Write(make([]byte, 64))
	data := frame(netKind, pl.Bytes())
	var err error
	alloc := allocated(func() { _, err = LoadNet(bytes.NewReader(data)) })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("LoadNet: %v, want a truncation", err)
	}
	if alloc > 4<<20 {
		t.Errorf("LoadNet allocated %d bytes for a %d-byte stream declaring 1 GiB", alloc, len(data))
	}
}

// TestLoadNetRefusesNonFinite: a network with a NaN or an infinite
// parameter (which Save writes: a failed run's diagnostic checkpoint)
// does not load, and the error names the parameter and its place.
func TestLoadNetRefusesNonFinite(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		n := smallNet(t, 1)
		n.Params()[100] = v
		var b bytes.Buffer
		if err := n.Save(&b); err != nil {
			t.Fatalf("Save of a network holding %v: %v", v, err)
		}
		_, err := LoadNet(&b)
		want := "params[100] (" + n.Where(100) + ") is " + strconvG(v)
		if !errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadNet of a network holding %v: %v, want ErrCorrupt and ErrNonFinite saying %q", v, err, want)
		}
	}
}

func strconvG(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return "?"
}

// TestLoadAdamRefusesBadMoments: NaN or infinite moments, or a negative
// second moment, are refused with an error naming the moment (before the
// fix they loaded, and the run then failed at its first step as if
// training had diverged).
func TestLoadAdamRefusesBadMoments(t *testing.T) {
	for _, c := range []struct {
		name  string
		set   func(a *Adam)
		want  string
		nonfi bool
	}{
		{"NaN m", func(a *Adam) { a.m[3] = math.NaN() }, "Adam first moment m[3] is NaN", true},
		{"Inf m", func(a *Adam) { a.m[0] = math.Inf(-1) }, "Adam first moment m[0] is -Inf", true},
		{"NaN v", func(a *Adam) { a.v[12] = math.NaN() }, "Adam second moment v[12] is NaN", true},
		{"Inf v", func(a *Adam) { a.v[19] = math.Inf(1) }, "Adam second moment v[19] is +Inf", true},
		{"negative v", func(a *Adam) { a.v[5] = -0.5 }, "Adam second moment v[5] is -0.5 (must be >= 0)", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := NewAdam(20, AdamConfig{})
			if err != nil {
				t.Fatal(err)
			}
			c.set(a)
			var b bytes.Buffer
			if err := a.Save(&b); err != nil {
				t.Fatal(err)
			}
			_, err = LoadAdam(&b)
			if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNonFinite) != c.nonfi || !strings.Contains(err.Error(), c.want) {
				t.Errorf("LoadAdam: %v, want ErrCorrupt (ErrNonFinite %v) saying %q", err, c.nonfi, c.want)
			}
		})
	}
	// A length that disagrees with the values is refused before the
	// moments are allocated.
	data := craft(t, adamKind, adamHeader{Config: mustAdamConfig(t), Len: maxParams}, []float64{0, 0}, nil)
	var err error
	alloc := allocated(func() { _, err = LoadAdam(bytes.NewReader(data)) })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "first moments: checkpoint: corrupt: 2 values stored, want 268435456") {
		t.Errorf("LoadAdam: %v", err)
	}
	if alloc > 1<<20 {
		t.Errorf("LoadAdam allocated %d bytes to refuse a %d-byte checkpoint", alloc, len(data))
	}
}

func mustAdamConfig(t testing.TB) AdamConfig {
	a, err := NewAdam(1, AdamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return a.Config()
}

// FuzzLoadNet: LoadNet never panics, refuses what it cannot load with
// ErrCorrupt, allocates at most loadBudget, and what it loads is finite,
// valid and saves to a checkpoint that loads to the same network. With
// fix set the target recomputes the checksum first, so mutations reach
// the header and the values. Seeds: real checkpoints, their truncations
// and header edits.
func FuzzLoadNet(f *testing.F) {
	for _, s := range netSeeds(f) {
		f.Add(s, false)
		f.Add(s[:len(s)/2], false)
		f.Add(bytes.Replace(payload(f, s), []byte(`"in":`), []byte(`"in":9`), 1), true)
	}
	f.Add(craft(f, netKind, netHeader{Config: Config{In: 1, Hidden: []int{16000, 16000}, Out: 1}}, nil), false)
	f.Add(craft(f, netKind, map[string]any{"config": map[string]any{"in": 1, "out": 1, "hidden": []int{}}}, []float64{math.NaN(), 1}), false)
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = frame(netKind, data)
		}
		var n *Net
		var err error
		alloc := allocated(func() { n, err = LoadNet(bytes.NewReader(data)) })
		if alloc > loadBudget(len(data)) {
			t.Fatalf("LoadNet allocated %d bytes for %d input bytes", alloc, len(data))
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("LoadNet: %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if err := n.CheckFinite(); err != nil {
			t.Fatalf("LoadNet returned a network that is not finite: %v", err)
		}
		if _, err := n.Config().Validate(); err != nil {
			t.Fatalf("LoadNet returned an invalid config: %v", err)
		}
		var b1, b2 bytes.Buffer
		if err := n.Save(&b1); err != nil {
			t.Fatal(err)
		}
		m, err := LoadNet(bytes.NewReader(b1.Bytes()))
		if err != nil {
			t.Fatalf("re-saved network does not load: %v", err)
		}
		if err := m.Save(&b2); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b1.Bytes(), b2.Bytes()) || !slices.Equal(n.Params(), m.Params()) {
			t.Fatal("Save∘LoadNet is not the identity on a saved network")
		}
	})
}

// FuzzLoadAdam: as FuzzLoadNet for LoadAdam; a loaded optimizer has
// finite moments with v >= 0 and re-saves to the bytes it was loaded from
// when those were Save's.
func FuzzLoadAdam(f *testing.F) {
	n := smallNet(f, 2)
	a, err := NewAdam(n.NumParams(), AdamConfig{LR: 0.01, ClipNorm: 5})
	if err != nil {
		f.Fatal(err)
	}
	trainSteps(f, n, a, rand.New(rand.NewPCG(3, 3)), 3)
	var b bytes.Buffer
	if err := a.Save(&b); err != nil {
		f.Fatal(err)
	}
	real := b.Bytes()
	small, _ := NewAdam(3, AdamConfig{})
	b.Reset()
	small.Save(&b)
	for _, s := range [][]byte{real, b.Bytes()} {
		f.Add(s, false)
		f.Add(s[:len(s)-7], false)
		f.Add(bytes.Replace(payload(f, s), []byte(`"len":`), []byte(`"len":1`), 1), true)
	}
	f.Add(craft(f, adamKind, adamHeader{Config: mustAdamConfig(f), Len: 1}, []float64{1}, []float64{-1}), false)
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = frame(adamKind, data)
		}
		var a *Adam
		var err error
		alloc := allocated(func() { a, err = LoadAdam(bytes.NewReader(data)) })
		if alloc > loadBudget(len(data)) {
			t.Fatalf("LoadAdam allocated %d bytes for %d input bytes", alloc, len(data))
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("LoadAdam: %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if i := firstNonFinite(a.m); i >= 0 {
			t.Fatalf("loaded m[%d] = %v", i, a.m[i])
		}
		for i, v := range a.v {
			if !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("loaded v[%d] = %v", i, v)
			}
		}
		var b1 bytes.Buffer
		if err := a.Save(&b1); err != nil {
			t.Fatal(err)
		}
		c, err := LoadAdam(bytes.NewReader(b1.Bytes()))
		if err != nil {
			t.Fatalf("re-saved optimizer does not load: %v", err)
		}
		if c.cfg != a.cfg || c.t != a.t || !slices.Equal(c.m, a.m) || !slices.Equal(c.v, a.v) {
			t.Fatal("Save∘LoadAdam changed the optimizer")
		}
	})
}
