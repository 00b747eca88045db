package remote

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (servers, streams
// and watchers all end with their contexts).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
