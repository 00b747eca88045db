package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
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
// configuration they all serve: a shard that does not answer (each call
// bounded by ctx and the client's CallTimeout), sends none, or serves
// another configuration than the first shard is an error naming the
// shards and the keys that differ. Cost: one Info call per shard, in
// order.
func FleetConfig(ctx context.Context, clients []*Client, names []string) ([]byte, error) {
	if len(clients) == 0 || len(names) != len(clients) {
		return nil, fmt.Errorf("remote: fleet config: %d clients and %d names", len(clients), len(names))
	}
	var first []byte
	for i, c := range clients {
		info, err := c.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("remote: replay shard %s: %w", names[i], err)
		}
		cfg := info.GetConfig()
		if len(cfg) == 0 {
			return nil, fmt.Errorf("remote: replay shard %s sent no run configuration", names[i])
		}
		if i == 0 {
			first = cfg
			continue
		}
		if d := ConfigDiff(first, cfg); d != "" {
			return nil, fmt.Errorf("remote: replay shards %s and %s serve different run configurations (%s): start every shard with the same run flags", names[0], names[i], d)
		}
	}
	return first, nil
}
