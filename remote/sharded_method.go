package remote

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ShardSampling is how a learner samples a batch across replay shards
// (ShardOptions.Sampling; `apex learner -shard-sampling`).
type ShardSampling uint8

const (
	// ShardExact spreads each batch's stratified targets over all live
	// shards by their masses: row j's target u_j, drawn in the j-th of B
	// equal slices of M = Σ M_s, goes to the shard whose prefix-sum range
	// holds it, as the fraction (u_j − M_<s)/M_s of that shard's mass,
	// which the shard scales to its mass at draw time. A row's probability
	// is (M_s/M)·p_i/M_s,now: the learner's view of the masses picks the
	// shard, the shard's tree the row. The method must draw at positions
	// (sampler.Method.Positional: per, lap, pal, uniform).
	ShardExact ShardSampling = iota
	// ShardOne draws each batch from one shard, chosen with probability
	// M_s/M; a row's probability is (M_s/M)·P_s(i), its shard-local
	// probability times the shard's. One round trip per batch whatever
	// the number of shards; any method but TER's (whose weights need its
	// own last sample) and the ReF-ER methods'. For rank-based PER each
	// shard ranks its own items: the mixture approximates one global
	// ranking (exactly so when the shards' priority distributions match),
	// and the weights are exact for the mixture actually sampled.
	ShardOne
)

// String is the mode's flag value: "exact" or "one".
func (m ShardSampling) String() string {
	switch m {
	case ShardExact:
		return "exact"
	case ShardOne:
		return "one"
	}
	return fmt.Sprintf("ShardSampling(%d)", uint8(m))
}

// ParseShardSampling reads a -shard-sampling value ("exact" or "one").
func ParseShardSampling(s string) (ShardSampling, error) {
	switch s {
	case "exact":
		return ShardExact, nil
	case "one":
		return ShardOne, nil
	}
	return 0, fmt.Errorf("remote: shard sampling %q: want exact or one", s)
}

// Defaults of ShardOptions.
const (
	DefaultShardDeadline = time.Second
	DefaultProbeMin      = 50 * time.Millisecond
	DefaultProbeMax      = 500 * time.Millisecond
	// DefaultFleetLease is ShardOptions.FleetLease's default.
	DefaultFleetLease = 2 * time.Second
)

// Bounds of the lease on the fleet's counts (FleetCounts.lease_ms): the
// learner's longest time between two draws is remembered for one to two
// leaseWindows, and the lease is FleetLease plus leaseGaps times it, at
// most maxFleetLease.
const (
	leaseWindow   = time.Minute
	leaseGaps     = 4
	maxFleetLease = time.Hour
	// minKeepAlive bounds how often the keep-alive looks (FleetLease/4).
	minKeepAlive = 5 * time.Millisecond
)

// tallyEvery is how old a live shard's view may get while batches do not
// touch it before a tally rides along with a draw (its mass refreshed, the
// fleet's counts handed to its limiter).
const tallyEvery = 20 * time.Millisecond

// Bounds of the learner's wait on the fleet's rate limiter: it asks every
// live shard for its counts, sleeping from gateMinSleep doubling to
// gateMaxSleep between rounds while nothing changes.
const (
	gateMinSleep = time.Millisecond
	gateMaxSleep = 16 * time.Millisecond
)

// ShardOptions configure ShardedMethod. The zero value samples exactly
// with the default deadlines.
type ShardOptions struct {
	// Sampling is ShardExact (the default) or ShardOne.
	Sampling ShardSampling
	// Deadline bounds a shard's answer to a draw, a write-back or a tally
	// (DefaultShardDeadline, 1 s, when 0). A shard that misses it, or
	// whose stream breaks, is down: left out of the masses (the batch is
	// re-planned over the others), its pending write-backs dropped and
	// counted, and probed until it answers again.
	Deadline time.Duration
	// ProbeMin and ProbeMax bound the backoff between probes of a down
	// shard (50 ms and 500 ms when 0): a restarted shard rejoins within
	// about ProbeMax of answering.
	ProbeMin, ProbeMax time.Duration
	// Counters, if not nil, is where the stage counts what it does; read
	// it with Snapshot from any goroutine.
	Counters *ShardCounters
	// Infos, if not nil, are the shards' Info replies as FleetConfig
	// returned them (Infos[i] is clients[i]'s), which ShardedMethod
	// reuses instead of asking every shard again; nil: it calls
	// FleetConfig itself.
	Infos []*replayv1.InfoReply
	// OnRefused, if not nil, is told (on the learner's goroutine) each time
	// a restarted shard is kept down because its new incarnation serves
	// another table, run configuration or limiter than the fleet's (the
	// reason names what differs); the learner logs it. The refusal is
	// also counted in ShardState.Refused.
	OnRefused func(target string, incarnation uint64, reason error)
	// FleetLease is the least lease on the fleet's counts the learner
	// hands a shard (FleetCounts.lease_ms; DefaultFleetLease, 2 s, or
	// 2·Deadline when longer, when 0; negative: no lease, the counts never
	// go stale and a shard the learner cannot reach holds its inserts
	// until it can, the strict ratio): the lease sent is FleetLease plus
	// 4 times the longest the learner went without renewing (between two
	// draws, or a draw and a keep-alive tally) over the last minute or
	// two, so a learner that reaches a shard renews its counts well
	// within their lease. While the learner does not draw (evaluating,
	// checkpointing) the stage renews the counts itself, with a tally
	// round every FleetLease/4, so only a learner that cannot reach a
	// shard, or is gone, lets its lease pass. A shard whose lease passes
	// without a renewal relaxes its bound on the stale counts by its
	// capacity in items, spent across renewals (see
	// runtime.RateLimiter.RenewFleetCounts).
	FleetLease time.Duration
	// Prefetch, when true, has the stage draw the learner's next batch
	// while the learner computes its step: right after a successful
	// write-back (Update, UpdateFeatures) it plans the next draw (as many
	// rows as the batch written back, the next step, the same procedure
	// and probabilities) and sends it to the shards, and the next Sample
	// only receives and assembles it. Each shard's Sample stream is
	// ordered and the shard applies the write-back before it handles the
	// next message, so the prefetched draw sees the priorities a draw at
	// Sample would (only inserts that arrive in between are missed, as
	// if they came a little later, and a second write-back of the same
	// batch, which first receives the prefetched draw, lands after it);
	// the rows' probabilities, hence the importance weights, are exact
	// for the draw made. The draws'
	// randomness then comes from a generator of the stage's own, seeded
	// from the generator handed to the first Sample (two values taken
	// from it then; none after): a prefetch never touches the caller's
	// generator outside Sample. No prefetch is sent when the fleet's
	// rate limiter would hold the draw, when no live shard holds items,
	// or when planning fails (Sample then draws, waiting as without
	// Prefetch). With Prefetch, a seed gives other draws than without it. A Sample for another batch size receives the
	// prefetched draw and discards it (its rows count as sampled, as the
	// shards counted them; never written back), then draws (counted:
	// ShardStats.PrefetchDiscarded); a shard that fails while the
	// prefetch is out is down and the batch is planned again without it,
	// as when it fails during a draw.
	Prefetch bool
}

func (o *ShardOptions) fill() error {
	if o.Sampling > ShardOne {
		return fmt.Errorf("remote: sharded method: unknown sampling mode %d", o.Sampling)
	}
	if o.Deadline < 0 || o.ProbeMin < 0 || o.ProbeMax < 0 {
		return fmt.Errorf("remote: sharded method: negative deadline or probe backoff (%v, %v, %v)", o.Deadline, o.ProbeMin, o.ProbeMax)
	}
	if o.Deadline == 0 {
		o.Deadline = DefaultShardDeadline
	}
	if o.ProbeMin == 0 {
		o.ProbeMin = DefaultProbeMin
	}
	if o.FleetLease == 0 {
		o.FleetLease = max(DefaultFleetLease, 2*o.Deadline)
	}
	if o.ProbeMax == 0 {
		o.ProbeMax = max(DefaultProbeMax, o.ProbeMin)
	}
	if o.ProbeMax < o.ProbeMin {
		return fmt.Errorf("remote: sharded method: ProbeMax %v below ProbeMin %v", o.ProbeMax, o.ProbeMin)
	}
	if o.Counters == nil {
		o.Counters = &ShardCounters{}
	}
	return nil
}

// ShardStats is a snapshot of a sharded stage's counters.
type ShardStats struct {
	// Draws and Rows count the batches and rows drawn.
	Draws, Rows uint64
	// Replans counts batches planned again without a shard that failed
	// during the draw.
	Replans uint64
	// GateWaits counts draws that waited on the fleet's rate limiter, and
	// GateWait is the time they waited in total.
	GateWaits uint64
	GateWait  time.Duration
	// KeepAlives counts the tally rounds the stage sent on its own while
	// the learner did not draw, renewing the lease on the fleet's counts
	// (ShardOptions.FleetLease).
	KeepAlives uint64
	// Prefetched counts the batches served from a draw sent ahead
	// (ShardOptions.Prefetch); PrefetchDiscarded the prefetched draws
	// thrown away because the next Sample asked another batch size.
	Prefetched, PrefetchDiscarded uint64
	// WriteBacks counts write-back calls; Applied and Stale the values
	// the shards applied and dropped (overwritten slots, an earlier
	// incarnation); Dropped the values the learner dropped unsent because
	// their shard was down or had restarted since the draw (never
	// applied), also counted in Stale of the call's result.
	WriteBacks, Applied, Stale, Dropped uint64
	// Shards are the shards' states, in the order of the clients.
	Shards []ShardState
}

// ShardState is one shard as the learner sees it.
type ShardState struct {
	// Target is the address the shard's client dialed.
	Target string
	// Up is false while the shard is left out (down, being probed).
	Up bool
	// Incarnation is the shard's latest known incarnation.
	Incarnation uint64
	// Mass, Size and MinProb are from the shard's latest reply.
	Mass    float64
	Size    int
	MinProb float64
	// Inserted is the items the fleet's limiter counts for the shard over
	// all its incarnations.
	Inserted int64
	// Rows counts the rows drawn from the shard; Dropped the write-back
	// values dropped for it; Downs the times it went down; Rejoins the
	// times it came back (with a new incarnation or the same).
	Rows, Dropped, Downs, Rejoins uint64
	// Refused counts the restarted incarnations kept down because they
	// serve another table, run configuration or limiter than the fleet's
	// (a shard restarted with other run flags), and Refusal is the latest
	// one's reason ("" when none).
	Refused uint64
	Refusal string
	// Lineage is the shard's data lineage as its latest admitted Info
	// showed it (0: a server older than lineages). SwapRefused counts the
	// refusals (in Refused too) of a server that reported another shard's
	// lineage (ErrShardSwapped: two shards' addresses swapped);
	// LineageResets the new incarnations taken with a lineage never seen
	// (the shard lost its data: restarted without a checkpoint).
	Lineage                    uint64
	SwapRefused, LineageResets uint64
}

// ShardCounters collects a sharded stage's counters. Safe for concurrent
// use; the zero value is ready.
type ShardCounters struct {
	mu sync.Mutex
	st ShardStats
}

// Snapshot returns a copy of the counters. O(shards).
func (c *ShardCounters) Snapshot() ShardStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.st
	out.Shards = append([]ShardState(nil), c.st.Shards...)
	return out
}

func (c *ShardCounters) update(f func(*ShardStats)) {
	c.mu.Lock()
	f(&c.st)
	c.mu.Unlock()
}

// shard is one replay server as the learner's goroutine keeps it.
type shard struct {
	i      int
	target string
	st     *stage // the Sample stream (openTries 1: a failure marks the shard down)

	up          bool
	incarnation uint64
	mass        float64
	size        int
	minProb     float64
	seen        time.Time // the latest reply's arrival
	tally       bool      // a tally rides along with the current draw
	reported    int64     // the limiter's own inserted count, as last reported
	sampledSeen uint64    // the limiter's sampled count, as last tallied
	base        int64     // added to reported: continuity over incarnations
	nextProbe   time.Time
	backoff     time.Duration
	probe       atomic.Pointer[replayv1.InfoReply] // set by a successful probe
	probing     atomic.Bool
	refused     uint64 // the latest incarnation kept down (0: none)
	admitted    uint64 // an incarnation a probe's Info showed fit (0: none)

	// The latest plan.
	rows   int       // rows planned on the shard
	first  int       // its first row in the batch
	at     []float64 // positions, exact mode
	q      float64   // the shard's probability under the plan (M_s/M)
	reply  *replayv1.Batch
	drawn  uint64 // the incarnation the plan's rows were drawn under
	failed error
	// The latest assembled batch's rows on the shard, which route its
	// write-back (a prefetch plans anew while the batch may still be
	// written back).
	bRows, bFirst int
	bDrawn        uint64
	fleet         replayv1.FleetCounts // reused
}

// counted is the items the fleet's limiter counts for s.
func (s *shard) counted() int64 { return s.base + s.reported }

// sharded is the learner's stage over a fleet of shards.
type sharded struct {
	// mu is held by the learner's calls (Sample, Update, UpdateFeatures)
	// and the keep-alive's tally rounds, which share the shards' streams.
	mu     sync.Mutex
	ctx    context.Context
	local  sampler.Method
	opts   ShardOptions
	table  string
	shards []*shard
	// lim is the fleet's limiter configuration (nil: no ratio limit).
	lim *runtime.RateLimiterConfig
	// config and tab are the fleet's run configuration and table, which a
	// shard's new incarnation must serve to be taken back (admit).
	config []byte
	tab    *replayv1.TableInfo
	// lineages are the shards' data lineages, from their Infos (admit).
	lineages *shardLineages

	sampled uint64 // the fleet's sampled items
	steps   uint64 // draws that succeeded, priorSteps included
	// The learner's time between renewals, for the lease on the fleet's
	// counts: when the latest Sample (or keep-alive round) returned, and
	// the longest gap in the current leaseWindow (begun at gapSince) and
	// the one before.
	outSince        time.Time
	gapCur, gapPrev time.Duration
	gapSince        time.Time
	live            []*shard // plan's scratch
	// refs are the latest batch's, in order: the rows of shard sh are
	// refs[sh.first : sh.first+sh.rows] (a batch's rows are consecutive
	// per shard), which routes its write-back.
	refs []buffer.Ref
	cols replayv1.Columns
	keys []uint64
	// rng is the stage's own generator (Prefetch), seeded at the first
	// Sample; pf is the prefetched draw.
	rng *rand.Rand
	pf  prefetch
}

// The states of a prefetched draw.
const (
	pfNone     = iota
	pfSent     // sent to the shards, not received
	pfReceived // received (by the keep-alive), with err
)

// prefetch is a draw of n rows for step sent ahead (ShardOptions.Prefetch).
type prefetch struct {
	state uint8
	n     int
	step  uint64
	err   error // recvPlanned's result, pfReceived
}

// ShardedMethod returns the learner's replay method over a fleet of replay
// shards (one apex replay each, started with the same run configuration):
// a sampler.Method whose Selector draws each batch across the shards and
// writes back to the shards the rows came from, whose Weighter is the
// local twin's over the batch's fleet-wide Prob, Size and MinProb (so the
// importance weights are exact for the distribution actually sampled),
// and whose Loss, Normalizer, Name and Warnings are local's (local is the
// method built in the learner's process from the fleet's configuration,
// as for Client.Method). priorSteps is the learner steps already taken.
//
// The learner keeps each shard's mass, size, smallest probability and
// inserted count from every reply; a live shard a batch does not touch
// gets a Tally along with the draw once its view is 20 ms old (or it held
// nothing), so a shard empty at the start joins once it holds items and
// every shard's limiter hears the fleet's counts. opts.Sampling picks the exact mode
// (ShardExact: each batch's stratified targets spread over the shards by
// their masses, Draw.at; needs a positional method) or one shard per
// batch (ShardOne, with probability M_s/M). Each row's Prob is the
// probability of the procedure run: (M_s/M)·P_s(i) with the learner's
// view of M_s choosing the shard and the shard's tree (as it is at the
// draw) the row; Size is Σ N_s, MinProb min_s (M_s/M)·P_s,min, Total M.
//
// Write-backs go to the shards the latest batch's rows came from (the
// stage keeps each row's shard): refs must be the latest batch's, in
// order, and that draw must have succeeded (after a failed Sample a
// write-back is refused with buffer.ErrShape until the next batch). Values for a shard that is down, or has restarted since the draw
// (a new incarnation), are dropped, counted in the result's Stale and in
// ShardStats.Dropped, never sent; a shard refuses keys of its earlier
// incarnations itself. A shard that fails (stream broken, or no answer
// within opts.Deadline) is down: the batch is planned again over the
// others, and the shard is probed with backoff (ProbeMin doubling to
// ProbeMax) by a goroutine that ends with ctx; once it answers it rejoins
// with its masses and, if it restarted, its new incarnation — but only
// when that incarnation's Info shows the fleet's table, run configuration
// (ConfigDiff), positional capability and limiter: a shard restarted with
// other run flags stays down, counted in ShardState.Refused with the
// reason naming what differs (and told to opts.OnRefused), and is probed
// until a restart with the fleet's flags. A new incarnation that reports
// the data lineage (InfoReply.lineage) another shard had is refused the
// same way, wrapping ErrShardSwapped (counted in ShardState.SwapRefused):
// the shards' addresses were swapped (IPs reused behind one DNS name),
// and taking it would mix two shards' masses, counts and write-backs; a
// lineage never seen is a shard that lost its data and is taken
// (ShardState.LineageResets). A new incarnation first seen
// on a reply (a re-opened stream) is checked the same way, with one Info
// call, before its rows or counts are taken. While no
// live shard holds items (every shard down, or none filled yet) a draw
// waits, as it waits on the limiter.
//
// The fleet's sample-to-insert ratio (the shards' common limiter
// configuration) is enforced on the fleet's counts: the learner counts
// the items it samples and sums the items the shards report inserted
// (over each shard's incarnations), holds a draw until the fleet's counts
// admit it, and hands every shard it talks to those counts
// (Draw.fleet, Tally.fleet), so each shard's limiter blocks its inserts on
// the fleet's balance rather than its own. A down shard keeps its
// inserted count in the sum (what it stored was stored); its limiter, on
// restart, is standalone until the learner's first message. The counts
// carry a lease (FleetCounts.lease_ms: opts.FleetLease plus 4 times the
// learner's longest time between renewals lately; none when FleetLease is
// negative), which the learner renews at every message to the shard (at
// least every 20 ms of draws while it reaches it) and, while it does not
// draw, with a keep-alive tally round every FleetLease/4 (counted:
// ShardStats.KeepAlives). A shard the learner cannot reach but actors can
// (a partition on the learner's side, or a heal the learner has not
// noticed yet) holds its inserts at the fleet's balance as it last heard
// it until the lease passes, then admits them while its balance is
// within its capacity in items past the ratio's bound (counted:
// Server.Stats' StaleFleetItems); that room is given back only by the
// learner's samples, not by a renewal, so a flapping link or a learner
// gone for good lets a shard run at most one capacity ahead of the
// ratio: on stale counts it cannot see the learner's samples elsewhere, and
// holding there would hold the actor hosts (a ShardedWriter waits on a
// shard that answers but holds its batches: backpressure) and, behind
// them, every other shard's inserts and the learner's draws until the
// link returned. The learner's side is unchanged: it admits draws on the
// inserts the shards report, so it never samples past the ratio; the
// items a stale shard admitted are sampled down once the learner is back
// (its limiter, fresh again, holds the actors meanwhile). A probe resets
// the client's gRPC reconnection backoff, and a shard that missed the
// deadline (a draw's, a write-back's, a tally's or a probe's) has its
// connection ended
// (Client.ResetConnection), so a shard back from a partition is reached
// on a new connection within about ProbeMax + Deadline once a connection
// attempt can start (an attempt begun during the cut lasts up to gRPC's
// MinConnectTimeout: 20 s by default, 1 s for apex learner's fleet), not
// after gRPC's seconds of backoff or a silent connection's keepalive.
//
// The shards' Info replies come from opts.Infos (FleetConfig's, reused) or
// from one FleetConfig round here; two entries that are one server (the
// same incarnation) are refused naming both, so no row's probability is
// halved by a shard listed twice.
//
// Refused: no clients, a local method that is invalid or has an episode
// stage (ReF-ER), a local Weighter that cannot weigh a batch from its
// Prob, Size and MinProb alone (TER's), shards whose table runs another
// method, shards that serve different run configurations or limiters
// (the error names them), and, in exact mode, a method that cannot draw
// at positions.
//
// With opts.Prefetch the next batch's draw is planned and sent at the end
// of each successful write-back and received by the next Sample (see
// ShardOptions.Prefetch): the same rows' probabilities, the round trip
// overlapped with the learner's step; the draws' randomness comes from
// the stage's own generator, seeded from the first Sample's. The
// keep-alive, or a second write-back of the same batch, receives an
// outstanding prefetched draw off the streams first (kept for Sample).
//
// Cost per draw: a tally round only while the limiter holds the draw,
// then one round trip to each shard the batch touches (in parallel),
// their rows decoded into dst in one pass; O(B + shards) planning (with
// Prefetch the planning and sends are in the write-back's call, the
// receipt and decoding in Sample).
// Concurrency: Sample, Update, UpdateFeatures and Weights are called by
// one goroutine (the learner's); Priority, Evaluated and Stats from any.
// ctx bounds the stage's life (streams, probes and the lease's
// keep-alive): cancel it when done.
func ShardedMethod(ctx context.Context, clients []*Client, local sampler.Method, priorSteps uint64, opts ShardOptions) (sampler.Method, error) {
	if err := opts.fill(); err != nil {
		return sampler.Method{}, err
	}
	if len(clients) == 0 {
		return sampler.Method{}, errors.New("remote: sharded method: no shards")
	}
	if err := local.Validate(); err != nil {
		return sampler.Method{}, fmt.Errorf("remote: sharded method: the local twin: %w", err)
	}
	if local.Episodes != nil {
		return sampler.Method{}, fmt.Errorf("remote: sharded method %q: the ReF-ER methods' learner follows one stage's episodes by its buffer's slots (the episode feed of one replay server), which shards do not share: run one replay server (Client.Method) or apex train", local.Name)
	}
	if local.Weighter != nil {
		if err := checkBatchWeighter(local.Weighter); err != nil {
			return sampler.Method{}, fmt.Errorf("remote: sharded method %q: its weights depend on more than the batch's probabilities (%v): it cannot sample across shards; run one replay server", local.Name, err)
		}
	}
	s := &sharded{ctx: ctx, local: local, opts: opts, steps: priorSteps, gapSince: time.Now()}
	names := make([]string, len(clients))
	for i, c := range clients {
		if c == nil {
			return sampler.Method{}, fmt.Errorf("remote: sharded method: client %d is nil", i)
		}
		names[i] = c.conn.Target()
	}
	infos := opts.Infos
	if infos == nil {
		// One Info round: the common run configuration, and no shard
		// listed twice (a duplicated shard would halve its rows'
		// probabilities).
		var err error
		if _, infos, err = FleetConfig(ctx, clients, names); err != nil {
			return sampler.Method{}, fmt.Errorf("remote: sharded method %q: %w", local.Name, err)
		}
	} else if err := checkFleetInfos(infos, names); err != nil {
		return sampler.Method{}, fmt.Errorf("remote: sharded method %q: %w", local.Name, err)
	}
	for i, info := range infos {
		if err := checkShardTable(info, local, opts.Sampling); err != nil {
			return sampler.Method{}, fmt.Errorf("remote: sharded method %q: shard %s: %w", local.Name, names[i], err)
		}
		if err := sameTable(infos[0], info); err != nil {
			return sampler.Method{}, fmt.Errorf("remote: sharded method: shards %s and %s %v: start every shard of a fleet with the same run flags", names[0], names[i], err)
		}
	}
	tab := infos[0].GetTables()[0]
	s.table, s.config, s.tab = tab.GetName(), infos[0].GetConfig(), tab
	if l := tab.GetLimiter(); l.GetSamplesPerInsert() > 0 {
		s.lim = &runtime.RateLimiterConfig{SamplesPerInsert: l.GetSamplesPerInsert(), MinSizeToSample: int64(l.GetMinSizeToSample()), ErrorBuffer: l.GetErrorBuffer()}
	}
	s.lineages = newShardLineages(len(clients))
	for i, info := range infos {
		if _, err := s.lineages.check(i, info.GetLineage(), func(j int) string { return names[j] }); err != nil {
			return sampler.Method{}, fmt.Errorf("remote: sharded method: shard %s: %w", names[i], err)
		}
	}
	for i, c := range clients {
		sh := &shard{i: i, target: c.conn.Target(), incarnation: infos[i].GetIncarnation(), up: true, backoff: opts.ProbeMin,
			st: &stage{c: c, ctx: ctx, table: s.table, local: local, openTries: 1, incarnation: infos[i].GetIncarnation()}}
		s.shards = append(s.shards, sh)
	}
	opts.Counters.update(func(st *ShardStats) {
		st.Shards = make([]ShardState, len(s.shards))
		for i, sh := range s.shards {
			st.Shards[i] = ShardState{Target: sh.target, Up: true, Incarnation: sh.incarnation, Lineage: infos[i].GetLineage()}
		}
	})
	// Learn the masses and counts; a learner resuming takes the fleet's
	// sampled count from the shards (the largest any was told).
	s.tallyRound(false)
	for _, sh := range s.shards {
		if sh.up {
			s.sampled = max(s.sampled, sh.sampledSeen)
		}
	}
	m := sampler.Method{
		Name:       local.Name,
		Selector:   s,
		Weighter:   local.Weighter,
		Normalizer: local.Normalizer,
		Loss:       local.Loss,
		Warnings:   local.Warnings,
	}
	if tab.GetFeatures() {
		m.Features = s
	}
	if tab.GetEvaluated() {
		m.Evaluated = s.evaluated
	}
	if local.Stats != nil {
		m.Stats = s.methodStats
	}
	if s.lim != nil && opts.FleetLease > 0 {
		go s.keepAlive()
	}
	return m, nil
}

// checkBatchWeighter asks w to weigh a one-row batch described by its
// fields alone: a Weighter that needs its own sampling state (TER's) fails.
func checkBatchWeighter(w sampler.Weighter) error {
	b := &buffer.Batch{Refs: make([]buffer.Ref, 1), Prob: []float64{1}, Size: 1, Total: 1, MinProb: 1}
	return w.Weights(b, 0)
}

// checkShardTable checks one shard's Info against the local twin.
func checkShardTable(info *replayv1.InfoReply, local sampler.Method, mode ShardSampling) error {
	if len(info.GetTables()) != 1 {
		return fmt.Errorf("the server has %d tables; a remote stage serves a one-table server", len(info.GetTables()))
	}
	tab := info.GetTables()[0]
	if name, _, _ := strings.Cut(tab.GetMethod(), ":"); name != local.Name {
		return fmt.Errorf("the server's table runs %q: build the local twin from the server's configuration (Client.Config)", tab.GetMethod())
	}
	if tab.GetFeatures() != (local.Features != nil) {
		return fmt.Errorf("the server's stage takes feature write-backs: %t, the local twin: %t", tab.GetFeatures(), local.Features != nil)
	}
	if mode == ShardExact && !tab.GetPositional() {
		return fmt.Errorf("method %q cannot draw at positions of its mass, which exact sampling across shards needs (per, lap, pal and uniform can): run the learner with -shard-sampling=one (one shard per batch, chosen by mass)", local.Name)
	}
	return nil
}

// checkFleetInfos checks Info replies handed in (ShardOptions.Infos) as
// FleetConfig checks the ones it asks for: one per shard, each with a run
// configuration, all the same, and no incarnation twice (one server
// listed twice).
func checkFleetInfos(infos []*replayv1.InfoReply, names []string) error {
	if len(infos) != len(names) {
		return fmt.Errorf("%d Info replies for %d shards", len(infos), len(names))
	}
	byInc := make(map[uint64]int, len(infos))
	for i, info := range infos {
		if info == nil || len(info.GetConfig()) == 0 {
			return fmt.Errorf("replay shard %s: no Info reply with a run configuration", names[i])
		}
		if j, dup := byInc[info.GetIncarnation()]; dup {
			return fmt.Errorf("replay shards %s and %s are one server (both report incarnation %d): list each shard once", names[j], names[i], info.GetIncarnation())
		}
		byInc[info.GetIncarnation()] = i
		if d := ConfigDiff(infos[0].GetConfig(), info.GetConfig()); d != "" {
			return fmt.Errorf("replay shards %s and %s serve different run configurations (%s): start every shard with the same run flags", names[0], names[i], d)
		}
	}
	return nil
}

// sameTable refuses a shard's table (one table, checked by
// checkShardTable) that differs from the fleet's reference in name,
// method, positional capability or limiter, saying what differs.
func sameTable(ref, in *replayv1.InfoReply) error {
	a, b := ref.GetTables()[0], in.GetTables()[0]
	la, lb := a.GetLimiter(), b.GetLimiter()
	var diff []string
	if a.GetName() != b.GetName() {
		diff = append(diff, fmt.Sprintf("table %q and %q", a.GetName(), b.GetName()))
	}
	if a.GetMethod() != b.GetMethod() {
		diff = append(diff, fmt.Sprintf("method %q and %q", a.GetMethod(), b.GetMethod()))
	}
	if a.GetPositional() != b.GetPositional() {
		diff = append(diff, fmt.Sprintf("positional %t and %t", a.GetPositional(), b.GetPositional()))
	}
	if la.GetSamplesPerInsert() != lb.GetSamplesPerInsert() || la.GetMinSizeToSample() != lb.GetMinSizeToSample() || la.GetErrorBuffer() != lb.GetErrorBuffer() {
		diff = append(diff, fmt.Sprintf("limiter {%v} and {%v}", la, lb))
	}
	if len(diff) > 0 {
		return fmt.Errorf("serve different tables or limiters (%s)", strings.Join(diff, ", "))
	}
	return nil
}

// admit checks shard sh's Info (of the incarnation it now runs) against the
// fleet's: not another entry's server (the same incarnation), the local
// twin's table and mode (checkShardTable), the fleet's
// run configuration (ConfigDiff: the error names the differing keys), and
// its table's name, method, positional capability and limiter.
func (s *sharded) admit(sh *shard, info *replayv1.InfoReply) error {
	var errs []error
	var swapped error
	names := func(j int) string { return s.shards[j].target }
	// Peek only: a server refused below for its configuration or
	// incarnation must not leave its lineage recorded as sh's.
	_, err := s.lineages.peek(sh.i, info.GetLineage(), names)
	if err != nil {
		swapped = err
		errs = append(errs, err)
	}
	for _, o := range s.shards {
		if o != sh && o.incarnation == info.GetIncarnation() {
			// Another entry's server: taking it would count one server
			// twice and halve its rows' probabilities.
			errs = append(errs, fmt.Errorf("it is the server of shard %s (incarnation %d)", o.target, o.incarnation))
		}
	}
	if d := ConfigDiff(s.config, info.GetConfig()); d != "" {
		errs = append(errs, fmt.Errorf("it serves another run configuration than the fleet (%s)", d))
	}
	if err := checkShardTable(info, s.local, s.opts.Sampling); err != nil {
		errs = append(errs, err)
	} else if err := sameTable(&replayv1.InfoReply{Tables: []*replayv1.TableInfo{s.tab}}, info); err != nil {
		errs = append(errs, fmt.Errorf("it and the fleet %w", err))
	}
	if len(errs) == 0 {
		lin := info.GetLineage()
		reset, err := s.lineages.check(sh.i, lin, names) // peeked above: the same answer
		if err != nil {
			return err
		}
		s.opts.Counters.update(func(st *ShardStats) {
			if lin != 0 {
				st.Shards[sh.i].Lineage = lin
			}
			if reset {
				st.Shards[sh.i].LineageResets++
			}
		})
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return wrappedMsg{msg: strings.Join(msgs, "; "), err: swapped}
}

// wrappedMsg is an error with its own message that wraps err (nil: none).
type wrappedMsg struct {
	msg string
	err error
}

func (e wrappedMsg) Error() string { return e.msg }
func (e wrappedMsg) Unwrap() error { return e.err }

// errRefused marks a shard's new incarnation kept down by admit.
var errRefused = errors.New("restarted with another configuration")

// refuse keeps sh down because its incarnation inc serves another
// configuration (why): counted and reported once per incarnation, the
// shard probed again (a later restart with the fleet's flags rejoins).
func (s *sharded) refuse(sh *shard, inc uint64, why error) error {
	err := fmt.Errorf("remote: replay shard %s (incarnation %d) kept down: %w: %w", sh.target, inc, errRefused, why)
	if sh.refused != inc {
		sh.refused = inc
		swapped := errors.Is(why, ErrShardSwapped)
		s.opts.Counters.update(func(st *ShardStats) {
			st.Shards[sh.i].Refused++
			st.Shards[sh.i].Refusal = err.Error()
			if swapped {
				st.Shards[sh.i].SwapRefused++
			}
		})
		if s.opts.OnRefused != nil {
			s.opts.OnRefused(sh.target, inc, err)
		}
	}
	return err
}

// checkIncarnation is called when a reply shows sh running incarnation inc
// other than the one the learner knows: it asks the shard's Info (within
// Deadline) and admits the incarnation only if the Info is of inc and
// serves the fleet's configuration; otherwise the error (a refusal, or
// the Info call's failure) takes the shard down.
func (s *sharded) checkIncarnation(sh *shard, inc uint64) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.Deadline)
	info, err := sh.st.c.replay.Info(ctx, &replayv1.InfoRequest{})
	cancel()
	if err != nil {
		return fmt.Errorf("the Info of its new incarnation %d: %w", inc, err)
	}
	if info.GetIncarnation() != inc {
		return fmt.Errorf("it restarted again (incarnation %d, then %d): %w", inc, info.GetIncarnation(), errShardRestarting)
	}
	if err := s.admit(sh, info); err != nil {
		return s.refuse(sh, inc, err)
	}
	return nil
}

// errShardRestarting marks a shard whose incarnation changed while the
// learner checked it.
var errShardRestarting = errors.New("restarting")

var (
	_ sampler.Selector       = (*sharded)(nil)
	_ sampler.FeatureUpdater = (*sharded)(nil)
)

// fleetCounts are the fleet's counts for shard sh with sampled items in
// total (nil without a limiter), in sh's reused message.
func (s *sharded) fleetCounts(sh *shard, sampled uint64) *replayv1.FleetCounts {
	if s.lim == nil {
		return nil
	}
	others := s.inserted() - sh.reported
	sh.fleet.Sampled, sh.fleet.OthersInserted = sampled, uint64(max(others, 0))
	sh.fleet.LeaseMs = uint32(s.lease() / time.Millisecond)
	return &sh.fleet
}

// lease is the lease on the fleet's counts the learner hands a shard now:
// FleetLease plus leaseGaps times its longest time between two renewals
// lately, at most maxFleetLease; 0 (none) when FleetLease is negative.
// O(1).
func (s *sharded) lease() time.Duration {
	if s.opts.FleetLease < 0 {
		return 0
	}
	return min(s.opts.FleetLease+leaseGaps*max(s.gapCur, s.gapPrev), maxFleetLease)
}

// keepAlive renews the lease on the fleet's counts while the learner
// does not draw: every FleetLease/4 it tallies the live shards with the
// fleet's counts (the same counts the learner's latest draw sent: a
// renewal reports no samples, so it gives a stale shard no room) unless
// a Sample or keep-alive did within that time, or the learner is in a
// call now (which renews as it goes: a draw held by the limiter tallies
// every gateMaxSleep). It starts only after the learner's first draw (a
// shard limits alone until then) and ends with ctx. A shard that does
// not answer goes down and is probed, as after a failed draw.
func (s *sharded) keepAlive() {
	every := max(s.opts.FleetLease/4, minKeepAlive)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if !s.mu.TryLock() {
			continue
		}
		if !s.outSince.IsZero() && time.Since(s.outSince) >= every && s.ctx.Err() == nil {
			if s.pf.state == pfSent {
				// The prefetched draw's replies come first on its
				// streams: take them (kept for the next Sample).
				s.pf.err, s.pf.state = s.recvPlanned(), pfReceived
			}
			s.tallyRound(true)
			s.opts.Counters.update(func(st *ShardStats) { st.KeepAlives++ })
			s.outSince = time.Now()
		}
		s.mu.Unlock()
	}
}

// noteGap records the time since the latest Sample or keep-alive round
// returned (the learner's step outside the stage) at now, a Sample's
// start.
func (s *sharded) noteGap(now time.Time) {
	if now.Sub(s.gapSince) >= leaseWindow {
		s.gapPrev, s.gapCur, s.gapSince = s.gapCur, 0, now
	}
	if !s.outSince.IsZero() {
		s.gapCur = max(s.gapCur, now.Sub(s.outSince))
	}
}

// inserted is the fleet's inserted items.
func (s *sharded) inserted() int64 {
	var total int64
	for _, sh := range s.shards {
		total += sh.counted()
	}
	return total
}

// Sample draws a batch across the shards into dst.
func (s *sharded) Sample(rng *rand.Rand, dst *buffer.Batch) error {
	// Until this draw succeeds there is no batch to write back: the
	// previous batch's refs are no longer routable (plan resets each
	// shard's rows), so a write-back of them is refused.
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs = s.refs[:0]
	s.noteGap(time.Now())
	defer func() { s.outSince = time.Now() }()
	if rng == nil || dst == nil {
		return fmt.Errorf("remote: sharded sample: %w: nil generator or batch", buffer.ErrNil)
	}
	n := dst.Len()
	if n == 0 {
		return fmt.Errorf("remote: sharded sample: %w: a batch of 0 rows", buffer.ErrBatchSize)
	}
	if s.opts.Prefetch {
		if s.rng == nil {
			s.rng = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		}
		rng = s.rng
	}
	step := s.steps + 1
	var lastErr error
	attempt, served := 0, false
	if s.pf.state != pfNone {
		pf := s.pf
		s.pf = prefetch{}
		err := pf.err
		if pf.state == pfSent {
			err = s.recvPlanned()
		}
		switch {
		case pf.n != n || pf.step != step:
			if err == nil {
				s.sampled += uint64(pf.n) // the shards counted them
			}
			s.opts.Counters.update(func(st *ShardStats) { st.PrefetchDiscarded++ })
		case err == nil:
			served = true
		case errors.Is(err, errShardDown):
			lastErr, attempt = err, 1
		default:
			return fmt.Errorf("remote: sharded draw for step %d: %w", step, err)
		}
	}
	s.rejoin()
	for ; !served; attempt++ {
		if attempt > 0 {
			s.opts.Counters.update(func(st *ShardStats) { st.Replans++ })
		}
		if attempt > maxReplans {
			return fmt.Errorf("remote: sharded draw for step %d: %d plans failed, the last: %w", step, attempt, lastErr)
		}
		if err := s.gate(n); err != nil { // after a loss: wait for a live shard
			return err
		}
		if err := s.plan(rng, n); err != nil {
			if lastErr != nil {
				return fmt.Errorf("remote: sharded draw for step %d: %w (after: %v)", step, err, lastErr)
			}
			return fmt.Errorf("remote: sharded draw for step %d: %w", step, err)
		}
		err := s.drawPlanned(rng, step, n)
		if err == nil {
			break
		}
		if !errors.Is(err, errShardDown) {
			return fmt.Errorf("remote: sharded draw for step %d: %w", step, err)
		}
		lastErr = err
	}
	if err := s.assemble(dst, n); err != nil {
		return fmt.Errorf("remote: sharded draw for step %d: %w", step, err)
	}
	s.steps = step
	s.sampled += uint64(n)
	s.opts.Counters.update(func(st *ShardStats) {
		if served {
			st.Prefetched++
		}
		st.Draws++
		st.Rows += uint64(n)
		for _, sh := range s.shards {
			st.Shards[sh.i].Rows += uint64(sh.rows)
		}
		s.recordLocked(st)
	})
	return nil
}

// maxReplans bounds the plans of one draw after shards failed during it
// (each failure takes a shard down until a probe answers, ProbeMin later
// at the earliest).
const maxReplans = 64

// errShardDown marks a failure that took a shard down (the batch is
// planned again without it).
var errShardDown = errors.New("shard down")

// plan chooses the shards of the next batch of n rows from the live
// shards' masses: exact mode spreads n stratified targets over them (row
// j's target uniform in the j-th of n equal slices of M = Σ M_s, sent to
// the shard whose prefix-sum range holds it as a fraction of that shard's
// mass), one mode picks one shard with probability M_s/M (positional
// methods then get the shard's own stratification as positions). It sets
// each shard's rows, first, at and q = M_s/M.
func (s *sharded) plan(rng *rand.Rand, n int) error {
	var mass float64
	live := s.live[:0]
	for _, sh := range s.shards {
		sh.rows, sh.first, sh.at, sh.q, sh.reply, sh.failed = 0, 0, sh.at[:0], 0, nil, nil
		if s.eligible(sh, n) {
			mass += sh.mass
			live = append(live, sh)
		}
	}
	s.live = live
	if len(live) == 0 || math.IsInf(mass, 0) {
		return fmt.Errorf("%w: no live shard holds items with mass (%s)", buffer.ErrEmpty, s.describe())
	}
	below1 := math.Nextafter(1, 0)
	if s.opts.Sampling == ShardOne {
		u := rng.Float64() * mass
		k := 0
		for k < len(live)-1 && u >= live[k].mass {
			u -= live[k].mass
			k++
		}
		sh := live[k]
		sh.rows, sh.q = n, sh.mass/mass
		if s.local.Positional != nil {
			for j := range n {
				sh.at = append(sh.at, min((float64(j)+rng.Float64())/float64(n), below1))
			}
		}
		return nil
	}
	k, cum := 0, 0.0
	for j := range n {
		u := (float64(j) + rng.Float64()) / float64(n) * mass
		for k < len(live)-1 && u >= cum+live[k].mass {
			cum += live[k].mass
			k++
		}
		sh := live[k]
		if sh.rows == 0 {
			sh.first, sh.q = j, sh.mass/mass
		}
		f := min(max((u-cum)/sh.mass, 0), below1)
		if len(sh.at) > 0 {
			f = max(f, sh.at[len(sh.at)-1]) // ascending despite rounding
		}
		sh.at = append(sh.at, f)
		sh.rows++
	}
	return nil
}

// eligible reports whether sh may serve rows of a batch of n: it is up
// and holds items with mass. A stage that cannot draw at positions cannot
// repeat items either: in one mode a shard holding fewer items than the
// batch is left out of the choice.
func (s *sharded) eligible(sh *shard, n int) bool {
	minSize := 1
	if s.opts.Sampling == ShardOne && s.local.Positional == nil {
		minSize = n
	}
	return sh.up && sh.mass > 0 && !math.IsInf(sh.mass, 0) && sh.size >= minSize
}

// drawPlanned sends the planned draws to their shards, then reads the
// replies. A shard that fails is taken down (errShardDown).
func (s *sharded) drawPlanned(rng *rand.Rand, step uint64, n int) error {
	s.sendPlanned(rng, step, n)
	return s.recvPlanned()
}

// sendPlanned is drawPlanned's first half: the planned draws (and the
// tallies riding along) sent, a send's failure kept in its shard's failed.
func (s *sharded) sendPlanned(rng *rand.Rand, step uint64, n int) {
	sampled := s.sampled + uint64(n)
	now := time.Now()
	for _, sh := range s.shards {
		// A live shard the batch does not touch hears the fleet's counts
		// and tells its mass in a tally riding along, once its view is
		// tallyEvery old (or it held nothing: it may have items now).
		sh.tally = sh.rows == 0 && sh.up && (sh.mass <= 0 || sh.size == 0 || now.Sub(sh.seen) >= tallyEvery)
		if sh.tally {
			s.sendTally(sh, true)
		}
		if sh.rows == 0 {
			continue
		}
		st := sh.st
		st.nextID++
		d := &replayv1.Draw{Table: s.table, Id: st.nextID, Batch: uint32(sh.rows), Seed: rng.Uint64(), Step: step,
			At: sh.at, Fleet: s.fleetCounts(sh, sampled)}
		if len(sh.at) == 0 {
			d.At = nil
		}
		st.req.Kind = &replayv1.SampleRequest_Draw{Draw: d}
		if err := st.send(&st.req); err != nil {
			sh.failed = err
		}
	}
}

// recvPlanned is drawPlanned's second half: the replies to sendPlanned
// read, each within Deadline.
func (s *sharded) recvPlanned() error {
	var down []string
	for _, sh := range s.shards {
		if sh.tally {
			s.recvTally(sh) // a failure takes the shard down, not the draw
		}
		if sh.rows == 0 {
			continue
		}
		if sh.failed == nil {
			reply, err := sh.st.recv(s.opts.Deadline, nil)
			if err == nil {
				b := reply.GetBatch()
				if b == nil || b.GetId() != sh.st.nextID {
					err = sh.st.broken(fmt.Errorf("draw %d: the reply is %s", sh.st.nextID, describe(reply)))
				} else if err = checkShardBatch(b, sh.rows); err == nil {
					if err = s.observe(sh, b.GetIncarnation(), b.GetMass(), int(b.GetSize()), b.GetMinProb(), b.GetInserted()); err == nil {
						sh.reply = b
						sh.drawn = b.GetIncarnation()
						continue
					}
				}
			}
			sh.failed = err
		}
		if isShardFailure(sh.failed) {
			s.down(sh, sh.failed)
			down = append(down, fmt.Sprintf("%s: %v", sh.target, sh.failed))
			continue
		}
		return fmt.Errorf("shard %s: %w", sh.target, sh.failed)
	}
	if len(down) > 0 {
		return fmt.Errorf("%w: %s", errShardDown, strings.Join(down, "; "))
	}
	return nil
}

// isShardFailure tells a shard's failure (its stream, its deadline, its
// process, a table it cannot sample now) from an error in the request
// itself, which planning again would only repeat.
func isShardFailure(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.Internal, codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented:
		return false
	}
	return true
}

// checkShardBatch checks a shard's Batch has rows rows.
func checkShardBatch(b *replayv1.Batch, rows int) error {
	if len(b.GetKeys()) != rows || len(b.GetProb()) != rows || b.GetData().GetRows() != uint32(rows) {
		return fmt.Errorf("the shard's batch has %d keys, %d probabilities and %d rows for a draw of %d", len(b.GetKeys()), len(b.GetProb()), b.GetData().GetRows(), rows)
	}
	for i, p := range b.GetProb() {
		if !(p > 0 && p <= 1) {
			return fmt.Errorf("the shard's row %d has probability %v", i, p)
		}
	}
	if m := b.GetMass(); !(m > 0) || math.IsInf(m, 0) {
		return fmt.Errorf("the shard's batch has mass %v", m)
	}
	return nil
}

// observe records a shard's reply: masses, and its limiter count, with a
// change of incarnation (a restart) rebased so the fleet's count goes on.
// A new incarnation is taken only once its Info shows it serves the
// fleet's table, run configuration and limiter (checkIncarnation; one
// Info call unless a probe's answer already showed it): otherwise the
// reply is not taken and the error takes the shard down.
func (s *sharded) observe(sh *shard, inc uint64, mass float64, size int, minProb float64, inserted uint64) error {
	if inc != sh.incarnation {
		if inc != sh.admitted {
			if err := s.checkIncarnation(sh, inc); err != nil {
				return err
			}
		}
		sh.admitted, sh.refused = 0, 0
		sh.base += sh.reported - int64(inserted)
		sh.incarnation = inc
		sh.st.incarnation = inc
	}
	sh.mass, sh.size, sh.minProb, sh.reported = mass, size, minProb, int64(inserted)
	sh.seen = time.Now()
	return nil
}

// assemble fills dst from the shards' replies, in row order.
func (s *sharded) assemble(dst *buffer.Batch, n int) error {
	c := &s.cols
	resetColumns(c)
	dst.Prob = dst.Prob[:0]
	s.keys = s.keys[:0]
	first := true
	// Exact mode's shards hold consecutive rows in shard order; one mode
	// has one shard.
	for _, sh := range s.shards {
		sh.bRows, sh.bFirst, sh.bDrawn = sh.rows, sh.first, sh.drawn
		if sh.rows == 0 {
			continue
		}
		b := sh.reply
		if err := appendColumns(c, b.GetData(), first); err != nil {
			return fmt.Errorf("shard %s: %w", sh.target, err)
		}
		first = false
		s.keys = append(s.keys, b.GetKeys()...)
		for _, p := range b.GetProb() {
			dst.Prob = append(dst.Prob, sh.q*p)
		}
	}
	c.Rows = uint32(n)
	if err := DecodeTransitions(&dst.Transitions, batchLayout(dst, n), c); err != nil {
		return err
	}
	dst.Refs = AppendRefs(dst.Refs[:0], s.keys)
	s.refs = append(s.refs[:0], dst.Refs...)
	var mass, size float64
	for _, sh := range s.shards {
		if sh.up && sh.mass > 0 {
			mass += sh.mass
			size += float64(sh.size)
		}
	}
	minProb := 0.0
	for _, sh := range s.shards {
		if sh.up && sh.mass > 0 && sh.minProb > 0 {
			p := sh.mass / mass * sh.minProb
			if minProb == 0 || p < minProb {
				minProb = p
			}
		}
	}
	dst.Size, dst.Total, dst.MinProb = int(size), mass, min(minProb, 1)
	return nil
}

// resetColumns empties c's columns, keeping their storage.
func resetColumns(c *replayv1.Columns) {
	c.Rows = 0
	for _, f := range columnFields(c) {
		*f = (*f)[:0]
	}
	for i := range c.Floats {
		c.Floats[i] = c.Floats[i][:0]
	}
	c.Floats = c.Floats[:0]
}

// columnFields are c's byte columns other than floats.
func columnFields(c *replayv1.Columns) [14]*[]byte {
	return [14]*[]byte{&c.Obs, &c.NextObs, &c.Action, &c.ActionVec, &c.Reward, &c.Discount, &c.Flags,
		&c.EpisodeId, &c.EpisodeStep, &c.GlobalStep, &c.ActorId, &c.StateHash, &c.NextStateHash, &c.Priority}
}

// appendColumns appends src's rows to dst column by column (little-endian
// rows concatenate). Every shard encodes the same layout, so a column
// present in one part and absent in another is an error.
func appendColumns(dst, src *replayv1.Columns, first bool) error {
	if src == nil {
		return fmt.Errorf("%w: a batch without data", ErrColumns)
	}
	df, sf := columnFields(dst), columnFields(src)
	for i, f := range df {
		if !first && (len(*f) == 0) != (len(*sf[i]) == 0) && src.GetRows() > 0 {
			return fmt.Errorf("%w: the shards' batches disagree on column %d (present in one, absent in another)", ErrColumns, i)
		}
		*f = append(*f, *sf[i]...)
	}
	if first {
		for range src.Floats {
			dst.Floats = append(dst.Floats, nil)
		}
		dst.Floats = dst.Floats[:len(src.Floats)]
	}
	if len(src.Floats) != len(dst.Floats) {
		return fmt.Errorf("%w: the shards' batches have %d and %d float columns", ErrColumns, len(dst.Floats), len(src.Floats))
	}
	for i, f := range src.Floats {
		dst.Floats[i] = append(dst.Floats[i], f...)
	}
	return nil
}

// recordLocked copies the shards' views into st.
func (s *sharded) recordLocked(st *ShardStats) {
	for _, sh := range s.shards {
		x := &st.Shards[sh.i]
		x.Up, x.Incarnation, x.Mass, x.Size, x.MinProb, x.Inserted = sh.up, sh.incarnation, sh.mass, sh.size, sh.minProb, sh.counted()
	}
}

// describe lists the shards' states for an error.
func (s *sharded) describe() string {
	var b strings.Builder
	for i, sh := range s.shards {
		if i > 0 {
			b.WriteString(", ")
		}
		state := "up"
		if !sh.up {
			state = "down"
		}
		fmt.Fprintf(&b, "%s %s mass %g size %d", sh.target, state, sh.mass, sh.size)
	}
	return b.String()
}

// down takes sh out of the masses and starts probing it. Once ctx has
// ended (the learner shutting down) a failure is the stage's own, not the
// shard's: the stream is closed but the shard is not counted down, so the
// final ShardStats show the shards as they were.
func (s *sharded) down(sh *shard, err error) {
	if s.ctx.Err() != nil {
		if sh.st.stream != nil {
			sh.st.broken(err)
		}
		return
	}
	if sh.up {
		sh.up = false
		sh.backoff = s.opts.ProbeMin
		s.opts.Counters.update(func(st *ShardStats) {
			st.Shards[sh.i].Downs++
			st.Shards[sh.i].Up = false
		})
	}
	if sh.st.stream != nil {
		sh.st.broken(err)
	}
	if missedDeadline(err) {
		// A shard silent past the deadline (a reply on the stream, which
		// opened on connection st.gen) may sit behind a connection that
		// stays silent after the network heals (see
		// Client.ResetConnection): the probes dial a new one.
		sh.st.c.resetIfSilent(sh.st.gen, true)
	}
	s.startProbe(sh)
}

// startProbe starts sh's probe goroutine unless one runs: it asks the
// shard's Info with backoff (ProbeMin doubling to ProbeMax), each try
// bounded by Deadline, until one answers (then it leaves the reply for
// rejoin) or ctx ends.
func (s *sharded) startProbe(sh *shard) {
	if !sh.probing.CompareAndSwap(false, true) {
		return
	}
	sh.probe.Store(nil)
	c, deadline := sh.st.c, s.opts.Deadline
	backoff, maxBackoff := s.opts.ProbeMin, s.opts.ProbeMax
	if sh.refused != 0 { // a refused incarnation: no hurry
		backoff = maxBackoff
	}
	go func() {
		defer sh.probing.Store(false)
		for {
			t := time.NewTimer(backoff)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			// A shard back after a partition is dialed now, not after
			// gRPC's own reconnection backoff (seconds after a long cut):
			// until the learner reaches it, its fleet counts are stale.
			c.conn.ResetConnectBackoff()
			gen, ready := c.connGen()
			ctx, cancel := context.WithTimeout(s.ctx, deadline)
			info, err := c.replay.Info(ctx, &replayv1.InfoRequest{})
			cancel()
			if err == nil {
				sh.probe.Store(info)
				return
			}
			if missedDeadline(err) && s.ctx.Err() == nil {
				c.resetIfSilent(gen, ready) // the next probe on a new connection
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}()
}

// rejoin brings back the down shards whose probe has answered: a tally on
// a new stream gives their counts and masses (and a restarted shard's new
// incarnation). A shard that fails it stays down and is probed again; so
// does one whose probe shows a new incarnation that serves another table,
// run configuration or limiter than the fleet's (refused, counted in
// ShardState.Refused; a later restart with the fleet's flags rejoins).
func (s *sharded) rejoin() {
	var back []*shard
	for _, sh := range s.shards {
		if !sh.up && !sh.probing.Load() {
			info := sh.probe.Swap(nil)
			if info == nil {
				continue
			}
			if inc := info.GetIncarnation(); inc != sh.incarnation {
				if err := s.admit(sh, info); err != nil {
					s.down(sh, s.refuse(sh, inc, err))
					continue
				}
				sh.admitted = inc
			}
			back = append(back, sh)
		}
	}
	if len(back) == 0 {
		return
	}
	s.tallyShards(back, true)
	for _, sh := range back {
		if sh.up {
			s.opts.Counters.update(func(st *ShardStats) {
				st.Shards[sh.i].Rejoins++
				s.recordLocked(st)
			})
		}
	}
}

// tallyRound tallies every live shard (with the fleet's counts when
// fleet): their limiter counts and masses.
func (s *sharded) tallyRound(fleet bool) {
	var live []*shard
	for _, sh := range s.shards {
		if sh.up {
			live = append(live, sh)
		}
	}
	s.tallyShards(live, fleet)
}

// tallyShards sends a Tally to each of shards, then reads the answers
// (each within Deadline). A shard that answers is up; one that fails is
// down. A shard's new incarnation is rebased (observe).
func (s *sharded) tallyShards(shards []*shard, fleet bool) {
	for _, sh := range shards {
		s.sendTally(sh, fleet)
	}
	for _, sh := range shards {
		s.recvTally(sh)
	}
	s.opts.Counters.update(s.recordLocked)
}

// sendTally sends sh a Tally (with the fleet's counts when fleet); a
// failure is kept in sh.failed for recvTally.
func (s *sharded) sendTally(sh *shard, fleet bool) {
	st := sh.st
	st.nextID++
	t := &replayv1.Tally{Table: s.table, Id: st.nextID}
	if fleet {
		sampled := s.sampled
		if s.pf.state != pfNone {
			// The prefetched draw told the shards its rows (they count
			// as sampled, served or discarded): no renewal takes them back.
			sampled += uint64(s.pf.n)
		}
		t.Fleet = s.fleetCounts(sh, sampled)
	}
	st.req.Kind = &replayv1.SampleRequest_Tally{Tally: t}
	sh.failed = st.send(&st.req)
}

// recvTally reads sh's answer to sendTally (within Deadline): the shard
// is up with its counts and masses, or down.
func (s *sharded) recvTally(sh *shard) {
	if sh.failed == nil {
		reply, err := sh.st.recv(s.opts.Deadline, nil)
		if err == nil {
			t := reply.GetTallied()
			if t == nil || t.GetId() != sh.st.nextID {
				err = sh.st.broken(fmt.Errorf("tally %d: the reply is %s", sh.st.nextID, describe(reply)))
			} else if err = s.observe(sh, t.GetIncarnation(), t.GetMass(), int(t.GetSize()), t.GetMinProb(), t.GetInserted()); err == nil {
				sh.sampledSeen = t.GetSampled()
				if !sh.up {
					sh.up = true
					s.opts.Counters.update(func(st *ShardStats) { st.Shards[sh.i].Up = true })
				}
				return
			}
		}
		sh.failed = err
	}
	s.down(sh, sh.failed)
}

// gate holds a draw of n rows until the fleet's counts admit it (no
// limiter: at once) and a live shard holds items (every shard down, or
// none has items yet): it tallies the live shards (handing them the
// fleet's counts), takes back the shards whose probes answered, and sleeps
// between rounds while the draw cannot go. It waits
// as long as the first client's DrawTimeout allows (no bound when 0) and
// ctx lives.
func (s *sharded) gate(n int) error {
	ready := func() bool { return s.ready(n) }
	if ready() {
		return nil
	}
	start := time.Now()
	var limit time.Time
	if d := s.shards[0].st.c.opts.DrawTimeout; d > 0 {
		limit = start.Add(d)
	}
	sleep := gateMinSleep
	for {
		before := s.inserted()
		s.rejoin()
		s.tallyRound(true)
		if ready() {
			d := time.Since(start)
			s.opts.Counters.update(func(st *ShardStats) { st.GateWaits++; st.GateWait += d })
			return nil
		}
		if s.inserted() != before {
			sleep = gateMinSleep
		}
		if !limit.IsZero() && time.Now().After(limit) {
			return fmt.Errorf("remote: sharded draw: held over %v by the fleet's rate limiter or for a live shard with items (inserted %d, sampled %d; %s): %w",
				time.Since(start).Round(time.Millisecond), s.inserted(), s.sampled, s.describe(), context.DeadlineExceeded)
		}
		t := time.NewTimer(sleep)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return fmt.Errorf("remote: sharded draw: %w", s.ctx.Err())
		case <-t.C:
		}
		sleep = min(2*sleep, gateMaxSleep)
	}
}

// ready reports whether the fleet's counts admit a draw of n rows and a
// live shard holds items (gate's test, without waiting).
func (s *sharded) ready(n int) bool {
	if s.lim != nil && !s.lim.AdmitsSample(s.inserted(), int64(s.sampled)) {
		return false
	}
	for _, sh := range s.shards {
		if s.eligible(sh, n) {
			return true
		}
	}
	return false
}

// prefetchNext sends the draw of the next batch (ShardOptions.Prefetch),
// as many rows as the latest, unless one is out, the stage has not drawn
// yet, ctx has ended, or the draw would wait (the fleet's limiter, or no
// live shard with items): then the next Sample draws. Planning and
// sending only; O(B + shards).
func (s *sharded) prefetchNext() {
	n := len(s.refs)
	if !s.opts.Prefetch || s.rng == nil || n == 0 || s.pf.state != pfNone || s.ctx.Err() != nil || !s.ready(n) {
		return
	}
	if err := s.plan(s.rng, n); err != nil {
		return
	}
	step := s.steps + 1
	s.sendPlanned(s.rng, step, n)
	s.pf = prefetch{state: pfSent, n: n, step: step}
}

// Update writes |δ| back to the shards the latest batch's rows came from.
func (s *sharded) Update(refs []buffer.Ref, absTD []float64) (buffer.UpdateResult, error) {
	if len(refs) != len(absTD) {
		return buffer.UpdateResult{}, fmt.Errorf("remote: update: %w: %d refs, %d errors", buffer.ErrShape, len(refs), len(absTD))
	}
	for i, d := range absTD {
		if math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
			return buffer.UpdateResult{}, fmt.Errorf("remote: update: %w: |δ| of row %d is %v", buffer.ErrPriority, i, d)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.writeBack(refs, absTD, nil, nil)
	if err == nil {
		s.prefetchNext()
	}
	return res, err
}

// UpdateFeatures writes Q and the targets back to the rows' shards.
func (s *sharded) UpdateFeatures(refs []buffer.Ref, q, target []float64) (buffer.UpdateResult, error) {
	if len(refs) != len(q) || len(refs) != len(target) {
		return buffer.UpdateResult{}, fmt.Errorf("remote: update features: %w: %d refs, %d Q values, %d targets", buffer.ErrShape, len(refs), len(q), len(target))
	}
	for i := range q {
		if math.IsNaN(q[i]) || math.IsInf(q[i], 0) || math.IsNaN(target[i]) || math.IsInf(target[i], 0) {
			return buffer.UpdateResult{}, fmt.Errorf("remote: update features: %w: row %d has Q %v, target %v", buffer.ErrNonFinite, i, q[i], target[i])
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.writeBack(refs, nil, q, target)
	if err == nil {
		s.prefetchNext()
	}
	return res, err
}

// writeBack splits a write-back by the rows' shards (the latest batch's
// rows are consecutive per shard), drops the values of shards that are
// down or restarted since the draw, sends the others in parallel and sums
// the results.
func (s *sharded) writeBack(refs []buffer.Ref, absTD, q, target []float64) (buffer.UpdateResult, error) {
	if len(s.refs) == 0 {
		return buffer.UpdateResult{}, fmt.Errorf("remote: write-back: %w: no batch to write back (no draw yet, or the latest draw failed): a sharded stage writes back its latest batch", buffer.ErrShape)
	}
	if len(refs) != len(s.refs) {
		return buffer.UpdateResult{}, fmt.Errorf("remote: write-back: %w: %d refs, the latest batch has %d rows (a sharded stage writes back its latest batch)", buffer.ErrShape, len(refs), len(s.refs))
	}
	for i := range refs {
		if refs[i] != s.refs[i] {
			return buffer.UpdateResult{}, fmt.Errorf("remote: write-back: %w: ref %d is %v, the latest batch's row %d is %v", buffer.ErrShape, i, refs[i], i, s.refs[i])
		}
	}
	if s.pf.state == pfSent {
		// Another write-back of the batch while the next draw is out:
		// its replies come first on the streams (kept for Sample).
		s.pf.err, s.pf.state = s.recvPlanned(), pfReceived
	}
	var res buffer.UpdateResult
	var dropped, wrongInc int
	var sent []*shard
	for _, sh := range s.shards {
		if sh.bRows == 0 {
			continue
		}
		lo, hi := sh.bFirst, sh.bFirst+sh.bRows
		if !sh.up || sh.incarnation != sh.bDrawn {
			dropped += sh.bRows
			s.opts.Counters.update(func(st *ShardStats) { st.Shards[sh.i].Dropped += uint64(sh.bRows) })
			continue
		}
		st := sh.st
		st.nextID++
		st.keys = AppendKeys(st.keys[:0], refs[lo:hi])
		wb := &replayv1.WriteBack{Table: s.table, Id: st.nextID, Incarnation: sh.bDrawn, Keys: st.keys}
		if absTD != nil {
			wb.AbsTd = absTD[lo:hi]
		} else {
			wb.Q, wb.Target = q[lo:hi], target[lo:hi]
		}
		st.req.Kind = &replayv1.SampleRequest_WriteBack{WriteBack: wb}
		sh.failed = st.send(&st.req)
		sent = append(sent, sh)
	}
	for _, sh := range sent {
		if sh.failed == nil {
			reply, err := sh.st.recv(s.opts.Deadline, nil)
			if err == nil {
				r := reply.GetWritten()
				if r == nil || r.GetId() != sh.st.nextID {
					err = sh.st.broken(fmt.Errorf("write-back %d: the reply is %s", sh.st.nextID, describe(reply)))
				} else if int(r.GetApplied()+r.GetStale()+r.GetWrongIncarnation()) != sh.bRows {
					err = sh.st.broken(fmt.Errorf("write-back %d: the shard counts %d applied and %d dropped of %d", sh.st.nextID, r.GetApplied(), r.GetStale()+r.GetWrongIncarnation(), sh.bRows))
				} else {
					res.Applied += int(r.GetApplied())
					res.Stale += int(r.GetStale() + r.GetWrongIncarnation())
					wrongInc += int(r.GetWrongIncarnation())
					continue
				}
			}
			sh.failed = err
		}
		if !isShardFailure(sh.failed) {
			return res, fmt.Errorf("remote: write-back to shard %s: %w", sh.target, sh.failed)
		}
		// Whether the shard applied them is unknown; it is down, and a
		// restart gives it a new incarnation, which refuses them.
		dropped += sh.bRows
		s.opts.Counters.update(func(st *ShardStats) { st.Shards[sh.i].Dropped += uint64(sh.bRows) })
		s.down(sh, sh.failed)
	}
	res.Stale += dropped
	s.opts.Counters.update(func(st *ShardStats) {
		st.WriteBacks++
		st.Applied += uint64(res.Applied)
		st.Stale += uint64(res.Stale - dropped)
		st.Dropped += uint64(dropped)
		s.recordLocked(st)
	})
	return res, nil
}

// Priority is the local twin's.
func (s *sharded) Priority(absTD float64) float64 { return s.local.Selector.Priority(absTD) }

// String is the local twin's stage name and the sampling mode.
func (s *sharded) String() string {
	return fmt.Sprintf("%s over %d shards (%s)", s.local.Selector.String(), len(s.shards), s.opts.Sampling)
}

// evaluated hands every shard's stage the evaluation's mean return; it
// fails only when no shard takes it (a down shard's failure is not the
// learner's).
func (s *sharded) evaluated(meanReturn float64) error {
	var errs []error
	for _, sh := range s.shards {
		if err := sh.st.evaluated(meanReturn); err != nil {
			errs = append(errs, fmt.Errorf("shard %s: %w", sh.target, err))
		}
	}
	if len(errs) == len(s.shards) {
		return errors.Join(errs...)
	}
	return nil
}

// methodStats is the mean over the shards of their method statistics.
func (s *sharded) methodStats() map[string]float64 {
	out := map[string]float64{}
	count := map[string]int{}
	for _, sh := range s.shards {
		for k, v := range sh.st.methodStats() {
			out[k] += v
			count[k]++
		}
	}
	for k := range out {
		out[k] /= float64(count[k])
	}
	return out
}
