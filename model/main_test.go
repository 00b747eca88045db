package model

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the package
// starts none (its matrix products are tiled so gonum never spawns
// workers); the concurrency tests start and join their own.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
