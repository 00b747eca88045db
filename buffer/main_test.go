package buffer

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (the stress tests
// start some; the buffer itself starts none).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
