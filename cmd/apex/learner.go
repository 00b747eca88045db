package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
)

const learnerUsage = `usage: apex learner -replay=HOST:PORT[,HOST:PORT...] [flags]

The learner of a distributed run: it connects to an apex replay server,
takes the run's configuration from it, samples through the server's replay
stage (draws, priority write-backs and, for NERS, feature write-backs on
one stream; for the ReF-ER methods, refer, refer-1, refer-2 and er, the
stage's episode events too, which its controller follows), learns, and serves its newest parameters to the apex actor
hosts (the Params service on -listen). It evaluates, stops and writes
results.json, curve.png and its checkpoint to -out as apex train does;
-resume continues from such a checkpoint (the replay server keeps the data).

Against a fleet of replay shards (-replay lists several, or names a DNS
name that resolves to several addresses, one shard per address at start,
each followed to a new address of the name when it is the one shard gone
and the one address new; every shard must serve the same
run configuration, refused by name otherwise) it samples each batch across
the shards: -shard-sampling=exact spreads the batch's stratified targets
over the shards by their masses (per, lap, pal, uniform), one picks one
shard per batch with probability proportional to its mass (any method but
ter; rank then ranks within each shard); either way every row carries the
probability of the procedure run, so the importance weights are exact. It
enforces the run's sample-to-insert ratio on the fleet's counts, which it
hands every shard with a lease (-fleet-lease) that its draws renew, and
tally rounds while it does not draw: a shard whose lease passes (the
learner cannot reach it, or is gone) admits its actors' inserts on its
stale counts up to its capacity past the ratio, room only the learner's
samples give back, so a learner cut off from one shard does not stall the
fleet; -fleet-lease=off keeps the ratio strict. A shard that fails or
does not answer within -shard-deadline is left out (its write-backs
dropped and counted) and probed until it rejoins. With -prefetch (the
default) the next batch's draw goes out right after each write-back, so
the learner's step hides the shards' round trip; the shards apply the
write-back first, so the draw sees the same priorities.

The learner's own settings (-steps, -duration, -target-return,
-stop-when-solved, -float32, -learner-workers) are this process's; every
other setting is the replay server's.

Exit status 0: stopped as asked (solved, -steps or -duration) or by
SIGINT/SIGTERM (results written); 1: the run failed; 2: a usage error.

flags:
`

// runLearner is apex learner.
func runLearner(args []string, stdout, stderr io.Writer) int {
	def := runtime.DefaultTrainConfig()
	local := def
	fs := flag.NewFlagSet("apex learner", flag.ContinueOnError)
	fs.SetOutput(stderr)
	replayAddr := fs.String("replay", "127.0.0.1:7700", "the apex replay server's host:port, or a fleet's shards: a comma-separated list (a DNS name expands to every address it resolves to)")
	shardSampling := fs.String("shard-sampling", "exact", "with several replay shards: exact (each batch's stratified targets spread over the shards by mass) or one (one shard per batch, chosen by mass)")
	shardDeadline := fs.Duration("shard-deadline", remote.DefaultShardDeadline, "with several replay shards: how long a shard may take to answer a draw, write-back or tally before it is left out and probed")
	var fleetLease leaseFlag
	fs.Var(&fleetLease, "fleet-lease", "with several replay shards: the least lease on the fleet's counts the learner hands each shard, plus 4 times its longest time between renewals lately (its draws renew it, and a tally every quarter lease while it does not draw); a shard whose lease passes admits inserts on its stale counts up to its capacity past the ratio (room only the learner's samples give back). A `duration`; 0: 2 s, or twice -shard-deadline; negative or \"off\": no lease, the counts never go stale (a shard the learner cannot reach holds its actors until it can)")
	prefetch := fs.Bool("prefetch", true, "with several replay shards: right after each write-back, send the next batch's draw (as many rows, the same exact probabilities), which the next step only receives: the draw overlaps the learner's step instead of waiting on idle shards (the draws' randomness then comes from a generator the stage seeds from the learner's at its first draw); false: draw when the step asks")
	pipeline := fs.Bool("pipeline", true, "with one replay server: send each write-back without waiting for its result, which the next draw reads ahead of its batch (one round trip per learner step instead of two; the same batches, the write-back counts reported one step late and settled at the end); false: wait for each result")
	addLearnerFlags(fs, &local)
	sf := addServeFlags(fs, "127.0.0.1:7701", "the parameter service (actor hosts subscribe to it)")
	df := addDialFlags(fs, "tls-client-", true)
	out := fs.String("out", "out/learner", "directory for results.json, curve.png and the learner's checkpoint")
	ckpt := fs.String("checkpoint", "", "write the learner's checkpoint (networks, optimiser, counters; the replay server keeps the data) to this file every -checkpoint-every and at the end (default <out>/learner.ckpt; \"none\": no checkpoint)")
	fs.DurationVar(&local.CheckpointEvery, "checkpoint-every", def.CheckpointEvery, "time between periodic learner checkpoints (0: only at the end)")
	resume := fs.String("resume", "", "continue the learner saved in this learner checkpoint (its networks, optimiser and counters; the replay server keeps the data): the server's run configuration must be the one it was saved under")
	progressEvery := fs.Duration("progress", 5*time.Second, "time between progress records (0: none)")
	obs := addObsFlags(fs, true)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), learnerUsage)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	usageErr := func(err error) int {
		fmt.Fprintf(stderr, "apex learner: %v\n", err)
		return 2
	}
	log, err := obs.logger(stdout)
	if err != nil {
		return usageErr(err)
	}
	if err := checkCounts(fs, []string{"steps", "duration", "learner-workers", "checkpoint-every", "progress", "shard-deadline"}); err != nil {
		return usageErr(err)
	}
	sampling, err := remote.ParseShardSampling(*shardSampling)
	if err != nil {
		return usageErr(fmt.Errorf("-shard-sampling: %w", err))
	}
	if err := sf.check(log); err != nil {
		return usageErr(err)
	}
	df.ca, df.insecure = sf.ca, sf.insecure
	copts, err := df.options()
	if err != nil {
		return usageErr(err)
	}
	copts.Pipeline = *pipeline
	switch *ckpt {
	case "":
		*ckpt = filepath.Join(*out, "learner.ckpt")
	case "none":
		*ckpt = ""
	}
	if err := prepareOut(*out); err != nil {
		return usageErr(err)
	}
	ctx, interrupted, stopSignals := watchSignals(func(s os.Signal) {
		log.Warn("interrupted: stopping; the results and the checkpoint are being written (a second signal exits at once)", "signal", signalName(s))
	}, func(s os.Signal) {
		fmt.Fprintf(stderr, "apex learner: second interrupt (%s): exiting now\n", signalName(s))
	})
	defer stopSignals()

	dialCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	fleet, cfg, _, rc := openReplayFleet(dialCtx, "learner", *replayAddr, copts, usageErr, stderr, log)
	if rc != 0 {
		return rc
	}
	defer fleet.Close()
	cfg.Steps, cfg.Duration, cfg.TargetReturn, cfg.StopWhenSolved = local.Steps, local.Duration, local.TargetReturn, local.StopWhenSolved
	cfg.Float32, cfg.LearnerWorkers = local.Float32, local.LearnerWorkers
	cfg.Checkpoint, cfg.CheckpointEvery = *ckpt, local.CheckpointEvery
	localMethod, err := runtime.NewLocalMethod(cfg)
	if err != nil {
		return usageErr(err)
	}
	var prior uint64
	if *resume != "" {
		f, err := os.Open(*resume)
		if err != nil {
			return usageErr(fmt.Errorf("-resume: %w", err))
		}
		prior, err = runtime.LearnerCheckpointSteps(f)
		f.Close()
		if err != nil {
			return usageErr(fmt.Errorf("-resume %s: %w", *resume, err))
		}
	}
	// The stage lives as long as the run (its streams, a fleet's probes).
	stageCtx, endStage := context.WithCancel(ctx)
	defer endStage()
	var m sampler.Method
	var shardStats *remote.ShardCounters
	if len(fleet.clients) == 1 {
		m, err = fleet.clients[0].Method(stageCtx, localMethod, prior)
	} else {
		shardStats = &remote.ShardCounters{}
		m, err = remote.ShardedMethod(stageCtx, fleet.clients, localMethod, prior,
			remote.ShardOptions{Sampling: sampling, Deadline: *shardDeadline, FleetLease: fleetLease.d, Prefetch: *prefetch, Counters: shardStats, Infos: fleet.infos,
				OnRefused: func(target string, inc uint64, err error) {
					log.Warn("replay shard refused", "shard", target, "incarnation", inc, "reason", err.Error())
				}})
	}
	if err != nil {
		fmt.Fprintf(stderr, "apex learner: the replay server's stage: %v\n", err)
		return 1
	}
	// The learner's records report the transitions the replay server has
	// stored as its environment steps (an n-step actor stores one
	// transition per step once an episode is under way): read from the
	// server's Info once a second.
	var inserted atomic.Int64
	pollCtx, stopPoll := context.WithCancel(ctx)
	var polling sync.WaitGroup
	defer func() { stopPoll(); polling.Wait() }()
	polling.Go(func() { pollInserted(pollCtx, fleet.clients, &inserted) })
	hostOpts := []runtime.LearnerOption{runtime.SeededRemotely(),
		runtime.WithEnvCounter(func() (int64, int64) { return inserted.Load(), 0 })}
	var host *runtime.LearnerHost
	if *resume != "" {
		f, ferr := os.Open(*resume)
		if ferr != nil {
			return usageErr(fmt.Errorf("-resume: %w", ferr))
		}
		host, err = runtime.LoadLearnerHost(cfg, m, f, hostOpts...)
		f.Close()
	} else {
		host, err = runtime.NewLearnerHost(cfg, m, hostOpts...)
	}
	if err != nil {
		return usageErr(err)
	}
	for _, w := range host.Warnings() {
		log.Warn("warning", "warning", w)
	}
	ps, err := remote.NewParamsServer(host.Store(), remote.ParamsServerOptions{})
	if err != nil {
		fmt.Fprintf(stderr, "apex learner: %v\n", err)
		return 1
	}
	gopts, err := sf.grpcOptions(remote.ParamsPolicy())
	if err != nil {
		return usageErr(err)
	}
	g, err := remote.NewParamsGRPCServer(ps, gopts)
	if err != nil {
		fmt.Fprintf(stderr, "apex learner: %v\n", err)
		return 1
	}
	// The parameter service outlives the learning: it stops after the
	// results are written, so actor hosts keep the final parameters.
	serveCtx, stopServing := context.WithCancel(context.Background())
	var serving sync.WaitGroup
	serveErr := make(chan error, 1)
	serving.Go(func() {
		serveErr <- sf.serve(serveCtx, g, log, "params")
	})
	metrics, err := obs.startMetrics(func() (*prometheus.Registry, error) {
		cs := []prometheus.Collector{newTrainCollector(host.Stats, host.Config()),
			newStatsCollector(func() remote.ClientStats { return sumClientStats(fleet.clients) }, learnerClientMetrics)}
		if shardStats != nil {
			cs = append(cs, newStatsCollector(shardStats.Snapshot, learnerShardMetrics))
		}
		return newStatsRegistry(cs...)
	}, log)
	if err != nil {
		stopServing()
		serving.Wait()
		fmt.Fprintf(stderr, "apex learner: %v\n", err)
		return 1
	}
	if metrics != nil {
		defer metrics.Close(metricsShutdownTimeout)
	}
	c := host.Config()
	log.Info("learner", "replay", *replayAddr, "shards", len(fleet.clients), "shard_sampling", sampling, "resumed_steps", prior, "env", c.Env, "sampler", c.Sampler, "algo", c.Algo, "float32", c.Float32,
		"learner_workers", c.LearnerWorkers, "batch", c.Batch)
	done := make(chan struct{})
	var printer sync.WaitGroup
	var shardAttrs func() []any
	if shardStats != nil {
		// A fleet's records say how many shards the learner draws from and
		// how often they went down and came back (the actor hosts' records
		// carry the same keys for their side).
		shardAttrs = func() []any {
			st := shardStats.Snapshot()
			var downs, rejoins uint64
			for _, sh := range st.Shards {
				downs += sh.Downs
				rejoins += sh.Rejoins
			}
			return []any{"shards_live", liveShards(&st), "shard_downs", downs, "shard_rejoins", rejoins}
		}
	}
	printer.Go(func() { progress(host, log, nil, *progressEvery, done, shardAttrs) })
	res, err := host.Run(ctx)
	close(done)
	printer.Wait()
	// A pipelined stage's last write-back is answered here (its counts
	// are not in the learner's, which lag by that one write-back).
	if owed, serr := remote.Settle(m); serr != nil {
		log.Warn("write-backs", "settle", serr.Error())
	} else if *pipeline && len(fleet.clients) == 1 {
		cs := fleet.clients[0].Stats()
		log.Info("write-backs", "pipelined", true, "last_applied", owed.Applied, "last_stale", owed.Stale,
			"applied", cs.Applied, "stale", cs.Stale, "answered", cs.WriteBacks, "lost", cs.WriteBacksLost)
	}
	if shardStats != nil {
		st := shardStats.Snapshot()
		attrs := []any{"draws", st.Draws, "replans", st.Replans, "gate_waits", st.GateWaits, "gate_wait_s", round1(st.GateWait.Seconds()),
			"write_backs_applied", st.Applied, "write_backs_stale", st.Stale, "write_backs_dropped", st.Dropped}
		for i, sh := range st.Shards {
			attrs = append(attrs, fmt.Sprintf("shard%d", i), fmt.Sprintf("%s up=%t rows=%d downs=%d rejoins=%d dropped=%d refused=%d", sh.Target, sh.Up, sh.Rows, sh.Downs, sh.Rejoins, sh.Dropped, sh.Refused))
		}
		log.Info("shards", attrs...)
	}
	code := 0
	if res != nil {
		if werr := writeResults(*out, res); werr != nil {
			fmt.Fprintf(stderr, "apex learner: results: %v\n", werr)
			code = 1
		} else {
			log.Info("done", "stop_reason", res.StopReason, "final_return", round1(res.FinalReturn), "solved", res.StoppedByTarget,
				"seconds", round1(res.Seconds), "learner_steps", res.LearnerSteps, "updates_per_s", round1(res.UpdatesPerSec),
				"results", filepath.Join(*out, "results.json"), "checkpoint", c.Checkpoint)
		}
	}
	stopServing()
	serving.Wait()
	if serr := <-serveErr; serr != nil && !errors.Is(serr, context.Canceled) {
		fmt.Fprintf(stderr, "apex learner: params: %v\n", serr)
		code = 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "apex learner: %v\n", err)
		return 1
	}
	if code != 0 {
		return code
	}
	if sig := interrupted(); sig != nil {
		fmt.Fprintf(stderr, "apex learner: interrupted by %s: results written to %s\n", signalName(sig), *out)
	}
	return 0
}

// pollInserted stores the replay servers' count of inserted transitions
// (summed over a fleet's shards) in n once a second until ctx ends (a
// shard whose Info fails counts as its last answer).
func pollInserted(ctx context.Context, clients []*remote.Client, n *atomic.Int64) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := make([]uint64, len(clients))
	for {
		var sum uint64
		for i, c := range clients {
			if info, err := c.Info(ctx); err == nil {
				last[i] = 0
				for _, tab := range info.GetTables() {
					last[i] += tab.GetCounters().GetInsertedItems()
				}
			}
			sum += last[i]
		}
		n.Store(int64(sum))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// leaseFlag is -fleet-lease: a duration (0: the default lease), or a
// negative one or "off" for none (remote.ShardOptions.FleetLease < 0).
type leaseFlag struct{ d time.Duration }

func (f *leaseFlag) String() string {
	if f.d < 0 {
		return "off"
	}
	return f.d.String()
}

func (f *leaseFlag) Set(s string) error {
	if s == "off" {
		f.d = -1
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New(`want a duration (0: the default; negative or "off": no lease)`)
	}
	f.d = max(d, -1)
	return nil
}

// Get is the lease (negative: none).
func (f *leaseFlag) Get() any { return f.d }
