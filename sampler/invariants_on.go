//go:build invariants

package sampler

// invariants makes the stages check their invariants as they run: every
// REFER AfterStep (on buffers of up to 2^14 slots) and every NERS Sample
// and UpdateFeatures. Build with -tags invariants (CI does).
const invariants = true
