package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/remote"
)

// TestDialReplayFleet: one entry is dialed as written; a DNS name with
// one address is dialed by its name (gRPC resolves it again after a
// restart elsewhere); a name with several addresses is one shard per
// address, dialed at the address; IP entries as they are.
func TestDialReplayFleet(t *testing.T) {
	lookup := func(_ context.Context, host string) ([]string, error) {
		switch host {
		case "replay-0.replay.test", "replay-1.replay.test":
			return []string{map[string]string{"replay-0.replay.test": "10.0.0.1", "replay-1.replay.test": "10.0.0.9"}[host]}, nil
		case "fleet.test":
			return []string{"10.0.1.2", "10.0.1.3"}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
	copts := remote.ClientOptions{Insecure: true}
	for _, c := range []struct {
		list string
		want []string
	}{
		{"replay-0.replay.test:7700", []string{"replay-0.replay.test:7700"}},
		{"127.0.0.1:7700", []string{"127.0.0.1:7700"}},
		{"replay-1.replay.test:7700, replay-0.replay.test:7700", []string{"replay-0.replay.test:7700", "replay-1.replay.test:7700"}},
		{"fleet.test:7700", []string{"10.0.1.2:7700", "10.0.1.3:7700"}},
		{"fleet.test:7700,127.0.0.1:7701", []string{"10.0.1.2:7700", "10.0.1.3:7700", "127.0.0.1:7701"}},
	} {
		f, err := dialReplayFleet(context.Background(), c.list, copts, lookup, nil)
		if err != nil {
			t.Errorf("%q: %v", c.list, err)
			continue
		}
		if got := f.names(); !slices.Equal(got, c.want) {
			t.Errorf("%q: dialed %q, want %q", c.list, got, c.want)
		}
		f.Close()
	}
	if _, err := dialReplayFleet(context.Background(), "nowhere.test:7700,127.0.0.1:1", copts, lookup, nil); err == nil {
		t.Error("an unknown host: no error")
	}
}

// infoOnly is a replay server that answers Info alone.
type infoOnly struct {
	replayv1.UnimplementedReplayServer
}

func (infoOnly) Info(context.Context, *replayv1.InfoRequest) (*replayv1.InfoReply, error) {
	return &replayv1.InfoReply{Incarnation: 42, Config: []byte(`{"env":"cartpole"}`)}, nil
}

// TestReplayFleetOneServerTwice: one server listed under two names
// (127.0.0.1:port and localhost:port) is refused at start as one server
// listed twice, naming both entries — not taken as two shards (whose
// writers would then collide on one writer id).
func TestReplayFleetOneServerTwice(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	replayv1.RegisterReplayServer(s, infoOnly{})
	go func() { _ = s.Serve(ln) }()
	defer s.Stop()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	lookup := func(_ context.Context, host string) ([]string, error) {
		if host == "localhost" {
			return []string{"127.0.0.1"}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := dialReplayFleet(ctx, "127.0.0.1:"+port+",localhost:"+port, remote.ClientOptions{Insecure: true}, lookup, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.clients) != 2 {
		t.Fatalf("dialed %q: want the two entries as written", f.names())
	}
	_, _, err = f.config(ctx)
	if err == nil || !strings.Contains(err.Error(), "are one server (both report incarnation 42)") || strings.Count(err.Error(), ":"+port) != 2 {
		t.Errorf("one server listed twice: %v", err)
	}
}

// incInfo is a replay server that answers Info alone, with its
// incarnation.
type incInfo struct {
	replayv1.UnimplementedReplayServer
	inc uint64
}

func (s incInfo) Info(context.Context, *replayv1.InfoRequest) (*replayv1.InfoReply, error) {
	return &replayv1.InfoReply{Incarnation: s.inc, Config: []byte(`{"env":"cartpole"}`)}, nil
}

// TestReplayFleetFollowsMovedShard: a -replay DNS name with two
// addresses (loopback, one port) is a fleet of two shards; when the
// second stops and starts again elsewhere and the name resolves to the
// new address, its client (same target: the shard's identity) reaches
// the new incarnation within seconds and the move is logged; an address
// the name gains beside is logged as unmatched and not dialed.
func TestReplayFleetFollowsMovedShard(t *testing.T) {
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(probe.Addr().String())
	probe.Close()
	serve := func(host string, inc uint64) func() {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer()
		replayv1.RegisterReplayServer(s, incInfo{inc: inc})
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Serve(ln) }()
		stop := func() { s.Stop(); <-done }
		t.Cleanup(stop)
		return stop
	}
	serve("127.0.0.1", 1)
	stop2 := serve("127.0.0.2", 2)
	var mu sync.Mutex
	answer := []string{"127.0.0.1", "127.0.0.2"}
	lookup := func(_ context.Context, host string) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		if host != "fleet.test" {
			return nil, fmt.Errorf("no such host %s", host)
		}
		return slices.Clone(answer), nil
	}
	var logs syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f, err := dialReplayFleet(ctx, "fleet.test:"+port, remote.ClientOptions{Insecure: true, CallTimeout: time.Second}, lookup,
		slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := []string{"127.0.0.1:" + port, "127.0.0.2:" + port}
	if !slices.Equal(f.names(), want) {
		t.Fatalf("dialed %q, want %q", f.names(), want)
	}
	if _, _, err := f.config(ctx); err != nil {
		t.Fatal(err)
	}
	stop2()
	serve("127.0.0.3", 3)
	mu.Lock()
	answer = []string{"127.0.0.3", "127.0.0.1"}
	mu.Unlock()
	for {
		r, err := f.clients[1].Info(ctx)
		if err == nil && r.GetIncarnation() == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("shard 1 never reached the moved shard: %v\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !slices.Equal(f.names(), want) {
		t.Errorf("after the move the shards are %q, want %q (their identities)", f.names(), want)
	}
	if !strings.Contains(logs.String(), `msg="replay shard moved" shard=127.0.0.2:`+port+` index=1 from=127.0.0.2:`+port+` to=127.0.0.3:`+port) {
		t.Errorf("no move record:\n%s", logs.String())
	}
	// A fourth address with no shard gone: reported when a shard next
	// reconnects, never dialed.
	mu.Lock()
	answer = []string{"127.0.0.3", "127.0.0.1", "127.0.0.4"}
	mu.Unlock()
	time.Sleep(remote.DefaultReresolveInterval)
	f.tracker.Refresh(ctx, 0)
	if !strings.Contains(logs.String(), `msg="replay shard addresses unmatched" entry=fleet.test:`+port+` addresses=127.0.0.4:`+port) {
		t.Errorf("no unmatched record:\n%s", logs.String())
	}
	if f.tracker.Addr(0) != "127.0.0.1:"+port || f.tracker.Addr(1) != "127.0.0.3:"+port {
		t.Errorf("shards at %s and %s", f.tracker.Addr(0), f.tracker.Addr(1))
	}
}
