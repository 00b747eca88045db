package auth

import (
	"os"
	"testing"
)

// TestTokensModeOK: 0600 or narrower for everyone; a group-readable file
// (0640, 0440: a Kubernetes Secret mounted with an fsGroup) only when root
// owns it and another user reads it; group write or any bit for others
// never.
func TestTokensModeOK(t *testing.T) {
	for _, c := range []struct {
		perm  os.FileMode
		owner int
		known bool
		euid  int
		want  bool
	}{
		{0o600, 1000, true, 1000, true},
		{0o400, 0, true, 0, true},
		{0o400, 0, false, 1000, true},
		{0o640, 1000, true, 1000, false}, // the reader's own file: chmod 600 it
		{0o640, 0, true, 0, false},       // root reading its own
		{0o640, 0, true, 65532, true},    // a Secret with an fsGroup
		{0o440, 0, true, 65532, true},
		{0o640, 0, false, 65532, false}, // owner unknown
		{0o660, 0, true, 65532, false},  // group write
		{0o644, 0, true, 65532, false},  // others read
		{0o604, 1000, true, 1000, false},
		{0o650, 0, true, 65532, false}, // group exec
	} {
		if got := tokensModeOK(c.perm, c.owner, c.known, c.euid); got != c.want {
			t.Errorf("tokensModeOK(%v, owner %d known %v, euid %d) = %v, want %v", c.perm, c.owner, c.known, c.euid, got, c.want)
		}
	}
}
