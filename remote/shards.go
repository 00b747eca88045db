package remote

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// MaxShards bounds the replay servers one list may name (after DNS
// expansion): a learner keeps a stream and a mass per shard, an actor
// host a writer per shard.
const MaxShards = 256

// ShardAddr is one replay server of a fleet: Addr is what is dialed
// ("ip:port" once a DNS name is expanded, or the entry as given), Host
// the name the entry gave (the TLS server name when it is a DNS name).
type ShardAddr struct {
	Addr string
	Host string
}

// String is the address dialed.
func (a ShardAddr) String() string { return a.Addr }

// Resolver looks a host name up; net.DefaultResolver.LookupHost is one.
type Resolver func(ctx context.Context, host string) ([]string, error)

// ResolveShards turns a comma-separated list of replay servers
// ("host:port,host:port", spaces allowed around entries) into the shards
// to dial, in a canonical order (sorted by address, duplicates removed,
// so every process given the same list and the same DNS answers agrees
// on the shards and their indices). An entry whose host is an IP address
// or "localhost" is kept as it is; a DNS name is looked up with lookup
// (net.DefaultResolver.LookupHost when nil) and expands to one shard per
// address it resolves to (a Kubernetes headless Service or a DNS name
// with several A records names a whole fleet), each keeping the name as
// its Host for TLS (the fleet's size is the answer's at this lookup; a
// ShardTracker follows each such shard to a new address of the name
// afterwards). An empty list, an entry without a port, a name that
// resolves to nothing, or more than MaxShards shards is an error naming
// the entry.
//
// Cost: one lookup per DNS entry, bounded by ctx. Safe for concurrent use.
func ResolveShards(ctx context.Context, list string, lookup Resolver) ([]ShardAddr, error) {
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	var out []ShardAddr
	for _, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			if strings.TrimSpace(list) == "" {
				return nil, errors.New("remote: no replay servers given (want host:port[,host:port...])")
			}
			return nil, fmt.Errorf("remote: replay servers %q: an empty entry", list)
		}
		host, port, err := net.SplitHostPort(entry)
		if err != nil || port == "" {
			return nil, fmt.Errorf("remote: replay server %q: want host:port", entry)
		}
		if host == "" {
			return nil, fmt.Errorf("remote: replay server %q: no host (give 127.0.0.1:%s for this machine)", entry, port)
		}
		if _, err := netip.ParseAddr(host); err == nil || host == "localhost" {
			out = append(out, ShardAddr{Addr: entry, Host: host})
			continue
		}
		addrs, err := lookup(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("remote: replay server %q: %w", entry, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("remote: replay server %q: %s resolves to no address", entry, host)
		}
		for _, a := range addrs {
			out = append(out, ShardAddr{Addr: net.JoinHostPort(a, port), Host: host})
		}
		if len(out) > MaxShards {
			break
		}
	}
	slices.SortFunc(out, func(a, b ShardAddr) int { return strings.Compare(a.Addr, b.Addr) })
	out = slices.CompactFunc(out, func(a, b ShardAddr) bool { return a.Addr == b.Addr })
	if len(out) > MaxShards {
		return nil, fmt.Errorf("remote: replay servers %q: %d shards, at most %d", list, len(out), MaxShards)
	}
	return out, nil
}

// DialShard dials one shard of a ResolveShards list: Dial(a.Addr, opts),
// except that a TLS configuration without a ServerName verifies the
// server's certificate against a.Host when the entry named the shard by
// a DNS name (the certificate carries the name, not the address it
// resolved to). Like Dial it does no I/O.
func DialShard(ctx context.Context, a ShardAddr, opts ClientOptions) (*Client, error) {
	if opts.TLS != nil && opts.TLS.ServerName == "" && a.Host != "" {
		if _, err := netip.ParseAddr(a.Host); err != nil {
			var c *tls.Config = opts.TLS.Clone()
			c.ServerName = a.Host
			opts.TLS = c
		}
	}
	return Dial(ctx, a.Addr, opts)
}
