package slotset

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSetAgainstMap: random adds and removes keep the Set's members equal
// to a map's, its invariant true, and its order the swap-remove order
// (the last member fills a removed one's place).
func TestSetAgainstMap(t *testing.T) {
	const n = 64
	s := Make(n)
	in := map[uint32]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 5000 {
		slot := uint32(rng.IntN(n))
		if rng.IntN(2) == 0 {
			s.Add(slot)
			in[slot] = true
		} else {
			before := slices.Clone(s.Slots())
			i := s.Index(slot)
			s.Remove(slot)
			if i >= 0 && i < len(before)-1 && s.Slots()[i] != before[len(before)-1] {
				t.Fatalf("step %d: removing index %d of %d put %d there, want the last member %d", step, i, len(before), s.Slots()[i], before[len(before)-1])
			}
			delete(in, slot)
		}
		if s.Len() != len(in) {
			t.Fatalf("step %d: %d members, want %d", step, s.Len(), len(in))
		}
		for i, x := range s.Slots() {
			if !in[x] || s.Index(x) != i {
				t.Fatalf("step %d: member %d at %d, index %d, in the map %v", step, x, i, s.Index(x), in[x])
			}
		}
		for x := range uint32(n) {
			if (s.Index(x) >= 0) != in[x] {
				t.Fatalf("step %d: slot %d index %d, in the map %v", step, x, s.Index(x), in[x])
			}
		}
	}
}
