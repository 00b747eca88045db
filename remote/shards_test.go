package remote

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
)

func TestResolveShards(t *testing.T) {
	dns := map[string][]string{
		"replay.fleet": {"10.0.0.2", "10.0.0.1"},
		"replay-0":     {"10.0.1.5"},
		"empty":        {},
	}
	lookup := func(_ context.Context, host string) ([]string, error) {
		a, ok := dns[host]
		if !ok {
			return nil, fmt.Errorf("no such host %s", host)
		}
		return a, nil
	}
	got, err := ResolveShards(context.Background(), " replay.fleet:7700 , 127.0.0.1:7701,replay-0:7700,127.0.0.1:7701,[::1]:7702,localhost:7703", lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := []ShardAddr{
		{"10.0.0.1:7700", "replay.fleet"}, {"10.0.0.2:7700", "replay.fleet"}, {"10.0.1.5:7700", "replay-0"},
		{"127.0.0.1:7701", "127.0.0.1"}, {"[::1]:7702", "::1"}, {"localhost:7703", "localhost"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != len(want) {
		t.Fatalf("ResolveShards = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("shard %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range []struct{ list, want string }{
		{"", "no replay servers"},
		{"127.0.0.1:1,,127.0.0.1:2", "empty entry"},
		{"127.0.0.1", "want host:port"},
		{":7700", "no host"},
		{"nowhere:7700", "no such host"},
		{"empty:7700", "resolves to no address"},
		{manyShards(MaxShards + 1), "at most"},
	} {
		if _, err := ResolveShards(context.Background(), bad.list, lookup); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ResolveShards(%.40q) = %v, want an error containing %q", bad.list, err, bad.want)
		}
	}
	if _, err := ResolveShards(context.Background(), manyShards(MaxShards), lookup); err != nil {
		t.Errorf("%d shards: %v", MaxShards, err)
	}
}

func manyShards(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "127.0.0.1:%d", 1000+i)
	}
	return b.String()
}

func TestDialShardServerName(t *testing.T) {
	base := &tls.Config{MinVersion: tls.VersionTLS13}
	for _, tc := range []struct {
		a    ShardAddr
		want string
	}{
		{ShardAddr{"10.0.0.1:7700", "replay.fleet"}, "replay.fleet"},
		{ShardAddr{"10.0.0.1:7700", "10.0.0.1"}, ""},
	} {
		var seen string
		c, err := DialShard(context.Background(), tc.a, ClientOptions{TLS: base})
		if err != nil {
			t.Fatal(err)
		}
		seen = c.opts.TLS.ServerName
		c.Close()
		if seen != tc.want {
			t.Errorf("DialShard(%+v): server name %q, want %q", tc.a, seen, tc.want)
		}
	}
	if base.ServerName != "" {
		t.Error("DialShard changed the caller's TLS configuration")
	}
	if _, err := DialShard(context.Background(), ShardAddr{"10.0.0.1:7700", "replay.fleet"}, ClientOptions{}); err == nil || !strings.Contains(err.Error(), "needs TLS") {
		t.Errorf("DialShard without TLS beyond loopback: %v, want a refusal", err)
	}
}
