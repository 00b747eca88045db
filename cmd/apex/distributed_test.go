package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apexrl/apex/remote"
)

// proc is a process a test started: its command, its output file, and
// how to end it by its own pid.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan error
}

// startProc starts bin with args, its stdout and stderr in dir/name.log,
// and registers its end with t.Cleanup: SIGTERM by its pid, then SIGKILL
// if it has not exited within 10 s.
func startProc(t *testing.T, dir, name, bin string, args ...string) *proc {
	t.Helper()
	return startCmd(t, dir, name, exec.Command(bin, args...))
}

// startCmd is startProc for a command already made (one run inside a
// network namespace, say): cmd must exec the process to be ended, so that
// its pid is cmd's.
func startCmd(t *testing.T, dir, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("%s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop ends p by its pid (SIGTERM, then SIGKILL after 10 s) and waits for
// it; a process that has exited already is left alone.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return
	default:
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
		p.done <- <-p.done
		t.Errorf("%s (pid %d) did not exit within 10 s of SIGTERM: killed", p.name, p.cmd.Process.Pid)
	}
}

// wait waits up to d for p to exit and returns its error.
func (p *proc) wait(d time.Duration) (error, bool) {
	select {
	case err := <-p.done:
		p.done <- err
		return err, true
	case <-time.After(d):
		return nil, false
	}
}

// output is p's log so far.
func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// waitAddr waits (up to 60 s, polling every 50 ms) for p to write its
// listening address to file and returns it; p exiting first fails the
// test with its output.
func waitAddr(t *testing.T, p *proc, file string) string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		if b, err := os.ReadFile(file); err == nil && strings.TrimSpace(string(b)) != "" {
			return strings.TrimSpace(string(b))
		}
		if err, exited := p.wait(50 * time.Millisecond); exited {
			t.Fatalf("%s exited before listening (%v):\n%s", p.name, err, p.output())
		}
	}
	t.Fatalf("%s wrote no address to %s within 60 s:\n%s", p.name, file, p.output())
	return ""
}

// TestDistributedCartPole runs a whole run as four processes on loopback:
// apex replay (the buffer, the stage and the limiter), apex learner
// (learning through the remote stage, serving parameters) and two apex
// actor hosts (two actors each, one insert stream and one parameter
// subscription per host). The learner stops once CartPole is solved; its
// final evaluation must reach 475. Then, with no learner drawing, the
// rate limiter holds the actor hosts (their inserts stop, they keep
// running); a second learner resumes from the first one's checkpoint,
// counts on from its steps, and the actors' inserts go on. Every process
// is ended by its own pid and every file removed (t.TempDir).
func TestDistributedCartPole(t *testing.T) {
	bin := apexBinary(t)
	dir := t.TempDir()
	replayAddr := filepath.Join(dir, "replay.addr")
	replay := startProc(t, dir, "replay", bin, "replay", "-listen=127.0.0.1:0", "-addr-file="+replayAddr,
		"-env=CartPole-v1", "-actors=4", "-seed=3", "-checkpoint-dir="+filepath.Join(dir, "replay-ckpt"))
	raddr := waitAddr(t, replay, replayAddr)

	learnerAddr := filepath.Join(dir, "learner.addr")
	out := filepath.Join(dir, "learner")
	learner := startProc(t, dir, "learner", bin, "learner", "-replay="+raddr, "-listen=127.0.0.1:0", "-addr-file="+learnerAddr,
		"-duration=4m", "-progress=2s", "-out="+out)
	laddr := waitAddr(t, learner, learnerAddr)

	var actors []*proc
	for i := range 2 {
		actors = append(actors, startProc(t, dir, fmt.Sprintf("actor%d", i), bin, "actor", "-replay="+raddr, "-learner="+laddr,
			"-hosts=2", fmt.Sprintf("-host=%d", i), "-progress=2s"))
	}
	err, exited := learner.wait(5 * time.Minute)
	if !exited {
		t.Fatalf("the learner did not finish within 5 minutes:\n%s", learner.output())
	}
	if err != nil {
		t.Fatalf("learner: %v:\n%s", err, learner.output())
	}
	var res struct {
		FinalReturn     float64 `json:"final_return"`
		StoppedByTarget bool    `json:"stopped_by_target"`
		StopReason      string  `json:"stop_reason"`
		LearnerSteps    int64   `json:"learner_steps"`
		Seconds         float64 `json:"seconds"`
	}
	raw, rerr := os.ReadFile(filepath.Join(out, "results.json"))
	if rerr == nil {
		rerr = json.Unmarshal(raw, &res)
	}
	if rerr != nil {
		t.Fatalf("the learner's results.json: %v\n%s", rerr, learner.output())
	}
	t.Logf("solved: %v (%s) in %.1f s, %d learner steps, final return %.1f", res.StoppedByTarget, res.StopReason, res.Seconds, res.LearnerSteps, res.FinalReturn)
	if res.FinalReturn < 475 {
		t.Fatalf("final evaluation %.1f < 475 (stop reason %s); learner output:\n%s", res.FinalReturn, res.StopReason, learner.output())
	}
	// With no learner drawing, the rate limiter holds the actors: their
	// inserts stop (the server's count stays put over 2 s) while the
	// actor hosts keep running, waiting.
	cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer ccancel()
	rc, err := remote.Dial(cctx, raddr, remote.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	inserted := func() uint64 {
		t.Helper()
		info, err := rc.Info(cctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.GetTables()[0].GetCounters().GetInsertedItems()
	}
	held, stable := inserted(), false
	for range 30 { // at most about a minute
		time.Sleep(2 * time.Second)
		now := inserted()
		if now == held {
			stable = true
			break
		}
		held = now
	}
	if !stable {
		t.Fatalf("the actors' inserts did not stop without a learner (the limiter should hold them): %d items and counting", held)
	}
	for _, a := range actors {
		if err, exited := a.wait(0); exited {
			t.Fatalf("%s exited while the limiter held it (%v):\n%s", a.name, err, a.output())
		}
	}
	// A second learner resumes from the first one's checkpoint against
	// the same replay server (the actors still running, waiting on the
	// limiter) and goes on counting from its steps; its draws release the
	// actors, whose inserts go on.
	out2 := filepath.Join(dir, "learner2")
	resumed := startProc(t, dir, "learner2", bin, "learner", "-replay="+raddr, "-listen=127.0.0.1:0",
		"-resume="+filepath.Join(out, "learner.ckpt"), fmt.Sprintf("-steps=%d", res.LearnerSteps+300), "-duration=2m",
		"-stop-when-solved=false", "-progress=0", "-out="+out2)
	if err, exited := resumed.wait(3 * time.Minute); !exited || err != nil {
		t.Fatalf("the resumed learner: exited %v, %v:\n%s", exited, err, resumed.output())
	}
	var res2 struct {
		LearnerSteps int64  `json:"learner_steps"`
		StopReason   string `json:"stop_reason"`
	}
	raw, rerr = os.ReadFile(filepath.Join(out2, "results.json"))
	if rerr == nil {
		rerr = json.Unmarshal(raw, &res2)
	}
	if rerr != nil || res2.StopReason != "steps" || res2.LearnerSteps <= res.LearnerSteps {
		t.Fatalf("the resumed learner's results (%v): %d steps (%s), the first learner's %d:\n%s", rerr, res2.LearnerSteps, res2.StopReason, res.LearnerSteps, resumed.output())
	}
	if after := inserted(); after <= held {
		t.Fatalf("the actors inserted nothing after the learner resumed (%d items before and after)", held)
	} else {
		t.Logf("resumed from %d learner steps to %d; the actors, held at %d items, went on to %d", res.LearnerSteps, res2.LearnerSteps, held, after)
	}
	for _, a := range actors {
		if err, exited := a.wait(0); exited {
			t.Fatalf("%s exited (%v):\n%s", a.name, err, a.output())
		}
	}
	// The replay server and the actor hosts stop gracefully on SIGTERM.
	replay.stop(t)
	if err, _ := replay.wait(0); err != nil {
		t.Errorf("replay exited with %v:\n%s", err, replay.output())
	}
}

// TestDistributedReFER: apex learner takes the ReF-ER methods (it refused
// them before the episode feed): a replay server of Pendulum with refer
// (V-RACER) or er (TD3 under ReF-ER), a learner and one actor host (its
// actors record the behaviour columns) run to -steps and the learner
// exits 0 with its results, having followed the server's episodes (the
// server counts its episode-feed subscription). Every process is ended by its
// own pid and every file removed (t.TempDir).
func TestDistributedReFER(t *testing.T) {
	bin := apexBinary(t)
	for _, tc := range []struct{ sampler, algo string }{{"refer", "vracer"}, {"er", "td3"}} {
		t.Run(tc.sampler+"-"+tc.algo, func(t *testing.T) {
			dir := t.TempDir()
			replayAddr := filepath.Join(dir, "replay.addr")
			replay := startProc(t, dir, "replay", bin, "replay", "-listen=127.0.0.1:0", "-addr-file="+replayAddr,
				"-env=Pendulum-v1", "-sampler="+tc.sampler, "-algo="+tc.algo, "-actors=2", "-batch=32", "-seed=3")
			raddr := waitAddr(t, replay, replayAddr)
			learnerAddr := filepath.Join(dir, "learner.addr")
			out := filepath.Join(dir, "learner")
			learner := startProc(t, dir, "learner", bin, "learner", "-replay="+raddr, "-listen=127.0.0.1:0", "-addr-file="+learnerAddr,
				"-steps=300", "-duration=3m", "-stop-when-solved=false", "-progress=0", "-out="+out)
			laddr := waitAddr(t, learner, learnerAddr)
			startProc(t, dir, "actor", bin, "actor", "-replay="+raddr, "-learner="+laddr, "-progress=0")
			err, exited := learner.wait(4 * time.Minute)
			if !exited || err != nil {
				t.Fatalf("the learner: exited %v, %v:\n%s", exited, err, learner.output())
			}
			var res struct {
				StopReason   string `json:"stop_reason"`
				LearnerSteps int64  `json:"learner_steps"`
			}
			raw, rerr := os.ReadFile(filepath.Join(out, "results.json"))
			if rerr == nil {
				rerr = json.Unmarshal(raw, &res)
			}
			if rerr != nil || res.StopReason != "steps" || res.LearnerSteps != 300 {
				t.Fatalf("the learner's results (%v): %+v:\n%s", rerr, res, learner.output())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := remote.Dial(ctx, raddr, remote.ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			info, err := c.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tab := info.GetTables()[0]
			if tab.GetEpisodes().GetVariant() != tc.sampler || tab.GetCounters().GetEpisodeSubscriptions() < 1 || tab.GetCounters().GetDraws() < 300 {
				t.Errorf("the replay server's table: %v", tab)
			}
		})
	}
}
