package ners

import (
	"testing"

	"go.uber.org/goleak"
)

// RunStats starts goroutines (control's workers and the
// runtime's): none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
