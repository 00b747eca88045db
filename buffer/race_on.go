//go:build race

package buffer

// raceBuild reports whether the race detector is on (tests scale their work
// by it).
const raceBuild = true
