package replayv1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the Go code from replay.proto
// with protoc and the pinned generators and compares it with the
// committed files. protoc is required (Debian's protobuf-compiler, which
// .ci/run installs): without it the test fails rather than skips.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Fatalf("protoc not found (%v): install Debian's protobuf-compiler (.ci/run does) to check the generated code", err)
	}
	out := t.TempDir()
	cmd := exec.Command("sh", "gen.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, b)
	}
	for _, name := range []string{"replay.pb.go", "replay_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what replay.proto generates: run `go generate ./api/replay/v1` and commit", name)
		}
	}
}
