package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
)

// fakeDNS is a Resolver whose answers the test sets.
type fakeDNS struct {
	mu      sync.Mutex
	answers map[string][]string
	err     error
	lookups int
}

func (d *fakeDNS) set(host string, addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.answers[host] = addrs
}

func (d *fakeDNS) lookup(_ context.Context, host string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lookups++
	if d.err != nil {
		return nil, d.err
	}
	a, ok := d.answers[host]
	if !ok {
		return nil, fmt.Errorf("no such host %s", host)
	}
	return slices.Clone(a), nil
}

// trackerEvents records a ShardTracker's callbacks.
type trackerEvents struct {
	mu        sync.Mutex
	moves     []string
	unmatched []string
}

func (e *trackerEvents) opts(d *fakeDNS) ShardTrackerOptions {
	return ShardTrackerOptions{Lookup: d.lookup, Interval: time.Nanosecond,
		OnMove: func(i int, a ShardAddr, from, to string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.moves = append(e.moves, fmt.Sprintf("%d %s %s->%s", i, a.Addr, from, to))
		},
		OnUnmatched: func(entry string, addrs []string, why string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.unmatched = append(e.unmatched, fmt.Sprintf("%s %v %s", entry, addrs, why))
		}}
}

func (e *trackerEvents) take() (moves, unmatched []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	moves, unmatched = e.moves, e.unmatched
	e.moves, e.unmatched = nil, nil
	return moves, unmatched
}

// TestShardTrackerRule: a shard of a multi-address name takes a new
// address only when exactly one of the name's shards is gone from the
// answer and exactly one address is new; every other change is reported
// once and nothing is guessed; failed lookups keep the addresses; shards
// given by IP are not tracked; a loopback shard stays on loopback.
func TestShardTrackerRule(t *testing.T) {
	dns := &fakeDNS{answers: map[string][]string{}}
	list := "fleet.test:7700,127.0.0.1:7701,local.test:7702"
	dns.set("fleet.test", "10.0.0.1", "10.0.0.2", "10.0.0.3")
	dns.set("local.test", "127.0.0.2", "127.0.0.3")
	shards, err := ResolveShards(context.Background(), list, dns.lookup)
	if err != nil {
		t.Fatal(err)
	}
	names := fmt.Sprint(shards)
	if names != "[10.0.0.1:7700 10.0.0.2:7700 10.0.0.3:7700 127.0.0.1:7701 127.0.0.2:7702 127.0.0.3:7702]" {
		t.Fatalf("shards %s", names)
	}
	var ev trackerEvents
	tr := NewShardTracker(shards, ev.opts(dns))
	for i, want := range []bool{true, true, true, false, true, true} {
		if tr.Tracked(i) != want {
			t.Errorf("shard %s: tracked %v, want %v", shards[i], tr.Tracked(i), want)
		}
	}
	addrs := func() string {
		var out []string
		for i := range shards {
			out = append(out, tr.Addr(i))
		}
		return strings.Join(out, " ")
	}
	ctx := context.Background()
	steps := []struct {
		answer    []string // fleet.test's
		refresh   int
		addrs     string
		moves     string
		unmatched string
	}{
		{[]string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, 1, "10.0.0.1:7700 10.0.0.2:7700 10.0.0.3:7700", "", ""},
		// Shard 1 is down, not back yet: nothing to do.
		{[]string{"10.0.0.1", "10.0.0.3"}, 0, "10.0.0.1:7700 10.0.0.2:7700 10.0.0.3:7700", "", ""},
		// It is back under a new address: shard 1 follows.
		{[]string{"10.0.0.5", "10.0.0.1", "10.0.0.3"}, 2, "10.0.0.1:7700 10.0.0.5:7700 10.0.0.3:7700", "[1 10.0.0.2:7700 10.0.0.2:7700->10.0.0.5:7700]", ""},
		// A new address with no shard gone: reported, not taken; once.
		{[]string{"10.0.0.1", "10.0.0.5", "10.0.0.3", "10.0.0.6"}, 0, "10.0.0.1:7700 10.0.0.5:7700 10.0.0.3:7700", "",
			"[fleet.test:7700 [10.0.0.6:7700] no shard of fleet.test:7700 is gone: a fleet's shards are fixed at start (restart the processes with the new fleet)]"},
		{[]string{"10.0.0.1", "10.0.0.5", "10.0.0.3", "10.0.0.6"}, 1, "10.0.0.1:7700 10.0.0.5:7700 10.0.0.3:7700", "", ""},
		// Two gone, two new: ambiguous.
		{[]string{"10.0.0.1", "10.0.0.7", "10.0.0.8"}, 0, "10.0.0.1:7700 10.0.0.5:7700 10.0.0.3:7700", "",
			"[fleet.test:7700 [10.0.0.7:7700 10.0.0.8:7700] 2 shards of fleet.test:7700 are gone and 2 addresses are new: which is which is unknown (name each shard, e.g. replay-0.replay:7700, for shards that move together)]"},
		// The answer settles to one each way: the pairing is forced.
		{[]string{"10.0.0.1", "10.0.0.7", "10.0.0.3"}, 2, "10.0.0.1:7700 10.0.0.7:7700 10.0.0.3:7700", "[1 10.0.0.2:7700 10.0.0.5:7700->10.0.0.7:7700]", "[fleet.test:7700 [] ]"},
	}
	for k, s := range steps {
		dns.set("fleet.test", s.answer...)
		tr.Refresh(ctx, s.refresh)
		if got := addrs(); !strings.HasPrefix(got, s.addrs) {
			t.Errorf("step %d (%v): addresses %s, want %s...", k, s.answer, got, s.addrs)
		}
		moves, unmatched := ev.take()
		if fmt.Sprint(moves) != orEmpty(s.moves) || fmt.Sprint(unmatched) != orEmpty(s.unmatched) {
			t.Errorf("step %d (%v): moves %v, unmatched %v; want %s and %s", k, s.answer, moves, unmatched, orEmpty(s.moves), orEmpty(s.unmatched))
		}
	}
	if fmt.Sprint(shards) != names {
		t.Errorf("the shards' identities changed: %v", shards)
	}
	st := tr.Stats()
	if st.Moves != 2 || st.Unmatched != 0 || st.Lookups != uint64(len(steps)) || st.LookupErrors != 0 {
		t.Errorf("stats %+v", st)
	}

	// A failed or empty lookup keeps every address.
	dns.mu.Lock()
	dns.err = errors.New("SERVFAIL")
	dns.mu.Unlock()
	tr.Refresh(ctx, 0)
	dns.mu.Lock()
	dns.err = nil
	dns.mu.Unlock()
	dns.set("fleet.test")
	tr.Refresh(ctx, 0)
	if got := addrs(); !strings.HasPrefix(got, "10.0.0.1:7700 10.0.0.7:7700 10.0.0.3:7700") || tr.Stats().LookupErrors != 2 {
		t.Errorf("after failed lookups: %s, %+v", got, tr.Stats())
	}

	// A loopback shard does not move to another host, but may move on loopback.
	dns.set("local.test", "127.0.0.2", "10.0.0.9")
	tr.Refresh(ctx, 5)
	if tr.Addr(5) != "127.0.0.3:7702" {
		t.Errorf("loopback shard moved to %s", tr.Addr(5))
	}
	if _, unmatched := ev.take(); len(unmatched) != 1 || !strings.Contains(unmatched[0], "on loopback") {
		t.Errorf("unmatched %v, want the loopback refusal", unmatched)
	}
	dns.set("local.test", "127.0.0.2", "127.0.0.4")
	tr.Refresh(ctx, 5)
	if tr.Addr(5) != "127.0.0.4:7702" {
		t.Errorf("loopback shard at %s, want 127.0.0.4:7702", tr.Addr(5))
	}

	// An untracked shard: Refresh looks nothing up.
	n := dns.lookups
	tr.Refresh(ctx, 3)
	if dns.lookups != n || tr.Addr(3) != "127.0.0.1:7701" {
		t.Errorf("untracked shard: %d lookups, address %s", dns.lookups-n, tr.Addr(3))
	}
	// Within Interval a name is looked up once.
	slow := NewShardTracker(shards, ShardTrackerOptions{Lookup: dns.lookup, Interval: time.Hour})
	n = dns.lookups
	for range 3 {
		slow.Refresh(ctx, 0)
		slow.Refresh(ctx, 1)
	}
	if dns.lookups-n != 1 {
		t.Errorf("%d lookups within Interval, want 1", dns.lookups-n)
	}
}

func orEmpty(s string) string {
	if s == "" {
		return "[]"
	}
	return s
}

// incarnationInfo is a replay server that answers Info alone, with its
// incarnation.
type incarnationInfo struct {
	replayv1.UnimplementedReplayServer
	inc uint64
}

func (s incarnationInfo) Info(context.Context, *replayv1.InfoRequest) (*replayv1.InfoReply, error) {
	return &replayv1.InfoReply{Incarnation: s.inc}, nil
}

// serveInfo serves incarnationInfo{inc} on addr until the test ends or
// the returned stop is called.
func serveInfo(t *testing.T, addr string, inc uint64) (stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if goruntime.GOOS != "linux" {
			t.Skipf("listen %s: %v (127.0.0.0/8 beyond 127.0.0.1 is routed to loopback on Linux)", addr, err)
		}
		t.Fatal(err)
	}
	s := grpc.NewServer()
	replayv1.RegisterReplayServer(s, incarnationInfo{inc: inc})
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	var once sync.Once
	stop = func() { once.Do(func() { s.Stop(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// TestShardTrackerFollowsRestart: a fleet named by one DNS name (two
// shards on 127.0.0.1 and 127.0.0.2, one port); the second shard stops
// and a new incarnation starts on 127.0.0.3; once the name resolves to
// it, the second shard's Client (its target, the shard's identity,
// unchanged) reaches the new incarnation within seconds, and the first
// shard's Client is untouched.
func TestShardTrackerFollowsRestart(t *testing.T) {
	// A free port on 127.0.0.1, for all three.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(probe.Addr().String())
	probe.Close()
	serveInfo(t, "127.0.0.1:"+port, 1)
	stop2 := serveInfo(t, "127.0.0.2:"+port, 2)

	dns := &fakeDNS{answers: map[string][]string{"fleet.test": {"127.0.0.2", "127.0.0.1"}}}
	shards, err := ResolveShards(context.Background(), "fleet.test:"+port, dns.lookup)
	if err != nil {
		t.Fatal(err)
	}
	var ev trackerEvents
	opts := ev.opts(dns)
	opts.Interval = 10 * time.Millisecond
	tr := NewShardTracker(shards, opts)
	var clients []*Client
	for i, a := range shards {
		c, err := DialShard(context.Background(), a, ClientOptions{CallTimeout: time.Second, Dialer: tr.Dialer(i)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	info := func(c *Client) (uint64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := c.Info(ctx)
		return r.GetIncarnation(), err
	}
	for i, want := range []uint64{1, 2} {
		if inc, err := info(clients[i]); err != nil || inc != want {
			t.Fatalf("shard %d: incarnation %d, %v; want %d", i, inc, err, want)
		}
	}
	stop2()
	serveInfo(t, "127.0.0.3:"+port, 3)
	dns.set("fleet.test", "127.0.0.1", "127.0.0.3")
	deadline := time.Now().Add(10 * time.Second)
	for {
		inc, err := info(clients[1])
		if err == nil && inc == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s shard 1 answers incarnation %d, %v; want 3 (at %s)", inc, err, tr.Addr(1))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := clients[1].Target(); got != "127.0.0.2:"+port {
		t.Errorf("shard 1's target %s: its identity changed", got)
	}
	if inc, err := info(clients[0]); err != nil || inc != 1 {
		t.Errorf("shard 0: incarnation %d, %v; want 1", inc, err)
	}
	if moves, _ := ev.take(); fmt.Sprint(moves) != fmt.Sprintf("[1 127.0.0.2:%s 127.0.0.2:%s->127.0.0.3:%s]", port, port, port) {
		t.Errorf("moves %v", moves)
	}
}
