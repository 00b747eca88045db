package remote

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/runtime"
)

// Defaults of ShardedWriterOptions.
const (
	// DefaultAckTimeout is how long a live shard may hold unacknowledged
	// batches without acknowledging any before it is probed.
	DefaultAckTimeout = 2 * time.Second
	// DefaultProbeTimeout bounds one probe (an Info call) of a shard.
	DefaultProbeTimeout = time.Second
	// DefaultAllDownTimeout is how long every shard may be dead before the
	// ShardedWriter gives up.
	DefaultAllDownTimeout = 30 * time.Second
)

// maxQuickBreaks is how many times in a row a shard's stream may break
// without an acknowledgement in between and be resumed on the same shard
// because it still answers a probe; the next break marks it dead.
const maxQuickBreaks = 3

// stickyEpisodes is how many episodes a ShardedWriter remembers the shard
// of (the most recently placed first): an episode it remembers stays on
// its shard while that shard lives, even when another shard rejoins.
const stickyEpisodes = 1 << 12

// ShardedWriterOptions configure NewShardedWriter. Zero values select the
// defaults noted on each field.
type ShardedWriterOptions struct {
	// WriterOptions are every shard writer's: Layout (required), Table,
	// Window (the most batches placed on one shard and not acknowledged;
	// the ShardedWriter holds at most shards × Window in all),
	// MaxMessageBytes, and MinBackoff and MaxBackoff, which here bound the
	// wait between two probes of a dead shard (50 ms doubling up to 2 s).
	// MaxAttempts is not used: a shard is never given up on; the whole
	// writer gives up after AllDownTimeout with every shard dead.
	WriterOptions
	// AckTimeout is how long a live shard may hold batches without
	// acknowledging any before it is probed (DefaultAckTimeout when 0): a
	// shard that then does not answer the probe is marked dead. One that
	// answers is only slow (its rate limiter holds inserts while the
	// learner catches up) and is probed again after another AckTimeout.
	// Its batches are not moved: that keeps episodes whole. A shard the
	// learner cannot reach stops holding once its fleet counts' lease
	// passes (ShardedMethod), so such a hold ends without the learner.
	AckTimeout time.Duration
	// ProbeTimeout bounds one probe, an Info call (DefaultProbeTimeout
	// when 0).
	ProbeTimeout time.Duration
	// AllDownTimeout is how long every shard may be dead before the writer
	// gives up (DefaultAllDownTimeout when 0): the batches it holds are
	// then counted as lost and every later call returns the error, which
	// names each shard's last failure.
	AllDownTimeout time.Duration
	// Config, when not empty, is the run configuration (InfoReply.config)
	// every shard must serve: a dead shard that comes back serving another
	// configuration is kept dead (its probes fail and say why).
	Config []byte
}

func (o *ShardedWriterOptions) fill() error {
	if err := o.WriterOptions.fill(); err != nil {
		return err
	}
	if o.AckTimeout < 0 || o.ProbeTimeout < 0 || o.AllDownTimeout < 0 {
		return fmt.Errorf("remote: sharded writer: negative AckTimeout (%v), ProbeTimeout (%v) or AllDownTimeout (%v)", o.AckTimeout, o.ProbeTimeout, o.AllDownTimeout)
	}
	if o.AckTimeout == 0 {
		o.AckTimeout = DefaultAckTimeout
	}
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.AllDownTimeout == 0 {
		o.AllDownTimeout = DefaultAllDownTimeout
	}
	return nil
}

// ShardedWriterStats are a ShardedWriter's counters, a snapshot for
// diagnostics. Every batch Insert took is, at any time, exactly one of
// acknowledged by some shard, pending on some shard, waiting for a live
// shard (Orphans) or lost: Batches == Σ Shards[i].Acked + Σ
// Shards[i].Pending + Orphans + Lost (each shard's Lost is included in
// Lost).
type ShardedWriterStats struct {
	// Batches and Items count what Insert took (after splitting by
	// episode and by MaxMessageBytes), Batches with the extra pieces of
	// moved messages split by episode (Splits).
	Batches, Items uint64
	// Live is the number of shards alive now.
	Live int
	// Orphans is the batches taken off dead shards while no shard was
	// alive, waiting for one to rejoin.
	Orphans int
	// Splits counts the messages taken off dead shards that were split by
	// episode to be re-placed (each piece is counted in Batches).
	Splits uint64
	// Lost and LostItems count the batches abandoned when the writer gave
	// up (every shard dead for AllDownTimeout, a refusal no shard would
	// take, Close's context ended first): the shards' and the orphans'.
	Lost, LostItems uint64
	// Shards are the shards' own counters, in the order of the clients
	// given to NewShardedWriter.
	Shards []ShardWriterStats
}

// Sum adds the shards' writer counters into one WriterStats, as one
// Writer would report them (a view for metrics that do not split by
// shard): Lost and LostItems are the whole writer's (the orphans' too),
// Pending includes the orphans, LastError and Incarnation are the latest
// shard's that has one, Incarnations counts every shard's changes.
// Batches counts the shards' (adopted batches once more), so it is not
// Insert's count: use ShardedWriterStats.Batches for that.
func (s ShardedWriterStats) Sum() WriterStats {
	var t WriterStats
	for _, sh := range s.Shards {
		w := sh.WriterStats
		t.Batches += w.Batches
		t.Items += w.Items
		t.Acked += w.Acked
		t.AckedItems += w.AckedItems
		t.Duplicates += w.Duplicates
		t.Resent += w.Resent
		t.Reconnects += w.Reconnects
		t.Errors += w.Errors
		t.Pending += w.Pending
		t.Blocked += w.Blocked
		t.Incarnations += w.Incarnations
		t.Adopted += w.Adopted
		t.Moved += w.Moved
		if w.LastError != "" {
			t.LastError = w.LastError
		}
		if w.Incarnation != 0 {
			t.Incarnation = w.Incarnation
		}
	}
	t.Pending += s.Orphans
	t.Lost, t.LostItems = s.Lost, s.LostItems
	return t
}

// ShardWriterStats are one shard's counters in ShardedWriterStats. The
// embedded WriterStats are its writer's: Acked and AckedItems are the
// batches and items the shard stored, Resent the batches sent again to it
// after its stream broke and it answered a probe, Adopted the batches it
// took over from dead shards, Moved the batches taken off it when it died
// (re-placed on the live shards), Lost its batches abandoned when the
// ShardedWriter gave up, Incarnation the shard's (from its latest
// acknowledgement).
type ShardWriterStats struct {
	// Shard is the client's target.
	Shard string
	// Live says whether the shard takes batches now.
	Live bool
	WriterStats
	// Deaths and Rejoins count the shard's alive→dead and dead→alive
	// transitions.
	Deaths, Rejoins uint64
	// Probes and ProbeFailures count the Info calls that checked the
	// shard, and those that failed; ConnectionResets the failures past
	// ProbeTimeout that ended the shard's connection
	// (Client.ResetConnection: the next probe dials a new one).
	Probes, ProbeFailures, ConnectionResets uint64
	// DownError is why the shard was last marked dead or last failed a
	// probe ("" when never).
	DownError string
	// Lineage is the shard's data lineage as its latest Info showed it
	// (0: not seen, or a server older than lineages). SwapRefusals counts
	// the probes refused because the server reached reported another
	// shard's lineage (ErrShardSwapped: the shard is kept dead);
	// LineageResets the times the shard came back with a lineage never
	// seen (it lost its data; its batches go on being stored).
	Lineage                     uint64
	SwapRefusals, LineageResets uint64
}

// wshard is one shard of a ShardedWriter.
type wshard struct {
	name  string
	seed  uint64 // rendezvous seed: the name hashed
	c     *Client
	w     *Writer
	broke chan error // the writer's stream breaks (capacity 1; a writer reports one and pauses)

	// Under ShardedWriter.mu:
	live                              bool
	deaths, rejoins                   uint64
	probes, probeFailures, connResets uint64
	downErr                           string
	swaps, resets                     uint64
}

var _ runtime.Sink = (*ShardedWriter)(nil)

// ShardedWriter streams transitions into a fleet of replay servers (the
// shards, one Client each): it implements runtime.Sink for an actor host
// whose replay is sharded, with one Writer per shard, all under the same
// writer id.
//
// Placement: Insert cuts a batch into runs of rows of one episode
// (buffer.Transitions.EpisodeID; a layout without episodes makes each
// Insert one run) and places each run on the live shard of highest
// rendezvous weight for (writer id, episode) — highest-random-weight
// hashing (Thaler and Ravishankar 1998) over the shards' targets — so an
// episode stays whole on one shard (ReF-ER's episode eviction and TER's
// predecessor links need it), placement is a function of the writer id,
// the episode and the live shards' targets alone (deterministic), and
// losing one shard moves only the episodes it held. Consecutive runs bound for the same shard travel as one
// message, which carries the last run's episode as its key (an actor's
// batch ends with the episode its next batch continues). The writer
// remembers the shard of its 4096 latest episodes, so a shard that
// rejoins takes new episodes, not the tails of running ones.
//
// Failures: a shard's stream error is noticed at once; the shard is then
// probed (Info, within ProbeTimeout): one that answers is resumed and gets
// its unacknowledged batches again, in order (stored once: (writer, seq)
// is idempotent, across a restart from a checkpoint too for the batches
// its writer table covers, see Writer), unless its stream broke maxQuickBreaks (3) times in a
// row without an acknowledgement; one that does not is marked dead. A
// shard that holds unacknowledged batches for AckTimeout without
// acknowledging any is probed the same way (a slow shard that answers is
// left alone: that is its rate limiter's backpressure). So a dead shard is
// marked dead within ProbeTimeout of its stream's error, or within
// AckTimeout + AckTimeout/4 + ProbeTimeout when it goes silent. Marking it
// dead moves its unacknowledged batches, in order, to the live shards
// (placed by the same hashing over the shards left; a message that
// carries several episodes is split by episode where they now go to
// different shards, each piece going where its episodes go, so a running
// episode's moved rows and its later rows share a shard — it stays whole
// unless the writer's bound on held batches has no room for the extra
// pieces) and sends them there. The episodes it held are split at that point: their
// acknowledged part stays on the dead shard and comes back with its
// checkpoint when it restarts, and a batch the dead shard had stored
// without acknowledging it is then stored twice, once on each shard (at
// most its window's batches per death). A dead shard is probed with
// backoff (MinBackoff doubling to MaxBackoff), gRPC's reconnection backoff
// reset before each probe, and rejoins when it answers (with its new
// incarnation, and Config when set), taking new episodes; its writer's
// sequence numbers go on from where they were.
//
// Shard identity: every shard's data lineage (InfoReply.lineage,
// Server.Lineage) is asked at first contact and checked at every probe
// (see shardLineages): a shard whose server reports the lineage another
// shard had (their addresses swapped: pods restarted on each other's IPs
// behind one DNS name) fails its probes and stays dead, counted in
// ShardWriterStats.SwapRefusals, its batches moved to the live shards —
// one writer id on every shard means that server's writer table would
// acknowledge this shard's batches as duplicates of the other shard's
// without storing them. Each batch sent carries the lineage the shard's
// latest probe showed (InsertRequest.lineage), so a server of another
// lineage reached without a probe (a reconnection after a probe) refuses
// it (ABORTED) before its writer table is consulted: the stream breaks
// and the probe that follows refuses the shard. A lineage never seen is a
// shard restarted without its checkpoint (LineageResets): taken, since
// its empty table stores every batch. Servers without lineages (0) are
// taken as before.
//
// Bounds: at most Window batches newly placed on a shard are
// unacknowledged, and shards × Window in all (a shard that takes over a
// dead shard's batches may hold more than Window). While every shard is
// dead Insert blocks; after AllDownTimeout the writer gives up: what it
// holds is counted in Lost and every later call returns an error naming
// each shard's last failure. A refusal that resending cannot cure (a
// malformed batch, a bad token, the writer id in use) from any shard also
// gives up, as a Writer does. Nothing is dropped without being counted.
//
// Cost: Insert is O(rows) to find the episodes, O(shards) per episode run
// to place it, plus a Writer's encode and wait for window space. One
// goroutine per shard watches it (and probes it while dead), besides each
// shard writer's own. Concurrency: Insert, Flush and Stats are safe for
// concurrent use. Inserts are serialized, in call order, as a Writer's
// are: one that waits for a full shard's window (that shard's
// backpressure, or a shard dying until it is marked dead) holds back the
// Inserts behind it, whatever their shards. Close is called once, after
// the last Insert, and may run while an Insert waits.
type ShardedWriter struct {
	id       string
	idHash   uint64
	opts     ShardedWriterOptions
	shards   []*wshard
	lineages *shardLineages // each shard's data lineage, from its Infos
	maxRows  int
	slots    chan struct{} // a place per batch held and not acknowledged: shards × Window

	insertMu sync.Mutex  // serializes Insert
	batchNo  uint64      // Inserts so far, the run key of a layout without episodes (under insertMu)
	runs     []insertRun // Insert's, reused (under insertMu)

	ctx    context.Context // ends the probes (Close)
	cancel context.CancelFunc
	wg     sync.WaitGroup // the monitors

	closeOnce sync.Once
	closeErr  error

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change below
	dead     chan struct{} // closed when the writer fails or closes: waits for a slot end
	deadDone bool
	sticky   map[uint64]int // episode key → shard index
	ring     []uint64       // sticky's keys, oldest at ringNext once full
	ringNext int
	orphans  []*wbatch // taken off dead shards while none was alive
	moving   int       // down()s between detaching a writer and placing its batches
	moves    uint64    // batches placements changed (Flush re-checks)
	splits   uint64    // moved messages split by episode
	live     int
	downAt   time.Time // when the last live shard died (live == 0)
	closing  bool
	failing  bool
	err      error
	batches  uint64
	items    uint64
	lostOrph uint64 // orphans lost, batches
	lostOrIt uint64 // and items
}

// NewShardedWriter starts a writer with id (1-128 bytes, unique to this
// writer, stable across its reconnects; every shard sees the same id)
// into the table opts name on each of clients' shards (1 to MaxShards
// clients of distinct targets, as ResolveShards and DialShard give them;
// each shard serving the same run configuration). Every shard starts
// alive: NewShardedWriter does no I/O. Its goroutines run until Close;
// the clients stay the caller's (close them after Close). An error names
// a bad id, a missing layout, a bad list of clients or a closed client.
func NewShardedWriter(clients []*Client, id string, opts ShardedWriterOptions) (*ShardedWriter, error) {
	if len(clients) == 0 || len(clients) > MaxShards {
		return nil, fmt.Errorf("remote: sharded writer: %d shards, want 1-%d", len(clients), MaxShards)
	}
	if err := opts.fill(); err != nil {
		return nil, err
	}
	s := &ShardedWriter{
		id: id, idHash: hashString(id), opts: opts,
		slots:    make(chan struct{}, len(clients)*opts.Window),
		changed:  make(chan struct{}),
		dead:     make(chan struct{}),
		sticky:   make(map[uint64]int),
		lineages: newShardLineages(len(clients)),
	}
	seen := make(map[string]bool, len(clients))
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("remote: sharded writer: shard %d: nil client", i)
		}
		name := c.Target()
		if seen[name] {
			return nil, fmt.Errorf("remote: sharded writer: shard %q given twice", name)
		}
		seen[name] = true
		sh := &wshard{name: name, seed: hashString(name), c: c, broke: make(chan error, 1), live: true}
		w, err := c.newWriter(id, opts.WriterOptions, &writerHooks{
			broke: func(err error) {
				select {
				case sh.broke <- err:
				default: // one is waiting already: the monitor looks at the writer anyway
				}
			},
			acked: s.release,
		})
		if err != nil {
			return nil, fmt.Errorf("remote: sharded writer: shard %s: %w", name, err)
		}
		sh.w = w
		s.shards = append(s.shards, sh)
	}
	s.maxRows = s.shards[0].w.maxRows
	s.live = len(s.shards)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for _, sh := range s.shards {
		go sh.w.run()
		s.wg.Add(2)
		go s.monitor(sh)
		go s.learn(sh)
	}
	return s, nil
}

// Insert places t's rows, episode by episode, on the live shards (split
// below MaxMessageBytes when larger) and returns once they are in the
// shards' windows, waiting while a window is full and while no shard is
// alive. It does not wait for acknowledgements (Flush does); t is only
// read and may be reused when Insert returns. An error is a malformed t
// (wrapping ErrColumns; nothing of t was taken), ErrWriterClosed, or the
// error the writer gave up with (see ShardedWriterStats.Lost).
func (s *ShardedWriter) Insert(t *buffer.Transitions) error {
	n := t.Len()
	s.insertMu.Lock()
	defer s.insertMu.Unlock()
	if err := s.state(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	for _, col := range columnLens(t) {
		if col%n != 0 {
			return fmt.Errorf("remote: sharded writer %q: %w: a column of %d values does not split into %d rows", s.id, ErrColumns, col, n)
		}
	}
	s.batchNo++
	// Runs of one episode each, and their shards: consecutive runs bound
	// for the same shard travel as one message, keyed by the last run's
	// episode (the one the actor's next batch continues).
	runs := s.runs[:0]
	if len(t.EpisodeID) == n {
		for lo := 0; lo < n; {
			hi := lo + 1
			for hi < n && t.EpisodeID[hi] == t.EpisodeID[lo] {
				hi++
			}
			runs = append(runs, insertRun{hi: hi, key: episodeKey(s.idHash, t.EpisodeID[lo])})
			lo = hi
		}
	} else {
		runs = append(runs, insertRun{hi: n, key: episodeKey(s.idHash^noEpisodeSalt, s.batchNo)})
	}
	s.mu.Lock()
	for i := range runs {
		runs[i].shard = s.placeLocked(runs[i].key, nil) // -1 while no shard lives: place waits
	}
	s.mu.Unlock()
	s.runs = runs
	for lo, r := 0, 0; r < len(runs); r++ {
		if r+1 < len(runs) && runs[r+1].shard == runs[r].shard && runs[r].shard >= 0 {
			continue // the next run goes along
		}
		hi, key := runs[r].hi, runs[r].key
		for plo := lo; plo < hi; plo += s.maxRows {
			phi := min(hi, plo+s.maxRows)
			piece := t
			if plo > 0 || phi < n {
				sub := rowRange(t, plo, phi, n)
				piece = &sub
			}
			if err := s.place(piece, phi-plo, key); err != nil {
				return err
			}
		}
		lo = hi
	}
	return nil
}

// insertRun is rows [previous run's hi, hi) of an Insert: one episode,
// its placement key and shard.
type insertRun struct {
	hi    int
	key   uint64
	shard int
}

// noEpisodeSalt keeps the run keys of a layout without episodes (the
// Insert count) apart from episode ids.
const noEpisodeSalt = 0x5bd1e9955bd1e995

// place puts one run piece of rows rows with placement key key on its
// shard, taking a place of the writer's total bound first.
func (s *ShardedWriter) place(t *buffer.Transitions, rows int, key uint64) error {
	select {
	case s.slots <- struct{}{}:
	case <-s.dead:
		return s.state()
	}
	for {
		sh, deaths, err := s.pick(key)
		if err != nil {
			s.release()
			return err
		}
		err = sh.w.insertRows(t, rows, key)
		if err == nil {
			s.mu.Lock()
			s.batches++
			s.items += uint64(rows)
			s.mu.Unlock()
			return nil
		}
		if !errors.Is(err, errShardDetached) {
			s.release()
			if serr := s.state(); serr != nil {
				return serr
			}
			return err
		}
		// The shard's monitor is moving its batches off it: wait until it
		// has (so this run follows its earlier rows), then place again.
		s.mu.Lock()
		for sh.live && sh.deaths == deaths && s.err == nil && !s.closing {
			ch := s.changed
			s.mu.Unlock()
			<-ch
			s.mu.Lock()
		}
		s.mu.Unlock()
	}
}

// release frees a place of the total bound (an acknowledgement, or a
// batch not taken after all).
func (s *ShardedWriter) release() {
	select {
	case <-s.slots:
	default:
	}
}

// pick returns key's shard and its deaths so far, waiting while no shard
// is alive.
func (s *ShardedWriter) pick(key uint64) (*wshard, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if err := s.stateLocked(); err != nil {
			return nil, 0, err
		}
		if i := s.placeLocked(key, nil); i >= 0 {
			return s.shards[i], s.shards[i].deaths, nil
		}
		ch := s.changed
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
}

// placeLocked returns the shard of key: the one remembered for it when it
// is alive and not excluded, else the live one of highest rendezvous
// weight (remembered from then on); -1 when none is alive.
func (s *ShardedWriter) placeLocked(key uint64, exclude []bool) int {
	if i, ok := s.sticky[key]; ok && s.shards[i].live && (exclude == nil || !exclude[i]) {
		return i
	}
	i := rendezvous(key, s.shards, func(i int) bool { return s.shards[i].live && (exclude == nil || !exclude[i]) })
	if i < 0 {
		return -1
	}
	if _, ok := s.sticky[key]; !ok {
		if len(s.ring) < stickyEpisodes {
			s.ring = append(s.ring, key)
		} else {
			delete(s.sticky, s.ring[s.ringNext])
			s.ring[s.ringNext] = key
			s.ringNext = (s.ringNext + 1) % stickyEpisodes
		}
	}
	s.sticky[key] = i
	return i
}

// rendezvous returns the index of the shard ok accepts with the highest
// weight for key (ties to the lower index), -1 when it accepts none.
// O(len(shards)).
func rendezvous(key uint64, shards []*wshard, ok func(int) bool) int {
	best, bestW := -1, uint64(0)
	for i, sh := range shards {
		if !ok(i) {
			continue
		}
		if w := mix64(key ^ sh.seed); best < 0 || w > bestW {
			best, bestW = i, w
		}
	}
	return best
}

// episodeKey is the placement key of (writer, episode): writer is the
// writer id hashed.
func episodeKey(writer, episode uint64) uint64 {
	return mix64(writer ^ mix64(episode+0x9e3779b97f4a7c15))
}

// mix64 is SplitMix64's finalizer: a bijection of uint64 whose every
// output bit depends on every input bit.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return mix64(h.Sum64())
}

// Flush waits until every batch taken so far is acknowledged by some
// shard, the writer gives up (its error) or ctx ends (ctx's error; the
// batches stay pending, not lost). Safe for concurrent use.
func (s *ShardedWriter) Flush(ctx context.Context) error {
	for {
		s.mu.Lock()
		err, gen, busy, ch := s.err, s.moves, len(s.orphans)+s.moving, s.changed
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if busy > 0 {
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return fmt.Errorf("remote: sharded writer %q: flush with batches waiting for a live shard: %w", s.id, ctx.Err())
			}
		}
		for _, sh := range s.shards {
			if err := sh.w.Flush(ctx); err != nil {
				if serr := s.state(); serr != nil && !errors.Is(serr, ErrWriterClosed) {
					return serr
				}
				return fmt.Errorf("remote: sharded writer %q: shard %s: %w", s.id, sh.name, err)
			}
		}
		s.mu.Lock()
		done := s.moves == gen && len(s.orphans) == 0 && s.moving == 0
		s.mu.Unlock()
		if done {
			return nil
		}
	}
}

// Close flushes (waiting for every acknowledgement until ctx ends), stops
// watching the shards and closes every shard writer, waiting for their
// goroutines. Batches still unacknowledged when ctx ends are counted as
// lost and the error says so. Call it once, after the last Insert; later
// calls return the first's result. The clients stay open.
func (s *ShardedWriter) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		ferr := s.Flush(ctx)
		s.mu.Lock()
		s.closing = true
		s.endLocked()
		s.broadcastLocked()
		s.mu.Unlock()
		if ferr != nil {
			s.fail(fmt.Errorf("closed before the shards acknowledged every batch: %w", ferr))
		}
		s.cancel()
		s.wg.Wait()
		var errs []error
		for _, sh := range s.shards {
			if err := sh.w.Close(ctx); err != nil && ferr == nil {
				errs = append(errs, fmt.Errorf("shard %s: %w", sh.name, err))
			}
		}
		s.mu.Lock()
		s.closeErr = s.err
		s.mu.Unlock()
		if s.closeErr == nil && len(errs) > 0 {
			s.closeErr = fmt.Errorf("remote: sharded writer %q: %w", s.id, errors.Join(errs...))
		}
	})
	return s.closeErr
}

// Stats snapshots the writer's counters. Safe for concurrent use; O(shards).
func (s *ShardedWriter) Stats() ShardedWriterStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ShardedWriterStats{Batches: s.batches, Items: s.items, Live: s.live, Orphans: len(s.orphans), Splits: s.splits,
		Lost: s.lostOrph, LostItems: s.lostOrIt, Shards: make([]ShardWriterStats, len(s.shards))}
	for i, sh := range s.shards {
		ws := sh.w.Stats()
		st.Lost += ws.Lost
		st.LostItems += ws.LostItems
		st.Shards[i] = ShardWriterStats{Shard: sh.name, Live: sh.live, WriterStats: ws,
			Deaths: sh.deaths, Rejoins: sh.rejoins, Probes: sh.probes, ProbeFailures: sh.probeFailures, ConnectionResets: sh.connResets, DownError: sh.downErr,
			Lineage: s.lineages.get(i), SwapRefusals: sh.swaps, LineageResets: sh.resets}
	}
	return st
}

// state is the error a call returns now (nil when the writer works).
func (s *ShardedWriter) state() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateLocked()
}

func (s *ShardedWriter) stateLocked() error {
	if s.err != nil {
		return s.err
	}
	if s.closing {
		return ErrWriterClosed
	}
	return nil
}

func (s *ShardedWriter) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// endLocked closes dead (once): waits for a place end.
func (s *ShardedWriter) endLocked() {
	if !s.deadDone {
		s.deadDone = true
		close(s.dead)
	}
}

// fail gives up: every shard writer fails (its pending batches counted
// lost), the orphans are counted lost, and err (with the totals) becomes
// every later call's error. The first failure wins.
func (s *ShardedWriter) fail(err error) {
	s.mu.Lock()
	if s.failing {
		s.mu.Unlock()
		return
	}
	s.failing = true
	s.mu.Unlock()
	for _, sh := range s.shards {
		sh.w.fail(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.orphans {
		s.lostOrph++
		s.lostOrIt += uint64(b.rows)
	}
	clear(s.orphans)
	s.orphans = s.orphans[:0]
	lost, items := s.lostOrph, s.lostOrIt
	for _, sh := range s.shards {
		ws := sh.w.Stats()
		lost += ws.Lost
		items += ws.LostItems
	}
	s.err = fmt.Errorf("remote: sharded writer %q: %d batches (%d items) lost: %w", s.id, lost, items, err)
	s.endLocked()
	s.broadcastLocked()
}

// monitor watches one shard while it is alive (its writer's stream
// errors, its acknowledgements' pace) and probes it while it is dead,
// until the writer closes or fails.
func (s *ShardedWriter) monitor(sh *wshard) {
	defer s.wg.Done()
	tick := time.NewTicker(max(s.opts.AckTimeout/4, time.Millisecond))
	defer tick.Stop()
	breaks, ackedAt := 0, uint64(0)
	var probedAt time.Time
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.dead:
			return
		case err := <-sh.broke:
			if permanent(err) {
				s.fail(fmt.Errorf("replay shard %s: %w", sh.name, err))
				return
			}
			if acked := sh.w.Stats().Acked; acked != ackedAt {
				breaks, ackedAt = 0, acked
			}
			breaks++
			if breaks < maxQuickBreaks {
				if perr := s.probe(sh); perr == nil {
					sh.w.resume() // the same shard: it gets its window again, in order
					continue
				}
			}
			if !s.down(sh, fmt.Errorf("stream error: %w", err)) {
				return
			}
			breaks, ackedAt = 0, sh.w.Stats().Acked
		case now := <-tick.C:
			mode, pending, at := sh.w.progress()
			if probedAt.After(at) {
				at = probedAt
			}
			if mode != modeActive || pending == 0 || now.Sub(at) < s.opts.AckTimeout {
				continue
			}
			probedAt = now
			perr := s.probe(sh)
			if perr == nil {
				continue // slow, not dead: the shard's limiter holds our batches
			}
			if !s.down(sh, fmt.Errorf("%d batches unacknowledged for %v and the probe failed: %w", pending, now.Sub(at).Round(time.Millisecond), perr)) {
				return
			}
			breaks, ackedAt = 0, sh.w.Stats().Acked
		}
	}
}

// learn asks the shard's Info at first contact (within ProbeTimeout,
// beside the shard's stream) and records its lineage; a shard that does
// not answer is learned at its first probe. A server that is another
// shard's (ErrShardSwapped) is reported to the monitor as a break of the
// stream, whose probe then keeps the shard dead. O(1) calls; not counted
// in Probes.
func (s *ShardedWriter) learn(sh *wshard) {
	defer s.wg.Done()
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.ProbeTimeout)
	defer cancel()
	info, err := sh.c.Info(ctx)
	if err != nil {
		return
	}
	if err := s.checkLineage(sh, info.GetLineage()); err != nil {
		select {
		case sh.broke <- err:
		default:
		}
	}
}

// checkLineage applies shardLineages.check to shard sh's lineage lin,
// counting refusals and resets.
func (s *ShardedWriter) checkLineage(sh *wshard, lin uint64) error {
	i := slices.Index(s.shards, sh)
	reset, err := s.lineages.check(i, lin, func(j int) string { return s.shards[j].name })
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		sh.swaps++
		return fmt.Errorf("replay shard %s: %w", sh.name, err)
	}
	if reset {
		sh.resets++
	}
	if lin != 0 {
		sh.w.lineage.Store(lin) // its batches now expect it (InsertRequest.lineage)
	}
	return nil
}

// probe asks the shard for its Info within ProbeTimeout (and its Config
// when one is required) and checks its lineage (shardLineages: a server
// that is another shard's fails the probe, wrapping ErrShardSwapped, so
// the shard stays dead rather than send its batches to another shard's
// writer table). O(1) calls; counted.
func (s *ShardedWriter) probe(sh *wshard) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.ProbeTimeout)
	defer cancel()
	gen, ready := sh.c.connGen()
	info, err := sh.c.Info(ctx)
	// Silent past ProbeTimeout on a ready connection: it may stay silent
	// after the network heals (Client.ResetConnection); the next probe
	// and the stream dial a new one.
	reset := missedDeadline(err) && s.ctx.Err() == nil && sh.c.resetIfSilent(gen, ready)
	if err == nil && len(s.opts.Config) > 0 {
		if diff := ConfigDiff(s.opts.Config, info.GetConfig()); diff != "" {
			err = fmt.Errorf("the shard serves another run configuration (%s)", diff)
		}
	}
	if err == nil {
		err = s.checkLineage(sh, info.GetLineage())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sh.probes++
	if reset {
		sh.connResets++
	}
	if err != nil {
		sh.probeFailures++
		sh.downErr = err.Error()
		return err
	}
	return nil
}

// down marks the shard dead: it moves the shard writer's unacknowledged
// batches to the live shards (or keeps them as orphans while none is
// alive), then probes the shard with backoff until it rejoins (true) or
// the writer closes or fails (false).
func (s *ShardedWriter) down(sh *wshard, why error) bool {
	s.mu.Lock()
	s.moving++
	s.mu.Unlock()
	bs := sh.w.detach()
	select {
	case <-sh.broke: // a break of the stream detach ended, or reported meanwhile: handled here
	default:
	}
	s.mu.Lock()
	sh.live = false
	sh.deaths++
	sh.downErr = why.Error()
	s.live--
	if s.live == 0 {
		s.downAt = time.Now()
	}
	s.placeBatchesLocked(bs)
	s.moving--
	s.broadcastLocked()
	s.mu.Unlock()
	return s.whileDead(sh)
}

// placeBatchesLocked hands bs, in order, to their live shards' writers
// (each batch renumbered there), or keeps them as orphans when no shard
// takes them.
func (s *ShardedWriter) placeBatchesLocked(bs []*wbatch) {
	if len(bs) == 0 {
		return
	}
	s.moves += uint64(len(bs))
	var exclude []bool
	var pieces []*wbatch
	for _, whole := range bs {
		pieces = s.splitMovedLocked(whole, pieces[:0])
		for _, b := range pieces {
			for {
				i := s.placeLocked(b.key, exclude)
				if i < 0 {
					s.orphans = append(s.orphans, b)
					break
				}
				if err := s.shards[i].w.adopt([]*wbatch{b}); err == nil {
					break
				}
				// The shard is being marked dead (or the writer fails): not it.
				if exclude == nil {
					exclude = make([]bool, len(s.shards))
				}
				exclude[i] = true
			}
		}
	}
}

// splitMovedLocked appends to out the pieces a batch taken off a dead
// shard is re-placed as: a message that carries several episodes' runs
// (consecutive runs the Insert found bound for one shard, keyed by the
// last) is split where its runs' episodes now go to different live
// shards, so each episode's rows follow the episode's own placement (and
// the shard it is remembered on) rather than the last episode's. Each
// extra piece takes a place of the writer's total bound; when none is
// free, or no shard lives, or the message holds one episode or cannot be
// decoded, the batch stays whole. O(rows) to decode and re-encode a
// message that is split; O(1) otherwise beyond its decode.
func (s *ShardedWriter) splitMovedLocked(b *wbatch, out []*wbatch) []*wbatch {
	var t buffer.Transitions
	if b.rows < 2 || DecodeTransitions(&t, s.opts.Layout, b.req.GetData()) != nil || len(t.EpisodeID) != b.rows {
		return append(out, b)
	}
	type group struct {
		hi    int
		key   uint64
		shard int
	}
	var groups []group
	for lo := 0; lo < b.rows; {
		hi := lo + 1
		for hi < b.rows && t.EpisodeID[hi] == t.EpisodeID[lo] {
			hi++
		}
		key := episodeKey(s.idHash, t.EpisodeID[lo])
		sh := s.placeLocked(key, nil)
		if sh < 0 {
			return append(out, b) // no shard lives: an orphan, whole
		}
		if k := len(groups); k > 0 && groups[k-1].shard == sh {
			groups[k-1].hi, groups[k-1].key = hi, key
		} else {
			groups = append(groups, group{hi: hi, key: key, shard: sh})
		}
		lo = hi
	}
	if len(groups) == 1 {
		b.key = groups[0].key
		return append(out, b)
	}
	taken := 0
	for full := false; taken < len(groups)-1 && !full; {
		select {
		case s.slots <- struct{}{}:
			taken++
		default:
			full = true
		}
	}
	if taken < len(groups)-1 {
		for range taken {
			s.release()
		}
		return append(out, b)
	}
	start := len(out)
	for lo, g := 0, 0; g < len(groups); g++ {
		sub := rowRange(&t, lo, groups[g].hi, b.rows)
		req := &replayv1.InsertRequest{Table: b.req.GetTable(), Writer: b.req.GetWriter(), Data: &replayv1.Columns{}}
		if err := EncodeTransitions(req.Data, s.opts.Layout, &sub); err != nil {
			// Cannot happen (the rows were decoded from this layout); stay whole.
			out = out[:start]
			for range taken {
				s.release()
			}
			return append(out, b)
		}
		out = append(out, &wbatch{req: req, rows: groups[g].hi - lo, key: groups[g].key})
		lo = groups[g].hi
	}
	s.batches += uint64(len(groups) - 1)
	s.splits++
	return out
}

// whileDead probes a dead shard with backoff until it answers (it
// rejoins: true), the writer closes or fails (false), or every shard has
// been dead for AllDownTimeout (the writer fails: false).
func (s *ShardedWriter) whileDead(sh *wshard) bool {
	backoff := s.opts.MinBackoff
	for {
		wait := backoff
		s.mu.Lock()
		if s.live == 0 {
			wait = min(wait, max(time.Until(s.downAt.Add(s.opts.AllDownTimeout)), 0))
		}
		s.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return false
		case <-s.dead:
			t.Stop()
			return false
		case <-t.C:
		}
		s.mu.Lock()
		if s.live == 0 && time.Since(s.downAt) >= s.opts.AllDownTimeout {
			why := s.allDownLocked()
			s.mu.Unlock()
			s.fail(why)
			return false
		}
		s.mu.Unlock()
		sh.c.conn.ResetConnectBackoff() // a restarted shard is dialed now, not after gRPC's own backoff
		if s.probe(sh) == nil {
			s.rejoin(sh)
			return true
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
	}
}

// allDownLocked is the error of a fleet dead for AllDownTimeout.
func (s *ShardedWriter) allDownLocked() error {
	var b strings.Builder
	for i, sh := range s.shards {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", sh.name, sh.downErr)
	}
	return fmt.Errorf("every replay shard has been down for %v (%s)", s.opts.AllDownTimeout, b.String())
}

// rejoin makes a dead shard that answered alive again: it takes new
// episodes, and the orphans if there are any.
func (s *ShardedWriter) rejoin(sh *wshard) {
	sh.w.resume()
	s.mu.Lock()
	defer s.mu.Unlock()
	sh.live = true
	sh.rejoins++
	s.live++
	orphans := s.orphans
	s.orphans = nil
	s.placeBatchesLocked(orphans)
	s.broadcastLocked()
}
