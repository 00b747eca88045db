package checkpoint

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReader: any input walks through a Reader (sections, nested ones,
// the payload helpers) without panicking; every error says ErrCorrupt or
// ErrFormat (a bytes.Reader never fails), and the chunk buffer stays within
// its bound: at most MaxChunk+4 bytes, and never more than twice what the
// input holds (plus the first growth step).
func FuzzReader(f *testing.F) {
	seed := func(build func(w io.Writer) error) []byte {
		var b bytes.Buffer
		if err := build(&b); err != nil {
			f.Fatal(err)
		}
		return b.Bytes()
	}
	f.Add(seed(func(w io.Writer) error {
		return Save(w, "outer", 1, func(w io.Writer) error {
			if err := WriteJSON(w, map[string]int{"n": 3}); err != nil {
				return err
			}
			if err := WriteFloat64s(w, []float64{1, 2, 3}); err != nil {
				return err
			}
			return Save(w, "inner", 2, func(w io.Writer) error { _, err := w.Write([]byte("payload")); return err })
		})
	}))
	f.Add(seed(func(w io.Writer) error {
		if err := Save(w, "a", 1, func(w io.Writer) error { return nil }); err != nil {
			return err
		}
		return Save(w, "b", 9, func(w io.Writer) error { _, err := w.Write(make([]byte, 70000)); return err })
	})[:2000])
	f.Add([]byte("APEXTRN1\x02\x00\x00\x00"))
	f.Add([]byte("APEXCKPT\x01\x00\x00\x00\x01k\x00\x00\x00\x00\xff\xff\xff\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ok := func(err error) {
			if err != nil && err != io.EOF && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrFormat) {
				t.Fatalf("error neither ErrCorrupt nor ErrFormat: %v", err)
			}
		}
		r := NewReader(bytes.NewReader(data))
		bound := func(rd *Reader) {
			if c := cap(rd.buf); c > MaxChunk+4 || c > max(growStep, 2*len(data)) {
				t.Fatalf("chunk buffer of %d bytes for a %d-byte input", c, len(data))
			}
		}
		for range 8 {
			h, err := r.Next()
			ok(err)
			if err != nil {
				break
			}
			switch h.Kind {
			case "outer":
				var m map[string]int
				ok(ReadJSON(r, &m, 1<<10))
				_, err := ReadFloat64s(r, 3)
				ok(err)
				ok(Load(r, "inner", 2, func(_ uint32, p io.Reader) error {
					_, err := io.Copy(io.Discard, p)
					return err
				}))
				ok(r.Finish())
			default:
				_, err := io.Copy(io.Discard, r)
				ok(err)
			}
			bound(r)
		}
	})
}
