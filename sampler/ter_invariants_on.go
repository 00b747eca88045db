//go:build invariants

package sampler

// terInvariants makes every TER Sample check its graph's invariants (on
// buffers of up to 2^14 slots). Build with -tags invariants (CI does).
const terInvariants = true
