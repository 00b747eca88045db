//go:build !invariants

package sampler

const invariants = false
