package learner

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the package
// starts none; the concurrency test starts and joins its own.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
