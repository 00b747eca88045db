//go:build unix

package auth

import (
	"os"
	"syscall"
)

// fileOwner returns the user id owning the file st describes.
func fileOwner(st os.FileInfo) (uid int, ok bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(s.Uid), true
}
