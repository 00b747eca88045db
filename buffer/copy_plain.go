//go:build !race && (amd64 || 386)

package buffer

import "unsafe"

// The record copies. Readers validate what they copied with the slot's
// generation (a sequence lock), so on x86 the copies are plain loads and
// stores: x86 keeps loads in order (TSO) and the Go compiler does not move
// plain loads across the atomic re-check of the tag. On weaker memory
// models (arm64 and others) a plain load may complete after that re-check,
// so there, as in the race build, copy_atomic.go copies with atomic loads
// and stores.

// clearCol zeroes a run of values.
func clearCol[T any](dst []T) { clear(dst) }

// load reads one element.
func load[T any](p *T) T { return *p }

// store writes one element.
func store[T any](p *T, v T) { *p = v }

// copyVec copies n float32 values from src to dst (a record's vector field
// or a column's item): 8 bytes at a time where n is short (a memmove call
// per 4-value run costs more than the values; an unaligned 8-byte access is
// as cheap as an aligned one on x86), by memmove otherwise.
func copyVec(dst, src unsafe.Pointer, n int) {
	if n > 16 {
		copy(unsafe.Slice((*float32)(dst), n), unsafe.Slice((*float32)(src), n))
		return
	}
	i := 0
	for ; i+2 <= n; i += 2 {
		*(*uint64)(unsafe.Add(dst, 4*i)) = *(*uint64)(unsafe.Add(src, 4*i))
	}
	if i < n {
		*(*uint32)(unsafe.Add(dst, 4*i)) = *(*uint32)(unsafe.Add(src, 4*i))
	}
}

// fastVec: scatterVec may move a 4-value item as one 16-byte copy (x86
// keeps such a copy's loads in order with the tag re-check, as above).
const fastVec = true
