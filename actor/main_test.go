package actor

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (the stats tests
// read an actor from another goroutine; the package itself starts none).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
