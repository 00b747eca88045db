package checkpoint_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/checkpoint"
)

func section(t testing.TB, kind string, version uint32, payload []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := checkpoint.Save(&b, kind, version, func(w io.Writer) error {
		_, err := w.Write(payload)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

// TestRoundTripSizes: payloads around the chunk size come back byte for
// byte, the stream holds exactly one head, the chunks and the end marker,
// and Load reads no byte past the section.
func TestRoundTripSizes(t *testing.T) {
	for _, n := range []int{0, 1, 7, checkpoint.ChunkSize - 1, checkpoint.ChunkSize, checkpoint.ChunkSize + 1, 3*checkpoint.MaxChunk + 5} {
		payload := randomBytes(n, uint64(n))
		raw := section(t, "test.blob", 3, payload)
		chunks := (n + checkpoint.ChunkSize - 1) / checkpoint.ChunkSize
		if want := 8 + 4 + 1 + len("test.blob") + 4 + n + 8*chunks + 16; len(raw) != want {
			t.Fatalf("n=%d: %d bytes, want %d", n, len(raw), want)
		}
		in := bytes.NewReader(append(raw, "tail"...))
		var got []byte
		err := checkpoint.Load(in, "test.blob", 3, func(v uint32, r io.Reader) error {
			if v != 3 {
				t.Fatalf("version %d", v)
			}
			var err error
			got, err = io.ReadAll(r)
			return err
		})
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("n=%d: payload differs", n)
		}
		if rest, _ := io.ReadAll(in); string(rest) != "tail" {
			t.Fatalf("n=%d: Load read past its section: %q left", n, rest)
		}
	}
}

// TestNestedAndSequence: sections nest inside a payload, and a Reader walks
// a sequence, skipping what it does not read, then reports io.EOF.
func TestNestedAndSequence(t *testing.T) {
	var b bytes.Buffer
	inner := randomBytes(5000, 9)
	err := checkpoint.Save(&b, "outer", 1, func(w io.Writer) error {
		if err := checkpoint.WriteJSON(w, map[string]int{"a": 1}); err != nil {
			return err
		}
		return checkpoint.Save(w, "inner", 2, func(w io.Writer) error { _, err := w.Write(inner); return err })
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Write(section(t, "unknown.part", 7, randomBytes(3*checkpoint.MaxChunk/2, 1)))
	b.Write(section(t, "last", 1, []byte("end")))

	r := checkpoint.NewReader(&b)
	h, err := r.Next()
	if err != nil || h != (checkpoint.Header{Kind: "outer", Version: 1}) {
		t.Fatalf("first section %v, %v", h, err)
	}
	var m map[string]int
	if err := checkpoint.ReadJSON(r, &m, 100); err != nil || m["a"] != 1 {
		t.Fatalf("JSON %v, %v", m, err)
	}
	var got []byte
	if err := checkpoint.Load(r, "inner", 2, func(_ uint32, r io.Reader) error { got, err = io.ReadAll(r); return err }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, inner) {
		t.Fatal("nested payload differs")
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	if h, err := r.Next(); err != nil || h.Kind != "unknown.part" {
		t.Fatalf("second section %v, %v", h, err)
	}
	if err := r.Skip(); err != nil {
		t.Fatal(err)
	}
	if h, err := r.Next(); err != nil || h.Kind != "last" {
		t.Fatalf("third section %v, %v", h, err)
	}
	// Next skips an unread payload, checking it.
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last section: %v, want io.EOF", err)
	}
}

// TestEveryDamageRefused: flipping any bit of a section, or cutting it
// anywhere, is refused by Load with ErrCorrupt (a truncation also with
// io.ErrUnexpectedEOF) or, where the flip lands in the kind or version and
// the head checksum is flipped too... never accepted.
func TestEveryDamageRefused(t *testing.T) {
	raw := section(t, "model.Net", 1, randomBytes(300, 4))
	load := func(p []byte) error {
		return checkpoint.Load(bytes.NewReader(p), "model.Net", 1, func(_ uint32, r io.Reader) error {
			_, err := io.ReadAll(r)
			return err
		})
	}
	if err := load(raw); err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for bit := range 8 {
			p := slices.Clone(raw)
			p[i] ^= 1 << bit
			err := load(p)
			if !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Fatalf("byte %d bit %d flipped: %v, want ErrCorrupt", i, bit, err)
			}
		}
	}
	for n := range len(raw) {
		err := load(raw[:n])
		if !errors.Is(err, checkpoint.ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d: %v, want ErrCorrupt and io.ErrUnexpectedEOF", n, err)
		}
	}
}

// TestSplicedChunkRefused: two sections of the same kind and size whose
// chunks are swapped fail the running checksum.
func TestSplicedChunkRefused(t *testing.T) {
	a := section(t, "k", 1, randomBytes(2*checkpoint.ChunkSize, 1))
	b := section(t, "k", 1, randomBytes(2*checkpoint.ChunkSize, 2))
	head := 8 + 4 + 1 + 1 + 4
	// Replace a's second chunk with b's second chunk.
	c := slices.Clone(a)
	second := head + 8 + checkpoint.ChunkSize
	copy(c[second:second+8+checkpoint.ChunkSize], b[second:second+8+checkpoint.ChunkSize])
	err := checkpoint.Load(bytes.NewReader(c), "k", 1, func(_ uint32, r io.Reader) error { _, err := io.Copy(io.Discard, r); return err })
	if !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("spliced chunk: %v", err)
	}
}

func TestKindVersionAndUnreadPayload(t *testing.T) {
	raw := section(t, "model.Adam", 2, []byte("xyz"))
	read := func(_ uint32, r io.Reader) error { _, err := io.ReadAll(r); return err }
	err := checkpoint.Load(bytes.NewReader(raw), "model.Net", 2, read)
	if !errors.Is(err, checkpoint.ErrFormat) || !strings.Contains(err.Error(), "a model.Adam version 2 section, want model.Net") {
		t.Fatalf("other kind: %v", err)
	}
	err = checkpoint.Load(bytes.NewReader(raw), "model.Adam", 1, read)
	if !errors.Is(err, checkpoint.ErrFormat) || !strings.Contains(err.Error(), "up to version 1") {
		t.Fatalf("newer version: %v", err)
	}
	err = checkpoint.Load(bytes.NewReader(raw), "model.Adam", 2, func(_ uint32, r io.Reader) error {
		var b [1]byte
		_, err := r.Read(b[:])
		return err
	})
	if !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), "2 payload bytes after its state") {
		t.Fatalf("unread payload: %v", err)
	}
	if err := checkpoint.Load(bytes.NewReader(nil), "model.Adam", 2, read); !errors.Is(err, checkpoint.ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("empty input: %v", err)
	}
	for _, kind := range []string{"", "a b", strings.Repeat("x", checkpoint.MaxKind+1), "é"} {
		if _, err := checkpoint.NewWriter(io.Discard, kind, 1); err == nil {
			t.Fatalf("kind %q accepted", kind)
		}
	}
	if _, err := checkpoint.NewWriter(io.Discard, "k", 0); err == nil {
		t.Fatal("version 0 accepted")
	}
}

// TestLegacyRefused: each format apex wrote before this one is named with
// its version and what to do.
func TestLegacyRefused(t *testing.T) {
	for _, m := range []string{"APEXTRN1", "APEXREPL", "APEXNET1", "APEXADAM", "APEXDQNL", "APEXTD3L", "APEXVRCL", "APEXSACL", "APEXNERS"} {
		raw := binary.LittleEndian.AppendUint32([]byte(m), 2)
		err := checkpoint.Load(bytes.NewReader(append(raw, make([]byte, 40)...)), "x", 1, nil)
		var le *checkpoint.LegacyError
		if !errors.As(err, &le) || le.Magic != m || le.Version != 2 || !errors.Is(err, checkpoint.ErrFormat) {
			t.Fatalf("%s: %v", m, err)
		}
		for _, want := range []string{m + " version 2", "before the unified checkpoint format", "resume it with the apex release that wrote it, or start a new run"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: %q lacks %q", m, err, want)
			}
		}
	}
	err := checkpoint.Load(strings.NewReader("NOTAPEX!xxxxxxxx"), "x", 1, nil)
	if !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), "bad magic") {
		t.Fatalf("bad magic: %v", err)
	}
}

// TestWriterErrorsStick: a failing writer's error is returned, by Save too.
func TestWriterErrorsStick(t *testing.T) {
	boom := errors.New("disk full")
	for limit := range 40 {
		w := &failAfter{n: limit, err: boom}
		err := checkpoint.Save(w, "k", 1, func(w io.Writer) error {
			_, err := w.Write(make([]byte, 10))
			return err
		})
		if limit < 8+4+1+1+4+4+10+4+16 && !errors.Is(err, boom) {
			t.Fatalf("write fails after %d bytes: %v", limit, err)
		}
	}
}

type failAfter struct {
	n   int
	err error
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, f.err
	}
	f.n -= len(p)
	return len(p), nil
}

func TestFloat64sAndJSON(t *testing.T) {
	s := []float64{0, -1.5, math.Inf(1), math.SmallestNonzeroFloat64, math.MaxFloat64}
	for range 3 {
		s = append(s, s...)
	}
	s = append(s, randomFloats(3*4096+17)...)
	var b bytes.Buffer
	if err := checkpoint.WriteFloat64s(&b, s); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 8+8*len(s) {
		t.Fatalf("%d bytes for %d values", b.Len(), len(s))
	}
	raw := b.Bytes()
	got, err := checkpoint.ReadFloat64s(bytes.NewReader(raw), len(s))
	if err != nil || !slices.Equal(got, s) {
		t.Fatalf("round trip: %v", err)
	}
	if _, err := checkpoint.ReadFloat64s(bytes.NewReader(raw), len(s)-1); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("wrong count: %v", err)
	}
	if _, err := checkpoint.ReadFloat64s(bytes.NewReader(raw[:len(raw)-1]), len(s)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated: %v", err)
	}
	b.Reset()
	type hdr struct{ A int }
	if err := checkpoint.WriteJSON(&b, hdr{A: 4}); err != nil {
		t.Fatal(err)
	}
	var h hdr
	if err := checkpoint.ReadJSON(bytes.NewReader(b.Bytes()), &h, 100); err != nil || h.A != 4 {
		t.Fatalf("JSON: %+v %v", h, err)
	}
	if err := checkpoint.ReadJSON(bytes.NewReader(b.Bytes()), &h, 3); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("over the limit: %v", err)
	}
	var other struct{ B int }
	if err := checkpoint.ReadJSON(bytes.NewReader(b.Bytes()), &other, 100); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("unknown field: %v", err)
	}
}

func randomFloats(n int) []float64 {
	r := rand.New(rand.NewPCG(5, 5))
	s := make([]float64, n)
	for i := range s {
		s[i] = r.NormFloat64()
	}
	return s
}

// TestFramingIndependentOfWrites: a payload is framed the same whether it
// is written at once or in pieces of any size, and a reader takes the
// larger chunks another writer may have used (up to MaxChunk) whatever the
// size of its reads.
func TestFramingIndependentOfWrites(t *testing.T) {
	payload := randomBytes(5*checkpoint.ChunkSize/2+3, 7)
	want := section(t, "k", 1, payload)
	for _, piece := range []int{1, 7, 4096, checkpoint.ChunkSize - 1, checkpoint.ChunkSize + 1} {
		var b bytes.Buffer
		checkpoint.Save(&b, "k", 1, func(w io.Writer) error {
			for p := payload; len(p) > 0; {
				k := min(piece, len(p))
				if _, err := w.Write(p[:k]); err != nil {
					return err
				}
				p = p[k:]
			}
			return nil
		})
		if !bytes.Equal(b.Bytes(), want) {
			t.Fatalf("written in pieces of %d: other bytes", piece)
		}
	}
	// One chunk of MaxChunk bytes, as another writer may frame it.
	big := randomBytes(checkpoint.MaxChunk, 8)
	head := want[:8+4+1+1+4]
	var raw []byte
	raw = append(raw, head...)
	crc := binary.LittleEndian.Uint32(head[len(head)-4:])
	raw = binary.LittleEndian.AppendUint32(raw, uint32(len(big)))
	raw = append(raw, big...)
	crc = crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), big)
	raw = binary.LittleEndian.AppendUint32(raw, crc)
	end := binary.LittleEndian.AppendUint64([]byte{0, 0, 0, 0}, uint64(len(big)))
	raw = append(raw, end...)
	raw = binary.LittleEndian.AppendUint32(raw, crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), end[4:]))
	for _, n := range []int{1, 100, checkpoint.ChunkSize, 2 * checkpoint.MaxChunk} {
		var got []byte
		err := checkpoint.Load(bytes.NewReader(raw), "k", 1, func(_ uint32, r io.Reader) error {
			p := make([]byte, n)
			for {
				k, err := r.Read(p)
				got = append(got, p[:k]...)
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
			}
		})
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("reads of %d bytes: %v", n, err)
		}
	}
}
