//go:build !race

package buffer

// copyCol copies a column run. Readers validate what they copied with the
// slot's generation (a sequence lock), so in ordinary builds the copy is a
// plain memmove; the race build (copy_race.go) copies with atomic loads and
// stores so the detector sees the protocol's synchronisation.
func copyCol[T any](dst, src []T) { copy(dst, src) }

// clearCol zeroes a column run (see copyCol).
func clearCol[T any](dst []T) { clear(dst) }

// load reads one element (see copyCol).
func load[T any](p *T) T { return *p }
