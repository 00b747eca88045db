// Package slotset is a dense set of buffer slots with O(1) insert, remove
// and membership: the stored steps of ReF-ER's stage (sampler.REFER) and
// of its learner-side controller (learner.REFERController). Both follow
// the same episodes with one Set each and must iterate the stored steps
// in the same order (the controller's sums over them, its reward scale
// included, then match the stage's to the bit), which one implementation
// guarantees.
package slotset

// Set holds distinct slots in [0, n) in a dense slice: Add appends, and
// Remove moves the last member into the removed one's place. The zero
// value holds nothing and accepts no slot: make one with Make. A Set is
// used by one goroutine at a time.
//
// Invariant: pos[slots[i]] == i for every i, and pos[s] == -1 for every
// slot s not in slots.
type Set struct {
	slots []uint32
	pos   []int32
}

// Make returns an empty Set for slots in [0, n). O(n).
func Make(n int) Set {
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = -1
	}
	return Set{pos: pos}
}

// Len is the number of members. O(1).
func (s *Set) Len() int { return len(s.slots) }

// Slots returns the members, in insertion order up to Remove's moves. The
// slice is the Set's, valid until the next Add or Remove; do not modify
// it. O(1).
func (s *Set) Slots() []uint32 { return s.slots }

// Index is slot's index in Slots, or -1 when it is not a member. O(1).
func (s *Set) Index(slot uint32) int { return int(s.pos[slot]) }

// Add appends slot, which must not be a member (a member is left where it
// is). Amortised O(1).
func (s *Set) Add(slot uint32) {
	if s.pos[slot] >= 0 {
		return
	}
	s.pos[slot] = int32(len(s.slots))
	s.slots = append(s.slots, slot)
}

// Remove removes slot, moving the last member into its place; a slot that
// is not a member is ignored. O(1).
func (s *Set) Remove(slot uint32) {
	i := s.pos[slot]
	if i < 0 {
		return
	}
	last := int32(len(s.slots) - 1)
	if i != last {
		moved := s.slots[last]
		s.slots[i] = moved
		s.pos[moved] = i
	}
	s.slots = s.slots[:last]
	s.pos[slot] = -1
}
