package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/runtime"
)

// replayFleet is the replay servers a -replay flag names, dialed: one
// shard (today's single server) or several.
type replayFleet struct {
	shards  []remote.ShardAddr
	clients []*remote.Client
}

// dialReplayFleet resolves list (remote.ResolveShards: comma-separated
// host:port entries, a DNS name expanding to every address it resolves
// to) and dials each shard (remote.DialShard). A list of one entry that
// names one shard is dialed as written, as a single server always was (a
// DNS name is then resolved by gRPC, again after a reconnection). Like
// Dial it does no I/O beyond the DNS lookups; an error is the flag's.
func dialReplayFleet(ctx context.Context, list string, copts remote.ClientOptions) (*replayFleet, error) {
	shards, err := remote.ResolveShards(ctx, list, nil)
	if err != nil {
		return nil, err
	}
	f := &replayFleet{shards: shards}
	if entry := strings.TrimSpace(list); len(shards) == 1 && !strings.Contains(entry, ",") {
		c, err := remote.Dial(ctx, entry, copts)
		if err != nil {
			return nil, err
		}
		f.clients = []*remote.Client{c}
		return f, nil
	}
	for _, a := range shards {
		c, err := remote.DialShard(ctx, a, copts)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("shard %s: %w", a, err)
		}
		f.clients = append(f.clients, c)
	}
	return f, nil
}

// names are the shards' addresses, for logs and errors.
func (f *replayFleet) names() []string {
	out := make([]string, len(f.shards))
	for i, a := range f.shards {
		out[i] = a.Addr
	}
	return out
}

// config is the run configuration every shard serves (and its JSON, which
// a ShardedWriter holds a rejoining shard to): one Info call per shard; a
// shard that does not answer or serves another configuration is an error
// naming the shards (remote.FleetConfig).
func (f *replayFleet) config(ctx context.Context) (runtime.TrainConfig, []byte, error) {
	if len(f.clients) == 1 {
		cfg, err := f.clients[0].Config(ctx)
		return cfg, nil, err
	}
	js, err := remote.FleetConfig(ctx, f.clients, f.names())
	if err != nil {
		return runtime.TrainConfig{}, nil, err
	}
	cfg, err := runtime.DecodeTrainConfig(js)
	if err != nil {
		return runtime.TrainConfig{}, nil, fmt.Errorf("the replay shards' run configuration: %w", err)
	}
	return cfg, js, nil
}

// Close closes every client.
func (f *replayFleet) Close() {
	for _, c := range f.clients {
		_ = c.Close()
	}
}
