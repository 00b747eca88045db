// Package deploy's tests check apex's deployment files — the image's
// Dockerfile, the compose fleet, the Kubernetes manifests and the
// static-address recipe in README.md — against the apex binary they run,
// and run the compose fleet through a shard kill and a network partition.
package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// binDir holds the apex binary the tests build; TestMain removes it.
var binDir string

// TestMain makes the binary's folder, runs the tests, removes the folder
// and checks no test left a goroutine behind.
func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "apex-deploy-bin"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildErr  error
)

// repoRoot is the module's root (this package is deploy/ in it).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// apexBinary builds, once per test process, the binary the image carries
// (static: CGO_ENABLED=0, -trimpath, -ldflags='-s -w', as build-image.sh
// builds it) and returns its path.
func apexBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(binDir, "apex")
	buildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/apex")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/apex (the go command is needed): %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

// readFile reads a file of this folder (or below), failing the test.
func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// trimLines is s without blank lines at either end.
func trimLines(s string) string { return strings.Trim(s, "\n") }
