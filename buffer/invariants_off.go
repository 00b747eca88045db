//go:build !invariants

package buffer

// invariantsEnabled is false in ordinary builds; see invariants_on.go.
const invariantsEnabled = false
