package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apexrl/apex/remote"
)

// shardInserted is the number of items a replay shard has stored so far
// (its Info's insert counter), or -1 when it does not answer.
func shardInserted(t *testing.T, addr string) int64 {
	t.Helper()
	c, err := remote.Dial(context.Background(), addr, remote.ClientOptions{CallTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := c.Info(context.Background())
	if err != nil || len(info.GetTables()) == 0 {
		return -1
	}
	return int64(info.GetTables()[0].GetCounters().GetInsertedItems())
}

// waitInserted waits (up to limit, polling every 100 ms) until the shard
// at addr has stored more than above items.
func waitInserted(t *testing.T, addr string, above int64, limit time.Duration, why string, procs ...*proc) int64 {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if n := shardInserted(t, addr); n > above {
			return n
		}
	}
	var logs strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&logs, "--- %s:\n%s\n", p.name, p.output())
	}
	t.Fatalf("%s: shard %s stored no more than %d items within %v\n%s", why, addr, above, limit, logs.String())
	return 0
}

// TestActorFleet runs one apex actor host against two apex replay shards
// (the learner's parameters from an apex learner on the first): the host
// refuses shards serving different run configurations, naming them; with
// matching shards it stores into both; when one is killed (SIGKILL, by
// its pid) it goes on storing into the other, and when the shard restarts
// on its address (a new incarnation) it takes new episodes again. On
// SIGTERM the host exits 0 having lost nothing it reports. Every process
// is ended by its own pid, every file removed (t.TempDir).
func TestActorFleet(t *testing.T) {
	bin := apexBinary(t)
	dir := t.TempDir()
	run := []string{"-env=CartPole-v1", "-actors=2", "-seed=3", "-rate-limit=false"}
	startShard := func(name, listen string, extra ...string) (*proc, string) {
		addrFile := filepath.Join(dir, name+".addr")
		args := append([]string{"replay", "-listen=" + listen, "-addr-file=" + addrFile}, run...)
		p := startProc(t, dir, name, bin, append(args, extra...)...)
		return p, waitAddr(t, p, addrFile)
	}
	_, a := startShard("shard-a", "127.0.0.1:0")
	b, baddr := startShard("shard-b", "127.0.0.1:0")
	other, oaddr := startShard("shard-other", "127.0.0.1:0", "-seed=4")

	// Shards that disagree: exit 1, both named, the key that differs.
	mismatch := startProc(t, dir, "actor-mismatch", bin, "actor", "-replay="+a+","+oaddr, "-learner=127.0.0.1:1", "-progress=0")
	err, exited := mismatch.wait(time.Minute)
	if !exited {
		t.Fatalf("apex actor against mismatched shards still running after a minute:\n%s", mismatch.output())
	}
	out := mismatch.output()
	if err == nil || !strings.Contains(out, a) || !strings.Contains(out, oaddr) || !strings.Contains(out, "seed differ") {
		t.Fatalf("apex actor against mismatched shards: %v, output:\n%s", err, out)
	}
	other.stop(t)

	learnerAddr := filepath.Join(dir, "learner.addr")
	learner := startProc(t, dir, "learner", bin, "learner", "-replay="+a, "-listen=127.0.0.1:0", "-addr-file="+learnerAddr,
		"-duration=5m", "-stop-when-solved=false", "-progress=0", "-out="+filepath.Join(dir, "learner"))
	laddr := waitAddr(t, learner, learnerAddr)
	actor := startProc(t, dir, "actor", bin, "actor", "-replay="+a+","+baddr, "-learner="+laddr, "-progress=500ms",
		"-shard-ack-timeout=500ms", "-shard-probe-timeout=300ms")
	waitInserted(t, a, 0, time.Minute, "two shards", actor, learner)
	waitInserted(t, baddr, 0, time.Minute, "two shards", actor, learner)

	// Kill shard b by its pid: the host goes on storing into shard a.
	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, exited := b.wait(10 * time.Second); !exited {
		t.Fatal("shard b did not exit on SIGKILL")
	}
	na := shardInserted(t, a)
	waitInserted(t, a, na+200, time.Minute, "shard b dead", actor)
	if !strings.Contains(actor.output(), "shards_live=1") {
		time.Sleep(time.Second) // one more progress record
		if !strings.Contains(actor.output(), "shards_live=1") {
			t.Errorf("the actor host never logged one live shard:\n%s", actor.output())
		}
	}
	// Restart shard b on its address (a new incarnation, empty): it
	// takes new episodes.
	if _, port, err := net.SplitHostPort(baddr); err != nil || port == "" {
		t.Fatalf("shard b's address %q: %v", baddr, err)
	}
	_, baddr2 := startShard("shard-b2", baddr)
	if baddr2 != baddr {
		t.Fatalf("shard b restarted on %s, not %s", baddr2, baddr)
	}
	waitInserted(t, baddr, 0, time.Minute, "shard b restarted", actor)

	actor.stop(t)
	if err, _ := actor.wait(0); err != nil {
		t.Fatalf("apex actor exited with %v:\n%s", err, actor.output())
	}
	last := actor.output()
	i := strings.LastIndex(last, "msg=done")
	if i < 0 || !strings.Contains(last[i:], " lost=0 ") || !strings.Contains(last[i:], " shards=2 ") || !strings.Contains(last[i:], " shard_rejoins=1 ") {
		t.Errorf("the actor host's last record:\n%s", last)
	}
}
