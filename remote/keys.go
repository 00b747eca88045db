package remote

import "github.com/apexrl/apex/buffer"

// Key packs ref into the wire's 64-bit key: the slot in bits 0-31, the
// slot's generation in bits 32-63. Keys are only meaningful within one
// incarnation of the server that issued them. O(1).
func Key(ref buffer.Ref) uint64 { return uint64(ref.Gen)<<32 | uint64(ref.Slot) }

// RefOf unpacks a key made by Key. O(1).
func RefOf(key uint64) buffer.Ref { return buffer.Ref{Slot: uint32(key), Gen: uint32(key >> 32)} }

// AppendKeys appends the key of every ref to dst. O(len(refs)).
func AppendKeys(dst []uint64, refs []buffer.Ref) []uint64 {
	for _, r := range refs {
		dst = append(dst, Key(r))
	}
	return dst
}

// AppendRefs appends the Ref of every key to dst. O(len(keys)).
func AppendRefs(dst []buffer.Ref, keys []uint64) []buffer.Ref {
	for _, k := range keys {
		dst = append(dst, RefOf(k))
	}
	return dst
}
