package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/bench/loadtest"
	"github.com/apexrl/apex/internal/meter"
	"github.com/apexrl/apex/remote"
	"google.golang.org/grpc"
)

// fleetConfig is a fleet load test (apex loadtest -shards=N).
type fleetConfig struct {
	lt         loadtest.Config // streams (simulated actors), batches, rates, warm-up, duration, seed
	shards     int
	hosts      int     // actor-host processes
	sampleRate float64 // rows/s drawn in all (0: full speed)
	sampling   string  // the learner's -shard-sampling: exact or one
	prefetch   bool    // the learner's ShardOptions.Prefetch
	capacity   int
	chaos      bool
	chaosShard int
	chaosAt    time.Duration // into the measured window
	chaosDown  time.Duration // dead time before the restart
	ckptEvery  time.Duration
	replayArgs []string
}

func (c fleetConfig) validate() error {
	switch {
	case c.shards < 1 || c.shards > 64:
		return fmt.Errorf("-shards=%d must be in 1..64", c.shards)
	case c.hosts < 1 || c.hosts > c.lt.Streams:
		return fmt.Errorf("-actor-hosts=%d must be in 1..%d (-streams)", c.hosts, c.lt.Streams)
	case !(c.sampleRate >= 0) || math.IsInf(c.sampleRate, 0):
		return fmt.Errorf("-sample-rate=%v must be a finite rate >= 0", c.sampleRate)
	case c.sampling != "exact" && c.sampling != "one":
		return fmt.Errorf("-shard-sampling=%q: want exact or one", c.sampling)
	case c.capacity < c.lt.SampleBatch:
		return fmt.Errorf("-capacity=%d must hold at least -sample-batch=%d", c.capacity, c.lt.SampleBatch)
	case c.chaos && (c.chaosShard < 0 || c.chaosShard >= c.shards):
		return fmt.Errorf("-chaos-shard=%d must be in [0, %d)", c.chaosShard, c.shards)
	case c.chaos && c.shards < 2:
		return errors.New("-chaos needs -shards >= 2 (the learner goes on with the others)")
	case c.chaos && (c.chaosAt <= 0 || c.chaosDown < 0 || c.chaosAt+c.chaosDown >= c.lt.Duration):
		return fmt.Errorf("-chaos-at=%v and -chaos-down=%v must fall inside -duration=%v", c.chaosAt, c.chaosDown, c.lt.Duration)
	case c.ckptEvery <= 0:
		return fmt.Errorf("-checkpoint-every=%v must be positive", c.ckptEvery)
	}
	return nil
}

// fleetReport is the fleet load test's JSON report.
type fleetReport struct {
	Shards        int     `json:"shards"`
	ActorHosts    int     `json:"actor_hosts"`
	Actors        int     `json:"simulated_actors"`
	InsertBatch   int     `json:"insert_batch"`
	InsertRate    float64 `json:"insert_rate"`
	SampleBatch   int     `json:"sample_batch"`
	ShardSampling string  `json:"shard_sampling"`
	Prefetch      bool    `json:"prefetch"`
	SampleRate    float64 `json:"sample_rate"`
	Capacity      int     `json:"capacity_per_shard"`
	InsertPath    string  `json:"insert_path"`
	SamplePath    string  `json:"sample_path"`
	WarmupSec     float64 `json:"warmup_s"`
	DurationSec   float64 `json:"duration_s"`

	InsertsPerSec  float64                 `json:"inserts_per_s"`
	SamplesPerSec  float64                 `json:"samples_per_s"`
	DrawsPerSec    float64                 `json:"draws_per_s"`
	PerShard       []fleetShardRep         `json:"per_shard"`
	SampleRTT      loadtest.RTT            `json:"sample_rtt"`
	SampleRTTPhase map[string]loadtest.RTT `json:"sample_rtt_by_phase,omitempty"`

	Processes     []fleetProcRep `json:"processes"`
	CPUSec        float64        `json:"cpu_s"`
	InsertsPerCPU float64        `json:"inserts_per_cpu_s"`
	SamplesPerCPU float64        `json:"samples_per_cpu_s"`

	// AckedInsertsLost is the acknowledged inserts lost, the sum of the
	// shards' AckedLost (see fleetShardRep); AckedInsertsLostMin the sum
	// of their AckedLostMin (equal unless a restored checkpoint's copy
	// stored some: the count is then the range between); LossExact that
	// every shard's count (or range) is exact.
	AckedInsertsLost    uint64 `json:"acked_inserts_lost"`
	AckedInsertsLostMin uint64 `json:"acked_inserts_lost_min"`
	LossExact           bool   `json:"acked_inserts_lost_exact"`
	StaleWritesApplied  uint64 `json:"stale_writes_applied"`
	StaleProbes         uint64 `json:"stale_probes"`
	InsertsLostItems    uint64 `json:"writer_lost_items"`
	Resent              uint64 `json:"resent_batches"`
	// Moved counts the batches the actor hosts' ShardedWriters took off a
	// dead shard and placed on the live ones.
	Moved uint64 `json:"moved_batches"`

	// Learner is the sharded method's totals at the end.
	Learner loadtest.LearnerTotals `json:"learner"`

	Chaos *fleetChaosRep `json:"chaos,omitempty"`
}

type fleetShardRep struct {
	Addr          string  `json:"addr"`
	InsertsPerSec float64 `json:"inserts_per_s"`
	SamplesPerSec float64 `json:"samples_per_s"`
	AckedItems    uint64  `json:"acked_items"`
	AckedBatches  uint64  `json:"acked_batches"`
	Size          uint64  `json:"size_at_end"`
	// StoredItems and UncertainItems are the shard's writer table's
	// counts (Info's WriterPage) for the actor hosts' writer ids, summed:
	// the items stored under them, through the restore from a checkpoint
	// (its table's counts, taken before its copy began, plus what was
	// stored since), and the items stored while that checkpoint was
	// copied (in it or not). They count what the table stored, evicted
	// by later inserts or not, so a full table does not hide a loss.
	StoredItems    uint64 `json:"stored_items"`
	UncertainItems uint64 `json:"uncertain_items"`
	// AckedLost is the acknowledged inserts lost: per writer id,
	// max(0, acknowledged − stored), summed over the hosts' writers.
	// A batch is stored once per (writer, seq) and acknowledged only once
	// stored; what the shard stored and kept is its checkpoint's counts
	// plus what it stored since, so acknowledged items beyond that are
	// those acknowledged after the checkpoint's writer table was taken and
	// gone with the process. Exact (LossExact) when the shard's writer
	// table is complete (no writer evicted, no restore from a table
	// without counts), each host's writer saw the shard die at most once
	// (the load test kills one once) and gave up on none of its batches:
	// then a batch the shard stored without its acknowledgement reaching
	// the writer (stored just before the shard died, or was wrongly
	// thought dead, and moved to another shard) is in the lineage only
	// where the writer has no loss to hide (every batch it had
	// acknowledged by then is in the checkpoint: acks come in seq order),
	// so it offsets nothing; with more deaths it could offset another
	// death's loss (StoredUnacked shows how much could hide), and an
	// evicted writer or a partial table misses stored items (AckedLost
	// then overcounts): not exact. The batches stored while the
	// restored checkpoint was copied (UncertainItems) are counted as lost:
	// AckedLostMin counts them as kept, and the exact count lies between
	// the two (one number when they are equal, as on a shard never
	// restarted).
	AckedLost    uint64 `json:"acked_inserts_lost"`
	AckedLostMin uint64 `json:"acked_inserts_lost_min"`
	LossExact    bool   `json:"acked_inserts_lost_exact"`
	// StoredUnacked is, per writer id, max(0, stored − acknowledged),
	// summed: batches the shard stored whose acknowledgement never
	// reached the writer (stored twice, once elsewhere, when moved).
	StoredUnacked uint64 `json:"stored_unacknowledged_items"`
	// WritersEvicted and CountsPartial are the shard's writer table's
	// (WriterPage): either makes AckedLost an upper bound, not exact.
	WritersEvicted uint64 `json:"writers_evicted,omitempty"`
	CountsPartial  bool   `json:"writer_counts_partial,omitempty"`
	// WrongIncarnation counts the probe write-back values of an earlier
	// incarnation the shard refused; Dropped the write-back values the
	// learner dropped unsent for it; LearnerDowns and LearnerRejoins its
	// transitions in the learner's view; ProbeLastError the probe
	// stream's latest error.
	WrongIncarnation uint64 `json:"probe_write_backs_wrong_incarnation"`
	Dropped          uint64 `json:"write_backs_dropped"`
	Incarnations     int    `json:"incarnations"`
	LearnerDowns     uint64 `json:"learner_downs"`
	LearnerRejoins   uint64 `json:"learner_rejoins"`
	ProbeLastError   string `json:"probe_last_error,omitempty"`
	// The actor hosts' ShardedWriters: the shard's deaths and rejoins (summed
	// over the hosts).
	WriterDeaths  uint64 `json:"writer_deaths"`
	WriterRejoins uint64 `json:"writer_rejoins"`
}

type fleetProcRep struct {
	Name   string  `json:"name"`
	Pid    int     `json:"pid"`
	CPUSec float64 `json:"cpu_s"`
}

type fleetChaosRep struct {
	Shard    int     `json:"shard"`
	KilledAt float64 `json:"killed_at_s"`
	// RestartedAt is when the new process served again (s into the
	// measured window); DownSec the time between.
	RestartedAt float64 `json:"restarted_at_s"`
	DownSec     float64 `json:"down_s"`
	Restored    bool    `json:"restored_from_checkpoint"`
	// The learner's sampled rows/s before the kill, while the shard was
	// down, and after its restart; Kept = during / before.
	RateBefore float64 `json:"learner_rate_before"`
	RateDuring float64 `json:"learner_rate_during"`
	RateAfter  float64 `json:"learner_rate_after"`
	Kept       float64 `json:"learner_rate_kept"`
	// The actor hosts' acknowledged inserts/s over the same spans.
	InsertsBefore float64 `json:"inserts_before"`
	InsertsDuring float64 `json:"inserts_during"`
	InsertsAfter  float64 `json:"inserts_after"`
	// FullRateSec is the time from the restart until the learner's rate
	// over 500 ms is back to 90% of RateBefore with the restarted shard
	// answering draws again (-1: not within the run); FirstDrawSec and
	// FirstAckSec when the restarted shard answered its first draw and
	// acknowledged its first insert.
	FullRateSec  float64 `json:"time_to_full_rate_s"`
	FirstDrawSec float64 `json:"restart_to_first_draw_s"`
	FirstAckSec  float64 `json:"restart_to_first_insert_ack_s"`
	// Inserts acknowledged by the killed shard and gone with it (those
	// after its last checkpoint's writer table), at most (LostOnKilled,
	// counting the batches stored during that checkpoint's copy as lost)
	// and at least (LostOnKilledMin), and by the survivors (must be 0),
	// as fleetShardRep.AckedLost.
	LostOnKilled    uint64 `json:"acked_inserts_lost_on_killed_shard"`
	LostOnKilledMin uint64 `json:"acked_inserts_lost_on_killed_shard_min"`
	LostOnSurvivors uint64 `json:"acked_inserts_lost_on_surviving_shards"`
	// AckedSinceCheckpoint is the same figure for the killed shard counted
	// independently, before its restart: per writer id, what the killed
	// process had acknowledged (the hosts' counters between the kill and
	// the restart) minus what its checkpoint's writer table counts; -1
	// when it could not be counted (no checkpoint table, or no counter
	// line in that span).
	AckedSinceCheckpoint int64 `json:"acked_since_checkpoint_on_killed_shard"`
}

// fleetPart is a child process (an actor host or the learner).
type fleetPart struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	logf   *os.File
	exited chan struct{}
	err    error

	mu     sync.Mutex
	shards []string
	series []partLine // the counter lines, in order
	final  *partLine
	ready  chan struct{}
}

func (p *fleetPart) send(line string) { _, _ = io.WriteString(p.stdin, line+"\n") }

func (p *fleetPart) last() (partLine, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.final != nil {
		return *p.final, true
	}
	if len(p.series) == 0 {
		return partLine{}, false
	}
	return p.series[len(p.series)-1], true
}

// at is the last counter line at or before t (false: none).
func (p *fleetPart) at(t int64) (partLine, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out partLine
	ok := false
	for _, l := range p.series {
		if l.T > t {
			break
		}
		out, ok = l, true
	}
	return out, ok
}

// startPart starts this binary's hidden loadtest-part with args; its
// stderr goes to dir/name.log.
func startPart(dir, name string, args []string) (*fleetPart, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	p := &fleetPart{name: name, cmd: exec.Command(exe, append([]string{loadtestPartCmd}, args...)...), logf: logf,
		exited: make(chan struct{}), ready: make(chan struct{})}
	p.cmd.Dir, p.cmd.Stderr = dir, logf
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		logf.Close()
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	var reading sync.WaitGroup
	reading.Go(func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		readyOnce := sync.OnceFunc(func() { close(p.ready) })
		for sc.Scan() {
			var l partLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			p.mu.Lock()
			switch {
			case l.Shards != nil:
				p.shards = l.Shards
				readyOnce()
			case l.Final:
				p.final = &l
			default:
				p.series = append(p.series, l)
			}
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, out)
	})
	go func() { reading.Wait(); p.err = p.cmd.Wait(); p.logf.Close(); close(p.exited) }()
	return p, nil
}

// stop asks the part to stop (stdin "stop", then its end), waits up to
// limit, then kills it by its pid. It returns how it exited.
func (p *fleetPart) stop(limit time.Duration) error {
	select {
	case <-p.exited:
		return p.exitErr()
	default:
	}
	p.send("stop")
	p.stdin.Close()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("%s (pid %d) did not stop within %v: killed", p.name, p.cmd.Process.Pid, limit)
	}
	return p.exitErr()
}

func (p *fleetPart) exitErr() error {
	if p.err == nil {
		return nil
	}
	b, _ := os.ReadFile(p.logf.Name())
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return fmt.Errorf("%s (pid %d) exited with %v:\n%s", p.name, p.cmd.Process.Pid, p.err, b)
}

// fleetShard is one shard: its folder (checkpoints), its port (kept
// across a restart) and its processes, the current last.
type fleetShard struct {
	dir   string
	addr  string
	procs []*replayProc
	// cpu is the CPU time of the processes at the window's start and
	// before they ended (a killed one's is read just before the kill).
	cpu0, cpu1 []time.Duration
}

func (s *fleetShard) cur() *replayProc { return s.procs[len(s.procs)-1] }

// runFleet runs a fleet load test: it starts the shards, the actor hosts
// and the learner as processes of this binary, warms up, measures (and
// with chaos kills one shard by its pid and restarts it from its
// checkpoint folder), stops every process by its pid and removes its
// folder. say gets progress lines.
func runFleet(ctx context.Context, c fleetConfig, say func(string)) (rep *fleetReport, err error) {
	dir, err := os.MkdirTemp("", "apex-loadtest-fleet-")
	if err != nil {
		return nil, err
	}
	var shards []*fleetShard
	var parts []*fleetPart
	defer func() {
		var errs []error
		for _, p := range parts {
			if e := p.stop(15 * time.Second); e != nil {
				errs = append(errs, e)
			}
		}
		for _, s := range shards {
			for _, p := range s.procs {
				if e := p.stop(); e != nil && !p.killed {
					errs = append(errs, e)
				}
			}
		}
		errs = append(errs, os.RemoveAll(dir))
		if e := errors.Join(errs...); e != nil {
			err = errors.Join(err, e)
			if rep != nil && err != nil {
				rep = nil
			}
		}
	}()
	replayArgs := func(s *fleetShard, restore bool) []string {
		a := []string{"-env=CartPole-v1", "-sampler=per", fmt.Sprintf("-capacity=%d", c.capacity), "-rate-limit=false",
			fmt.Sprintf("-min-replay=%d", c.lt.SampleBatch)}
		if c.chaos { // checkpoints only where a shard is restarted from one
			a = append(a, "-checkpoint-dir="+filepath.Join(s.dir, "ckpt"), "-checkpoint-every="+c.ckptEvery.String())
		}
		if restore {
			a = append(a, "-restore="+filepath.Join(s.dir, "ckpt", "replay.ckpt"))
		}
		return append(a, c.replayArgs...)
	}
	var addrs []string
	for i := range c.shards {
		s := &fleetShard{dir: filepath.Join(dir, fmt.Sprintf("shard%d", i))}
		if err := os.MkdirAll(filepath.Join(s.dir, "ckpt"), 0o755); err != nil {
			return nil, err
		}
		p, err := startReplayIn(ctx, s.dir, "127.0.0.1:0", "replay", replayArgs(s, false), false, say)
		if err != nil {
			return nil, err
		}
		s.addr = p.addr
		s.procs = append(s.procs, p)
		shards = append(shards, s)
		addrs = append(addrs, p.addr)
	}
	list := strings.Join(addrs, ",")
	nonce := rand.Uint64()
	common := []string{"-replay=" + list, fmt.Sprintf("-seed=%d", c.lt.Seed), "-table=" + c.lt.Table}
	var hosts []*fleetPart
	for h := range c.hosts {
		n, first := c.lt.Streams/c.hosts, h*(c.lt.Streams/c.hosts)
		if rest := c.lt.Streams % c.hosts; h < rest {
			n, first = n+1, first+h
		} else {
			first += rest
		}
		p, err := startPart(dir, fmt.Sprintf("actors%d", h), append(common, "-role=actors", fmt.Sprintf("-actors=%d", n),
			fmt.Sprintf("-first=%d", first), fmt.Sprintf("-total=%d", c.lt.Streams), fmt.Sprintf("-insert-batch=%d", c.lt.InsertBatch),
			fmt.Sprintf("-window=%d", c.lt.Window), fmt.Sprintf("-insert-rate=%g", c.lt.InsertRate*float64(n)/float64(c.lt.Streams)),
			fmt.Sprintf("-nonce=%d", nonce)))
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
		hosts = append(hosts, p)
	}
	// The learner starts once every shard holds a batch (as Ape-X's
	// learner waits for its replay to fill): remote.ShardedMethod
	// refreshes a shard's mass only from its replies (or while the fleet's
	// limiter holds draws, and these shards run none), so a shard it first
	// sees empty would never be drawn from.
	for deadline := time.Now().Add(60 * time.Second); ; {
		full := 0
		for _, a := range addrs {
			if si, err := shardInfo(ctx, a, false); err == nil && si.size >= uint64(c.lt.SampleBatch) {
				full++
			}
		}
		if full == len(addrs) {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the shards did not each hold %d items within 60 s of the actor hosts' start", c.lt.SampleBatch)
		}
		for _, p := range hosts {
			select {
			case <-p.exited:
				return nil, fmt.Errorf("%s ended before the learner started: %w", p.name, p.exitErr())
			default:
			}
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	learner, err := startPart(dir, "learner", append(common, "-role=learner", fmt.Sprintf("-sample-batch=%d", c.lt.SampleBatch),
		"-shard-sampling="+c.sampling, fmt.Sprintf("-prefetch=%t", c.prefetch), fmt.Sprintf("-sample-rate=%g", c.sampleRate)))
	if err != nil {
		return nil, err
	}
	parts = append(parts, learner)
	for _, p := range parts {
		select {
		case <-p.ready:
			say(fmt.Sprintf("%s (pid %d) runs", p.name, p.cmd.Process.Pid))
		case <-p.exited:
			return nil, fmt.Errorf("%s exited before it ran: %w", p.name, p.exitErr())
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("%s did not start within 30 s", p.name)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// The parts name the shards in their canonical order: index maps it
	// to this function's.
	index := map[string]int{}
	for i, a := range addrs {
		index[a] = i
	}
	pidCPU := func(p *replayProc) time.Duration { d, _ := meter.PidCPU(p.cmd.Process.Pid); return d }
	partCPU := func(p *fleetPart) time.Duration { d, _ := meter.PidCPU(p.cmd.Process.Pid); return d }
	sleep := func(d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		for _, p := range parts {
			select {
			case <-p.exited:
				return fmt.Errorf("%s ended during the run: %w", p.name, p.exitErr())
			default:
			}
		}
		return nil
	}

	say(fmt.Sprintf("warming up for %v: %d simulated actors over %d actor hosts, %d shards, 1 learner", c.lt.Warmup, c.lt.Streams, c.hosts, c.shards))
	start := time.Now()
	if err := sleep(c.lt.Warmup); err != nil {
		return nil, err
	}
	// Measuring waits for the learner's first draws (at most 30 s more).
	for deadline := time.Now().Add(30 * time.Second); ; {
		if l, ok := learner.last(); ok && l.Lrn != nil && l.Lrn.Draws > 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, errors.New("the learner drew nothing within 30 s of the warm-up")
		}
		if err := sleep(50 * time.Millisecond); err != nil {
			return nil, err
		}
	}
	rep = &fleetReport{Shards: c.shards, ActorHosts: c.hosts, Actors: c.lt.Streams, InsertBatch: c.lt.InsertBatch,
		InsertRate: c.lt.InsertRate, SampleBatch: c.lt.SampleBatch, ShardSampling: c.sampling, Prefetch: c.prefetch, SampleRate: c.sampleRate,
		Capacity: c.capacity, WarmupSec: time.Since(start).Seconds(),
		InsertPath: "remote.ShardedWriter: one per actor host, shared by its simulated actors",
		SamplePath: "remote.ShardedMethod (-shard-sampling), one draw at a time, each batch weighted and written back (-prefetch: the next draw sent right after the write-back, its round trip then the receipt); a one-row probe stream per shard"}
	phase := "run"
	if c.chaos {
		phase = "before"
	}
	learner.send("phase " + phase)
	t0 := time.Now()
	partCPU0 := make([]time.Duration, len(parts))
	for i, p := range parts {
		partCPU0[i] = partCPU(p)
	}
	for _, s := range shards {
		s.cpu0 = append(s.cpu0, pidCPU(s.cur()))
	}
	own0 := meter.ProcessCPU()
	say(fmt.Sprintf("measuring for %v", c.lt.Duration))
	var tKill, tBack time.Time
	if c.chaos {
		if err := sleep(c.chaosAt); err != nil {
			return nil, err
		}
		s := shards[c.chaosShard]
		p := s.cur()
		s.cpu1 = append(s.cpu1, pidCPU(p))
		tKill = time.Now()
		learner.send("phase during")
		p.killed = true
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			return nil, fmt.Errorf("killing shard %d (pid %d): %w", c.chaosShard, p.cmd.Process.Pid, err)
		}
		<-p.exited
		say(fmt.Sprintf("killed shard %d (pid %d) with SIGKILL", c.chaosShard, p.cmd.Process.Pid))
		if err := sleep(c.chaosDown - time.Since(tKill)); err != nil {
			return nil, err
		}
		ck := filepath.Join(s.dir, "ckpt", "replay.ckpt")
		_, statErr := os.Stat(ck)
		restore := statErr == nil
		// What the killed process acknowledged (the hosts' counters are
		// frozen for it until the restart) against its checkpoint's
		// writer table: the loss counted before the restart.
		tRestart := time.Now()
		ackedAtKill, frozen := map[string]uint64{}, true
		for _, h := range hosts {
			l, ok := h.at(tRestart.UnixNano())
			frozen = frozen && ok && l.T > tKill.UnixNano()
			for j, si := range l.Ins {
				if index[h.shards[j]] == c.chaosShard {
					ackedAtKill[si.Writer] += si.AckedItems
				}
			}
		}
		sinceCkpt := int64(-1)
		if frozen {
			var tbl *remote.WriterTable
			if restore {
				tbl, err = remote.ReadWriterTable(ck)
				if err != nil {
					return nil, fmt.Errorf("shard %d's checkpoint: %w", c.chaosShard, err)
				}
			} else {
				tbl = &remote.WriterTable{} // no checkpoint: everything acknowledged is gone
			}
			if tbl != nil && !tbl.CountsPartial && tbl.Evicted == 0 {
				sinceCkpt = 0
				for w, a := range ackedAtKill {
					if st := tbl.Writers[w].Items; a > st {
						sinceCkpt += int64(a - st)
					}
				}
			}
		}
		np, err := startReplayIn(ctx, s.dir, s.addr, "replay-restarted", replayArgs(s, restore), false, say)
		if err != nil {
			return nil, fmt.Errorf("restarting shard %d: %w", c.chaosShard, err)
		}
		tBack = time.Now()
		learner.send("phase after")
		s.procs = append(s.procs, np)
		s.cpu0 = append(s.cpu0, pidCPU(np))
		rep.Chaos = &fleetChaosRep{Shard: c.chaosShard, KilledAt: tKill.Sub(t0).Seconds(), RestartedAt: tBack.Sub(t0).Seconds(),
			DownSec: tBack.Sub(tKill).Seconds(), Restored: restore, AckedSinceCheckpoint: sinceCkpt}
	}
	if err := sleep(c.lt.Duration - time.Since(t0)); err != nil {
		return nil, err
	}
	t1 := time.Now()
	own1 := meter.ProcessCPU()
	partCPU1 := make([]time.Duration, len(parts))
	for i, p := range parts {
		partCPU1[i] = partCPU(p)
	}
	for _, s := range shards {
		s.cpu1 = append(s.cpu1, pidCPU(s.cur()))
	}
	say("stopping the actor hosts and the learner")
	// The learner's round trips stop counting at t1.
	learner.send("phase end")
	var stopErrs []error
	for _, p := range hosts {
		stopErrs = append(stopErrs, p.stop(20*time.Second))
	}
	stopErrs = append(stopErrs, learner.stop(20*time.Second))
	if err := errors.Join(stopErrs...); err != nil {
		return nil, err
	}

	// Rates over the measured window, from the parts' counter lines.
	el := t1.Sub(t0).Seconds()
	rep.DurationSec = el
	rep.PerShard = make([]fleetShardRep, c.shards)
	insAt := func(t int64) []uint64 { // acked items per shard (this function's order), all hosts
		out := make([]uint64, c.shards)
		for _, h := range hosts {
			l, _ := h.at(t)
			for j, si := range l.Ins {
				out[index[h.shards[j]]] += si.AckedItems
			}
		}
		return out
	}
	smpAt := func(t int64) ([]uint64, uint64) { // rows drawn per shard, and draws
		out := make([]uint64, c.shards)
		l, _ := learner.at(t)
		for j, ss := range l.Smp {
			out[index[learner.shards[j]]] += ss.Rows
		}
		var draws uint64
		if l.Lrn != nil {
			draws = l.Lrn.Draws
		}
		return out, draws
	}
	i0, i1 := insAt(t0.UnixNano()), insAt(t1.UnixNano())
	s0, d0 := smpAt(t0.UnixNano())
	s1, d1 := smpAt(t1.UnixNano())
	for i := range c.shards {
		ps := &rep.PerShard[i]
		ps.Addr = addrs[i]
		ps.InsertsPerSec = float64(i1[i]-i0[i]) / el
		ps.SamplesPerSec = float64(s1[i]-s0[i]) / el
		rep.InsertsPerSec += ps.InsertsPerSec
		rep.SamplesPerSec += ps.SamplesPerSec
		ps.Incarnations = len(shards[i].procs)
	}
	rep.DrawsPerSec = float64(d1-d0) / el
	lf, _ := learner.last()
	rep.SampleRTT = lf.RTT["measured"]
	rep.SampleRTTPhase = map[string]loadtest.RTT{}
	for k, v := range lf.RTT {
		if k != "measured" && k != "warmup" && k != "end" {
			rep.SampleRTTPhase[k] = v
		}
	}
	for j, ss := range lf.Smp {
		i := index[learner.shards[j]]
		rep.PerShard[i].WrongIncarnation = ss.WrongIncarnation
		rep.PerShard[i].Dropped = ss.Dropped
		rep.PerShard[i].LearnerDowns = ss.Downs
		rep.PerShard[i].LearnerRejoins = ss.Rejoins
		rep.PerShard[i].ProbeLastError = ss.LastError
		rep.StaleWritesApplied += ss.StaleApplied
		rep.StaleProbes += ss.Probes
	}
	if t := lf.Lrn; t != nil {
		rep.Learner = *t
	}
	// Acknowledged inserts lost: what the hosts' writers had acknowledged
	// by each shard against what the shard's writer table counts as
	// stored under their ids, writer by writer (fleetShardRep.AckedLost).
	acked := make([]map[string]uint64, c.shards) // per shard: items acknowledged per writer id
	for i := range acked {
		acked[i] = map[string]uint64{}
	}
	maxDeaths := make([]uint64, c.shards) // per shard: the most deaths one host's writer saw
	abandoned := make([]uint64, c.shards) // per shard: the items the hosts' writers gave up on
	for _, h := range hosts {
		l, _ := h.last()
		for j, si := range l.Ins {
			i := index[h.shards[j]]
			ps := &rep.PerShard[i]
			acked[i][si.Writer] += si.AckedItems
			maxDeaths[i] = max(maxDeaths[i], si.Deaths)
			abandoned[i] += si.LostItems
			ps.AckedItems += si.AckedItems
			ps.AckedBatches += si.AckedBatches
			ps.WriterDeaths += si.Deaths
			ps.WriterRejoins += si.Rejoins
			rep.InsertsLostItems += si.LostItems
			rep.Resent += si.Resent
			rep.Moved += si.Moved
		}
	}
	rep.LossExact = true
	for i, s := range shards {
		si, err := shardInfo(ctx, s.addr, true)
		if err != nil {
			return nil, fmt.Errorf("shard %d's Info at the end: %w", i, err)
		}
		ps := &rep.PerShard[i]
		ps.Size = si.size
		l := countLoss(acked[i], si.records)
		ps.StoredItems, ps.UncertainItems, ps.AckedLost, ps.AckedLostMin, ps.StoredUnacked = l.stored, l.uncertain, l.lost, l.lostMin, l.storedUnacked
		ps.WritersEvicted, ps.CountsPartial = si.evicted, si.partial
		ps.LossExact = si.evicted == 0 && !si.partial && len(shards[i].procs) <= 2 &&
			maxDeaths[i] <= 1 && abandoned[i] == 0
		rep.AckedInsertsLost += ps.AckedLost
		rep.AckedInsertsLostMin += ps.AckedLostMin
		rep.LossExact = rep.LossExact && ps.LossExact
	}

	// CPU seconds of every process over the window.
	add := func(name string, pid int, d time.Duration) {
		rep.Processes = append(rep.Processes, fleetProcRep{Name: name, Pid: pid, CPUSec: d.Seconds()})
		rep.CPUSec += d.Seconds()
	}
	for i, s := range shards {
		for k, p := range s.procs {
			name := fmt.Sprintf("shard%d", i)
			if k > 0 {
				name += fmt.Sprintf(" (restart %d)", k)
			}
			add(name, p.cmd.Process.Pid, s.cpu1[k]-s.cpu0[k])
		}
	}
	for i, p := range parts {
		add(p.name, p.cmd.Process.Pid, partCPU1[i]-partCPU0[i])
	}
	add("loadtest", os.Getpid(), own1-own0)
	if rep.CPUSec > 0 {
		rep.InsertsPerCPU = rep.InsertsPerSec * el / rep.CPUSec
		rep.SamplesPerCPU = rep.SamplesPerSec * el / rep.CPUSec
	}

	if ch := rep.Chaos; ch != nil {
		rate := func(a, b time.Time) float64 {
			x, _ := smpAt(a.UnixNano())
			y, _ := smpAt(b.UnixNano())
			var n uint64
			for i := range x {
				n += y[i] - x[i]
			}
			return float64(n) / b.Sub(a).Seconds()
		}
		insRate := func(a, b time.Time) float64 {
			x, y := insAt(a.UnixNano()), insAt(b.UnixNano())
			var n uint64
			for i := range x {
				n += y[i] - x[i]
			}
			return float64(n) / b.Sub(a).Seconds()
		}
		ch.InsertsBefore, ch.InsertsDuring, ch.InsertsAfter = insRate(t0, tKill), insRate(tKill, tBack), insRate(tBack, t1)
		ch.RateBefore = rate(t0, tKill)
		ch.RateDuring = rate(tKill, tBack)
		ch.RateAfter = rate(tBack, t1)
		if ch.RateBefore > 0 {
			ch.Kept = ch.RateDuring / ch.RateBefore
		}
		// The restarted shard's first answered draw and acknowledged
		// insert, and the first 500 ms window after the restart at 90%
		// of the rate before with that shard drawing again.
		k := c.chaosShard
		ch.FullRateSec, ch.FirstDrawSec, ch.FirstAckSec = -1, -1, -1
		base, _ := smpAt(tBack.UnixNano())
		baseIns := insAt(tBack.UnixNano())
		for t := tBack; !t.After(t1); t = t.Add(50 * time.Millisecond) {
			now, _ := smpAt(t.UnixNano())
			if ch.FirstDrawSec < 0 && now[k] > base[k] {
				ch.FirstDrawSec = t.Sub(tBack).Seconds()
			}
			if ch.FirstAckSec < 0 && insAt(t.UnixNano())[k] > baseIns[k] {
				ch.FirstAckSec = t.Sub(tBack).Seconds()
			}
			if ch.FullRateSec < 0 && ch.FirstDrawSec >= 0 && t.Add(500*time.Millisecond).Before(t1) &&
				rate(t, t.Add(500*time.Millisecond)) >= 0.9*ch.RateBefore {
				ch.FullRateSec = t.Sub(tBack).Seconds()
			}
		}
		for i, ps := range rep.PerShard {
			if i == k {
				ch.LostOnKilled += ps.AckedLost
				ch.LostOnKilledMin += ps.AckedLostMin
			} else {
				ch.LostOnSurvivors += ps.AckedLost
			}
		}
	}
	return rep, nil
}

// shardState is what a shard's Info says at the end of a run.
type shardState struct {
	size    uint64
	records map[string]*replayv1.WriterRecord // the writer table, by id (with writers)
	evicted uint64
	partial bool
}

// shardInfo asks the shard at addr (loopback, plaintext) for its table's
// size and, with writers, its whole writer table (page by page).
func shardInfo(ctx context.Context, addr string, writers bool) (*shardState, error) {
	dopts, err := loadtestDialOptions(addr, remote.ClientOptions{})
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(addr, dopts...)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	cli := replayv1.NewReplayClient(conn)
	out := &shardState{records: map[string]*replayv1.WriterRecord{}}
	for after, first := "", true; first || writers; first = false {
		ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
		info, err := cli.Info(ictx, &replayv1.InfoRequest{Writers: writers, WritersAfter: after})
		cancel()
		if err != nil {
			return nil, err
		}
		if first {
			for _, t := range info.GetTables() {
				out.size += t.GetSize()
			}
		}
		if !writers {
			break
		}
		p := info.GetWriters()
		if p == nil {
			return nil, fmt.Errorf("%s: Info carries no writer table (a server older than the writer counts)", addr)
		}
		out.evicted, out.partial = p.GetEvicted(), p.GetCountsPartial()
		for _, r := range p.GetRecords() {
			out.records[r.GetId()] = r
			after = r.GetId()
		}
		if !p.GetMore() || len(p.GetRecords()) == 0 {
			break
		}
	}
	return out, nil
}

// lossCount is one shard's acknowledged inserts against its writer table.
type lossCount struct {
	stored, uncertain, lost, lostMin, storedUnacked uint64
}

// countLoss counts, writer id by writer id, what a shard acknowledged
// (acked: items per id) against what its writer table stored under the id
// (fleetShardRep.AckedLost): lost sums max(0, acked − stored), lostMin
// max(0, acked − stored − uncertain), storedUnacked max(0, stored −
// acked); stored and uncertain sum the table's counts for acked's ids. A
// writer the table lacks stored nothing. O(writers).
func countLoss(acked map[string]uint64, records map[string]*replayv1.WriterRecord) lossCount {
	var l lossCount
	sat := func(a, b uint64) uint64 {
		if a > b {
			return a - b
		}
		return 0
	}
	for w, a := range acked {
		r := records[w]
		st, u := r.GetItems(), r.GetUncertainItems()
		l.stored += st
		l.uncertain += u
		l.lost += sat(a, st)
		l.lostMin += sat(a, st+u)
		l.storedUnacked += sat(st, a)
	}
	return l
}

// lossText shows a count of acknowledged inserts lost: the number, a
// range when batches stored during a restored checkpoint's copy make it
// one, marked when it is not exact otherwise (fleetShardRep.LossExact).
func lossText(lost, lostMin uint64, exact bool) string {
	out := fmt.Sprint(lost)
	if lostMin != lost {
		out = fmt.Sprintf("%d-%d", lostMin, lost)
	}
	if !exact {
		out += " (not exact)"
	}
	return out
}

// writeText writes the fleet report as a table.
func (r *fleetReport) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	paced := func(v float64) string {
		if v > 0 {
			return "paced to " + meter.SI(v) + "/s"
		}
		return "full speed"
	}
	prefetch := "no prefetch"
	if r.Prefetch {
		prefetch = "prefetch"
	}
	p("fleet\t%d shards, %d actor hosts of %d simulated actors (batches of %d, %s), 1 learner (draws of %d, %s sampling, %s, %s)\n",
		r.Shards, r.ActorHosts, r.Actors, r.InsertBatch, paced(r.InsertRate), r.SampleBatch, r.ShardSampling, prefetch, paced(r.SampleRate))
	p("measured\t%.2f s after %.2f s of warm-up\n\n", r.DurationSec, r.WarmupSec)
	p("shard\tinserts/s\tsamples/s\tacked\tstored\tsize at end\tacked lost\tincarnations\n")
	for i, s := range r.PerShard {
		p("%d %s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\n", i, s.Addr, meter.SI(s.InsertsPerSec), meter.SI(s.SamplesPerSec), s.AckedItems, s.StoredItems, s.Size,
			lossText(s.AckedLost, s.AckedLostMin, s.LossExact), s.Incarnations)
	}
	p("total\t%s\t%s\t\t\t\t%s\t\n\n", meter.SI(r.InsertsPerSec), meter.SI(r.SamplesPerSec), lossText(r.AckedInsertsLost, r.AckedInsertsLostMin, r.LossExact))
	rtt := func(name string, x loadtest.RTT) {
		p("sample round trip %s (µs)\tp50 %.0f\tp90 %.0f\tp99 %.0f\tmax %.0f\t(%d draws)\n", name, x.P50US, x.P90US, x.P99US, x.MaxUS, x.Count)
	}
	rtt("all", r.SampleRTT)
	for _, ph := range []string{"before", "during", "after"} {
		if x, ok := r.SampleRTTPhase[ph]; ok {
			rtt(ph, x)
		}
	}
	p("\nprocess\tpid\tCPU s\n")
	for _, pr := range r.Processes {
		p("%s\t%d\t%.2f\n", pr.Name, pr.Pid, pr.CPUSec)
	}
	p("all\t\t%.2f\t(%s inserts, %s samples per CPU-s)\n\n", r.CPUSec, meter.SI(r.InsertsPerCPU), meter.SI(r.SamplesPerCPU))
	p("stale writes applied\t%d\t(%d probe write-backs of an earlier incarnation)\n", r.StaleWritesApplied, r.StaleProbes)
	p("learner\t%d draws (%d prefetched), %d rows; write-backs %d applied, %d stale (%d dropped unsent); %d re-planned, %d failed draws\n",
		r.Learner.Draws, r.Learner.Prefetched, r.Learner.Rows, r.Learner.Applied, r.Learner.Stale, r.Learner.Dropped, r.Learner.Replans, r.Learner.Errors)
	p("acknowledged inserts lost\t%s\t(per shard and writer id: acked − stored under the id, by the shard's writer table)\n", lossText(r.AckedInsertsLost, r.AckedInsertsLostMin, r.LossExact))
	p("writers' lost / resent / moved\t%d items / %d batches / %d batches\n", r.InsertsLostItems, r.Resent, r.Moved)
	if c := r.Chaos; c != nil {
		p("\nchaos\tshard %d killed (SIGKILL) at %.2f s, restarted at %.2f s (down %.2f s, restored from checkpoint: %v)\n", c.Shard, c.KilledAt, c.RestartedAt, c.DownSec, c.Restored)
		p("learner rate\tbefore %s/s\tduring %s/s (%.0f%% kept)\tafter %s/s\n", meter.SI(c.RateBefore), meter.SI(c.RateDuring), 100*c.Kept, meter.SI(c.RateAfter))
		p("inserts\tbefore %s/s\tduring %s/s\tafter %s/s\n", meter.SI(c.InsertsBefore), meter.SI(c.InsertsDuring), meter.SI(c.InsertsAfter))
		p("after the restart\tfull rate in %.2f s\tfirst draw %.2f s\tfirst insert ack %.2f s\n", c.FullRateSec, c.FirstDrawSec, c.FirstAckSec)
		since := "not counted"
		if c.AckedSinceCheckpoint >= 0 {
			since = fmt.Sprint(c.AckedSinceCheckpoint)
		}
		p("acked inserts lost\ton the killed shard %s (acked after its last checkpoint's writer table: %s)\ton the survivors %d\n",
			lossText(c.LostOnKilled, c.LostOnKilledMin, true), since, c.LostOnSurvivors)
	}
	p("\ninsert path\t%s\nsample path\t%s\n", r.InsertPath, r.SamplePath)
	return tw.Flush()
}
