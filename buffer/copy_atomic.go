//go:build race || !(amd64 || 386)

package buffer

import (
	"sync/atomic"
	"unsafe"
)

// The record copies move every value with an atomic load or store, so the
// race detector understands the sequence-lock protocol and weakly ordered
// CPUs cannot complete a load after the tag's re-check (see copy_plain.go).

// clearCol zeroes a run of values with atomic stores.
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

// load reads one element with an atomic load.
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

// store writes one element with an atomic store.
func store[T any](p *T, v T) {
	switch unsafe.Sizeof(v) {
	case 4:
		atomic.StoreUint32((*uint32)(unsafe.Pointer(p)), *(*uint32)(unsafe.Pointer(&v)))
		return
	case 8:
		atomic.StoreUint64((*uint64)(unsafe.Pointer(p)), *(*uint64)(unsafe.Pointer(&v)))
		return
	}
	panic("buffer: store on an element that is not 4 or 8 bytes")
}

// copyVec copies n float32 values from src to dst, each with an atomic
// load and store (copy_plain.go has the x86 version).
func copyVec(dst, src unsafe.Pointer, n int) {
	for i := range n {
		atomic.StoreUint32((*uint32)(unsafe.Add(dst, 4*i)), atomic.LoadUint32((*uint32)(unsafe.Add(src, 4*i))))
	}
}

// fastVec is off: every value moves with its own atomic.
const fastVec = false
