//go:build !invariants

package learner

// referInvariants is off without the invariants build tag.
const referInvariants = false
