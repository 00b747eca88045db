//go:build invariants

package sampler

// invariants makes the stages check their invariants as they run (on
// buffers of up to 2^14 slots): every TER Sample, REFER Sample and
// NERS Sample and UpdateFeatures. Build with -tags invariants (CI does).
const invariants = true
