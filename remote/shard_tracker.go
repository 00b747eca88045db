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

	"google.golang.org/grpc"

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
}

// ShardTrackerStats are a ShardTracker's counters, a snapshot.
type ShardTrackerStats struct {
	// Lookups counts the names looked up again; LookupErrors those that
	// failed or resolved to nothing (the shards keep their addresses).
	Lookups, LookupErrors uint64
	// Moves counts the shards that took a new address.
	Moves uint64
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
// Safe for concurrent use. Cost: a lookup per name per Interval at most,
// and only while a tracked shard reconnects; O(shards) work per lookup.
type ShardTracker struct {
	opts   ShardTrackerOptions
	shards []ShardAddr
	groups map[string]*shardGroup // by entry (host:port)
	group  []*shardGroup          // shard i's, nil when untracked

	mu     sync.Mutex
	cur    []string // each shard's address now
	dialed []bool   // whether shard i was dialed before
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
		group: make([]*shardGroup, len(shards)), cur: make([]string, len(shards)), dialed: make([]bool, len(shards))}
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

// DialOption is the option that makes a Client dialed for shard i
// (DialShard, ClientOptions.DialOptions) connect to the shard's current
// address: before each connection after the first it looks the name up
// again (Refresh). For an untracked shard it changes nothing.
func (t *ShardTracker) DialOption(i int) grpc.DialOption {
	if t.group[i] == nil {
		return grpc.EmptyDialOption{}
	}
	return grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		t.mu.Lock()
		again := t.dialed[i]
		t.dialed[i] = true
		t.mu.Unlock()
		if again {
			t.Refresh(ctx, i)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", t.Addr(i))
	})
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
	if !g.last.IsZero() && time.Since(g.last) < t.opts.Interval {
		return
	}
	g.last = time.Now()
	lctx, cancel := context.WithTimeout(ctx, t.opts.LookupTimeout)
	addrs, err := t.opts.Lookup(lctx, g.host)
	cancel()

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
	held := make(map[string]bool, len(t.cur))
	for _, a := range t.cur {
		held[a] = true
	}
	var gone []int
	for _, s := range g.shards {
		if !answer[t.cur[s]] {
			gone = append(gone, s)
		}
	}
	var fresh []string
	for a := range answer {
		if !held[a] {
			fresh = append(fresh, a)
		}
	}
	slices.Sort(fresh)
	moved := -1
	var from, to, why string
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
		moved, from, to = gone[0], t.cur[gone[0]], fresh[0]
		t.cur[moved] = to
		t.stats.Moves++
		fresh = nil
	}
	report := !slices.Equal(fresh, g.unmatched)
	t.stats.Unmatched += len(fresh) - len(g.unmatched)
	g.unmatched = fresh
	t.mu.Unlock()

	if moved >= 0 && t.opts.OnMove != nil {
		t.opts.OnMove(moved, t.shards[moved], from, to)
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
