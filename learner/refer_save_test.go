package learner

import (
	"bytes"
	"errors"
	"io"
	"math"
	"testing"

	"github.com/apexrl/apex/checkpoint"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

// TestREFERControllerSaveLoad: the controller's own section carries k and
// beta (hence c_max and the learning-rate scale); a damaged or foreign
// section, or a beta outside [0, 1], is refused with ErrCorrupt and
// changes nothing.
func TestREFERControllerSaveLoad(t *testing.T) {
	buf := samplertest.REFERBuffer(t, 64, 1)
	cfg := sampler.REFERConfig{TotalSteps: 100}
	a := newReferPair(t, buf, cfg)
	if err := a.SetController(40, 0.3); err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	if err := a.Save(&w); err != nil {
		t.Fatal(err)
	}
	saved := w.Bytes()
	b := newReferPair(t, buf, cfg)
	r := bytes.NewReader(append(append([]byte(nil), saved...), 7)) // a byte that is not the section's
	if err := b.Load(r); err != nil {
		t.Fatal(err)
	}
	if b.Step() != 40 || b.Beta() != 0.3 || b.CMax() != a.CMax() || b.LRScale() != a.LRScale() || r.Len() != 1 {
		t.Fatalf("restored k %d beta %v c_max %v lr scale %v (%d bytes left), want %d %v %v %v",
			b.Step(), b.Beta(), b.CMax(), b.LRScale(), r.Len(), a.Step(), a.Beta(), a.CMax(), a.LRScale())
	}
	c := newReferPair(t, buf, cfg)
	flipped := append([]byte(nil), saved...)
	flipped[len(flipped)/2] ^= 1
	var beta2 bytes.Buffer
	if err := checkpoint.Save(&beta2, referKind, referVersion, func(w io.Writer) error {
		return checkpoint.WriteJSON(w, referState{K: 3, Beta: 2})
	}); err != nil {
		t.Fatal(err)
	}
	var other bytes.Buffer
	if err := checkpoint.Save(&other, "learner.Other", 1, func(w io.Writer) error { return checkpoint.WriteJSON(w, 1) }); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"a flipped bit": flipped, "truncated": saved[:len(saved)-3], "empty": nil,
		"beta 2": beta2.Bytes(), "another kind": other.Bytes(),
	} {
		if err := c.Load(bytes.NewReader(data)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
		if c.Step() != 0 || c.Beta() != 0 || math.Abs(c.CMax()-5) > 1e-12 {
			t.Fatalf("%s: a refused Load changed the controller: k %d beta %v c_max %v", name, c.Step(), c.Beta(), c.CMax())
		}
	}
	if err := c.Load(nil); !errors.Is(err, ErrConfig) {
		t.Errorf("Load(nil): %v, want ErrConfig", err)
	}
	if err := c.Save(nil); !errors.Is(err, ErrConfig) {
		t.Errorf("Save(nil): %v, want ErrConfig", err)
	}
}
