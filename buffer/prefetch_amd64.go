package buffer

import (
	"sync/atomic"
	"unsafe"
)

// The prefetch passes (prefetch_amd64.s) ask the cache for lines and
// return without waiting for them. They read nothing Go can observe, and
// each covers a whole list in one call.

// prefetchCol asks for the line at base + slots[i]·stride, for every i (the
// first line of each row of one column).
//
//go:noescape
func prefetchCol(base unsafe.Pointer, stride uintptr, slots []int32)

// prefetch asks for the line holding p.
//
//go:noescape
func prefetch(p unsafe.Pointer)

// prefetchLines asks for the n consecutive lines from p on (the records an
// insert is about to write: their misses then overlap the slot claims).
//
//go:noescape
func prefetchLines(p unsafe.Pointer, n int)

// prefetchGroup asks for the two lines of the 16-word node group starting
// at p (a group is 128 bytes at a 128-byte offset of a page-aligned level).
//
//go:noescape
func prefetchGroup(p *atomic.Uint64)
