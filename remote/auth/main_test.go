package auth_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: the gRPC
// servers and clients the tests start must all be stopped.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
