package remote

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apexrl/apex/remote/auth"
)

// DefaultReresolveInterval is the least time between two lookups of one
// DNS name by a ShardTracker (ShardTrackerOptions.Interval).
const DefaultReresolveInterval = time.Second

// DefaultReresolveTimeout bounds one lookup of a ShardTracker
// (ShardTrackerOptions.LookupTimeout).
const DefaultReresolveTimeout = 2 * time.Second

// ShardTrackerOptions configure a ShardTracker.
type ShardTrackerOptions struct {
	// Lookup resolves a name again; net.DefaultResolver.LookupHost when
	// nil (give ResolveShards' lookup).
	Lookup Resolver
	// Interval is the least time between two lookups of one name
	// (DefaultReresolveInterval when 0); LookupTimeout bounds each
	// (DefaultReresolveTimeout when 0).
	Interval, LookupTimeout time.Duration
	// OnMove, when not nil, is called when shard i (its ShardAddr as
	// ResolveShards gave it) is dialed at a new address from now on.
	// Called without the tracker's lock, from the dialing goroutine.
	OnMove func(i int, shard ShardAddr, from, to string)
	// OnUnmatched, when not nil, is called when the addresses a name
	// resolves to that no shard holds and that the tracker does not take
	// (sorted; why says why) differ from the last call's for that name
	// (so once per change, an empty addrs when they are gone). Called
	// like OnMove.
	OnUnmatched func(entry string, addrs []string, why string)
	// Lineage, when not nil, asks the replay server at addr (host:port,
	// an address of the tracked shards' name host) for its data lineage
	// (InfoReply.lineage; 0 from a server older than lineages), within
	// ctx: the tracker then pairs shards with addresses by lineage (see
	// ShardTracker). Called from the dialing goroutine, for each address
	// of the answer at each lookup, concurrently. nil: the address rule
	// alone. InfoLineage builds one.
	Lineage func(ctx context.Context, host, addr string) (uint64, error)
}

// InfoLineage is a ShardTrackerOptions.Lineage that dials addr as a
// shard of host (DialShard: host names the TLS certificate) with opts,
// asks its Info and closes the client. Cost: a connection and one call
// per use.
func InfoLineage(opts ClientOptions) func(ctx context.Context, host, addr string) (uint64, error) {
	return func(ctx context.Context, host, addr string) (uint64, error) {
		c, err := DialShard(ctx, ShardAddr{Addr: addr, Host: host}, opts)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		info, err := c.Info(ctx)
		return info.GetLineage(), err
	}
}

// ShardTrackerStats are a ShardTracker's counters, a snapshot.
type ShardTrackerStats struct {
	// Lookups counts the names looked up again; LookupErrors those that
	// failed or resolved to nothing (the shards keep their addresses).
	Lookups, LookupErrors uint64
	// Moves counts the shards that took a new address; LineageMoves
	// those of them paired with it by lineage. LineageAsks counts the
	// Lineage calls, LineageErrors those that failed.
	Moves, LineageMoves        uint64
	LineageAsks, LineageErrors uint64
	// SwapRefusals counts the connections refused because the server
	// reached had another shard's lineage.
	SwapRefusals uint64
	// Unmatched is the addresses the names resolved to at their latest
	// lookups that no shard holds and that were not taken.
	Unmatched int
}

// ShardTracker keeps the shards of a ResolveShards list that a DNS name
// expanded to (a Kubernetes headless Service, a name with several A
// records) at the name's current addresses, so that a shard restarted
// under a new address is found again. Each shard keeps its identity: the
// Client dialed for it keeps its target (the address it was resolved to
// at start), which names it in a ShardedWriter's placement and a
// ShardedMethod's masses and logs; only where the Client's connections go
// changes. The fleet's shard count is fixed by its start: a name is never
// expanded to more shards.
//
// The rule, applied each time gRPC reconnects a tracked shard (its
// connection broke, or the shard was down and is probed): the shard's
// name is looked up again (at most once per Interval per name, bounded by
// LookupTimeout; a failed lookup keeps every address). If exactly one of
// the name's shards has an address the answer no longer holds, and the
// answer holds exactly one address no shard of the list holds, that
// shard takes that address: one shard of a fixed fleet went away and one
// came back, so it is the same shard restarted (a StatefulSet's pod with
// its volume). Any other difference is ambiguous and is only reported
// (OnUnmatched), never guessed: two shards gone and two new addresses (a
// wrong pairing would send a writer's batches to another shard's
// restored idempotency table, which would acknowledge unseen batches as
// duplicates), or new addresses with no shard gone (the fleet grew:
// restart the processes to use them). Name each shard instead (e.g.
// replay-0.replay:7700) where shards may move together: a name with one
// address is followed by gRPC itself. A shard dialed at a loopback
// address never moves to another address (its connection may be without
// TLS, which Dial allows only on loopback).
//
// With ShardTrackerOptions.Lineage the tracker also knows each shard by
// its data lineage (Server.Lineage: kept across restarts from a
// checkpoint), learned at the shard's first connection, and pairs by it
// first: at each lookup it asks every address of the answer its lineage,
// and a shard whose lineage answers at exactly one address takes that
// address, however many shards moved (two pods that came back on each
// other's IPs, or on one's old IP and a new one, are paired right; with
// the address rule alone they would be paired the wrong way round, or
// not noticed at all). A shard so moved whose connection is up (not the
// one reconnecting) has it closed, so it reconnects at its address. The
// shards left (lineage unknown, a server older than lineages, or a
// lineage found nowhere: the shard lost its data) go by the address rule
// over the addresses left, except that a shard whose lineage is known
// waits while an address of the answer did not say its lineage (its own
// may be there); an address whose lineage belongs to another shard is
// never taken by the rule, and a connection (Dialer) to a server
// whose lineage is another shard's is refused (ErrShardSwapped; gRPC
// dials again, looking the name up again). Clients check lineages too
// (ShardedWriter, ShardedMethod: a server reporting another shard's
// lineage is refused, ErrShardSwapped), so a pairing the tracker cannot
// make is a refusal, never a silent loss.
//
// Safe for concurrent use. Cost: a lookup per name per Interval at most,
// and only while a tracked shard reconnects; O(shards) work per lookup,
// plus with Lineage one Lineage call per address of the answer (in
// parallel, bounded by LookupTimeout) and one at each shard's first
// connection.
type ShardTracker struct {
	opts   ShardTrackerOptions
	shards []ShardAddr
	groups map[string]*shardGroup // by entry (host:port)
	group  []*shardGroup          // shard i's, nil when untracked

	mu     sync.Mutex
	cur    []string   // each shard's address now
	dialed []bool     // whether shard i was dialed before
	lin    []uint64   // each shard's lineage (0: unknown)
	conns  []net.Conn // each shard's latest connection (closed when it moves by lineage)
	stats  ShardTrackerStats
}

// shardGroup is the shards one DNS entry expanded to.
type shardGroup struct {
	entry, host, port string
	shards            []int

	lookupMu sync.Mutex // one lookup of the name at a time; guards last
	last     time.Time

	// Under ShardTracker.mu:
	unmatched []string
}

// NewShardTracker tracks the shards of shards (a ResolveShards list, in
// its order) that a DNS name expanded to. It does no I/O.
func NewShardTracker(shards []ShardAddr, opts ShardTrackerOptions) *ShardTracker {
	if opts.Lookup == nil {
		opts.Lookup = net.DefaultResolver.LookupHost
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultReresolveInterval
	}
	if opts.LookupTimeout <= 0 {
		opts.LookupTimeout = DefaultReresolveTimeout
	}
	t := &ShardTracker{opts: opts, shards: slices.Clone(shards), groups: map[string]*shardGroup{},
		group: make([]*shardGroup, len(shards)), cur: make([]string, len(shards)), dialed: make([]bool, len(shards)),
		lin: make([]uint64, len(shards)), conns: make([]net.Conn, len(shards))}
	for i, a := range shards {
		t.cur[i] = a.Addr
		if _, err := netip.ParseAddr(a.Host); err == nil || a.Host == "localhost" || a.Host == "" {
			continue
		}
		_, port, err := net.SplitHostPort(a.Addr)
		if err != nil {
			continue
		}
		entry := net.JoinHostPort(a.Host, port)
		g := t.groups[entry]
		if g == nil {
			g = &shardGroup{entry: entry, host: a.Host, port: port}
			t.groups[entry] = g
		}
		g.shards = append(g.shards, i)
		t.group[i] = g
	}
	return t
}

// Tracked reports whether shard i came from a DNS name (its address
// follows the name).
func (t *ShardTracker) Tracked(i int) bool { return t.group[i] != nil }

// Addr is the address shard i is dialed at now.
func (t *ShardTracker) Addr(i int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur[i]
}

// Stats snapshots the tracker's counters.
func (t *ShardTracker) Stats() ShardTrackerStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

// Dialer is the dialer (ClientOptions.Dialer) that connects a Client
// dialed for shard i to the shard's current address: before each
// connection after the first it looks the name up again (Refresh), and
// it verifies the server's lineage there. Nil for an untracked shard
// (dial its address as it is).
func (t *ShardTracker) Dialer(i int) func(ctx context.Context, addr string) (net.Conn, error) {
	if t.group[i] == nil {
		return nil
	}
	return func(ctx context.Context, _ string) (net.Conn, error) {
		t.mu.Lock()
		again := t.dialed[i]
		t.dialed[i] = true
		t.mu.Unlock()
		if again {
			t.Refresh(ctx, i)
		}
		addr := t.Addr(i)
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if err := t.verify(ctx, i, addr); err != nil {
			conn.Close()
			return nil, err
		}
		t.mu.Lock()
		t.conns[i] = conn
		t.mu.Unlock()
		return conn, nil
	}
}

// Lineage is shard i's data lineage as the tracker knows it (0: unknown,
// or no ShardTrackerOptions.Lineage).
func (t *ShardTracker) Lineage(i int) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lin[i]
}

// verify asks the server at addr, where shard i is being connected, its
// lineage (no-op without Lineage): one another shard has is refused
// (ErrShardSwapped: gRPC dials again after its backoff, looking the name
// up again); otherwise it becomes the shard's lineage (its first, or a
// new one: the shard lost its data). A failed ask lets the connection
// through (the clients check lineages themselves).
func (t *ShardTracker) verify(ctx context.Context, i int, addr string) error {
	if t.opts.Lineage == nil {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, t.opts.LookupTimeout)
	lin, err := t.opts.Lineage(lctx, t.shards[i].Host, addr)
	cancel()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stats.LineageAsks++
	if err != nil {
		t.stats.LineageErrors++
		return nil
	}
	if lin == 0 || lin == t.lin[i] {
		return nil
	}
	if j := slices.Index(t.lin, lin); j >= 0 {
		t.stats.SwapRefusals++
		return fmt.Errorf("remote: replay shard %s: the server at %s is shard %s's: %w", t.shards[i].Addr, addr, t.shards[j].Addr, ErrShardSwapped)
	}
	t.lin[i] = lin
	return nil
}

// lineages asks every address of addrs its lineage, in parallel, within
// LookupTimeout: 0 where unknown. Counted.
func (t *ShardTracker) lineages(ctx context.Context, host string, addrs []string) map[string]uint64 {
	out := make(map[string]uint64, len(addrs))
	if t.opts.Lineage == nil {
		return out
	}
	lctx, cancel := context.WithTimeout(ctx, t.opts.LookupTimeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs uint64
	for _, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lin, err := t.opts.Lineage(lctx, host, a)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				return
			}
			out[a] = lin
		}()
	}
	wg.Wait()
	t.mu.Lock()
	t.stats.LineageAsks += uint64(len(addrs))
	t.stats.LineageErrors += errs
	t.mu.Unlock()
	return out
}

// Refresh looks shard i's name up again unless it was looked up less
// than Interval ago, and applies the rule of ShardTracker. It returns
// once the lookup is done (or skipped); ctx bounds it too. A no-op for
// an untracked shard.
func (t *ShardTracker) Refresh(ctx context.Context, i int) {
	g := t.group[i]
	if g == nil {
		return
	}
	g.lookupMu.Lock()
	defer g.lookupMu.Unlock()
	var linOf map[string]uint64 // each answer address's lineage (with Lineage)
	if !g.last.IsZero() && time.Since(g.last) < t.opts.Interval {
		return
	}
	g.last = time.Now()
	lctx, cancel := context.WithTimeout(ctx, t.opts.LookupTimeout)
	addrs, err := t.opts.Lookup(lctx, g.host)
	cancel()
	if err == nil && len(addrs) > 0 && t.opts.Lineage != nil {
		joined := make([]string, len(addrs))
		for k, a := range addrs {
			joined[k] = net.JoinHostPort(a, g.port)
		}
		linOf = t.lineages(ctx, g.host, joined)
	}

	t.mu.Lock()
	t.stats.Lookups++
	if err != nil || len(addrs) == 0 {
		t.stats.LookupErrors++
		t.mu.Unlock()
		return
	}
	answer := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		answer[net.JoinHostPort(a, g.port)] = true
	}
	// Pair by lineage first: a shard whose lineage answers at exactly one
	// address takes it.
	type move struct {
		i        int
		from, to string
	}
	var moves []move
	paired := map[int]bool{}
	claimed := map[string]int{} // address → the shard whose lineage answers there
	for a, lin := range linOf {
		if lin == 0 {
			continue
		}
		if j := slices.Index(t.lin, lin); j >= 0 && t.group[j] == g {
			if _, dup := claimed[a]; !dup {
				claimed[a] = j
			}
		}
	}
	for _, s := range g.shards {
		if t.lin[s] == 0 {
			continue
		}
		var at []string
		for a, lin := range linOf {
			if lin == t.lin[s] {
				at = append(at, a)
			}
		}
		if len(at) != 1 || (isLoopbackAddr(t.cur[s]) && !isLoopbackAddr(at[0])) {
			continue
		}
		paired[s] = true
		if at[0] != t.cur[s] {
			moves = append(moves, move{s, t.cur[s], at[0]})
			t.cur[s] = at[0]
			t.stats.LineageMoves++
		}
	}
	held := make(map[string]bool, len(t.cur))
	for s, a := range t.cur {
		if j, ok := claimed[a]; !ok || j == s {
			held[a] = true
		}
	}
	// The address rule over the shards left; with lineages, a shard whose
	// lineage is known takes part only when every address answered its
	// lineage (else its own might be at the one that did not).
	unanswered := t.opts.Lineage != nil && len(linOf) < len(answer)
	var gone []int
	for _, s := range g.shards {
		if paired[s] || (unanswered && t.lin[s] != 0) {
			continue
		}
		if j, ok := claimed[t.cur[s]]; !answer[t.cur[s]] || (ok && j != s) {
			gone = append(gone, s)
		} else if lin := linOf[t.cur[s]]; lin != 0 && !slices.Contains(t.lin, lin) {
			t.lin[s] = lin // first known, or the shard lost its data where it was
		}
	}
	var fresh []string
	for a := range answer {
		if _, ok := claimed[a]; !held[a] && !ok {
			fresh = append(fresh, a)
		}
	}
	slices.Sort(fresh)
	var why string
	switch {
	case len(fresh) == 0:
	case len(gone) == 0:
		why = fmt.Sprintf("no shard of %s is gone: a fleet's shards are fixed at start (restart the processes with the new fleet)", g.entry)
	case len(gone) > 1 || len(fresh) > 1:
		why = fmt.Sprintf("%d shards of %s are gone and %d addresses are new: which is which is unknown (name each shard, e.g. replay-0.replay:%s, for shards that move together)",
			len(gone), g.entry, len(fresh), g.port)
	case isLoopbackAddr(t.cur[gone[0]]) && !isLoopbackAddr(fresh[0]):
		why = fmt.Sprintf("shard %s is on loopback: it does not move to another host", t.shards[gone[0]].Addr)
	default:
		s := gone[0]
		moves = append(moves, move{s, t.cur[s], fresh[0]})
		t.cur[s] = fresh[0]
		if lin := linOf[fresh[0]]; lin != 0 && !slices.Contains(t.lin, lin) {
			t.lin[s] = lin
		}
		fresh = nil
	}
	t.stats.Moves += uint64(len(moves))
	var stale []net.Conn
	for _, m := range moves {
		if m.i != i && t.conns[m.i] != nil {
			stale = append(stale, t.conns[m.i])
			t.conns[m.i] = nil
		}
	}
	report := !slices.Equal(fresh, g.unmatched)
	t.stats.Unmatched += len(fresh) - len(g.unmatched)
	g.unmatched = fresh
	t.mu.Unlock()

	for _, c := range stale {
		c.Close() // a live connection of a shard moved by lineage: it reconnects at its address
	}
	if t.opts.OnMove != nil {
		for _, m := range moves {
			t.opts.OnMove(m.i, t.shards[m.i], m.from, m.to)
		}
	}
	if report && t.opts.OnUnmatched != nil {
		t.opts.OnUnmatched(g.entry, slices.Clone(fresh), why)
	}
}

// isLoopbackAddr reports whether addr's (host:port) host is loopback.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return auth.IsLoopback(strings.TrimSpace(host))
}
