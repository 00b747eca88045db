package sampler_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (the conformance
// suite inserts from another goroutine while a stage samples; the package
// itself starts none).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
