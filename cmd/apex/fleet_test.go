package main

import (
	"context"
	"fmt"
	"slices"
	"testing"

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
