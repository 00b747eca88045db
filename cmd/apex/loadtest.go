package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/apexrl/apex/bench/loadtest"
	"github.com/apexrl/apex/internal/meter"
	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/remote/auth"
	"github.com/apexrl/apex/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

const loadtestUsage = `usage: apex loadtest [flags]

Load-tests one replay server (apex replay) over loopback gRPC: -streams
simulated actors, each an Insert stream of batches of -insert-batch random
CartPole transitions (44 bytes, plus a random priority) with at most -window
batches unacknowledged (paced to -insert-rate transitions/s in all, or
as fast as the server takes them), and one learner on -sample-streams Sample
streams (1 by default, on one connection), each keeping -sample-inflight draws of -sample-batch rows in flight and writing back
random priorities for every row it draws. After -warmup it measures for
-duration: inserted transitions/s, sampled transitions/s (each written
back), draws/s, the round trip of each draw (sent → batch received) at p50,
p90, p99 and max, and the CPU seconds of the server and of the load test
itself, with the figures per CPU-second.

Without -server it starts the server itself: this binary's apex replay
-listen=127.0.0.1:0 -env=CartPole-v1 -sampler=per -capacity=1048576
-rate-limit=false (plus -replay-args), in a temporary folder, and stops it
(SIGTERM to its pid) and removes the folder at the end. With -server it
drives a server already running; its CPU time is then not reported. A
server with TLS and tokens (apex replay -tls-cert ... -tokens ...) is
dialed with -tls-cert, -tls-key and -tls-ca (apex certs' client.pem,
client-key.pem, ca.pem) and -token-file (the learner's token: the load
test inserts and samples); an address beyond loopback needs them (or
-insecure).

Fleet mode (-shards=N): Ape-X's set-up over processes of this binary.
It starts N apex replay shards (-capacity each, no rate limiter), then
-actor-hosts actor-host processes that share -streams simulated actors
(each inserting batches of -insert-batch through its host's
remote.ShardedWriter, paced to -insert-rate in all) and one learner
process that draws batches of -sample-batch rows through
remote.ShardedMethod (-shard-sampling), one after another as a learner's
steps do (-sample-inflight is the one-server mode's), weighs them and
writes back every row (paced to -sample-rate in all; 0: full speed). The
report gives inserts/s and samples/s per shard and in total, the draws'
round trips, the CPU seconds of every process, acknowledged inserts lost
(exact: per shard and writer id, the writer's acknowledged rows minus
what the shard's writer table counts as stored under the id, its
restored checkpoint's included; 0 without a crash, and on a killed shard
those acknowledged after its last checkpoint, a range when some were
stored while that checkpoint was copied) and stale writes applied. -chaos kills shard -chaos-shard by its pid
(SIGKILL) at -chaos-at into the measured window and restarts it on its
port from its checkpoint folder after -chaos-down (a new incarnation);
a probe stream per shard then sends a write-back of a row of the killed
incarnation on purpose, which must not be applied, and the report adds
the learner's
rate before, during and after the loss and the time to full rate after
the restart. Every process is ended by its pid and the folder removed.

Ape-X's rate: apex loadtest -shards=2 -actor-hosts=4 -streams=360 -insert-batch=50 -insert-rate=12500 -sample-rate=9700
A shard kill: apex loadtest -shards=2 -streams=360 -insert-batch=50 -insert-rate=12500 -sample-rate=9700 -duration=20s -chaos

Typical: apex loadtest -json=loadtest.json
Fewer actors: apex loadtest -streams=8 -duration=5s
Draw latency at a set insert load: apex loadtest -insert-rate=1e6 -sample-inflight=1

flags:
`

// The spawned server's table: CartPole, PER, 2^20 slots, no rate limit.
var loadtestReplayArgs = []string{"-env=CartPole-v1", "-sampler=per", "-capacity=1048576", "-rate-limit=false"}

// runLoadtest is `apex loadtest`: it parses flags, starts (or reaches) the
// server, runs the load and writes the report (a table on stdout; JSON to
// -json). Exit status: 0 success, 1 failure (the server it started
// exiting uncleanly included), 2 usage error, 128+signal when a signal
// stopped it.
func runLoadtest(args []string, stdout, stderr io.Writer) (code int) {
	def := loadtest.DefaultConfig()
	cfg := def
	fs := flag.NewFlagSet("apex loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "", "HOST:PORT of a running apex replay (beyond loopback with the TLS flags, or -insecure); empty: start one")
	df := addDialFlags(fs, "tls-", false)
	replayArgs := fs.String("replay-args", "", "extra flags for the apex replay this command starts, space-separated (e.g. -metrics-addr=127.0.0.1:6060 to profile it through pprof)")
	fs.StringVar(&cfg.Table, "table", def.Table, "the server's table; empty: its only table")
	fs.IntVar(&cfg.Streams, "streams", def.Streams, fmt.Sprintf("simulated actors, one Insert stream each (1..%d; with -shards, spread over -actor-hosts, each host's sharing its remote.ShardedWriter)", loadtest.MaxStreams))
	fs.IntVar(&cfg.InsertBatch, "insert-batch", def.InsertBatch, fmt.Sprintf("transitions per insert batch (1..%d)", loadtest.MaxBatch))
	fs.IntVar(&cfg.Window, "window", def.Window, fmt.Sprintf("unacknowledged batches per stream (1..%d; with -shards, per shard of each actor host's writer)", loadtest.MaxWindow))
	fs.IntVar(&cfg.Conns, "conns", def.Conns, "client connections the insert streams share (0..-streams; 0: one per stream); the learner has its own")
	fs.Float64Var(&cfg.InsertRate, "insert-rate", def.InsertRate, "pace the streams to this many transitions/s in all (0: as fast as the server acknowledges)")
	fs.IntVar(&cfg.SampleBatch, "sample-batch", def.SampleBatch, fmt.Sprintf("rows per draw (1..%d)", loadtest.MaxBatch))
	fs.IntVar(&cfg.SampleStreams, "sample-streams", def.SampleStreams, fmt.Sprintf("Sample streams the learner runs on its one connection, each with -sample-inflight draws in flight (1..%d; not with -shards)", loadtest.MaxSampleStreams))
	fs.IntVar(&cfg.SampleInflight, "sample-inflight", def.SampleInflight, fmt.Sprintf("draws the learner keeps in flight (1..%d; not with -shards, where the learner draws one batch at a time)", loadtest.MaxInflight))
	fs.DurationVar(&cfg.Warmup, "warmup", def.Warmup, "unmeasured load first (>= 0); measuring also waits for the first answered draw")
	fs.DurationVar(&cfg.Duration, "duration", def.Duration, "measured window (> 0)")
	fs.Uint64Var(&cfg.Seed, "seed", def.Seed, "seed of the synthetic transitions, the priorities and the draws")
	fc := fleetConfig{}
	fs.IntVar(&fc.shards, "shards", 0, "fleet mode: start this many apex replay shards (0: one server, the mode above); -streams simulated actors then run over -actor-hosts processes and the learner in a process of its own")
	fs.IntVar(&fc.hosts, "actor-hosts", 4, "fleet mode: actor-host processes the simulated actors are spread over")
	fs.StringVar(&fc.sampling, "shard-sampling", "exact", "fleet mode: the learner's remote.ShardedMethod mode: exact (each batch spread over the shards by their masses) or one (one shard per batch, chosen by mass)")
	fs.BoolVar(&fc.prefetch, "prefetch", true, "fleet mode: the learner's stage draws its next batch right after each write-back (remote.ShardOptions.Prefetch, as apex learner -prefetch); the sampling round trip is then the receipt of a draw already sent")
	fs.Float64Var(&fc.sampleRate, "sample-rate", 0, "fleet mode: pace the learner to this many sampled transitions/s (0: full speed)")
	fs.IntVar(&fc.capacity, "capacity", 1<<19, "fleet mode: each shard's capacity")
	fs.BoolVar(&fc.chaos, "chaos", false, "fleet mode: kill one shard by its pid (SIGKILL) at -chaos-at into the measured window and restart it on the same port from its checkpoint folder -chaos-down later")
	fs.IntVar(&fc.chaosShard, "chaos-shard", 0, "fleet mode: the shard -chaos kills")
	fs.DurationVar(&fc.chaosAt, "chaos-at", 0, "fleet mode: when -chaos kills the shard, into the measured window (0: a third of -duration)")
	fs.DurationVar(&fc.chaosDown, "chaos-down", time.Second, "fleet mode: how long the killed shard stays down")
	fs.DurationVar(&fc.ckptEvery, "checkpoint-every", time.Second, "fleet mode with -chaos: the shards' -checkpoint-every (the restarted shard restores the last one; without -chaos the shards write no checkpoints)")
	jsonPath := fs.String("json", "", "also write the report as JSON to this file (- for stdout, instead of the table)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the load test's own process to this file")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), loadtestUsage)
		fs.PrintDefaults()
	}
	if c, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return c
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "apex loadtest: "+format+" (see apex loadtest -h)\n", a...)
		return 2
	}
	if err := cfg.Validate(); err != nil {
		return usageErr("invalid flags: %v", err)
	}
	fleet := fc.shards > 0
	if fleet {
		if fc.chaosAt == 0 {
			fc.chaosAt = cfg.Duration / 3
		}
		fc.lt, fc.replayArgs = cfg, strings.Fields(*replayArgs)
		if err := fc.validate(); err != nil {
			return usageErr("invalid flags: %v", err)
		}
		if *server != "" || cfg.Conns != 0 {
			return usageErr("-server and -conns do not apply with -shards (fleet mode starts its own shards)")
		}
		if cfg.SampleStreams != 1 {
			return usageErr("-sample-streams does not apply with -shards (the fleet's learner draws through one remote.ShardedMethod)")
		}
	} else {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, name := range []string{"actor-hosts", "shard-sampling", "prefetch", "sample-rate", "capacity", "chaos", "chaos-shard", "chaos-at", "chaos-down", "checkpoint-every"} {
			if set[name] {
				return usageErr("-%s applies with -shards only (fleet mode)", name)
			}
		}
	}
	if *server != "" {
		host, port, err := net.SplitHostPort(*server)
		if err != nil || port == "" {
			return usageErr("-server=%q is not HOST:PORT", *server)
		}
		if !auth.IsLoopback(host) && df.cert == "" && !df.insecure {
			return usageErr("-server=%q is not a loopback address: give -tls-cert, -tls-key and -tls-ca (or -insecure)", *server)
		}
		if *replayArgs != "" {
			return usageErr("-replay-args applies only to the server this command starts (no -server)")
		}
	} else if df.cert != "" || df.key != "" || df.ca != "" || df.tokenFile != "" || df.insecure {
		return usageErr("the TLS, token and -insecure flags apply to -server only (the server this command starts serves loopback without them)")
	}
	copts, err := df.options()
	if err != nil {
		return usageErr("%v", err)
	}

	ctx, interrupted, stopWatching := watchSignals(func(s os.Signal) {
		fmt.Fprintf(stderr, "apex loadtest: interrupted (%s): stopping (a second signal exits at once)\n", signalName(s))
	}, func(s os.Signal) {
		fmt.Fprintf(stderr, "apex loadtest: second interrupt (%s): exiting now\n", signalName(s))
	})
	defer stopWatching()
	start := time.Now()
	cfg.Progress = func(line string) {
		fmt.Fprintf(stderr, "apex loadtest: %5.1fs  %s\n", time.Since(start).Seconds(), line)
	}
	failed := func(err error) int {
		if s := interrupted(); s != nil {
			return signalExitCode(s)
		}
		fmt.Fprintf(stderr, "apex loadtest: %v\n", err)
		return 1
	}

	if fleet {
		return runLoadtestFleet(ctx, fc, *jsonPath, *cpuProfile, fs, stdout, failed, cfg.Progress)
	}
	addr := *server
	if addr == "" {
		srv, err := startReplay(ctx, strings.Fields(*replayArgs), cfg.Progress)
		if err != nil {
			return failed(err)
		}
		defer func() {
			if err := srv.stop(); err != nil {
				fmt.Fprintf(stderr, "apex loadtest: %v\n", err)
				if code == 0 {
					code = 1
				}
			}
		}()
		addr = srv.addr
		cfg.ServerCPU = func() (time.Duration, error) { return meter.PidCPU(srv.cmd.Process.Pid) }
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			return failed(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	dopts, err := loadtestDialOptions(addr, copts)
	if err != nil {
		return failed(err)
	}
	dial := func() (*grpc.ClientConn, error) { return grpc.NewClient(addr, dopts...) }
	rep, err := loadtest.Run(ctx, dial, cfg)
	if err != nil {
		return failed(err)
	}
	rep.Server = addr
	out := struct {
		*loadtest.Report
		Machine runtime.MachineInfo `json:"machine"`
		Flags   map[string]string   `json:"flags"`
	}{rep, runtime.Machine(), map[string]string{}}
	fs.VisitAll(func(f *flag.Flag) { out.Flags[f.Name] = f.Value.String() })
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return failed(err)
	}
	switch *jsonPath {
	case "-":
		_, err = js.WriteTo(stdout)
	case "":
		err = rep.WriteText(stdout)
	default:
		if err = rep.WriteText(stdout); err == nil {
			err = os.WriteFile(*jsonPath, js.Bytes(), 0o644)
		}
	}
	if err != nil {
		return failed(err)
	}
	return 0
}

// replayProc is an apex replay process the load test started.
type replayProc struct {
	cmd    *exec.Cmd
	dir    string        // its working folder, removed by stop
	addr   string        // where it serves
	exited chan struct{} // closed when it has exited (err then set)
	err    error
	log    *os.File
	// removeDir: stop removes dir.
	removeDir bool
	// killed: the fleet load test killed it on purpose (its exit status
	// is no failure).
	killed bool
}

// replayStartLimit bounds the wait for the server's address file.
const replayStartLimit = 60 * time.Second

// startReplay starts this binary's apex replay on 127.0.0.1:0 in a new
// temporary folder (its working folder, which also holds its log and
// address file) and waits until it serves. On error nothing is left
// running and the folder is removed.
func startReplay(ctx context.Context, extra []string, progress func(string)) (*replayProc, error) {
	dir, err := os.MkdirTemp("", "apex-loadtest-")
	if err != nil {
		return nil, err
	}
	args := append(slices.Clone(loadtestReplayArgs), extra...)
	return startReplayIn(ctx, dir, "127.0.0.1:0", "replay", args, true, progress)
}

// startReplayIn starts this binary's apex replay -listen=listen with args
// in the folder dir (its working folder; its log and address file are
// name.log and name.addr there) and waits until it serves. stop removes
// dir when removeDir. On error nothing is left running (and dir is
// removed when removeDir).
func startReplayIn(ctx context.Context, dir, listen, name string, args []string, removeDir bool, progress func(string)) (*replayProc, error) {
	exe, err := os.Executable()
	if err != nil {
		if removeDir {
			os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("finding this program to start apex replay: %w", err)
	}
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		if removeDir {
			os.RemoveAll(dir)
		}
		return nil, err
	}
	addrFile := filepath.Join(dir, name+".addr")
	os.Remove(addrFile)
	args = append([]string{"replay", "-listen=" + listen, "-addr-file=" + addrFile}, args...)
	p := &replayProc{cmd: exec.Command(exe, args...), dir: dir, exited: make(chan struct{}), log: logf, removeDir: removeDir}
	p.cmd.Dir, p.cmd.Stdout, p.cmd.Stderr = dir, logf, logf
	progress("starting apex " + strings.Join(args, " "))
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		if removeDir {
			os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("starting apex replay: %w", err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	limit := time.NewTimer(replayStartLimit)
	defer limit.Stop()
	for {
		if b, err := os.ReadFile(addrFile); err == nil {
			a := strings.TrimSpace(string(b))
			if _, _, err := net.SplitHostPort(a); err == nil {
				p.addr = a
				progress("apex replay (pid " + fmt.Sprint(p.cmd.Process.Pid) + ") serves on " + a)
				return p, nil
			}
		}
		var why error
		select {
		case <-tick.C:
			continue
		case <-p.exited:
			why = fmt.Errorf("apex replay exited before serving (%v)", p.err)
		case <-limit.C:
			why = fmt.Errorf("apex replay did not write its address within %v", replayStartLimit)
		case <-ctx.Done():
			why = ctx.Err()
		}
		return nil, errors.Join(why, p.stop())
	}
}

// stop ends the server by its own pid (SIGTERM, then SIGKILL after 10 s),
// removes its folder and says how it exited when that was not cleanly,
// with the end of its log.
func (p *replayProc) stop() error {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(10 * time.Second)
		select {
		case <-p.exited:
		case <-t.C:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		t.Stop()
	}
	var err error
	if p.err != nil {
		b, _ := os.ReadFile(p.log.Name())
		if len(b) > 2000 {
			b = b[len(b)-2000:]
		}
		err = fmt.Errorf("apex replay (pid %d) exited with %v; the end of its log:\n%s", p.cmd.Process.Pid, p.err, b)
	}
	p.log.Close()
	if !p.removeDir {
		return err
	}
	return errors.Join(err, os.RemoveAll(p.dir))
}

// loadtestDialOptions are the load test's gRPC dial options for addr:
// mutual TLS when copts.TLS is set (else plaintext, which the flags allow
// only to loopback or with -insecure), copts.Token as a bearer token on
// every call (over plaintext only to loopback, as remote.Dial), and the
// API's message limits.
func loadtestDialOptions(addr string, copts remote.ClientOptions) ([]grpc.DialOption, error) {
	creds := insecure.NewCredentials()
	if copts.TLS != nil {
		creds = credentials.NewTLS(copts.TLS)
	}
	dopts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, remote.WireDialOptions()...)
	if copts.Token != "" {
		var b *auth.Bearer
		var err error
		if copts.TLS != nil {
			b, err = auth.NewBearer(copts.Token)
		} else {
			b, err = auth.NewLoopbackBearer(copts.Token, addr)
		}
		if err != nil {
			return nil, fmt.Errorf("-token-file: %w", err)
		}
		dopts = append(dopts, grpc.WithPerRPCCredentials(b))
	}
	return dopts, nil
}

// runLoadtestFleet runs the fleet mode and writes its report (the table on
// stdout, JSON to jsonPath; - for JSON on stdout).
func runLoadtestFleet(ctx context.Context, fc fleetConfig, jsonPath, cpuProfile string, fs *flag.FlagSet, stdout io.Writer,
	failed func(error) int, say func(string)) int {
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			return failed(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	rep, err := runFleet(ctx, fc, say)
	if err != nil {
		return failed(err)
	}
	out := struct {
		*fleetReport
		Machine runtime.MachineInfo `json:"machine"`
		Flags   map[string]string   `json:"flags"`
	}{rep, runtime.Machine(), map[string]string{}}
	fs.VisitAll(func(f *flag.Flag) { out.Flags[f.Name] = f.Value.String() })
	js, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return failed(err)
	}
	js = append(js, '\n')
	switch jsonPath {
	case "-":
		_, err = stdout.Write(js)
	case "":
		err = rep.writeText(stdout)
	default:
		if err = rep.writeText(stdout); err == nil {
			err = os.WriteFile(jsonPath, js, 0o644)
		}
	}
	if err != nil {
		return failed(err)
	}
	return 0
}
