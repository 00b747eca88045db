//go:build !amd64

package buffer

import (
	"sync/atomic"
	"unsafe"
)

// The prefetch passes are hints; without an assembly version they do
// nothing (see prefetch_amd64.go).
func prefetchCol(base unsafe.Pointer, stride uintptr, slots []int32) {}
func prefetch(p unsafe.Pointer)                                      {}
func prefetchLines(p unsafe.Pointer, n int)                          {}
func prefetchGroup(p *atomic.Uint64)                                 {}
