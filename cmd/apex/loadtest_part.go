package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apexrl/apex/bench/loadtest"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// apex loadtest-part is the hidden role of a fleet load test's child
// processes (apex loadtest -shards=N starts them; not for users): an actor
// host of simulated actors (-role=actors) or the sampling learner
// (-role=learner) over the shards of -replay. It talks to its parent
// through its standard streams:
//
//   - stdout: one JSON line first ({"shards": [...]}, the shards in the
//     order of the counters), then every -report period a line of
//     cumulative counters ({"t": UnixNano, "ins": [...]} or "smp"), and at
//     the end a line with "final": true (and the learner's round trips by
//     phase);
//   - stdin: "phase NAME" lines (the learner's round-trip phase) and
//     "stop"; the end of stdin stops it too, so a part never outlives its
//     parent.
//
// Exit status 0 after a clean stop, 1 on a failure, 2 on bad flags.

// loadtestPartCmd is the hidden subcommand of the parts.
const loadtestPartCmd = "loadtest-part"

// partLine is one line a part writes.
type partLine struct {
	Shards []string                `json:"shards,omitempty"`
	T      int64                   `json:"t,omitempty"`
	Ins    []loadtest.ShardInserts `json:"ins,omitempty"`
	Smp    []loadtest.ShardSamples `json:"smp,omitempty"`
	Lrn    *loadtest.LearnerTotals `json:"lrn,omitempty"`
	RTT    map[string]loadtest.RTT `json:"rtt,omitempty"`
	Final  bool                    `json:"final,omitempty"`
	Error  string                  `json:"error,omitempty"`
}

func runLoadtestPart(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apex loadtest-part", flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", "", "actors or learner")
	replay := fs.String("replay", "", "the shards, host:port,...")
	var ac loadtest.ActorsConfig
	fs.StringVar(&ac.Table, "table", "", "the shards' table")
	fs.IntVar(&ac.Actors, "actors", 1, "simulated actors on this host")
	fs.IntVar(&ac.First, "first", 0, "fleet-wide index of the first")
	fs.IntVar(&ac.Total, "total", 1, "simulated actors in the fleet")
	fs.IntVar(&ac.InsertBatch, "insert-batch", 64, "transitions per batch")
	fs.IntVar(&ac.Window, "window", 8, "unacknowledged batches per shard writer")
	fs.Float64Var(&ac.InsertRate, "insert-rate", 0, "this host's transitions/s (0: unpaced)")
	fs.Uint64Var(&ac.Seed, "seed", 1, "seed")
	fs.Uint64Var(&ac.Nonce, "nonce", 0, "writer id nonce")
	var lc loadtest.LearnerConfig
	sampleBatch := fs.Int("sample-batch", 512, "rows per draw")
	sampling := fs.String("shard-sampling", "exact", "exact or one")
	prefetch := fs.Bool("prefetch", true, "draw the next batch right after each write-back (remote.ShardOptions.Prefetch)")
	fs.Float64Var(&lc.SampleRate, "sample-rate", 0, "rows/s over all shards (0: unpaced)")
	report := fs.Duration("report", 100*time.Millisecond, "time between counter lines")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	lc.Table, lc.Seed = ac.Table, ac.Seed
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "apex loadtest-part: %v\n", err)
		return code
	}
	if *role != "actors" && *role != "learner" {
		return fail(2, fmt.Errorf("-role=%q: want actors or learner", *role))
	}
	if *report <= 0 {
		return fail(2, fmt.Errorf("-report=%v must be positive", *report))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shards, err := remote.ResolveShards(ctx, *replay, nil)
	if err != nil {
		return fail(2, err)
	}
	enc := json.NewEncoder(stdout)
	var encMu sync.Mutex
	emit := func(l partLine) error {
		encMu.Lock()
		defer encMu.Unlock()
		return enc.Encode(l)
	}
	names := make([]string, len(shards))
	for i, s := range shards {
		names[i] = s.Addr
	}

	var stats func(*partLine)
	var stop func() error
	var phase func(string)
	switch *role {
	case "actors":
		var clients []*remote.Client
		defer func() {
			for _, c := range clients {
				c.Close()
			}
		}()
		for _, s := range shards {
			c, err := remote.DialShard(ctx, s, remote.ClientOptions{DialOptions: []grpc.DialOption{fastReconnect}})
			if err != nil {
				return fail(1, err)
			}
			clients = append(clients, c)
		}
		a, err := loadtest.StartActors(clients, ac)
		if err != nil {
			return fail(2, err)
		}
		stats = func(l *partLine) { l.Ins = a.Stats() }
		stop = func() error {
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return a.Stop(fctx)
		}
		phase = func(string) {}
	case "learner":
		var clients []*remote.Client
		var conns []*grpc.ClientConn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
			for _, c := range clients {
				c.Close()
			}
		}()
		for _, s := range shards {
			c, err := remote.DialShard(ctx, s, remote.ClientOptions{DialOptions: []grpc.DialOption{fastReconnect}})
			if err != nil {
				return fail(1, err)
			}
			clients = append(clients, c)
			dopts, err := loadtestDialOptions(s.Addr, remote.ClientOptions{})
			if err == nil {
				var c *grpc.ClientConn
				if c, err = grpc.NewClient(s.Addr, append(dopts, fastReconnect)...); err == nil {
					conns = append(conns, c)
				}
			}
			if err != nil {
				return fail(1, err)
			}
		}
		mode, err := remote.ParseShardSampling(*sampling)
		if err != nil {
			return fail(2, err)
		}
		cfg, err := clients[0].Config(ctx)
		if err != nil {
			return fail(1, err)
		}
		local, err := runtime.NewLocalMethod(cfg)
		if err != nil {
			return fail(1, err)
		}
		layout, err := runtime.ReplayLayout(cfg)
		if err != nil {
			return fail(1, err)
		}
		layout.Capacity, layout.Stripes = *sampleBatch, 0
		buf, err := buffer.New(layout)
		if err != nil {
			return fail(1, err)
		}
		batch, err := buf.NewBatch(*sampleBatch)
		if err != nil {
			return fail(2, err)
		}
		mctx, stopMethod := context.WithCancel(context.Background())
		defer stopMethod()
		var counters remote.ShardCounters
		m, err := remote.ShardedMethod(mctx, clients, local, 0, remote.ShardOptions{Sampling: mode, Counters: &counters, Prefetch: *prefetch})
		if err != nil {
			return fail(1, err)
		}
		l, err := loadtest.StartLearner(m, batch, &counters, conns, lc)
		if err != nil {
			return fail(2, err)
		}
		stats = func(p *partLine) {
			smp, tot := l.Stats()
			p.Smp, p.Lrn = smp, &tot
		}
		stop = func() error { l.Stop(2 * time.Second); return nil }
		phase = l.Phase
		defer func() {
			smp, tot := l.Stats()
			_ = emit(partLine{Final: true, T: time.Now().UnixNano(), Smp: smp, Lrn: &tot, RTT: l.RTTs()})
		}()
	}
	if err := emit(partLine{Shards: names}); err != nil {
		_ = stop()
		return fail(1, err)
	}
	// Commands from the parent; the end of stdin is a stop.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if name, ok := strings.CutPrefix(line, "phase "); ok {
				phase(name)
			} else if line == "stop" {
				return
			}
		}
	}()
	t := time.NewTicker(*report)
	defer t.Stop()
	for running := true; running; {
		select {
		case <-stopped:
			running = false
		case <-t.C:
		}
		l := partLine{T: time.Now().UnixNano()}
		stats(&l)
		if err := emit(l); err != nil {
			_ = stop()
			return fail(1, err)
		}
	}
	err = stop()
	if *role == "actors" {
		l := partLine{Final: true, T: time.Now().UnixNano()}
		stats(&l)
		if err != nil {
			l.Error = err.Error()
		}
		_ = emit(l)
	}
	if err != nil {
		return fail(1, err)
	}
	return 0
}

// fastReconnect re-dials a lost shard every 50-250 ms (gRPC's default
// backoff grows to seconds while a shard is down, which would measure the
// backoff rather than the shard's restart).
var fastReconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 250 * time.Millisecond},
	MinConnectTimeout: time.Second,
})
