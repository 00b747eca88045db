package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
)

// ConfigDiff compares two run configurations as replay servers report
// them (InfoReply.config, JSON objects): "" when they are equal (byte for
// byte, or key by key), else which keys differ ("capacity, seed differ")
// or why they do not compare. Cost: O(bytes).
func ConfigDiff(a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	var ma, mb map[string]json.RawMessage
	if err := json.Unmarshal(a, &ma); err != nil {
		return fmt.Sprintf("the first is not a JSON object: %v", err)
	}
	if err := json.Unmarshal(b, &mb); err != nil {
		return fmt.Sprintf("the second is not a JSON object: %v", err)
	}
	var diff []string
	for _, k := range slices.Sorted(maps.Keys(ma)) {
		vb, ok := mb[k]
		if !ok || !jsonEqual(ma[k], vb) {
			diff = append(diff, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(mb)) {
		if _, ok := ma[k]; !ok {
			diff = append(diff, k)
		}
	}
	if len(diff) == 0 {
		return ""
	}
	slices.Sort(diff)
	return strings.Join(diff, ", ") + " differ"
}

// jsonEqual compares two JSON values after compacting them.
func jsonEqual(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// FleetConfig asks every shard of a fleet (one client each, names[i]
// naming clients[i] in errors) for its Info and returns the run
// configuration they all serve, with the Info replies themselves
// (infos[i] is clients[i]'s; callers reuse them rather than asking
// again). It is an error naming the shards when a shard does not answer
// (each call bounded by ctx and the client's CallTimeout), sends no
// configuration, or serves another configuration than the first shard,
// and when two entries reach the same server: two shards that report the
// same incarnation are one server listed twice (127.0.0.1:7700 and
// localhost:7700, or a DNS name and its address), which would otherwise
// be taken as two shards and then refuse one writer id on two streams.
// Cost: one Info call per shard, in order.
func FleetConfig(ctx context.Context, clients []*Client, names []string) (config []byte, infos []*replayv1.InfoReply, err error) {
	if len(clients) == 0 || len(names) != len(clients) {
		return nil, nil, fmt.Errorf("remote: fleet config: %d clients and %d names", len(clients), len(names))
	}
	byInc := make(map[uint64]int, len(clients))
	infos = make([]*replayv1.InfoReply, len(clients))
	for i, c := range clients {
		info, err := c.Info(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("remote: replay shard %s: %w", names[i], err)
		}
		infos[i] = info
		if j, dup := byInc[info.GetIncarnation()]; dup {
			return nil, nil, fmt.Errorf("remote: replay shards %s and %s are one server (both report incarnation %d): list each shard once", names[j], names[i], info.GetIncarnation())
		}
		byInc[info.GetIncarnation()] = i
		cfg := info.GetConfig()
		if len(cfg) == 0 {
			return nil, nil, fmt.Errorf("remote: replay shard %s sent no run configuration", names[i])
		}
		if i == 0 {
			config = cfg
			continue
		}
		if d := ConfigDiff(config, cfg); d != "" {
			return nil, nil, fmt.Errorf("remote: replay shards %s and %s serve different run configurations (%s): start every shard with the same run flags", names[0], names[i], d)
		}
	}
	return config, infos, nil
}
