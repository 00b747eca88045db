//go:build !invariants

package sampler

const referInvariants = false
