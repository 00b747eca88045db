//go:build invariants

package buffer

// invariantsEnabled turns on the per-operation assertions of
// assertBatch and friends. Build with -tags invariants (CI does).
const invariantsEnabled = true
