//go:build !amd64

package buffer

// anyNonFinite: see finite_amd64.go.
func anyNonFinite(v []float32) bool { return anyNonFiniteGo(v) }
