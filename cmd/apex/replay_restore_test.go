package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/bench/loadtest"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// replayTestArgs is the table these tests serve: CartPole rows of the
// load test's layout, PER, no ratio limit.
var replayTestArgs = []string{"replay", "-listen=127.0.0.1:0", "-env=CartPole-v1", "-sampler=per"}

// adminClient is a plain Replay client of a loopback server (no TLS, no
// token: the server's admin calls are open there), closed at cleanup.
func adminClient(t *testing.T, addr string) replayv1.ReplayClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return replayv1.NewReplayClient(conn)
}

// fillReplay inserts n CartPole transitions into the server at addr
// through a remote.Writer of its own (named after id0; ids from id0,
// carried in the reward) and waits
// for their acknowledgement.
func fillReplay(t *testing.T, addr string, id0, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := remote.Dial(ctx, addr, remote.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := c.NewWriter(fmt.Sprintf("fill-%d", id0), remote.WriterOptions{Layout: loadtest.Layout})
	if err != nil {
		t.Fatal(err)
	}
	for done := 0; done < n; {
		k := min(1024, n-done)
		var tr buffer.Transitions
		for i := range k {
			for j := range 2 * loadtest.ObsDim {
				if j < loadtest.ObsDim {
					tr.Obs = append(tr.Obs, float32(j))
				} else {
					tr.NextObs = append(tr.NextObs, float32(j))
				}
			}
			tr.Action = append(tr.Action, int32(i%2))
			tr.Reward = append(tr.Reward, float32(id0+done+i))
			tr.Discount = append(tr.Discount, 0.99)
		}
		if err := w.Insert(&tr); err != nil {
			t.Fatal(err)
		}
		done += k
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// tableInfo is the server's only table.
func tableInfo(t *testing.T, cli replayv1.ReplayClient) *replayv1.TableInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := cli.Info(ctx, &replayv1.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return info.GetTables()[0]
}

// TestReplayKilledMidCheckpoint: apex replay killed (SIGKILL, by its pid)
// while it writes a large checkpoint leaves the previous checkpoint in
// place (the partial one only as a temporary dot-file); a server
// restored from the folder holds the previous checkpoint's items, and
// its next checkpoint removes the leftover.
func TestReplayKilledMidCheckpoint(t *testing.T) {
	bin := apexBinary(t)
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	addrFile := filepath.Join(dir, "replay.addr")
	// 2^21 slots: each checkpoint writes (and syncs) about 150 MB.
	args := append(append([]string(nil), replayTestArgs...), "-capacity=2097152", "-rate-limit=false", "-checkpoint-dir="+ck)
	replay := startProc(t, dir, "replay", bin, append(args, "-addr-file="+addrFile)...)
	addr := waitAddr(t, replay, addrFile)
	cli := adminClient(t, addr)

	fillReplay(t, addr, 0, 3000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := cli.Checkpoint(ctx, &replayv1.CheckpointRequest{})
	if err != nil || first.GetItems() != 3000 {
		t.Fatalf("first checkpoint: %v, %v", first, err)
	}
	prev, err := os.ReadFile(first.GetPath())
	if err != nil {
		t.Fatal(err)
	}
	fillReplay(t, addr, 3000, 2000)

	// The second checkpoint: kill the server as soon as its temporary
	// file has data (polled every millisecond, at most 60 s).
	second := make(chan error, 1)
	go func() {
		_, err := cli.Checkpoint(ctx, &replayv1.CheckpointRequest{})
		second <- err
	}()
	tmp := ""
	for deadline := time.Now().Add(60 * time.Second); tmp == "" && time.Now().Before(deadline); {
		m, _ := filepath.Glob(filepath.Join(ck, ".replay.ckpt.tmp-*"))
		for _, p := range m {
			if st, err := os.Stat(p); err == nil && st.Size() > 0 {
				tmp = p
			}
		}
		if tmp == "" {
			time.Sleep(time.Millisecond)
		}
	}
	if tmp == "" {
		t.Fatalf("no temporary checkpoint file appeared within 60 s:\n%s", replay.output())
	}
	if err := syscall.Kill(replay.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, exited := replay.wait(30 * time.Second); !exited {
		t.Fatal("the killed server did not exit within 30 s")
	}
	if err := <-second; err == nil {
		t.Fatal("the second checkpoint succeeded: the kill came after its rename, not mid-write")
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("the partial checkpoint %s is gone after the kill (%v): it was not mid-write", tmp, err)
	}
	after, err := os.ReadFile(first.GetPath())
	if err != nil || !bytes.Equal(after, prev) {
		t.Fatalf("the previous checkpoint changed under a killed checkpoint (%v)", err)
	}

	addrFile2 := filepath.Join(dir, "restored.addr")
	restored := startProc(t, dir, "restored", bin, append(args, "-addr-file="+addrFile2, "-restore="+first.GetPath())...)
	cli2 := adminClient(t, waitAddr(t, restored, addrFile2))
	if tab := tableInfo(t, cli2); tab.GetSize() != 3000 {
		t.Fatalf("the restored server holds %d items, want the previous checkpoint's 3000", tab.GetSize())
	}
	if _, err := cli2.Checkpoint(ctx, &replayv1.CheckpointRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the restored server's checkpoint left the crashed one's temporary file (%v)", err)
	}
	restored.stop(t)
}

// TestReplayRestoreLimiter: a restore whose rate limiter configuration
// differs from the flags' is refused (exit 2) naming both, and with
// -limiter-from the named one is in force.
func TestReplayRestoreLimiter(t *testing.T) {
	bin := apexBinary(t)
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	addrFile := filepath.Join(dir, "replay.addr")
	replay := startProc(t, dir, "replay", bin, append(append([]string(nil), replayTestArgs...),
		"-capacity=4096", "-replay-ratio=4", "-checkpoint-dir="+ck, "-addr-file="+addrFile)...)
	fillReplay(t, waitAddr(t, replay, addrFile), 0, 100)
	replay.stop(t) // SIGTERM: a final checkpoint
	if err, _ := replay.wait(0); err != nil {
		t.Fatalf("replay: %v:\n%s", err, replay.output())
	}
	file := filepath.Join(ck, "replay.ckpt")

	base := append(append([]string(nil), replayTestArgs...), "-capacity=4096", "-restore="+file)
	var out, errb bytes.Buffer
	if code := run(append(base, "-replay-ratio=8"), &out, &errb); code != 2 {
		t.Fatalf("a restore with another ratio: exit %d, want 2:\n%s", code, errb.String())
	}
	for _, want := range []string{"samples per insert 4,", "samples per insert 8,", "-limiter-from"} {
		if !strings.Contains(errb.String(), want) {
			t.Fatalf("the refusal does not name %q:\n%s", want, errb.String())
		}
	}
	for from, want := range map[string]float64{"checkpoint": 4, "flags": 8} {
		af := filepath.Join(dir, from+".addr")
		p := startProc(t, dir, from, bin, append(base, "-replay-ratio=8", "-limiter-from="+from, "-addr-file="+af)...)
		tab := tableInfo(t, adminClient(t, waitAddr(t, p, af)))
		if got := tab.GetLimiter().GetSamplesPerInsert(); got != want || tab.GetSize() != 100 {
			t.Fatalf("-limiter-from=%s: samples per insert %v (want %v), %d items:\n%s", from, got, want, tab.GetSize(), p.output())
		}
		p.stop(t)
	}
}
