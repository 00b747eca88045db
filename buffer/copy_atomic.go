//go:build race || !(amd64 || 386)

package buffer

import (
	"sync/atomic"
	"unsafe"
)

// copyCol copies element by element with atomic operations, so the race
// detector understands the sequence-lock protocol and weakly ordered CPUs
// cannot complete a load after the tag's re-check (see copy_plain.go).
func copyCol[T any](dst, src []T) {
	n := min(len(dst), len(src))
	if n == 0 {
		return
	}
	var zero T
	switch unsafe.Sizeof(zero) {
	case 4:
		d := unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), n)
		s := unsafe.Slice((*uint32)(unsafe.Pointer(&src[0])), n)
		for i := range n {
			atomic.StoreUint32(&d[i], atomic.LoadUint32(&s[i]))
		}
	case 8:
		d := unsafe.Slice((*uint64)(unsafe.Pointer(&dst[0])), n)
		s := unsafe.Slice((*uint64)(unsafe.Pointer(&src[0])), n)
		for i := range n {
			atomic.StoreUint64(&d[i], atomic.LoadUint64(&s[i]))
		}
	default:
		panic("buffer: copyCol on an element that is not 4 or 8 bytes")
	}
}

// clearCol zeroes a column run with atomic stores (see copyCol).
func clearCol[T any](dst []T) {
	n := len(dst)
	if n == 0 {
		return
	}
	var zero T
	switch unsafe.Sizeof(zero) {
	case 4:
		d := unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), n)
		for i := range n {
			atomic.StoreUint32(&d[i], 0)
		}
	case 8:
		d := unsafe.Slice((*uint64)(unsafe.Pointer(&dst[0])), n)
		for i := range n {
			atomic.StoreUint64(&d[i], 0)
		}
	default:
		panic("buffer: clearCol on an element that is not 4 or 8 bytes")
	}
}

// load reads one element with an atomic load (see copyCol).
func load[T any](p *T) T {
	var zero T
	switch unsafe.Sizeof(zero) {
	case 4:
		v := atomic.LoadUint32((*uint32)(unsafe.Pointer(p)))
		return *(*T)(unsafe.Pointer(&v))
	case 8:
		v := atomic.LoadUint64((*uint64)(unsafe.Pointer(p)))
		return *(*T)(unsafe.Pointer(&v))
	}
	panic("buffer: load on an element that is not 4 or 8 bytes")
}
