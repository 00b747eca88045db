//go:build !invariants

package sampler

// terInvariants: see ter_invariants_on.go.
const terInvariants = false
