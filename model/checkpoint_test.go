package model

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
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
	bad = slices.Clone(good)
	bad[8] = 2
	expect(t, bad, "unsupported format version 2")
	expect(t, ab.Bytes(), "Adam optimizer checkpoint, not a network")
	if _, err := LoadAdam(bytes.NewReader(good)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "network checkpoint, not an Adam") {
		t.Errorf("LoadAdam of a network: %v", err)
	}
	// A huge declared length is refused without allocating it.
	bad = slices.Clone(good)
	for i := 16; i < 24; i++ {
		bad[i] = 0xff
	}
	expect(t, bad, "values")

	// A consistent checkpoint (valid checksum) whose header disagrees with
	// its data.
	var sb bytes.Buffer
	writeCheckpoint(&sb, netMagic, netHeader{Config: Config{In: 4, Hidden: []int{16, 16}, Out: 3}}, net.Params())
	expect(t, sb.Bytes(), "parameters stored")
	sb.Reset()
	writeCheckpoint(&sb, netMagic, netHeader{Config: Config{In: -4, Out: 2}}, net.Params())
	expect(t, sb.Bytes(), "In = -4", ErrConfig)
	sb.Reset()
	writeCheckpoint(&sb, netMagic, map[string]any{"config": map[string]any{"in": 1, "out": 1}, "extra": 1}, []float64{1, 2})
	expect(t, sb.Bytes(), "unknown field")

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
	writeCheckpoint(&sb, adamMagic, adamHeader{Config: adam.Config(), Len: 4}, make([]float64, 10))
	if _, err := LoadAdam(&sb); !errors.Is(err, ErrCorrupt) {
		t.Errorf("inconsistent length: %v", err)
	}
}
