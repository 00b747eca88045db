//go:build invariants

package sampler

// referInvariants makes every REFER AfterStep check the stage's
// invariants (on buffers of up to 2^14 slots). Build with -tags
// invariants (CI does).
const referInvariants = true
