package deploy

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fleet is a compose project the test started: its name, the image, and
// how to run docker and docker-compose on it.
type fleet struct {
	t       *testing.T
	project string
	file    string
	image   string
}

// run runs a command bounded by d and returns its combined output,
// failing the test when it fails.
func (f *fleet) run(d time.Duration, name string, args ...string) string {
	f.t.Helper()
	out, err := f.try(d, name, args...)
	if err != nil {
		f.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// try runs a command bounded by d with the fleet's environment.
func (f *fleet) try(d time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "APEX_IMAGE="+f.image)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// compose runs docker-compose on the fleet's project.
func (f *fleet) compose(d time.Duration, args ...string) string {
	f.t.Helper()
	return f.run(d, "docker-compose", append([]string{"-f", f.file, "-p", f.project}, args...)...)
}

// container is the id of service's container.
func (f *fleet) container(service string) string {
	f.t.Helper()
	id := strings.TrimSpace(f.compose(time.Minute, "ps", "-q", service))
	if id == "" {
		f.t.Fatalf("no container for service %s", service)
	}
	return id
}

// record is one progress record of apex learner or apex actor (-log-format
// json), the fields the test reads.
type record struct {
	Time         time.Time `json:"time"`
	Msg          string    `json:"msg"`
	LearnerSteps int64     `json:"learner_steps"`
	BatchesAcked int64     `json:"batches_acked"`
	ShardsLive   int       `json:"shards_live"`
	ShardDeaths  int       `json:"shard_deaths"`
	ShardRejoins int       `json:"shard_rejoins"`
}

// progress reads every progress record a container has logged so far.
func (f *fleet) progress(id string) []record {
	f.t.Helper()
	out, err := f.try(30*time.Second, "docker", "logs", id)
	if err != nil {
		f.t.Fatalf("docker logs %s: %v\n%s", id, err, out)
	}
	var recs []record
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r record
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Msg == "progress" {
			recs = append(recs, r)
		}
	}
	return recs
}

// rate is the growth per second of v over the records within [from, to]
// (the first and last record inside it), and how many records it spans;
// 0 with fewer than two.
func rate(recs []record, from, to time.Time, v func(record) int64) (float64, int) {
	var first, last *record
	n := 0
	for i := range recs {
		r := &recs[i]
		if r.Time.Before(from) || r.Time.After(to) {
			continue
		}
		if first == nil {
			first = r
		}
		last = r
		n++
	}
	if n < 2 {
		return 0, n
	}
	return float64(v(*last)-v(*first)) / last.Time.Sub(first.Time).Seconds(), n
}

// waitFor polls cond every 500 ms for at most d; it returns when cond
// first held, or fails the test with what.
func (f *fleet) waitFor(d time.Duration, what string, cond func() bool) time.Time {
	f.t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if cond() {
			return time.Now()
		}
	}
	f.t.Fatalf("%s: not within %v\n%s", what, d, f.tail())
	return time.Time{}
}

// tail is the last lines of every service's log, for a failure message.
func (f *fleet) tail() string {
	out, _ := f.try(time.Minute, "docker-compose", "-f", f.file, "-p", f.project, "logs", "--no-color", "--tail=15")
	return out
}

// actorsState sums the actor hosts' latest progress records: inserted
// batches, and the fewest live shards and least rejoins any host reports.
func (f *fleet) actorsState(ids []string) (acked int64, live, rejoins, deaths int) {
	live, rejoins, deaths = 1<<30, 1<<30, 1<<30
	for _, id := range ids {
		recs := f.progress(id)
		if len(recs) == 0 {
			return 0, 0, 0, 0
		}
		r := recs[len(recs)-1]
		acked += r.BatchesAcked
		live, rejoins, deaths = min(live, r.ShardsLive), min(rejoins, r.ShardRejoins), min(deaths, r.ShardDeaths)
	}
	return acked, live, rejoins, deaths
}

// lastRecord is the last JSON record with message msg a container logged
// (nil if none).
func (f *fleet) lastRecord(id, msg string) map[string]any {
	f.t.Helper()
	out, err := f.try(30*time.Second, "docker", "logs", id)
	if err != nil {
		f.t.Fatalf("docker logs %s: %v\n%s", id, err, out)
	}
	var last map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r map[string]any
		if json.Unmarshal(sc.Bytes(), &r) == nil && r["msg"] == msg {
			last = r
		}
	}
	if last == nil {
		f.t.Fatalf("no %q record in the logs of %s:\n%s", msg, id, out[max(0, len(out)-3000):])
	}
	return last
}

// ipOf is a container's address on the fleet's network.
func (f *fleet) ipOf(id string) string {
	f.t.Helper()
	return strings.TrimSpace(f.run(time.Minute, "docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", id))
}

// TestComposeFleet builds the image, starts docker-compose.yml's fleet
// (certificates, two replay shards, a learner, two actor hosts; mutual TLS
// and tokens) under a project name of its own, waits for the learner to
// learn, then:
//  1. kills replay-1 (docker kill): the actor hosts mark it dead and keep
//     inserting into replay-0, the learner keeps learning;
//  2. starts it again: the actor hosts see it rejoin (time to rejoin);
//  3. disconnects replay-0 from the network and connects it again: the
//     same, through a partition instead of a crash.
//
// The learner's rate before, during and after each is logged (and kept in
// bench/BENCHMARKS.md). docker-compose down -v removes every container,
// volume and network at the end, failure or not, and the test checks
// nothing of its project is left. Without Docker it fails: CI machines
// have it.
func TestComposeFleet(t *testing.T) {
	for _, tool := range []string{"docker", "docker-compose"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (%v): the compose fleet test needs the Docker daemon and docker-compose (v1), which CI machines have", tool, err)
		}
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Fatalf("docker info: %v: the compose fleet test needs a running Docker daemon\n%s", err, out)
	}
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	id := hex.EncodeToString(nonce[:])
	file, err := filepath.Abs("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, project: "apexfleettest" + id, file: file, image: "apex:fleettest-" + id}
	bin := apexBinary(t)

	start := time.Now()
	out, err := func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "build-image.sh", f.image)
		cmd.Env = append(os.Environ(), "APEX_BINARY="+bin)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}()
	if err != nil {
		t.Fatalf("build-image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := f.try(2*time.Minute, "docker", "rmi", "-f", f.image); err != nil {
			t.Errorf("docker rmi %s: %v\n%s", f.image, err, out)
		}
	})
	t.Logf("image %s built in %.1f s", f.image, time.Since(start).Seconds())
	// Registered before up: a failed start is torn down too.
	t.Cleanup(func() {
		if out, err := f.try(3*time.Minute, "docker-compose", "-f", f.file, "-p", f.project, "down", "-v", "--remove-orphans", "-t", "10"); err != nil {
			t.Errorf("docker-compose down -v: %v\n%s", err, out)
		}
		label := "label=com.docker.compose.project=" + f.project
		for _, what := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
			args := append(append([]string{}, what...), "--filter", label)
			if out, err := f.try(time.Minute, "docker", args...); err != nil || strings.TrimSpace(out) != "" {
				t.Errorf("after down -v, docker %s: %v %q: the project's resources were not all removed", strings.Join(args, " "), err, out)
			}
		}
	})

	start = time.Now()
	f.compose(4*time.Minute, "up", "-d", "--no-build")
	t.Logf("fleet up (certificates made, shards healthy, learner healthy, actor hosts started) in %.1f s", time.Since(start).Seconds())
	learner := f.container("learner")
	actors := []string{f.container("actor-0"), f.container("actor-1")}
	shard := map[string]string{"replay-0": f.container("replay-0"), "replay-1": f.container("replay-1")}
	network := f.project + "_fleet"
	steps := func(r record) int64 { return r.LearnerSteps }
	latestSteps := func() int64 {
		recs := f.progress(learner)
		if len(recs) == 0 {
			return 0
		}
		return recs[len(recs)-1].LearnerSteps
	}
	f.waitFor(2*time.Minute, "the learner learning", func() bool { return latestSteps() > 0 })
	f.waitFor(time.Minute, "both actor hosts inserting into 2 live shards", func() bool {
		acked, live, _, _ := f.actorsState(actors)
		return acked > 0 && live == 2
	})
	const window = 8 * time.Second
	measure := func(what string, from time.Time) float64 {
		t.Helper()
		if d := time.Until(from.Add(window)); d > 0 {
			time.Sleep(d)
		}
		r, n := rate(f.progress(learner), from, from.Add(window), steps)
		t.Logf("learner %s: %.1f learner steps/s (%d records over %v)", what, r, n, window)
		if n < 3 || r <= 0 {
			t.Fatalf("the learner did not learn %s: %.1f steps/s over %d records\n%s", what, r, n, f.tail())
		}
		return r
	}
	before := measure("before", time.Now())
	// backToRate waits for the learner to run at half its rate before,
	// over two seconds of records after since, and returns when that span
	// began: the learner back to rate, which must be within
	// recoveryBound of since. After a rejoin nothing holds the learner
	// for long: a restarted shard's limiter is its own until the
	// learner's first message, and a reconnected one, whose fleet counts
	// went stale while the learner could not reach it (their lease, 2 s
	// plus 4 learner steps, passed during the partition), admits its
	// actors' inserts until the learner's probe (at most 0.5 s apart,
	// each within 1 s) takes it back.
	//
	// recoveryBound, 7 s: both ends are the learner's own progress
	// records against since, the time the test saw the actor hosts' rejoin
	// (polled every 0.5 s, so since is late, never early: the difference
	// only understates a recovery). A healthy recovery is the learner's
	// probe (0.5 s apart), its answer (within 1 s), the first record at
	// half rate (records are 1 s apart) and the learner's own catch-up:
	// runs so far 0.2-1.0 s unloaded, and a loaded 2-core machine (five
	// containers, the test under -race -tags invariants) may stretch that
	// several times. The stall this catches (the actor hosts held on a
	// shard the learner had not reached again, the learner on the fleet's
	// ratio) lasted 8 s by this same measure (0 updates/s from the actor
	// hosts' rejoin until the learner reached the shard again); so did,
	// once, a learner whose TCP connection to the partitioned shard
	// waited on the kernel's retransmission backoff (0.2, 0.6, 1.4, 3,
	// 6 s...) after the cut healed: 7.5 s. The learner now ends the
	// connection of a shard that misses its deadline
	// (remote.Client.ResetConnection) and its probes dial a new one. The
	// wait adds the two-second span, a record, and docker logs' latency
	// under load: 25 s.
	const recoveryBound = 7 * time.Second
	backToRate := func(since time.Time, what string) time.Time {
		t.Helper()
		var back time.Time
		f.waitFor(25*time.Second, "the learner back to half its rate "+what, func() bool {
			recs := f.progress(learner)
			for i := range recs {
				if recs[i].Time.Before(since) {
					continue
				}
				for j := i + 1; j < len(recs); j++ {
					if d := recs[j].Time.Sub(recs[i].Time); d >= 2*time.Second {
						if float64(recs[j].LearnerSteps-recs[i].LearnerSteps)/d.Seconds() >= before/2 {
							back = recs[i].Time
							return true
						}
						break
					}
				}
			}
			return false
		})
		// back is the learner's record time (its clock is the host's),
		// since the test's, taken up to a poll after the event: the
		// difference is a lower bound of the recovery.
		if d := back.Sub(since); d > recoveryBound {
			t.Errorf("the learner took %.1f s to return to half its rate %s (bound %v): a stall", d.Seconds(), what, recoveryBound)
		}
		return back
	}

	// 1. A shard killed: the actor hosts move to the other, the learner
	// keeps learning from it.
	ip1 := f.ipOf(shard["replay-1"])
	ackedAtKill, _, _, deaths0 := f.actorsState(actors)
	killed := time.Now()
	f.run(time.Minute, "docker", "kill", shard["replay-1"])
	noticed := f.waitFor(30*time.Second, "the actor hosts marking the killed shard dead", func() bool {
		_, live, _, deaths := f.actorsState(actors)
		return live == 1 && deaths > deaths0
	})
	during := measure("with replay-1 killed", noticed)
	ackedAlone, live, _, _ := f.actorsState(actors)
	if ackedAlone <= ackedAtKill || live != 1 {
		t.Fatalf("the actor hosts did not insert into replay-0 while replay-1 was dead: acked %d -> %d, %d live\n%s", ackedAtKill, ackedAlone, live, f.tail())
	}
	_, _, rejoins0, _ := f.actorsState(actors)
	restarted := time.Now()
	f.run(time.Minute, "docker", "start", shard["replay-1"])
	rejoined := f.waitFor(time.Minute, "the restarted shard rejoining both actor hosts", func() bool {
		_, live, rejoins, _ := f.actorsState(actors)
		return live == 2 && rejoins > rejoins0
	})
	healthy := f.waitFor(time.Minute, "the restarted shard healthy", func() bool {
		out, _ := f.try(time.Minute, "docker", "inspect", "-f", "{{.State.Health.Status}}", shard["replay-1"])
		return strings.TrimSpace(out) == "healthy"
	})
	if r := f.lastRecord(shard["replay-1"], "replay"); r["restored"] != true {
		t.Fatalf("the restarted replay-1 did not restore its checkpoint: %v", r)
	}
	if ip := f.ipOf(shard["replay-1"]); ip != ip1 {
		t.Fatalf("replay-1 came back on %s, not %s: clients keep the addresses they resolved at start", ip, ip1)
	}
	recovered := backToRate(rejoined, "after replay-1 rejoined")
	after := measure("after replay-1 rejoined", recovered)

	// 2. A shard cut off the network and connected again.
	_, _, _, deaths1 := f.actorsState(actors)
	ip0 := f.ipOf(shard["replay-0"])
	ackedAtCut, _, _, _ := f.actorsState(actors)
	cut := time.Now()
	f.run(time.Minute, "docker", "network", "disconnect", network, shard["replay-0"])
	cutNoticed := f.waitFor(45*time.Second, "the actor hosts marking the disconnected shard dead", func() bool {
		_, live, _, deaths := f.actorsState(actors)
		return live == 1 && deaths > deaths1
	})
	partitioned := measure("with replay-0 disconnected", cutNoticed)
	// The learner's own view (its records carry shards_live and
	// shard_rejoins): it left replay-0 out during the cut.
	learnerRejoins := func() (live, rejoins int, at time.Time) {
		recs := f.progress(learner)
		if len(recs) == 0 {
			return 0, 0, time.Time{}
		}
		r := recs[len(recs)-1]
		return r.ShardsLive, r.ShardRejoins, r.Time
	}
	lLive, lRejoins, _ := learnerRejoins()
	if lLive != 1 {
		t.Fatalf("the learner's record during the cut shows %d live shards, want 1 (replay-0 left out)\n%s", lLive, f.tail())
	}
	ackedCut, _, _, _ := f.actorsState(actors)
	if ackedCut <= ackedAtCut {
		t.Fatalf("the actor hosts did not insert into replay-1 while replay-0 was cut off: acked %d -> %d\n%s", ackedAtCut, ackedCut, f.tail())
	}
	_, _, rejoins1, _ := f.actorsState(actors)
	reconnected := time.Now()
	f.run(time.Minute, "docker", "network", "connect", "--alias", "replay-0", network, shard["replay-0"])
	if ip := f.ipOf(shard["replay-0"]); ip != ip0 {
		t.Fatalf("replay-0 came back on %s, not %s: clients keep the addresses they resolved at start", ip, ip0)
	}
	healed := f.waitFor(time.Minute, "the reconnected shard rejoining both actor hosts", func() bool {
		_, live, rejoins, _ := f.actorsState(actors)
		return live == 2 && rejoins > rejoins1
	})
	// The learner takes replay-0 back on a new connection: its probes
	// (at most 0.5 s apart) dial again once the network is back, rather
	// than wait on the connection it had through the cut, which the
	// kernel's retransmission backoff kept silent up to 7.5 s after the
	// heal in one run before the learner ended such connections
	// (remote.Client.ResetConnection). The bound, from before docker
	// network connect to the learner's first record showing the rejoin
	// (records 1 s apart), adds the command's own time and a loaded
	// machine's slack to a probe's period and a connection's handshake.
	const learnerRejoinBound = 6 * time.Second
	var learnerBack time.Time
	f.waitFor(time.Minute, "the learner taking replay-0 back", func() bool {
		for _, r := range f.progress(learner) {
			if r.Time.After(reconnected) && r.ShardRejoins > lRejoins && r.ShardsLive == 2 {
				learnerBack = r.Time
				return true
			}
		}
		return false
	})
	if d := learnerBack.Sub(reconnected); d > learnerRejoinBound {
		t.Errorf("the learner took replay-0 back %.1f s after docker network connect (bound %v): a connection kept through the partition?", d.Seconds(), learnerRejoinBound)
	}
	recoveredCut := backToRate(healed, "after replay-0 rejoined")
	healedRate := measure("after replay-0 reconnected", recoveredCut)

	t.Logf("recovery: learner steps/s before %.1f; replay-1 killed %.1f (%.0f%%), after its restart %.1f (%.0f%%); replay-0 disconnected %.1f (%.0f%%), after reconnecting %.1f (%.0f%%)",
		before, during, 100*during/before, after, 100*after/before, partitioned, 100*partitioned/before, healedRate, 100*healedRate/before)
	t.Logf("recovery: kill noticed by the actor hosts in %.1f s; restarted shard rejoined %.1f s after docker start (healthy after %.1f s), the learner at half its rate %.1f s after the rejoin; disconnect noticed in %.1f s; rejoined %.1f s after reconnecting, the learner at half its rate %.1f s after the rejoin",
		noticed.Sub(killed).Seconds(), rejoined.Sub(restarted).Seconds(), healthy.Sub(restarted).Seconds(), max(0, recovered.Sub(rejoined).Seconds()),
		cutNoticed.Sub(cut).Seconds(), healed.Sub(reconnected).Seconds(), max(0, recoveredCut.Sub(healed).Seconds()))
	t.Logf("recovery: the learner's record shows replay-0 back %.1f s after docker network connect began", learnerBack.Sub(reconnected).Seconds())
	// The learner's own view of the shards, in its last record once
	// stopped: each shard drawn from, lost and back.
	f.compose(time.Minute, "stop", "-t", "30", "learner")
	shardsRec := f.lastRecord(learner, "shards")
	for _, key := range []string{"shard0", "shard1"} {
		v, _ := shardsRec[key].(string)
		var target string
		var up bool
		var rows, downs, rejoins, dropped int64
		if _, err := fmt.Sscanf(v, "%s up=%t rows=%d downs=%d rejoins=%d dropped=%d", &target, &up, &rows, &downs, &rejoins, &dropped); err != nil {
			t.Fatalf("the learner's shards record %v: %s %q: %v", shardsRec, key, v, err)
		}
		t.Logf("learner's %s (%s): up %v, rows drawn %d, downs %d, rejoins %d, write-backs dropped %d", key, target, up, rows, downs, rejoins, dropped)
		// Not "up": the learner's stop ends its streams before this
		// record, which counts one more down on every shard.
		if rows == 0 || downs < 1 || rejoins < 1 {
			t.Errorf("the learner's %s: %q: want rows drawn, at least one down and one rejoin", key, v)
		}
	}
	// Bounds for a loaded 2-core CI machine running five containers (the
	// issue's targets, >= 45% during a loss and full rate soon after, are
	// measured and reported; these catch a stall).
	for what, r := range map[string]float64{"with replay-1 killed": during, "after replay-1 rejoined": after,
		"with replay-0 disconnected": partitioned, "after replay-0 reconnected": healedRate} {
		if r < 0.25*before {
			t.Errorf("learner %s: %.1f steps/s, under 25%% of %.1f before", what, r, before)
		}
	}
	if d := rejoined.Sub(restarted); d > 30*time.Second {
		t.Errorf("the restarted shard took %v to rejoin (bound 30 s)", d)
	}
}
