package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/runtime"
)

const replayUsage = `usage: apex replay [flags]

Serves a run's replay over gRPC (api/replay/v1): the buffer, the replay
method's whole stage (-sampler and its options) and the sample-to-insert
rate limiter. It is the run's configuration authority: start it with the
flags apex train takes for the run (environment, method, learner and actor
settings); apex learner and apex actor hosts connect to it, receive that
configuration and build their parts from it.

Listens on loopback by default; beyond loopback it needs -tls-cert,
-tls-key and -tls-ca (mutual TLS 1.3; apex certs makes them) or -insecure.
With -tokens, every call needs a bearer token of a role allowed to make it
(actor: insert, info; learner: those and sampling; admin: everything,
checkpoints and limiter changes included). Serves the standard gRPC health
service, and /metrics with -metrics-addr.

Checkpoints (the admin Checkpoint call, -checkpoint-every, the end) are
written while it serves: the buffer stripe by stripe, each stripe held
only while it is copied, into a temporary file renamed over replay.ckpt,
so a crash mid-checkpoint leaves the previous one; replay.ckpt.writers
beside it holds each actor writer's highest stored batch number, so
batches the actors resend after a restore are not stored again, and its
counts of stored items and batches (Info's writer table goes on from
them: apex loadtest counts acknowledged inserts lost with them).
-restore refuses a
checkpoint whose rate limiter configuration differs from the flags' unless
-limiter-from says which wins.

SIGINT or SIGTERM stops it gracefully: streams end, in-flight calls finish,
and with -checkpoint-dir a last checkpoint is written. Exit status 0 after
such a stop, 1 on a failure, 2 on a usage error (found before serving).

flags:
`

// noRatioErrorBuffer is the limiter's error buffer under -rate-limit=false:
// so wide that no run's balance reaches it, leaving -min-replay as the only
// hold on draws.
const noRatioErrorBuffer = 1e15

// runReplay is apex replay.
func runReplay(args []string, stdout, stderr io.Writer) int {
	def := runtime.DefaultTrainConfig()
	cfg := def
	fs := flag.NewFlagSet("apex replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addRunFlags(fs, &cfg)
	sf := addServeFlags(fs, "127.0.0.1:7700", "the replay service")
	ckDir := fs.String("checkpoint-dir", "", "folder for the replay's checkpoint (replay.ckpt: buffer, stage state, limiter balance), written on the admin Checkpoint call, every -checkpoint-every and at the end (empty: none)")
	ckEvery := fs.Duration("checkpoint-every", 0, "time between periodic checkpoints into -checkpoint-dir (0: only on request and at the end)")
	restore := fs.String("restore", "", "start from this replay checkpoint (one written by apex replay with the same run flags)")
	missingOK := fs.Bool("restore-missing-ok", false, "with -restore: a checkpoint file that does not exist yet starts an empty replay (logged) instead of being an error, so one command line serves a container's first start and its restarts (-restore=<checkpoint-dir>/replay.ckpt)")
	limiterFrom := fs.String("limiter-from", "", "with -restore, which rate limiter configuration wins where the checkpoint's (samples per insert, min size to sample, error buffer) differs from the one these flags give (-replay-ratio, -min-replay, -batch, -rate-limit): checkpoint or flags; empty: such a restore is refused, naming both")
	rateLimit := fs.Bool("rate-limit", true, "hold draws and inserts to -replay-ratio (Reverb's sample-to-insert ratio); false: only -min-replay holds draws back (load tests)")
	obs := addObsFlags(fs, true)
	methodOpts, err := methodFlags(fs)
	if err != nil {
		fmt.Fprintf(stderr, "apex replay: %v\n", err)
		return 2
	}
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), replayUsage)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	log, err := obs.logger(stdout)
	if err != nil {
		fmt.Fprintf(stderr, "apex replay: %v\n", err)
		return 2
	}
	usageErr := func(err error) int {
		fmt.Fprintf(stderr, "apex replay: %v\n", err)
		return 2
	}
	if err := checkRunFlags(fs, &cfg, methodOpts); err != nil {
		return usageErr(err)
	}
	if err := checkCounts(fs, []string{"checkpoint-every"}); err != nil {
		return usageErr(err)
	}
	if err := sf.check(log); err != nil {
		return usageErr(err)
	}
	if *ckDir != "" {
		if err := os.MkdirAll(*ckDir, 0o755); err != nil {
			return usageErr(fmt.Errorf("-checkpoint-dir: %w", err))
		}
		if err := checkWritableDir(*ckDir); err != nil {
			return usageErr(fmt.Errorf("-checkpoint-dir: %w", err))
		}
	} else if *ckEvery > 0 {
		return usageErr(errors.New("-checkpoint-every needs -checkpoint-dir"))
	}
	switch {
	case *limiterFrom != "" && *restore == "":
		return usageErr(errors.New("-limiter-from needs -restore"))
	case *limiterFrom != "" && *limiterFrom != runtime.LimiterFromCheckpoint && *limiterFrom != runtime.LimiterFromFlags:
		return usageErr(fmt.Errorf("-limiter-from=%s: want %s or %s", *limiterFrom, runtime.LimiterFromCheckpoint, runtime.LimiterFromFlags))
	}
	limCfg, err := runtime.LimiterConfigOf(cfg)
	if err != nil {
		return usageErr(err)
	}
	if !*rateLimit {
		limCfg.SamplesPerInsert, limCfg.ErrorBuffer = 1, noRatioErrorBuffer
	}
	if *missingOK && *restore == "" {
		return usageErr(errors.New("-restore-missing-ok needs -restore"))
	}
	var core *runtime.ReplayCore
	var ckpt *os.File
	var writers *remote.WriterTable // the writer table beside the checkpoint
	if *restore != "" {
		ckpt, err = os.Open(*restore)
		if errors.Is(err, os.ErrNotExist) && *missingOK {
			log.Info("restore", "note", "no checkpoint yet: starting empty (-restore-missing-ok)", "path", *restore)
		} else if err != nil {
			return usageErr(fmt.Errorf("-restore: %w", err))
		}
	}
	if ckpt != nil {
		f := ckpt
		core, err = runtime.LoadReplayCoreWith(cfg, f, runtime.RestoreOptions{Limiter: &limCfg, LimiterFrom: *limiterFrom})
		f.Close()
		if err != nil {
			return usageErr(fmt.Errorf("-restore %s: %w", *restore, err))
		}
		for _, n := range core.RestoreNotes() {
			log.Warn("restore", "note", n)
		}
		if writers, err = remote.ReadWriterTable(*restore); err != nil {
			return usageErr(fmt.Errorf("-restore %s: %w", *restore, err))
		}
		if writers != nil && writers.Skipped > 0 {
			log.Warn("restore", "writers_skipped", writers.Skipped, "note", "the version-1 writer table has entries whose ids are empty or over "+fmt.Sprint(remote.MaxWriterName)+" bytes, which no writer can send under: dropped")
		}
		switch {
		case writers == nil:
			log.Warn("restore", "note", "no writer table beside the checkpoint ("+remote.WriterTableFile(*restore)+"): batches the actors resend that it holds are stored again, and the writers' stored counts start at zero (partial)")
			writers = &remote.WriterTable{CountsPartial: true}
		case writers.CountsPartial:
			log.Info("restore", "writers", len(writers.Writers), "note", "the writer table has no stored counts (version 1, or restored from one): the writers' counts are partial")
		default:
			log.Info("restore", "writers", len(writers.Writers))
		}
	} else {
		if core, err = runtime.NewReplayCore(cfg); err != nil {
			return usageErr(err)
		}
		if err := core.Limiter().SetConfig(limCfg); err != nil {
			return usageErr(fmt.Errorf("-rate-limit=false: %w", err))
		}
	}
	for _, w := range core.Warnings() {
		log.Warn("replay method", "warning", w)
	}
	js, err := core.ConfigJSON()
	if err != nil {
		fmt.Fprintf(stderr, "apex replay: %v\n", err)
		return 1
	}
	srv, err := remote.NewServer(remote.Table{Buffer: core.Buffer(), Method: core.Method(), Limiter: core.Limiter(),
		Config: js, Save: core.SaveStriped, CheckpointDir: *ckDir, CheckpointFile: "replay.ckpt"}, remote.ServerOptions{Version: version, Writers: writers})
	if err != nil {
		fmt.Fprintf(stderr, "apex replay: %v\n", err)
		return 1
	}
	gopts, err := sf.grpcOptions(remote.ReplayPolicy())
	if err != nil {
		return usageErr(err)
	}
	g, err := remote.NewGRPCServer(srv, gopts)
	if err != nil {
		fmt.Fprintf(stderr, "apex replay: %v\n", err)
		return 1
	}
	metrics, err := obs.startMetrics(func() (*prometheus.Registry, error) {
		return newStatsRegistry(newStatsCollector(srv.Stats, replayMetrics))
	}, log)
	if err != nil {
		fmt.Fprintf(stderr, "apex replay: %v\n", err)
		return 1
	}
	if metrics != nil {
		defer metrics.Close(metricsShutdownTimeout)
	}
	ctx, _, stop := watchSignals(func(s os.Signal) {
		log.Info("stopping", "signal", signalName(s))
	}, func(s os.Signal) {
		fmt.Fprintf(stderr, "apex replay: second signal (%s): exiting now\n", signalName(s))
	})
	defer stop()
	c := core.Config()
	lc := core.Limiter().Config()
	log.Info("replay", "env", c.Env, "sampler", c.Sampler, "algo", c.Algo, "capacity", c.Capacity, "incarnation", srv.Incarnation(), "lineage", fmt.Sprintf("%016x", srv.Lineage()),
		"restored", ckpt != nil, "rate_limit", *rateLimit, "samples_per_insert", lc.SamplesPerInsert,
		"min_size_to_sample", lc.MinSizeToSample, "error_buffer", lc.ErrorBuffer, "items", core.Buffer().Size())
	if *ckEvery > 0 {
		go periodicCheckpoints(ctx, srv, *ckEvery, log)
	}
	err = sf.serve(ctx, g, log, "replay")
	code := 0
	if err != nil {
		fmt.Fprintf(stderr, "apex replay: %v\n", err)
		code = 1
	}
	if *ckDir != "" {
		if rep, cerr := checkpointNow(srv); cerr != nil {
			fmt.Fprintf(stderr, "apex replay: final checkpoint: %v\n", cerr)
			code = 1
		} else {
			log.Info("checkpoint", "path", rep.Path, "bytes", rep.Bytes, "items", rep.Items)
		}
	}
	st := srv.Stats()
	log.Info("done", "inserted_items", st.InsertedItems, "sampled_items", st.SampledItems, "write_backs", st.WriteBacksApplied,
		"stale", st.WriteBacksStale, "wrong_incarnation", st.WriteBacksWrongIncarnation, "rejected", st.RejectedMessages)
	return code
}

// checkpointNow writes the server's checkpoint (the Checkpoint call's
// work, from inside the process), bounded by a minute.
func checkpointNow(srv *remote.Server) (*replayv1.CheckpointReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return srv.Checkpoint(ctx, &replayv1.CheckpointRequest{})
}

// periodicCheckpoints checkpoints srv every d until ctx ends; a failure is
// logged and retried at the next tick (the previous checkpoint stays).
func periodicCheckpoints(ctx context.Context, srv *remote.Server, d time.Duration, log *slog.Logger) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if rep, err := checkpointNow(srv); err != nil {
				log.Error("checkpoint", "err", err)
			} else {
				log.Info("checkpoint", "path", filepath.Base(rep.Path), "bytes", rep.Bytes, "items", rep.Items)
			}
		}
	}
}
