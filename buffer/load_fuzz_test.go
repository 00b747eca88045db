package buffer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// ckAllocated returns the bytes f allocated (TotalAlloc, every
// goroutine's: callers keep the test single-threaded).
func ckAllocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// ckLoadBudget is the most Load may allocate for an input of n bytes,
// whatever its config and section headers declare.
func ckLoadBudget(n int) uint64 { return 64*uint64(n) + 64<<20 }

// FuzzLoadBounded: Load of any input, from an in-memory reader or from a
// stream of unknown length, with or without the checksum made right
// first, never panics, allocates at most ckLoadBudget, refuses with
// ErrCorrupt, and a buffer it returns holds only finite float data and
// passes ckCheckLoad (invariants, re-save to the same bytes, use).
// Seeds: real checkpoints of several configs, and their non-finite and
// oversized edits.
func FuzzLoadBounded(f *testing.F) {
	for i, d := range ckSeeds(f) {
		f.Add(d, false, i%2 == 0)
		f.Add(d[:len(d)*3/4], false, true)
	}
	_, small := ckSmall(f)
	f.Add(ckWithNaN(f, small, ckIDReward, 1), false, false)
	f.Add(ckEditConfig(f, small, func(c *ckConfig) { c.Capacity, c.Stripes = 1<<20, 1 }), false, true)
	f.Add(ckEditConfig(f, small, func(c *ckConfig) { c.ObsDim = MaxWidth }), false, false)
	f.Fuzz(func(t *testing.T, data []byte, fix, hide bool) {
		if fix && len(data) >= 4 {
			data = ckFixCRC(bytes.Clone(data))
		}
		var r io.Reader = bytes.NewReader(data)
		if hide {
			r = ckHideLen{r}
		}
		var b *Buffer
		var err error
		alloc := ckAllocated(func() { b, err = Load(r) })
		if alloc > ckLoadBudget(len(data)) {
			t.Fatalf("Load allocated %d bytes for %d input bytes (hidden length %v)", alloc, len(data), hide)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		cols, err := b.ckColumns(b.columns())
		if err != nil {
			t.Fatal(err)
		}
		if err := checkFiniteColumns(cols, b.cfg.Capacity); err != nil {
			t.Fatalf("Load returned non-finite data: %v", err)
		}
		ckCheckLoad(t, data)
	})
}

// ckWithNaN returns checkpoint d with value i of section id (a float32
// column) set to NaN and the checksum recomputed.
func ckWithNaN(t testing.TB, d []byte, id uint32, i int) []byte {
	t.Helper()
	d = bytes.Clone(d)
	sp, ok := parseCk(t, d).sections[id]
	if !ok {
		t.Fatalf("no section %s", ckSectionName(id))
	}
	binary.LittleEndian.PutUint32(d[sp.data+4*i:], math.Float32bits(float32(math.NaN())))
	return ckFixCRC(d)
}

// TestCheckpointRefusesNonFinite: a checkpoint holding a NaN or infinite
// observation, reward or Floats value (checksum recomputed) is refused
// with an error naming the column and the slot; Save refuses such a
// buffer too, so whatever Save writes loads.
func TestCheckpointRefusesNonFinite(t *testing.T) {
	cfg := Config{Capacity: 16, Stripes: 2, ObsDim: 3, Floats: []FloatColumn{{Name: "mu", Width: 2}}}
	a := ckExercised(t, cfg, 16, 5)
	d := ckSave(t, a)
	for _, c := range []struct {
		id   uint32
		i    int
		want string
	}{
		{ckIDObs, 7, "slot 2: obs[1] is NaN"},
		{ckIDNextObs, 0, "slot 0: next_obs[0] is NaN"},
		{ckIDReward, 9, "slot 9: reward is NaN"},
		{ckIDDiscount, 15, "slot 15: discount is NaN"},
		{ckIDFloats, 5, "slot 2: floats[mu][1] is NaN"},
	} {
		_, err := Load(bytes.NewReader(ckWithNaN(t, d, c.id, c.i)))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrCorrupt saying %q", ckSectionName(c.id), err, c.want)
		}
	}

	// Insert refuses what Load would: a buffer cannot come to hold it.
	tr := ckTransitions(a.Config(), 1, rand.New(rand.NewPCG(1, 1)))
	tr.Reward[0] = float32(math.Inf(-1))
	if err := a.Insert(tr); !errors.Is(err, ErrNonFinite) {
		t.Errorf("Insert of an infinite reward: %v, want ErrNonFinite", err)
	}
	if err := a.Save(io.Discard); err != nil {
		t.Errorf("Save after the refused insert: %v", err)
	}
}

// TestCheckpointOversizedConfigBounded: a small checkpoint whose config
// (checksum recomputed) declares far more data than it holds is refused
// without allocating the declared size, from an in-memory reader and from
// a stream of unknown length.
func TestCheckpointOversizedConfigBounded(t *testing.T) {
	_, small := ckSmall(t)
	for name, edit := range map[string]func(*ckConfig){
		"capacity": func(c *ckConfig) { c.Capacity, c.Stripes = MaxCapacity, 1 },
		"obs_dim":  func(c *ckConfig) { c.ObsDim = MaxWidth },
		"stripes":  func(c *ckConfig) { c.Capacity, c.Stripes = 1<<24, 1<<24 },
		"floats": func(c *ckConfig) {
			for i := range 64 {
				c.Floats = append(c.Floats, ckFloat{Name: strings.Repeat("x", i+1), Width: MaxWidth})
			}
		},
	} {
		d := ckEditConfig(t, small, edit)
		for _, hide := range []bool{false, true} {
			var r io.Reader = bytes.NewReader(d)
			if hide {
				r = ckHideLen{r}
			}
			var err error
			alloc := ckAllocated(func() { _, err = Load(r) })
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s (hidden length %v): %v, want ErrCorrupt", name, hide, err)
			}
			if alloc > 8<<20 {
				t.Errorf("%s (hidden length %v): Load allocated %d bytes for a %d-byte checkpoint", name, hide, alloc, len(d))
			}
		}
	}
}
