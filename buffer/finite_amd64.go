package buffer

// nonFiniteAVX2 reports whether any of v's values is NaN or ±Inf, 8 a
// step (finite_amd64.s); len(v) must be a multiple of 8.
//
//go:noescape
func nonFiniteAVX2(v []float32) bool

// anyNonFinite reports whether v holds a NaN or an infinity: with AVX2 on
// the whole multiple of 8 and anyNonFiniteGo on the tail.
func anyNonFinite(v []float32) bool {
	if useAVX2 && len(v) >= 8 {
		n := len(v) &^ 7
		if nonFiniteAVX2(v[:n]) {
			return true
		}
		v = v[n:]
	}
	return anyNonFiniteGo(v)
}
