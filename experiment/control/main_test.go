package control

import (
	"testing"

	"go.uber.org/goleak"
)

// Run starts goroutines (its workers and the runtime's): none may
// outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
