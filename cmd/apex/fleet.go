package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/remote"
	"github.com/apexrl/apex/runtime"
)

// replayFleet is the replay servers a -replay flag names, dialed: one
// shard (today's single server) or several.
type replayFleet struct {
	shards  []remote.ShardAddr
	clients []*remote.Client
	// infos are the shards' Info replies from config (a fleet of several;
	// remote.ShardOptions.Infos reuses them).
	infos []*replayv1.InfoReply
	// tracker follows the shards a DNS name expanded to (nil for a
	// single server).
	tracker *remote.ShardTracker
}

// dialReplayFleet resolves list (remote.ResolveShards: comma-separated
// host:port entries, a DNS name expanding to every address it resolves
// to) and dials each shard (remote.DialShard). A list of one entry that
// names one shard is dialed as written, as a single server always was. A
// DNS name that resolves to one address is dialed by its name too, so
// gRPC resolves it again when it reconnects: a shard restarted elsewhere
// under the same name (a StatefulSet's pod, replay-0.replay:7700) is found
// at its new address. A name that expands to several shards gives the
// fleet one shard per address at start (the fleet's size); each is dialed
// at its address through a remote.ShardTracker, which looks the name up
// again when the shard reconnects and moves it to a new address only
// when exactly one of the name's shards is gone and one address is new
// (logged: "replay shard moved"); other new addresses are logged
// ("replay shard addresses unmatched") and not used. A fleet's shards
// re-dial a lost shard every 50-250 ms. Like Dial it does no I/O beyond
// the DNS lookups (lookup's; net.DefaultResolver's when nil); an error
// is the flag's. log (nil: none) gets the tracker's records.
func dialReplayFleet(ctx context.Context, list string, copts remote.ClientOptions, lookup remote.Resolver, log *slog.Logger) (*replayFleet, error) {
	shards, err := remote.ResolveShards(ctx, list, lookup)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
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
	byName := func(a remote.ShardAddr) string { // the entry's host:port
		_, port, _ := net.SplitHostPort(a.Addr)
		return net.JoinHostPort(a.Host, port)
	}
	// A fleet's shards re-dial a lost shard quickly (fastReconnect): a
	// restarted shard rejoins in well under gRPC's default backoff.
	sopts := copts
	sopts.DialOptions = append(slices.Clip(copts.DialOptions), fastReconnect)
	perEntry := map[string]int{}
	for _, a := range shards {
		perEntry[byName(a)]++
	}
	// The tracker pairs moved shards by their data lineage (each Info's),
	// asked over a connection of the fleet's own options.
	f.tracker = remote.NewShardTracker(shards, remote.ShardTrackerOptions{Lookup: lookup, Lineage: remote.InfoLineage(copts),
		OnMove: func(i int, a remote.ShardAddr, from, to string) {
			log.Info("replay shard moved", "shard", a.Addr, "index", i, "from", from, "to", to)
		},
		OnUnmatched: func(entry string, addrs []string, why string) {
			if len(addrs) > 0 {
				log.Warn("replay shard addresses unmatched", "entry", entry, "addresses", strings.Join(addrs, ","), "reason", why)
			}
		}})
	for i, a := range shards {
		opts := sopts
		if name := byName(a); perEntry[name] == 1 && net.ParseIP(a.Host) == nil {
			a.Addr = name // by name: re-resolved on reconnection
		} else if f.tracker.Tracked(i) {
			opts.Dialer = f.tracker.Dialer(i)
		}
		c, err := remote.DialShard(ctx, a, opts)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("shard %s: %w", a, err)
		}
		f.clients = append(f.clients, c)
	}
	return f, nil
}

// openReplayFleet dials the fleet -replay names (dialReplayFleet) and
// reads the run configuration every shard serves (config), both within
// ctx, for apex actor and apex learner (prog). A list that does not dial
// is the flag's usage error (usageErr's exit status); a fleet that does
// not answer or disagrees is reported on stderr, exit status 1. rc is 0
// when f is open; the caller closes it.
func openReplayFleet(ctx context.Context, prog, list string, copts remote.ClientOptions, usageErr func(error) int, stderr io.Writer, log *slog.Logger) (f *replayFleet, cfg runtime.TrainConfig, cfgJSON []byte, rc int) {
	f, err := dialReplayFleet(ctx, list, copts, nil, log)
	if err != nil {
		return nil, cfg, nil, usageErr(fmt.Errorf("-replay %s: %w", list, err))
	}
	if cfg, cfgJSON, err = f.config(ctx); err != nil {
		f.Close()
		fmt.Fprintf(stderr, "apex %s: the replay server at %s: %v\n", prog, list, err)
		return nil, cfg, nil, 1
	}
	return f, cfg, cfgJSON, 0
}

// names are the shards' targets as dialed, for logs and errors.
func (f *replayFleet) names() []string {
	out := make([]string, len(f.clients))
	for i, c := range f.clients {
		out[i] = c.Target()
	}
	return out
}

// config is the run configuration every shard serves (and its JSON, which
// a ShardedWriter holds a rejoining shard to): one Info call per shard; a
// shard that does not answer or serves another configuration is an error
// naming the shards, and so are two entries that reach one server (they
// report the same incarnation: 127.0.0.1:7700 and localhost:7700) —
// remote.FleetConfig.
func (f *replayFleet) config(ctx context.Context) (runtime.TrainConfig, []byte, error) {
	if len(f.clients) == 1 {
		cfg, err := f.clients[0].Config(ctx)
		return cfg, nil, err
	}
	js, infos, err := remote.FleetConfig(ctx, f.clients, f.names())
	if err != nil {
		return runtime.TrainConfig{}, nil, err
	}
	cfg, err := runtime.DecodeTrainConfig(js)
	if err != nil {
		return runtime.TrainConfig{}, nil, fmt.Errorf("the replay shards' run configuration: %w", err)
	}
	f.infos = infos
	return cfg, js, nil
}

// Close closes every client.
func (f *replayFleet) Close() {
	for _, c := range f.clients {
		_ = c.Close()
	}
}
