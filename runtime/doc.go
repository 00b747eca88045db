// Package runtime drives apex's pure core: it owns the goroutines, channels,
// rate limiting, supervision and shutdown of an Ape-X run. This file set
// currently holds the rate limiter (Reverb's SampleToInsertRatio semantics).
package runtime
