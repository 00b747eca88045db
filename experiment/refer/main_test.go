package refer

import (
	"testing"

	"go.uber.org/goleak"
)

// RunPendulum and RunLQR start goroutines (their workers and the
// runtime's): none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
