//go:build amd64 && !race

package buffer

import (
	"sync/atomic"
	"unsafe"
)

// storeOwned publishes v into a leaf word its caller owns: the word holds an
// odd tag that only the claiming inserter may change (write-backs skip odd
// tags, other inserters wait on them, readers only load it). On amd64 an
// aligned 8-byte store is single-copy atomic, and under x86-TSO it becomes
// visible after every earlier store, the row's columns included; the Go
// compiler keeps it after the copies (function calls) and before the
// atomic tree adds that follow. sync/atomic's Store is an XCHG, a full
// fence costing as much as the CAS that claimed the slot: this plain store
// is what a publish needs and no more.
func storeOwned(p *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(p)) = v }
