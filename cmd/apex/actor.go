package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/runtime"
)

const actorUsage = `usage: apex actor -replay=HOST:PORT[,HOST:PORT...] -learner=HOST:PORT [flags]

An actor host of a distributed run: one process running its share of the
run's actors (the replay server's -actors, split over -hosts hosts; this is
host -host), which share one insert stream to the replay server and one
parameter subscription to the learner. The run's configuration comes from
the replay server. It waits for the learner's first parameters, then acts
until SIGINT or SIGTERM, when it stores every batch it completed (waiting
for the server's acknowledgements, at most -stop-grace) and exits 0. It exits
1 when the replay server stays unreachable or does not take the completed
batches in time: the unacknowledged batches are reported lost.

Against a fleet of replay shards (-replay lists several, or names a DNS
name with several addresses: one shard per address at start, each followed
to a new address of the name when it is the one shard gone and the one
address new) the host keeps one insert stream per shard
and places each episode whole on one shard (rendezvous hashing of the
host's writer id and the episode over the live shards). Every shard must
serve the same run configuration. A shard that dies is noticed within
-shard-probe-timeout of its stream's error (or -shard-ack-timeout plus
that when it goes silent): its unacknowledged batches move to the live
shards; it is probed with backoff and takes new episodes again when it
answers. The host exits 1 when every shard stays down for
-shard-down-timeout.

flags:
`

// runActor is apex actor.
func runActor(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apex actor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	replayAddr := fs.String("replay", "127.0.0.1:7700", "the apex replay server's host:port, or a fleet's shards: a comma-separated list (a DNS name expands to every address it resolves to)")
	learnerAddr := fs.String("learner", "127.0.0.1:7701", "the apex learner's parameter service host:port")
	hosts := fs.Int("hosts", 1, "actor hosts the run's actors are split over")
	hostIdx := fs.Int("host", 0, "this host's index in [0, -hosts): it runs the host-th contiguous block of the run's actors")
	grace := fs.Duration("stop-grace", 5*time.Second, "after SIGINT/SIGTERM, how long completed batches may wait to be stored (the server's limiter holds inserts while no learner samples); what is still unacknowledged then is reported lost")
	window := fs.Int("window", 0, "insert batches in flight without acknowledgement, per replay shard (0: remote.DefaultWindow)")
	ackTimeout := fs.Duration("shard-ack-timeout", remote.DefaultAckTimeout, "with several replay shards: how long a shard may hold batches without acknowledging any before it is probed (dead if the probe fails)")
	probeTimeout := fs.Duration("shard-probe-timeout", remote.DefaultProbeTimeout, "with several replay shards: the deadline of one probe (an Info call) of a shard")
	downTimeout := fs.Duration("shard-down-timeout", remote.DefaultAllDownTimeout, "with several replay shards: how long every shard may be down before the host gives up (exit 1, the batches it held reported lost)")
	df := addDialFlags(fs, "tls-", false)
	progressEvery := fs.Duration("progress", 5*time.Second, "time between progress records (0: none)")
	obs := addObsFlags(fs, true)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), actorUsage)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	usageErr := func(err error) int {
		fmt.Fprintf(stderr, "apex actor: %v\n", err)
		return 2
	}
	log, err := obs.logger(stdout)
	if err != nil {
		return usageErr(err)
	}
	switch {
	case *hosts < 1:
		return usageErr(fmt.Errorf("-hosts must be >= 1, got %d", *hosts))
	case *hostIdx < 0 || *hostIdx >= *hosts:
		return usageErr(fmt.Errorf("-host must be in [0, %d) (-hosts), got %d", *hosts, *hostIdx))
	case *window < 0:
		return usageErr(fmt.Errorf("-window must not be negative, got %d", *window))
	case *ackTimeout <= 0 || *probeTimeout <= 0 || *downTimeout <= 0:
		return usageErr(fmt.Errorf("-shard-ack-timeout, -shard-probe-timeout and -shard-down-timeout must be positive, got %v, %v, %v", *ackTimeout, *probeTimeout, *downTimeout))
	}
	if err := checkCounts(fs, []string{"progress"}); err != nil {
		return usageErr(err)
	}
	copts, err := df.options()
	if err != nil {
		return usageErr(err)
	}
	ctx, _, stopSignals := watchSignals(func(s os.Signal) {
		log.Info("stopping: storing the completed batches", "signal", signalName(s))
	}, func(s os.Signal) {
		fmt.Fprintf(stderr, "apex actor: second signal (%s): exiting now\n", signalName(s))
	})
	defer stopSignals()

	dialCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	fleet, cfg, cfgJSON, rc := openReplayFleet(dialCtx, "actor", *replayAddr, copts, usageErr, stderr, log)
	if rc != 0 {
		return rc
	}
	defer fleet.Close()
	n, first := cfg.Actors / *hosts, *hostIdx*(cfg.Actors / *hosts)
	if rest := cfg.Actors % *hosts; *hostIdx < rest {
		n, first = n+1, first+*hostIdx
	} else {
		first += rest
	}
	if n == 0 {
		return usageErr(fmt.Errorf("the run has %d actors: not enough for host %d of %d", cfg.Actors, *hostIdx, *hosts))
	}
	layout, err := runtime.ReplayLayout(cfg)
	if err != nil {
		return usageErr(err)
	}
	lc, err := remote.Dial(dialCtx, *learnerAddr, copts)
	if err != nil {
		return usageErr(fmt.Errorf("-learner %s: %w", *learnerAddr, err))
	}
	defer lc.Close()
	var store model.Store
	sub, err := lc.SubscribeParams(&store, remote.SubscriberOptions{})
	if err != nil {
		fmt.Fprintf(stderr, "apex actor: %v\n", err)
		return 1
	}
	defer sub.Close()
	ao := &actorObs{sub: sub}
	var watching sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer func() { stopWatch(); watching.Wait() }()
	watching.Go(func() { ao.watchParams(watchCtx) })
	metrics, err := obs.startMetrics(func() (*prometheus.Registry, error) {
		return newStatsRegistry(newStatsCollector(ao.snapshot, actorMetrics))
	}, log)
	if err != nil {
		fmt.Fprintf(stderr, "apex actor: %v\n", err)
		return 1
	}
	if metrics != nil {
		defer metrics.Close(metricsShutdownTimeout)
	}
	log.Info("actor host", "replay", *replayAddr, "shards", len(fleet.clients), "learner", *learnerAddr, "actors", n, "first_actor", first, "of", cfg.Actors)
	if err := sub.WaitVersion(ctx, 0); err != nil {
		if ctx.Err() != nil {
			return 0
		}
		fmt.Fprintf(stderr, "apex actor: waiting for the learner's first parameters: %v\n", err)
		return 1
	}
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	host, _ := os.Hostname()
	// The host's writer id: made once, so it stays the same across
	// reconnections (and on every shard), which makes resends idempotent.
	id := fmt.Sprintf("%s/actor-host-%d/%s", host, *hostIdx, hex.EncodeToString(nonce[:]))
	wopts := remote.WriterOptions{Layout: layout, Window: *window}
	var w insertSink
	if len(fleet.clients) == 1 {
		w, err = fleet.clients[0].NewWriter(id, wopts)
	} else {
		w, err = remote.NewShardedWriter(fleet.clients, id, remote.ShardedWriterOptions{WriterOptions: wopts,
			AckTimeout: *ackTimeout, ProbeTimeout: *probeTimeout, AllDownTimeout: *downTimeout, Config: cfgJSON})
	}
	if err != nil {
		fmt.Fprintf(stderr, "apex actor: %v\n", err)
		return 1
	}
	ah, err := runtime.NewActorHost(cfg, n, &store, w, runtime.FirstActor(first))
	if err != nil {
		w.Close(context.Background())
		return usageErr(err)
	}
	ao.writer.Store(&w)
	ao.host.Store(ah)
	done := make(chan struct{})
	var printer sync.WaitGroup
	printer.Go(func() { actorProgress(ah, w, log, *progressEvery, done) })
	// After a stop, the completed batches get a grace period to be
	// stored: the replay server's limiter holds inserts while no learner
	// samples, and then they are abandoned (counted as lost) rather than
	// waited for without end.
	ran := make(chan struct{})
	var closeErr error
	var closing sync.WaitGroup
	closing.Go(func() {
		select {
		case <-ran:
		case <-ctx.Done():
			select {
			case <-ran:
			case <-time.After(*grace):
				expired, cancel := context.WithCancel(context.Background())
				cancel()
				closeErr = w.Close(expired) // unblocks a waiting Insert with the loss
			}
		}
	})
	runErr := ah.Run(ctx)
	close(ran)
	closing.Wait()
	if closeErr == nil {
		flushCtx, cancelFlush := context.WithTimeout(context.Background(), *grace)
		closeErr = w.Close(flushCtx)
		cancelFlush()
	}
	close(done)
	printer.Wait()
	ws := summarize(w)
	st := ah.Stats()
	log.Info("done", append([]any{"env_steps", st.EnvSteps, "episodes", st.Episodes, "batches_acked", ws.acked, "lost", ws.lost, "resent", ws.resent}, ws.shardAttrs()...)...)
	if err := errors.Join(runErr, closeErr); err != nil {
		fmt.Fprintf(stderr, "apex actor: %v\n", err)
		return 1
	}
	return 0
}

// insertSink is an actor host's insert path: a remote.Writer (one replay
// server) or a remote.ShardedWriter (a fleet of shards).
type insertSink interface {
	runtime.Sink
	Close(ctx context.Context) error
}

// sinkSummary is what an actor host logs of its insert path.
type sinkSummary struct {
	acked, lost, resent, reconnects uint64
	pending                         int
	sharded                         bool
	live, shards                    int
	deaths, rejoins, moved          uint64
}

// writerStats is w's counters as one Writer's (a ShardedWriter's summed
// over its shards: fleetWriterStats) and its shards'.
func writerStats(w insertSink) (remote.WriterStats, actorShards) {
	switch w := w.(type) {
	case *remote.Writer:
		return w.Stats(), actorShards{Shards: 1, Live: 1}
	case *remote.ShardedWriter:
		return fleetWriterStats(w.Stats())
	}
	return remote.WriterStats{}, actorShards{}
}

// summarize reads w's counters (a ShardedWriter's summed over its shards).
func summarize(w insertSink) sinkSummary {
	switch w := w.(type) {
	case *remote.Writer:
		s := w.Stats()
		return sinkSummary{acked: s.Acked, lost: s.Lost, resent: s.Resent, reconnects: s.Reconnects, pending: s.Pending}
	case *remote.ShardedWriter:
		s := w.Stats()
		out := sinkSummary{lost: s.Lost, pending: s.Orphans, sharded: true, live: s.Live, shards: len(s.Shards)}
		for _, sh := range s.Shards {
			out.acked += sh.Acked
			out.resent += sh.Resent + sh.Adopted
			out.reconnects += sh.Reconnects
			out.pending += sh.Pending
			out.deaths += sh.Deaths
			out.rejoins += sh.Rejoins
			out.moved += sh.Moved
		}
		return out
	}
	return sinkSummary{}
}

// shardAttrs are the fleet's log attributes (none for one server).
func (s sinkSummary) shardAttrs() []any {
	if !s.sharded {
		return nil
	}
	return []any{"shards_live", s.live, "shards", s.shards, "shard_deaths", s.deaths, "shard_rejoins", s.rejoins, "batches_moved", s.moved}
}

// actorProgress logs the host's rates every period until done closes.
func actorProgress(h *runtime.ActorHost, w insertSink, log *slog.Logger, period time.Duration, done <-chan struct{}) {
	if period <= 0 {
		return
	}
	t := time.NewTicker(period)
	defer t.Stop()
	last, lastT := h.Stats(), time.Now()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		st, now := h.Stats(), time.Now()
		ws := summarize(w)
		rate := float64(st.EnvSteps-last.EnvSteps) / now.Sub(lastT).Seconds()
		log.Info("progress", append([]any{"env_steps", st.EnvSteps, "env_steps_per_s", round1(rate), "episodes", st.Episodes,
			"batches_acked", ws.acked, "in_flight", ws.pending, "reconnects", ws.reconnects}, ws.shardAttrs()...)...)
		last, lastT = st, now
	}
}

// actorObs is what apex actor's /metrics reads: the writer and the actor
// host once made (nil before the first parameters), the subscriber, and
// when the newest parameter version arrived.
type actorObs struct {
	sub     *remote.ParamsSubscriber
	writer  atomic.Pointer[insertSink]
	host    atomic.Pointer[runtime.ActorHost]
	arrived atomic.Int64 // UnixNano the newest version arrived; 0 before the first
}

// watchParams records when each parameter version arrives until ctx ends
// or the subscriber closes.
func (o *actorObs) watchParams(ctx context.Context) {
	for next := uint64(0); ; {
		if err := o.sub.WaitVersion(ctx, next); err != nil {
			return
		}
		o.arrived.Store(time.Now().UnixNano())
		next = max(next, o.sub.Stats().Version) + 1
	}
}

// snapshot is one scrape's actorSnapshot. Safe for concurrent use.
func (o *actorObs) snapshot() actorSnapshot {
	s := actorSnapshot{Params: o.sub.Stats()}
	if w := o.writer.Load(); w != nil {
		s.Writer, s.Shards = writerStats(*w)
	}
	if h := o.host.Load(); h != nil {
		s.Host = h.Stats()
	}
	if at := o.arrived.Load(); at != 0 {
		s.ParamsAge = time.Since(time.Unix(0, at))
	}
	return s
}
