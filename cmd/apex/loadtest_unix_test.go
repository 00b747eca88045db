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

// TestLoadtestServerTLSTokens: apex loadtest -server drives an apex replay
// that serves mutual TLS and checks bearer tokens, dialing with the
// client certificate and the learner's token; without them its dial is
// refused by the server and it exits 1 naming the failure.
func TestLoadtestServerTLSTokens(t *testing.T) {
	bin := apexBinary(t)
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	if code, _, errs := runCertsCmd(t, "-out", pki, "-hosts", "localhost,127.0.0.1"); code != 0 {
		t.Fatalf("apex certs: exit %d: %s", code, errs)
	}
	f := func(name string) string { return filepath.Join(pki, name) }
	addrFile := filepath.Join(dir, "replay.addr")
	replay := startProc(t, dir, "replay", bin, append([]string{"replay", "-listen=127.0.0.1:0", "-addr-file=" + addrFile,
		"-tls-cert=" + f("server.pem"), "-tls-key=" + f("server-key.pem"), "-tls-ca=" + f("ca.pem"), "-tokens=" + f("tokens")},
		loadtestReplayArgs...)...)
	addr := waitAddr(t, replay, addrFile)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	js := filepath.Join(dir, "report.json")
	cmd := exec.CommandContext(ctx, bin, "loadtest", "-server="+addr, "-duration=1s", "-warmup=200ms", "-streams=2", "-json="+js,
		"-tls-cert="+f("client.pem"), "-tls-key="+f("client-key.pem"), "-tls-ca="+f("ca.pem"), "-token-file="+f("learner.token"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("apex loadtest over TLS with a token: %v\nstderr:\n%s\nreplay:\n%s", err, stderr.String(), replay.output())
	}
	var rep struct{ Inserted, Sampled uint64 }
	b, err := os.ReadFile(js)
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil || rep.Inserted == 0 || rep.Sampled == 0 {
		t.Fatalf("report (%v): %s", err, b)
	}
	// A token without its role's rights (an actor may not sample), and
	// plaintext to a TLS server, both fail with exit 1.
	for _, args := range [][]string{
		{"-tls-cert=" + f("client.pem"), "-tls-key=" + f("client-key.pem"), "-tls-ca=" + f("ca.pem"), "-token-file=" + f("actor.token")},
		{},
	} {
		cmd := exec.CommandContext(ctx, bin, append([]string{"loadtest", "-server=" + addr, "-duration=1s", "-warmup=0s", "-streams=1"}, args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("apex loadtest %q: %v, want exit 1:\n%s", args, err, out)
		}
	}
}
