//go:build !race && (amd64 || 386)

package buffer

// copyCol copies a column run. Readers validate what they copied with the
// slot's generation (a sequence lock), so on x86 the copy is a plain
// memmove: x86 keeps loads in order (TSO) and the Go compiler does not move
// plain loads across the atomic re-check of the tag. On weaker memory models
// (arm64 and others) a plain load may complete after that re-check, so
// there, as in the race build, copy_atomic.go copies with atomic loads and
// stores.
func copyCol[T any](dst, src []T) { copy(dst, src) }

// clearCol zeroes a column run (see copyCol).
func clearCol[T any](dst []T) { clear(dst) }

// load reads one element (see copyCol).
func load[T any](p *T) T { return *p }
