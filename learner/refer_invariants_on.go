//go:build invariants

package learner

// referInvariants makes the ReF-ER controller check its invariants after
// every AfterStep (on buffers of up to 2^14 slots). Build with -tags
// invariants (CI does).
const referInvariants = true
