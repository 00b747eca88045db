package remote

import (
	"encoding/binary"
	"unsafe"
)

// word is the element type of a numeric column on the wire.
type word interface {
	~uint32 | ~int32 | ~float32 | ~uint64 | ~int64 | ~float64
}

// nativeLE selects the bulk (memory view) copy of columns; a big-endian
// machine converts value by value. A variable so a test can take the
// portable path.
var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

func sizeOf[T word]() int {
	var zero T
	return int(unsafe.Sizeof(zero))
}

// appendLE appends s's values to dst, little endian. O(len(s)); allocates
// only when dst lacks the capacity.
func appendLE[T word](dst []byte, s []T) []byte {
	if len(s) == 0 {
		return dst
	}
	size := sizeOf[T]()
	if nativeLE {
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*size)...)
	}
	n := len(dst)
	dst = growBytes(dst, n+len(s)*size)
	out := dst[n:]
	if size == 4 {
		for i, v := range unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(s))), len(s)) {
			binary.LittleEndian.PutUint32(out[4*i:], v)
		}
	} else {
		for i, v := range unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(s))), len(s)) {
			binary.LittleEndian.PutUint64(out[8*i:], v)
		}
	}
	return dst
}

// decodeLE fills dst (resized to len(src)/size, reusing its storage) from
// the little-endian values of src; len(src) must be a multiple of the
// element size. O(len(src)).
func decodeLE[T word](dst []T, src []byte) []T {
	size := sizeOf[T]()
	n := len(src) / size
	dst = growSlice(dst, n)
	if n == 0 {
		return dst
	}
	if nativeLE {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), n*size), src)
		return dst
	}
	if size == 4 {
		u := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(dst))), n)
		for i := range u {
			u[i] = binary.LittleEndian.Uint32(src[4*i:])
		}
	} else {
		u := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(dst))), n)
		for i := range u {
			u[i] = binary.LittleEndian.Uint64(src[8*i:])
		}
	}
	return dst
}

// growSlice returns s resized to n, reusing its storage when it is large
// enough (the values are then overwritten by the caller).
func growSlice[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// growBytes is growSlice for byte slices, keeping the first len(b) bytes.
func growBytes(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	nb := make([]byte, n)
	copy(nb, b)
	return nb
}
