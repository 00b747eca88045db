package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
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
		f, err := dialReplayFleet(context.Background(), c.list, copts, lookup)
		if err != nil {
			t.Errorf("%q: %v", c.list, err)
			continue
		}
		if got := f.names(); !slices.Equal(got, c.want) {
			t.Errorf("%q: dialed %q, want %q", c.list, got, c.want)
		}
		f.Close()
	}
	if _, err := dialReplayFleet(context.Background(), "nowhere.test:7700,127.0.0.1:1", copts, lookup); err == nil {
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
	f, err := dialReplayFleet(ctx, "127.0.0.1:"+port+",localhost:"+port, remote.ClientOptions{Insecure: true}, lookup)
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
