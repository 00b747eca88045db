//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apexrl/apex/remote/auth"
)

// TestLoadtestSpawnsReplay: apex loadtest without -server starts apex
// replay from its own binary, loads it, reports both processes' CPU time
// in its JSON, then stops the server by its pid and removes its folder.
func TestLoadtestSpawnsReplay(t *testing.T) {
	bin := apexBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp") // the spawned server's folder goes here
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(dir, "report.json")
	cmd := exec.CommandContext(ctx, bin, "loadtest", "-duration=1s", "-warmup=200ms", "-streams=4", "-json="+js)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("apex loadtest: %v\nstderr:\n%s", err, stderr.String())
	}
	for _, want := range []string{"inserted transitions", "sampled + written back", "sample round trip"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, stdout.String())
		}
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Server    string   `json:"server"`
		Streams   int      `json:"streams"`
		Inserted  uint64   `json:"inserted"`
		Sampled   uint64   `json:"sampled"`
		Draws     uint64   `json:"draws"`
		P99       float64  `json:"sample_rtt_p99_us"`
		ServerCPU *float64 `json:"server_cpu_s"`
		OwnCPU    float64  `json:"loadtest_cpu_s"`
		PerCPU    *float64 `json:"inserts_per_cpu_s"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	if rep.Streams != 4 || rep.Inserted == 0 || rep.Sampled == 0 || rep.Draws == 0 || rep.P99 <= 0 ||
		rep.ServerCPU == nil || *rep.ServerCPU <= 0 || rep.OwnCPU <= 0 || rep.PerCPU == nil || !auth.IsLoopback(strings.Split(rep.Server, ":")[0]) {
		t.Errorf("report: %s", b)
	}
	// The server it started has exited (reaped: no such process) and its
	// folder is gone.
	m := regexp.MustCompile(`apex replay \(pid (\d+)\) serves on`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("stderr does not name the server's pid:\n%s", stderr.String())
	}
	pid, _ := strconv.Atoi(m[1])
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("apex replay (pid %d) still there after apex loadtest ended: kill 0: %v", pid, err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("apex loadtest left %d entries in TMPDIR (%s first)", len(left), left[0].Name())
	}
}
