package cktest

import (
	"bytes"
	"io"
	"testing"

	"github.com/apexrl/apex/checkpoint"
)

// TestReseal: an edit inside a nested section's payload is refused as it
// is, and loads once resealed; a good stream is left as it is.
func TestReseal(t *testing.T) {
	var b bytes.Buffer
	err := checkpoint.Save(&b, "outer", 1, func(w io.Writer) error {
		w.Write([]byte("head"))
		return checkpoint.Save(w, "inner", 1, func(w io.Writer) error {
			_, err := w.Write(bytes.Repeat([]byte("x"), 3*checkpoint.MaxChunk/2))
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	good := b.Bytes()
	if !bytes.Equal(Reseal(good), good) {
		t.Fatal("Reseal changed a good stream")
	}
	bad := bytes.Clone(good)
	bad[len(bad)/2] = 'y'
	load := func(d []byte) error {
		return checkpoint.Load(bytes.NewReader(d), "outer", 1, func(_ uint32, r io.Reader) error {
			var h [4]byte
			if _, err := io.ReadFull(r, h[:]); err != nil {
				return err
			}
			return checkpoint.Load(r, "inner", 1, func(_ uint32, r io.Reader) error { _, err := io.Copy(io.Discard, r); return err })
		})
	}
	if load(bad) == nil {
		t.Fatal("an edit passed the checksums")
	}
	if err := load(Reseal(bad)); err != nil {
		t.Fatalf("resealed: %v", err)
	}
}
