//go:build !amd64 || race

package buffer

import "sync/atomic"

// storeOwned publishes v into a leaf word its caller owns (see
// publish_amd64.go). Weaker memory models need the release order an atomic
// store gives, 386 has no single-copy-atomic 8-byte plain store, and the
// race detector must see the publish as a synchronising store.
func storeOwned(p *atomic.Uint64, v uint64) { p.Store(v) }
