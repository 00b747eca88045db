package buffer

import (
	"sync/atomic"
	"unsafe"
)

// prefetch asks the cache for the line holding p and returns without
// waiting for it (prefetch_amd64.s). It reads nothing Go can observe.
//
//go:noescape
func prefetch(p unsafe.Pointer)

// prefetchGroup asks for the two lines of the 16-word node group starting
// at p (a group is 128 bytes at a 128-byte offset of a page-aligned level).
//
//go:noescape
func prefetchGroup(p *atomic.Uint64)
