//go:build !amd64

package buffer

import (
	"sync/atomic"
	"unsafe"
)

// prefetch and prefetchGroup are hints; without an assembly version they do
// nothing (the passes that call them then only cost their loop).
func prefetch(p unsafe.Pointer)      {}
func prefetchGroup(p *atomic.Uint64) {}
