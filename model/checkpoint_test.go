package model

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/checkpoint"
)

func TestNetSaveLoad(t *testing.T) {
	for _, cfg := range []Config{
		{In: 4, Hidden: []int{16, 16}, Out: 2},
		{In: 3, Hidden: []int{8}, Out: 3, Act: Softsign, Dueling: true, StreamHidden: []int{5}},
		{In: 2, Out: 1, OutAct: Tanh},
	} {
		net, err := NewNet(cfg, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		net.Params()[0] = math.Copysign(0, -1) // bit-exact, sign of zero included
		var buf bytes.Buffer
		if err := net.Save(&buf); err != nil {
			t.Fatal(err)
		}
		saved := slices.Clone(buf.Bytes())
		buf.WriteString("trailing data")
		got, err := LoadNet(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if buf.String() != "trailing data" {
			t.Errorf("LoadNet consumed %q beyond the checkpoint", buf.String())
		}
		if !got.SameShape(net) || got.Config().Dueling != cfg.Dueling {
			t.Fatalf("loaded config %+v", got.Config())
		}
		for i, p := range net.Params() {
			if math.Float64bits(p) != math.Float64bits(got.Params()[i]) {
				t.Fatalf("params[%d] = %g, saved %g", i, got.Params()[i], p)
			}
		}
		x := []float64{0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8}[:2*cfg.In]
		if !slices.Equal(got.Forward(x), net.Forward(x)) {
			t.Error("loaded network computes differently")
		}
		var again bytes.Buffer
		got.Save(&again)
		if !bytes.Equal(again.Bytes(), saved) {
			t.Error("re-saving a loaded network gives different bytes")
		}
	}
}

// TestAdamSaveLoad: a restored Adam continues the run bit for bit.
func TestAdamSaveLoad(t *testing.T) {
	net := smallNet(t, 1)
	adam, _ := NewAdam(net.NumParams(), AdamConfig{LR: 3e-3, ClipNorm: 5, Beta2: 0.99})
	rng := rand.New(rand.NewPCG(4, 4))
	trainSteps(t, net, adam, rng, 5)

	var nb, ab bytes.Buffer
	if err := net.Save(&nb); err != nil {
		t.Fatal(err)
	}
	if err := adam.Save(&ab); err != nil {
		t.Fatal(err)
	}
	net2, err := LoadNet(&nb)
	if err != nil {
		t.Fatal(err)
	}
	adam2, err := LoadAdam(&ab)
	if err != nil {
		t.Fatal(err)
	}
	if adam2.Config() != adam.Config() || adam2.Steps() != 5 {
		t.Fatalf("loaded %+v at step %d", adam2.Config(), adam2.Steps())
	}
	trainSteps(t, net, adam, rand.New(rand.NewPCG(9, 9)), 5)
	trainSteps(t, net2, adam2, rand.New(rand.NewPCG(9, 9)), 5)
	if !slices.Equal(net.Params(), net2.Params()) {
		t.Error("the restored run diverged")
	}
}

func TestLoadCorrupt(t *testing.T) {
	net := smallNet(t, 1)
	var nb bytes.Buffer
	net.Save(&nb)
	good := nb.Bytes()
	adam, _ := NewAdam(net.NumParams(), AdamConfig{})
	var ab bytes.Buffer
	adam.Save(&ab)

	expect := func(t *testing.T, data []byte, want string, extra ...error) {
		t.Helper()
		_, err := LoadNet(bytes.NewReader(data))
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("LoadNet: %v, want ErrCorrupt", err)
		}
		for _, e := range extra {
			if !errors.Is(err, e) {
				t.Fatalf("LoadNet: %v, want it to wrap %v", err, e)
			}
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("LoadNet: %q does not say %q", err, want)
		}
	}

	expect(t, nil, "empty input")
	// Every truncation.
	for n := 1; n < len(good); n++ {
		expect(t, good[:n], "truncated", io.ErrUnexpectedEOF)
	}
	// Every single-bit flip is caught (bits of the fixed header say what
	// they broke; the rest by the checksum).
	for i := range good {
		bad := slices.Clone(good)
		bad[i] ^= 1 << (i % 8)
		if _, err := LoadNet(bytes.NewReader(bad)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flipping a bit of byte %d: %v", i, err)
		}
	}
	bad := slices.Clone(good)
	bad[len(bad)-40] ^= 0xff
	expect(t, bad, "checksum mismatch")
	bad = slices.Clone(good)
	bad[0] = 'X'
	expect(t, bad, "bad magic")
	var nb2 bytes.Buffer
	checkpoint.Save(&nb2, netKind, 2, func(w io.Writer) error { return nil })
	expect(t, nb2.Bytes(), "model.Net version 2, this build reads model.Net up to version 1", checkpoint.ErrFormat)
	expect(t, ab.Bytes(), "a model.Adam version 1 section, want model.Net")
	if _, err := LoadAdam(bytes.NewReader(good)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "a model.Net version 1 section, want model.Adam") {
		t.Errorf("LoadAdam of a network: %v", err)
	}
	// A huge declared count is refused without allocating it.
	var pl bytes.Buffer
	checkpoint.WriteJSON(&pl, netHeader{Config: net.Config()})
	pl.Write([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	expect(t, frame(netKind, pl.Bytes()), "values stored")

	// A consistent checkpoint (valid checksums) whose header disagrees
	// with its data.
	var sb bytes.Buffer
	writeCheckpoint(&sb, netKind, netHeader{Config: Config{In: 4, Hidden: []int{16, 16}, Out: 3}}, net.Params())
	expect(t, sb.Bytes(), "values stored")
	sb.Reset()
	writeCheckpoint(&sb, netKind, netHeader{Config: Config{In: -4, Out: 2}}, net.Params())
	expect(t, sb.Bytes(), "In = -4", ErrConfig)
	sb.Reset()
	writeCheckpoint(&sb, netKind, map[string]any{"config": map[string]any{"in": 1, "out": 1}, "extra": 1}, []float64{1, 2})
	expect(t, sb.Bytes(), "unknown field")
	sb.Reset()
	writeCheckpoint(&sb, netKind, netHeader{Config: Config{In: 1, Out: 1}}, []float64{1, 2}, []float64{3})
	expect(t, sb.Bytes(), "payload bytes after its state")

	// A reader's own failure is passed through, not called corruption.
	boom := errors.New("disk on fire")
	_, err := LoadNet(io.MultiReader(bytes.NewReader(good[:30]), errReader{boom}))
	if !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
		t.Errorf("reader error: %v", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestLoadAdamCorrupt(t *testing.T) {
	adam, _ := NewAdam(10, AdamConfig{})
	var ab bytes.Buffer
	adam.Save(&ab)
	good := ab.Bytes()
	for n := 0; n < len(good); n++ {
		if _, err := LoadAdam(bytes.NewReader(good[:n])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	var sb bytes.Buffer
	writeCheckpoint(&sb, adamKind, adamHeader{Config: adam.Config(), Len: 4}, make([]float64, 10), make([]float64, 10))
	if _, err := LoadAdam(&sb); !errors.Is(err, ErrCorrupt) {
		t.Errorf("inconsistent length: %v", err)
	}
}

// TestLegacyNetRefused: a network file of the format apex wrote before the
// checkpoint package (APEXNET1 version 1, a fixture written by that
// release) is refused with an error that names it and says what to do.
func TestLegacyNetRefused(t *testing.T) {
	data, err := os.ReadFile("testdata/legacy-apexnet1-v1.net")
	if err != nil {
		t.Fatal(err)
	}
	_, err = LoadNet(bytes.NewReader(data))
	var le *checkpoint.LegacyError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &le) || le.Magic != "APEXNET1" || le.Version != 1 ||
		!strings.Contains(err.Error(), "APEXNET1 version 1 (a network checkpoint), written by apex before the unified checkpoint format") ||
		!strings.Contains(err.Error(), "resume it with the apex release that wrote it, or start a new run") {
		t.Fatalf("LoadNet of an APEXNET1 file: %v", err)
	}
	if _, err := LoadAdam(bytes.NewReader(data)); !errors.As(err, &le) {
		t.Fatalf("LoadAdam of an APEXNET1 file: %v", err)
	}
}
