package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/remote/auth"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
)

// This file is the only place apex imports Prometheus (style.md §12): the
// core packages expose Stats() snapshots, and trainCollector turns one
// runtime.TrainStats snapshot into const metrics on every scrape.
//
// Why a custom Collector rather than one CounterFunc/GaugeFunc per metric:
// each Func would call Trainer.Stats() on its own (some 35 calls a scrape,
// each summing over every actor and every buffer stripe), and the values of
// one scrape would come from different instants (samples could exceed
// inserts, the learner step count could disagree with the loss). Collect
// takes one snapshot and emits every metric from it, so a scrape is one
// consistent view at the cost of one Stats() call.

// metricsShutdownTimeout bounds how long the end of training waits for
// in-flight scrapes and profiles before closing their connections.
const metricsShutdownTimeout = 5 * time.Second

// metricKind is a metric's Prometheus type.
type metricKind int

const (
	counter metricKind = iota
	gauge
)

// trainMetric is one metric read from a TrainStats snapshot.
type trainMetric struct {
	name, help string
	kind       metricKind
	value      func(*runtime.TrainStats) float64
}

// behaviourMetrics are the ReF-ER controller's metrics (LearnerStats'
// far fraction, beta and KL), emitted only for runs whose replay method
// replays through the recorded behaviour (sampler.Needs.Behaviour).
var behaviourMetrics = []trainMetric{
	{"apex_refer_far_fraction", "ReF-ER: share of the stored steps whose importance ratio is outside (1/c_max, c_max).", gauge,
		func(s *runtime.TrainStats) float64 { return s.Learner.FarFraction }},
	{"apex_refer_beta", "ReF-ER: the penalty coefficient beta (the policy gradient's weight; the KL's is 1 - beta).", gauge,
		func(s *runtime.TrainStats) float64 { return s.Learner.Beta }},
	{"apex_refer_kl", "ReF-ER: mean KL(mu||pi) of the last learner batch.", gauge,
		func(s *runtime.TrainStats) float64 { return s.Learner.MeanKL }},
}

// methodMetrics are the metrics of a run's replay method: the ReF-ER
// controller's if it needs the behaviour, then one per Stat its Spec
// declares (apex_<stat name>, read from LearnerStats.Method).
func methodMetrics(spec sampler.Spec) []trainMetric {
	var out []trainMetric
	if spec.Needs.Behaviour {
		out = append(out, behaviourMetrics...)
	}
	for _, st := range spec.Stats {
		kind := gauge
		if st.Counter {
			kind = counter
		}
		out = append(out, trainMetric{"apex_" + st.Name, st.Help, kind,
			func(s *runtime.TrainStats) float64 { return s.Learner.Method[st.Name] }})
	}
	return out
}

// trainMetrics lists every metric trainCollector emits, named
// apex_<subsystem>_<name>_<unit> with base units; counters end in _total.
var trainMetrics = []trainMetric{
	{"apex_train_elapsed_seconds", "Wall time since the training run started.", gauge,
		func(s *runtime.TrainStats) float64 { return s.Seconds }},

	{"apex_actor_env_steps_total", "Environment steps taken by all actors.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.EnvSteps) }},
	{"apex_actor_episodes_total", "Episodes finished by all actors.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Episodes) }},

	{"apex_learner_steps_total", "Completed learner steps (gradient updates).", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.LearnerSteps) }},
	{"apex_learner_loss", "Weighted loss of the last learner step.", gauge,
		func(s *runtime.TrainStats) float64 { return s.Learner.Loss }},
	{"apex_learner_td_error_abs", "Mean absolute TD error of the last learner batch.", gauge,
		func(s *runtime.TrainStats) float64 { return s.Learner.MeanAbsTD }},
	{"apex_learner_q_value", "Mean Q(s, a) of the last learner batch, before the update.", gauge,
		func(s *runtime.TrainStats) float64 { return s.Learner.MeanQ }},
	{"apex_learner_grad_norm", "L2 norm of the last learner step's gradient, before clipping.", gauge,
		func(s *runtime.TrainStats) float64 { return s.Learner.GradNorm }},
	{"apex_learner_write_backs_total", "Priorities written back by the learner and applied.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Learner.WriteBacks) }},
	{"apex_learner_stale_write_backs_total", "Priority write-backs dropped because the slot had been overwritten since it was sampled.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Learner.StaleWriteBacks) }},
	{"apex_learner_publishes_total", "Parameter snapshots published to the actors.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Learner.Publishes) }},
	{"apex_learner_target_updates_total", "Target network updates (hard copies or Polyak steps).", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Learner.TargetUpdates) }},
	{"apex_learner_actor_loss", "TD3's last policy loss, -mean Q1(s, pi(s)); SAC's, mean alpha log pi(a|s) - min Q(s, a) (0 for DQN).", gauge,
		func(s *runtime.TrainStats) float64 { return s.Learner.ActorLoss }},
	{"apex_learner_actor_updates_total", "TD3's delayed policy updates, SAC's policy updates (0 for DQN).", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Learner.ActorUpdates) }},
	{"apex_learner_entropy", "SAC's policy entropy estimate, -mean log pi(a|s) of the last batch, in nats of the [-1, 1] action (0 for other learners).", gauge,
		func(s *runtime.TrainStats) float64 { return s.Learner.Entropy }},
	{"apex_learner_alpha", "SAC's temperature alpha (0 for other learners).", gauge,
		func(s *runtime.TrainStats) float64 { return s.Learner.Alpha }},
	{"apex_learner_step_seconds_total", "Time spent in completed learner steps.", counter,
		func(s *runtime.TrainStats) float64 { return s.Learner.Timing.Steps.Seconds() }},
	{"apex_learner_sample_seconds_total", "Time learner steps spent in the replay method's sampling (and importance weights).", counter,
		func(s *runtime.TrainStats) float64 { return s.Learner.Timing.Sample.Seconds() }},
	{"apex_learner_write_back_seconds_total", "Time learner steps spent writing priorities back.", counter,
		func(s *runtime.TrainStats) float64 { return s.Learner.Timing.WriteBack.Seconds() }},

	{"apex_replay_size", "Items stored in the replay buffer.", gauge,
		func(s *runtime.TrainStats) float64 { return float64(s.Buffer.Size) }},
	{"apex_replay_capacity", "Replay buffer capacity in items.", gauge,
		func(s *runtime.TrainStats) float64 { return float64(s.Buffer.Capacity) }},
	{"apex_replay_inserts_total", "Items inserted into the replay buffer.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Buffer.Inserts) }},
	{"apex_replay_samples_total", "Items returned by replay sampling.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Buffer.Samples) }},
	{"apex_replay_priority_updates_total", "Priority updates applied to the replay buffer.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Buffer.Updates) }},
	{"apex_replay_stale_updates_total", "Priority updates dropped because the slot had been overwritten since it was sampled.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Buffer.StaleUpdates) }},
	{"apex_replay_stale_reads_total", "Reads by reference dropped because the slot had been overwritten since it was sampled.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Buffer.StaleReads) }},
	{"apex_replay_torn_reads_total", "Sampled items re-drawn because the slot was overwritten while being copied.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Buffer.TornReads) }},
	{"apex_replay_priorities_clamped_total", "Priorities above the maximum stored as the maximum.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Buffer.PrioritiesClamped) }},
	{"apex_replay_stratum_fallbacks_total", "Sampled rows drawn over the whole priority mass instead of their stratum.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Buffer.StratumFallbacks) }},
	{"apex_replay_priority_mass", "Sum of the stored priorities (the sum trees' total).", gauge,
		func(s *runtime.TrainStats) float64 { return s.Buffer.TotalPriority }},
	{"apex_replay_priority_max", "Largest stored priority.", gauge,
		func(s *runtime.TrainStats) float64 { return s.Buffer.MaxPriority }},
	{"apex_replay_priority_min", "Smallest non-zero stored priority (0 if none).", gauge,
		func(s *runtime.TrainStats) float64 { return s.Buffer.MinPriority }},

	{"apex_pipeline_batches_total", "Actor batches stored in the replay buffer by the inserter.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Pipeline.Batches) }},
	{"apex_pipeline_items_total", "Items stored in the replay buffer by the inserter.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Pipeline.Items) }},
	{"apex_pipeline_discarded_total", "Items produced by actors but not handed over when the run stopped.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Pipeline.Discarded) }},

	{"apex_ratelimiter_inserted_total", "Items admitted for insertion by the rate limiter.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Limiter.Inserted) }},
	{"apex_ratelimiter_sampled_total", "Items admitted for sampling by the rate limiter.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Limiter.Sampled) }},
	{"apex_ratelimiter_insert_waits_total", "Insert calls that had to wait for the rate limiter.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Limiter.InsertWaits) }},
	{"apex_ratelimiter_sample_waits_total", "Sample calls that had to wait for the rate limiter.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Limiter.SampleWaits) }},
	{"apex_ratelimiter_insert_wait_seconds_total", "Time insert calls waited for the rate limiter.", counter,
		func(s *runtime.TrainStats) float64 { return s.Limiter.InsertWait.Seconds() }},
	{"apex_ratelimiter_sample_wait_seconds_total", "Time sample calls waited for the rate limiter.", counter,
		func(s *runtime.TrainStats) float64 { return s.Limiter.SampleWait.Seconds() }},
	{"apex_ratelimiter_timeouts_total", "Rate limiter calls that gave up with a timeout.", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Limiter.Timeouts) }},

	{"apex_checkpoint_saves_total", "Checkpoints the run wrote (periodic and final).", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Checkpoints.Saved) }},
	{"apex_checkpoint_failures_total", "Checkpoints that could not be written (the run goes on).", counter,
		func(s *runtime.TrainStats) float64 { return float64(s.Checkpoints.Failed) }},
	{"apex_checkpoint_last_duration_seconds", "How long the last written checkpoint took (the inserter and the learner waited that long).", gauge,
		func(s *runtime.TrainStats) float64 { return s.Checkpoints.LastSeconds }},
	{"apex_checkpoint_last_size_bytes", "Size of the last written checkpoint.", gauge,
		func(s *runtime.TrainStats) float64 { return float64(s.Checkpoints.LastBytes) }},
}

// trainCollector is a prometheus.Collector over a TrainStats source: each
// Collect takes one snapshot and emits every metric from it as a const
// metric.
type trainCollector struct {
	stats    func() runtime.TrainStats
	metrics  []trainMetric // trainMetrics, then the run's method's (methodMetrics)
	descs    []*prometheus.Desc
	info     *prometheus.Desc
	infoVals []string
	eval     *prometheus.Desc
}

// newTrainCollector returns a collector over stats for a run configured
// by cfg (its environment, sampler and actor count label apex_train_info).
func newTrainCollector(stats func() runtime.TrainStats, cfg runtime.TrainConfig) *trainCollector {
	spec, _ := sampler.Lookup(cfg.Sampler) // an unknown method has no metrics of its own
	c := &trainCollector{stats: stats, metrics: append(slices.Clip(trainMetrics), methodMetrics(spec)...),
		info: prometheus.NewDesc("apex_train_info", "The training run's configuration (value 1).",
			[]string{"env", "sampler", "actors"}, nil),
		infoVals: []string{cfg.Env, cfg.Sampler, strconv.Itoa(cfg.Actors)},
		eval: prometheus.NewDesc("apex_eval_return",
			"Mean return of the last greedy evaluation (absent until the first one).", nil, nil),
	}
	for _, m := range c.metrics {
		c.descs = append(c.descs, prometheus.NewDesc(m.name, m.help, nil, nil))
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *trainCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.info
	ch <- c.eval
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one Stats() call per scrape.
func (c *trainCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, c.infoVals...)
	if st.Evaluated {
		ch <- prometheus.MustNewConstMetric(c.eval, prometheus.GaugeValue, st.LastEval)
	}
	emit := func(d *prometheus.Desc, m trainMetric) {
		vt := prometheus.GaugeValue
		if m.kind == counter {
			vt = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(d, vt, m.value(&st))
	}
	for i, m := range c.metrics {
		emit(c.descs[i], m)
	}
}

// newMetricsRegistry returns a private registry (never the global one)
// holding the Go runtime and process collectors and a trainCollector over
// stats.
func newMetricsRegistry(stats func() runtime.TrainStats, cfg runtime.TrainConfig) (*prometheus.Registry, error) {
	return newStatsRegistry(newTrainCollector(stats, cfg))
}

// metricsHandler serves /metrics from reg and net/http/pprof under
// /debug/pprof/.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// checkMetricsAddr validates a -metrics-addr value: host:port with a
// loopback host (localhost or a loopback IP literal) unless allowRemote.
// An empty host (":9090", every interface) is not loopback.
func checkMetricsAddr(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("invalid -metrics-addr %q: %v (want host:port, e.g. 127.0.0.1:9090)", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("invalid -metrics-addr %q: bad port %q", addr, port)
	}
	if allowRemote || auth.IsLoopback(host) {
		return nil
	}
	return fmt.Errorf("-metrics-addr %q is not a loopback address: /metrics and pprof would be reachable from the network; "+
		"use 127.0.0.1:PORT, [::1]:PORT or localhost:PORT, or pass -metrics-allow-remote to serve on it anyway", addr)
}

// isLoopback reports whether the listen address addr (host:port) is on a
// loopback interface only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && auth.IsLoopback(host)
}

// metricsServer serves metricsHandler on one listener until Close.
type metricsServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan error // Serve's result

	closeOnce sync.Once
	closeErr  error
}

// startMetricsServer listens on addr (already checked by checkMetricsAddr)
// and serves /metrics from reg, and pprof, in a goroutine that Close ends.
func startMetricsServer(addr string, reg *prometheus.Registry) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	// No WriteTimeout: /debug/pprof/profile and /trace stream for their
	// ?seconds= (30 s by default) and refuse to run past a WriteTimeout.
	m := &metricsServer{srv: &http.Server{Handler: metricsHandler(reg), ReadHeaderTimeout: 10 * time.Second},
		ln: ln, done: make(chan error, 1)}
	go func() { m.done <- m.srv.Serve(ln) }()
	return m, nil
}

// Addr is the address the server listens on (the port resolved when addr
// asked for port 0).
func (m *metricsServer) Addr() string { return m.ln.Addr().String() }

// Close shuts the server down: it stops accepting, waits up to timeout for
// in-flight requests, then closes what is left, and returns once the serve
// goroutine has ended. Idempotent: later calls return the first's result.
func (m *metricsServer) Close(timeout time.Duration) error {
	m.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err := m.srv.Shutdown(ctx)
		if err != nil {
			err = errors.Join(fmt.Errorf("metrics: shutdown: %w", err), m.srv.Close())
		}
		if serr := <-m.done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, fmt.Errorf("metrics: serve: %w", serr))
		}
		m.closeErr = err
	})
	return m.closeErr
}

// statMetric is one metric read from a snapshot of type S.
type statMetric[S any] struct {
	name, help string
	kind       metricKind
	value      func(*S) float64
}

// statsCollector turns one snapshot of S per scrape into const metrics
// (the servers' collectors; trainCollector adds the run's info and
// evaluation to the same pattern).
type statsCollector[S any] struct {
	stats   func() S
	metrics []statMetric[S]
	descs   []*prometheus.Desc
}

func newStatsCollector[S any](stats func() S, metrics []statMetric[S]) *statsCollector[S] {
	c := &statsCollector[S]{stats: stats, metrics: metrics}
	for _, m := range metrics {
		c.descs = append(c.descs, prometheus.NewDesc(m.name, m.help, nil, nil))
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *statsCollector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one snapshot per scrape.
func (c *statsCollector[S]) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	for i, m := range c.metrics {
		vt := prometheus.GaugeValue
		if m.kind == counter {
			vt = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(c.descs[i], vt, m.value(&st))
	}
}

// newStatsRegistry returns a private registry with the Go runtime and
// process collectors and cs.
func newStatsRegistry(cs ...prometheus.Collector) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	for _, c := range append([]prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}, cs...) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// replayMetrics are apex replay's metrics, from remote.ServerStats.
var replayMetrics = []statMetric[remote.ServerStats]{
	{"apex_replay_inserted_items_total", "Transitions stored.", counter, func(s *remote.ServerStats) float64 { return float64(s.InsertedItems) }},
	{"apex_replay_inserted_batches_total", "Insert batches stored.", counter, func(s *remote.ServerStats) float64 { return float64(s.InsertedBatches) }},
	{"apex_replay_duplicate_batches_total", "Insert batches acknowledged as resends, not stored again.", counter, func(s *remote.ServerStats) float64 { return float64(s.DuplicateBatches) }},
	{"apex_replay_draws_total", "Sample draws served.", counter, func(s *remote.ServerStats) float64 { return float64(s.Draws) }},
	{"apex_replay_sampled_items_total", "Transitions sampled.", counter, func(s *remote.ServerStats) float64 { return float64(s.SampledItems) }},
	{"apex_replay_write_backs_total", "Priority write-backs applied.", counter, func(s *remote.ServerStats) float64 { return float64(s.WriteBacksApplied) }},
	{"apex_replay_write_backs_stale_total", "Write-backs dropped: the slot was overwritten since the draw.", counter, func(s *remote.ServerStats) float64 { return float64(s.WriteBacksStale) }},
	{"apex_replay_write_backs_wrong_incarnation_total", "Write-backs dropped: drawn from an earlier incarnation of the server.", counter, func(s *remote.ServerStats) float64 { return float64(s.WriteBacksWrongIncarnation) }},
	{"apex_replay_rejected_messages_total", "Requests refused (bad input, unknown table, missing deadline, ...).", counter, func(s *remote.ServerStats) float64 { return float64(s.RejectedMessages) }},
	{"apex_replay_checkpoints_total", "Checkpoints written.", counter, func(s *remote.ServerStats) float64 { return float64(s.Checkpoints) }},
	{"apex_replay_episode_subscriptions_total", "ReF-ER episode feeds subscribed (a learner following the stage's episodes; more than one: resyncs).", counter, func(s *remote.ServerStats) float64 { return float64(s.EpisodeSubscriptions) }},
	{"apex_replay_episode_feeds_lost_total", "ReF-ER episode feeds lost: taken over by another stream or fallen behind.", counter, func(s *remote.ServerStats) float64 { return float64(s.EpisodeFeedsLost) }},
	{"apex_replay_size", "Transitions stored now.", gauge, func(s *remote.ServerStats) float64 { return float64(s.Size) }},
	{"apex_replay_writers", "Writers in the idempotency table.", gauge, func(s *remote.ServerStats) float64 { return float64(s.Writers) }},
	{"apex_replay_insert_streams", "Open insert streams.", gauge, func(s *remote.ServerStats) float64 { return float64(s.InsertStreams) }},
	{"apex_replay_sample_streams", "Open sample streams.", gauge, func(s *remote.ServerStats) float64 { return float64(s.SampleStreams) }},
	{"apex_replay_inserts_waiting", "Insert batches held by the rate limiter now.", gauge, func(s *remote.ServerStats) float64 { return float64(s.InsertsWaiting) }},
	{"apex_replay_draws_waiting", "Draws held by the rate limiter now.", gauge, func(s *remote.ServerStats) float64 { return float64(s.DrawsWaiting) }},
	{"apex_replay_incarnation", "The server's incarnation (new at every start; write-backs of another are dropped).", gauge, func(s *remote.ServerStats) float64 { return float64(s.Incarnation) }},
	{"apex_replay_writers_evicted_total", "Idle writers a full idempotency table forgot.", counter, func(s *remote.ServerStats) float64 { return float64(s.WritersEvicted) }},
	{"apex_replay_watch_streams", "Open Watch streams.", gauge, func(s *remote.ServerStats) float64 { return float64(s.WatchStreams) }},
	{"apex_replay_fleet_stale_inserts_total", "Insert batches a fleet shard's limiter admitted on stale fleet counts (the learner's lease on them passed).", counter, func(s *remote.ServerStats) float64 { return float64(s.StaleFleetInserts) }},
	{"apex_replay_fleet_stale_inserted_items_total", "Transitions a fleet shard's limiter admitted on stale fleet counts (while its balance is within its capacity past the ratio; only the learner's samples give that room back).", counter, func(s *remote.ServerStats) float64 { return float64(s.StaleFleetItems) }},
}

// actorSnapshot is what apex actor's /metrics reads in one scrape: the
// host's actors, its insert writer and its parameter subscription. The
// host and the writer are zero until the first parameters arrived (they
// are made then).
type actorSnapshot struct {
	Host runtime.ActorHostStats
	// Writer is the insert writer's counters (a fleet's summed over its
	// shards: remote.ShardedWriterStats.Sum), Shards the fleet's own.
	Writer remote.WriterStats
	Shards actorShards
	Params remote.SubscriberStats
	// ParamsAge is the time since the newest parameter version arrived
	// (0 before the first).
	ParamsAge time.Duration
}

// actorShards are an actor host's replay shards: how many, how many live,
// the batches waiting for a live one, their deaths, rejoins and probes,
// and the moved messages split by episode (one live shard and zero
// counters for a single replay server).
type actorShards struct {
	Shards, Live, Orphans       int
	Deaths, Rejoins             uint64
	Probes, ProbeFailures       uint64
	ConnectionResets            uint64
	Splits                      uint64
	SwapRefusals, LineageResets uint64
}

// fleetWriterStats is a ShardedWriter's snapshot as apex actor's metrics
// read it: the shards' writer counters summed (ShardedWriterStats.Sum),
// except Batches and Items, which are Insert's (the shards' sum counts
// each adopted batch again), so that Batches == Acked + Pending + Lost
// holds for the host as for one Writer; and the fleet's own counters.
func fleetWriterStats(st remote.ShardedWriterStats) (remote.WriterStats, actorShards) {
	ws := st.Sum()
	ws.Batches, ws.Items = st.Batches, st.Items
	sh := actorShards{Shards: len(st.Shards), Live: st.Live, Orphans: st.Orphans, Splits: st.Splits}
	for _, s := range st.Shards {
		sh.Deaths += s.Deaths
		sh.Rejoins += s.Rejoins
		sh.Probes += s.Probes
		sh.ProbeFailures += s.ProbeFailures
		sh.ConnectionResets += s.ConnectionResets
		sh.SwapRefusals += s.SwapRefusals
		sh.LineageResets += s.LineageResets
	}
	return ws, sh
}

// actorMetrics are apex actor's metrics, from one actorSnapshot.
var actorMetrics = []statMetric[actorSnapshot]{
	{"apex_actor_env_steps_total", "Environment steps taken by this host's actors.", counter, func(s *actorSnapshot) float64 { return float64(s.Host.EnvSteps) }},
	{"apex_actor_episodes_total", "Episodes finished by this host's actors.", counter, func(s *actorSnapshot) float64 { return float64(s.Host.Episodes) }},
	{"apex_actor_batches_total", "Actor batches handed to the insert writer.", counter, func(s *actorSnapshot) float64 { return float64(s.Host.Pipeline.Batches) }},
	{"apex_actor_items_total", "Transitions handed to the insert writer.", counter, func(s *actorSnapshot) float64 { return float64(s.Host.Pipeline.Items) }},
	{"apex_actor_discarded_total", "Transitions produced but not handed to the writer when the host stopped.", counter, func(s *actorSnapshot) float64 { return float64(s.Host.Pipeline.Discarded) }},
	{"apex_actor_writer_batches_total", "Insert batches the writer took (after splitting to the message limit; a fleet's by episode too).", counter, func(s *actorSnapshot) float64 { return float64(s.Writer.Batches) }},
	{"apex_actor_writer_items_total", "Transitions in the insert batches the writer took.", counter, func(s *actorSnapshot) float64 { return float64(s.Writer.Items) }},
	{"apex_actor_writer_acked_batches_total", "Insert batches the replay server acknowledged.", counter, func(s *actorSnapshot) float64 { return float64(s.Writer.Acked) }},
	{"apex_actor_writer_acked_items_total", "Transitions the replay server acknowledged.", counter, func(s *actorSnapshot) float64 { return float64(s.Writer.AckedItems) }},
	{"apex_actor_writer_duplicate_batches_total", "Acknowledgements of batches the server had stored before (a resend after a break).", counter, func(s *actorSnapshot) float64 { return float64(s.Writer.Duplicates) }},
	{"apex_actor_writer_resent_batches_total", "Insert batches sent again on a re-opened stream.", counter, func(s *actorSnapshot) float64 { return float64(s.Writer.Resent) }},
	{"apex_actor_writer_reconnects_total", "Insert streams re-opened after a break.", counter, func(s *actorSnapshot) float64 { return float64(s.Writer.Reconnects) }},
	{"apex_actor_writer_errors_total", "Insert stream errors that broke a stream.", counter, func(s *actorSnapshot) float64 { return float64(s.Writer.Errors) }},
	{"apex_actor_writer_lost_batches_total", "Insert batches abandoned unacknowledged (the writer gave up, or a stop's grace ran out).", counter, func(s *actorSnapshot) float64 { return float64(s.Writer.Lost) }},
	{"apex_actor_writer_lost_items_total", "Transitions abandoned unacknowledged.", counter, func(s *actorSnapshot) float64 { return float64(s.Writer.LostItems) }},
	{"apex_actor_writer_blocked_batches_total", "Insert batches that waited for window space (backpressure from the server).", counter, func(s *actorSnapshot) float64 { return float64(s.Writer.Blocked) }},
	{"apex_actor_writer_in_flight_batches", "Insert batches sent or queued and not yet acknowledged.", gauge, func(s *actorSnapshot) float64 { return float64(s.Writer.Pending) }},
	{"apex_actor_writer_replay_incarnation", "The replay server incarnation of the latest acknowledgement (0 before the first).", gauge, func(s *actorSnapshot) float64 { return float64(s.Writer.Incarnation) }},
	{"apex_actor_writer_replay_incarnations_total", "Replay server incarnation changes the writer saw after its first acknowledgement (server restarts).", counter, func(s *actorSnapshot) float64 { return float64(s.Writer.Incarnations) }},
	{"apex_actor_writer_replay_shards", "Replay shards the writer inserts into (1: a single replay server).", gauge, func(s *actorSnapshot) float64 { return float64(s.Shards.Shards) }},
	{"apex_actor_writer_replay_shards_live", "Replay shards taking inserts now (the others are dead and probed).", gauge, func(s *actorSnapshot) float64 { return float64(s.Shards.Live) }},
	{"apex_actor_writer_shard_deaths_total", "Replay shards marked dead (stream error or silence, then a failed probe).", counter, func(s *actorSnapshot) float64 { return float64(s.Shards.Deaths) }},
	{"apex_actor_writer_shard_rejoins_total", "Dead replay shards that answered a probe and took inserts again.", counter, func(s *actorSnapshot) float64 { return float64(s.Shards.Rejoins) }},
	{"apex_actor_writer_moved_batches_total", "Unacknowledged insert batches moved off a dead shard to the live ones.", counter, func(s *actorSnapshot) float64 { return float64(s.Writer.Moved) }},
	{"apex_actor_writer_adopted_batches_total", "Insert batches the live shards took over from dead ones (a moved batch split by episode counts each piece).", counter, func(s *actorSnapshot) float64 { return float64(s.Writer.Adopted) }},
	{"apex_actor_writer_split_batches_total", "Insert batches moved off a dead shard that were split by episode to be placed again.", counter, func(s *actorSnapshot) float64 { return float64(s.Shards.Splits) }},
	{"apex_actor_writer_orphan_batches", "Insert batches taken off dead shards while none was alive, waiting for one to rejoin.", gauge, func(s *actorSnapshot) float64 { return float64(s.Shards.Orphans) }},
	{"apex_actor_writer_shard_probes_total", "Info calls that checked a replay shard (a suspect or dead one).", counter, func(s *actorSnapshot) float64 { return float64(s.Shards.Probes) }},
	{"apex_actor_writer_shard_probe_failures_total", "Probes of a replay shard that failed.", counter, func(s *actorSnapshot) float64 { return float64(s.Shards.ProbeFailures) }},
	{"apex_actor_writer_shard_connection_resets_total", "Connections to a replay shard ended after a probe got no answer within its timeout (the next probe dials a new one).", counter, func(s *actorSnapshot) float64 { return float64(s.Shards.ConnectionResets) }},
	{"apex_actor_writer_shard_swap_refusals_total", "Probes of a replay shard refused because the server reached reported another shard's data lineage (addresses swapped): the shard stays dead.", counter, func(s *actorSnapshot) float64 { return float64(s.Shards.SwapRefusals) }},
	{"apex_actor_writer_shard_lineage_resets_total", "Replay shards that came back with a data lineage never seen (restarted without their checkpoint: their data was lost).", counter, func(s *actorSnapshot) float64 { return float64(s.Shards.LineageResets) }},
	{"apex_actor_params_version", "The newest parameter version the actors act with (the learner's update count; 0 before the first).", gauge, func(s *actorSnapshot) float64 { return float64(s.Params.Version) }},
	{"apex_actor_params_age_seconds", "Time since the newest parameter version arrived from the learner (0 before the first): how stale the actors' policy is.", gauge, func(s *actorSnapshot) float64 { return s.ParamsAge.Seconds() }},
	{"apex_actor_params_versions_total", "Parameter versions received and published to the actors.", counter, func(s *actorSnapshot) float64 { return float64(s.Params.Versions) }},
	{"apex_actor_params_chunks_total", "Parameter chunks received.", counter, func(s *actorSnapshot) float64 { return float64(s.Params.Chunks) }},
	{"apex_actor_params_discarded_total", "Partial parameter versions dropped because a newer one began.", counter, func(s *actorSnapshot) float64 { return float64(s.Params.Discarded) }},
	{"apex_actor_params_reconnects_total", "Parameter streams re-opened after a break.", counter, func(s *actorSnapshot) float64 { return float64(s.Params.Reconnects) }},
	{"apex_actor_params_errors_total", "Parameter stream errors and malformed chunks that broke a stream.", counter, func(s *actorSnapshot) float64 { return float64(s.Params.Errors) }},
}

// learnerShardMetrics are apex learner's metrics of a fleet of replay
// shards (remote.ShardedMethod's counters; served only against a fleet).
var learnerShardMetrics = []statMetric[remote.ShardStats]{
	{"apex_learner_replay_shards", "Replay shards the learner samples from.", gauge, func(s *remote.ShardStats) float64 { return float64(len(s.Shards)) }},
	{"apex_learner_replay_shards_live", "Replay shards in the masses now (the others are down and probed).", gauge, func(s *remote.ShardStats) float64 { return float64(liveShards(s)) }},
	{"apex_learner_shard_draws_total", "Batches drawn across the shards.", counter, func(s *remote.ShardStats) float64 { return float64(s.Draws) }},
	{"apex_learner_shard_replans_total", "Batches planned again without a shard that failed during the draw.", counter, func(s *remote.ShardStats) float64 { return float64(s.Replans) }},
	{"apex_learner_shard_gate_waits_total", "Draws held by the fleet's rate limiter or for a live shard with items.", counter, func(s *remote.ShardStats) float64 { return float64(s.GateWaits) }},
	{"apex_learner_shard_gate_wait_seconds_total", "Time draws were held by the fleet's rate limiter or for a live shard.", counter, func(s *remote.ShardStats) float64 { return s.GateWait.Seconds() }},
	{"apex_learner_shard_prefetched_total", "Batches served from a draw sent right after the previous write-back (-prefetch).", counter, func(s *remote.ShardStats) float64 { return float64(s.Prefetched) }},
	{"apex_learner_shard_prefetch_discarded_total", "Prefetched draws thrown away because the next draw asked another batch size.", counter, func(s *remote.ShardStats) float64 { return float64(s.PrefetchDiscarded) }},
	{"apex_learner_shard_keepalives_total", "Tally rounds that renewed the lease on the fleet's counts while the learner did not draw.", counter, func(s *remote.ShardStats) float64 { return float64(s.KeepAlives) }},
	{"apex_learner_shard_downs_total", "Times a shard was left out (its stream broke or it missed the deadline).", counter, func(s *remote.ShardStats) float64 {
		return shardSum(s, func(x remote.ShardState) uint64 { return x.Downs })
	}},
	{"apex_learner_shard_rejoins_total", "Times a down shard answered a probe and was taken back.", counter, func(s *remote.ShardStats) float64 {
		return shardSum(s, func(x remote.ShardState) uint64 { return x.Rejoins })
	}},
	{"apex_learner_shard_refused_total", "Restarted shard incarnations kept down because they serve another table, run configuration or limiter than the fleet.", counter, func(s *remote.ShardStats) float64 {
		return shardSum(s, func(x remote.ShardState) uint64 { return x.Refused })
	}},
	{"apex_learner_shard_swap_refusals_total", "Of the refused, the shard incarnations that reported another shard's data lineage (addresses swapped or reused).", counter, func(s *remote.ShardStats) float64 {
		return shardSum(s, func(x remote.ShardState) uint64 { return x.SwapRefused })
	}},
	{"apex_learner_shard_lineage_resets_total", "Restarted shard incarnations taken with a data lineage never seen (restarted without their checkpoint: their data was lost).", counter, func(s *remote.ShardStats) float64 {
		return shardSum(s, func(x remote.ShardState) uint64 { return x.LineageResets })
	}},
	{"apex_learner_shard_write_backs_dropped_total", "Write-back values dropped for a shard that was down or had restarted since the draw (never applied).", counter, func(s *remote.ShardStats) float64 { return float64(s.Dropped) }},
	{"apex_learner_shard_rows_total", "Rows drawn across the shards.", counter, func(s *remote.ShardStats) float64 { return float64(s.Rows) }},
	{"apex_learner_shard_write_backs_total", "Write-back calls across the shards.", counter, func(s *remote.ShardStats) float64 { return float64(s.WriteBacks) }},
	{"apex_learner_shard_write_backs_applied_total", "Write-back values the shards applied.", counter, func(s *remote.ShardStats) float64 { return float64(s.Applied) }},
	{"apex_learner_shard_write_backs_stale_total", "Write-back values the shards dropped (overwritten slots, an earlier incarnation; not the ones the learner dropped unsent).", counter, func(s *remote.ShardStats) float64 { return float64(s.Stale) }},
	{"apex_learner_shard_inserted_items_total", "Items the fleet's rate limiter counts inserted, over every shard's incarnations.", counter, func(s *remote.ShardStats) float64 {
		var n int64
		for _, x := range s.Shards {
			n += x.Inserted
		}
		return float64(n)
	}},
	{"apex_learner_shard_items", "Items the live shards held at their latest replies.", gauge, func(s *remote.ShardStats) float64 {
		n := 0
		for _, x := range s.Shards {
			if x.Up {
				n += x.Size
			}
		}
		return float64(n)
	}},
	{"apex_learner_shard_priority_mass", "Priority mass (items for uniform and pal) of the live shards at their latest replies: the learner's view of the fleet's.", gauge, func(s *remote.ShardStats) float64 {
		m := 0.0
		for _, x := range s.Shards {
			if x.Up {
				m += x.Mass
			}
		}
		return m
	}},
}

// learnerClientMetrics are apex learner's metrics of its replay clients'
// remote stages (remote.ClientStats; a fleet's summed over its shards by
// sumClientStats), served against one server and against a fleet.
var learnerClientMetrics = []statMetric[remote.ClientStats]{
	{"apex_learner_remote_draws_total", "Draws answered by the replay server (a fleet's: by each shard a batch drew from).", counter, func(s *remote.ClientStats) float64 { return float64(s.Draws) }},
	{"apex_learner_remote_rows_total", "Rows the replay server's draws returned.", counter, func(s *remote.ClientStats) float64 { return float64(s.Rows) }},
	{"apex_learner_remote_write_backs_total", "Priority write-backs the replay server answered.", counter, func(s *remote.ClientStats) float64 { return float64(s.WriteBacks) }},
	{"apex_learner_remote_write_backs_applied_total", "Write-back values the replay server applied.", counter, func(s *remote.ClientStats) float64 { return float64(s.Applied) }},
	{"apex_learner_remote_write_backs_stale_total", "Write-back values the replay server dropped (overwritten slots, an earlier incarnation).", counter, func(s *remote.ClientStats) float64 { return float64(s.Stale) }},
	{"apex_learner_remote_write_backs_wrong_incarnation_total", "Write-back values dropped for keys of an earlier incarnation of the server (a restart; included in the stale ones).", counter, func(s *remote.ClientStats) float64 { return float64(s.WrongIncarnation) }},
	{"apex_learner_remote_write_backs_lost_total", "Pipelined write-backs whose result was lost with their stream (the server may or may not have applied them).", counter, func(s *remote.ClientStats) float64 { return float64(s.WriteBacksLost) }},
	{"apex_learner_remote_stream_opens_total", "Sample streams opened (the first included).", counter, func(s *remote.ClientStats) float64 { return float64(s.StreamOpens) }},
	{"apex_learner_remote_stream_errors_total", "Calls that failed on a broken Sample stream.", counter, func(s *remote.ClientStats) float64 { return float64(s.StreamErrors) }},
	{"apex_learner_remote_connection_resets_total", "Connections to a replay shard ended after it missed the shard deadline (the probes dial a new one).", counter, func(s *remote.ClientStats) float64 { return float64(s.ConnectionResets) }},
	{"apex_learner_remote_episode_resyncs_total", "ReF-ER episode feeds subscribed again on a new stream (the controller starts over from the stored episodes).", counter, func(s *remote.ClientStats) float64 { return float64(s.EpisodeResyncs) }},
}

// sumClientStats adds the clients' counters field by field (one
// remote.ClientStats for the learner's /metrics). O(clients).
func sumClientStats(cs []*remote.Client) remote.ClientStats {
	var t remote.ClientStats
	for _, c := range cs {
		t = addClientStats(t, c.Stats())
	}
	return t
}

// addClientStats is a + b, field by field.
func addClientStats(a, b remote.ClientStats) remote.ClientStats {
	a.Draws += b.Draws
	a.Rows += b.Rows
	a.WriteBacks += b.WriteBacks
	a.Applied += b.Applied
	a.Stale += b.Stale
	a.WrongIncarnation += b.WrongIncarnation
	a.WriteBacksLost += b.WriteBacksLost
	a.StreamOpens += b.StreamOpens
	a.StreamErrors += b.StreamErrors
	a.EpisodeResyncs += b.EpisodeResyncs
	a.ConnectionResets += b.ConnectionResets
	return a
}

// liveShards counts the shards up in s.
func liveShards(s *remote.ShardStats) int {
	n := 0
	for _, x := range s.Shards {
		if x.Up {
			n++
		}
	}
	return n
}

// shardSum sums f over s's shards.
func shardSum(s *remote.ShardStats, f func(remote.ShardState) uint64) float64 {
	var n uint64
	for _, x := range s.Shards {
		n += f(x)
	}
	return float64(n)
}
