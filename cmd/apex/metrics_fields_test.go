package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/apexrl/apex/remote"
)

// The tests in this file fail when a counter or gauge of a Stats snapshot
// the apex servers export is not exported: each numeric or boolean field
// of the snapshot (nested structs and one element of each slice of
// structs included) is set on its own, and some metric must change.
// Fields that are derived from exported ones, or that are per shard and
// read elsewhere, are listed with the reason; strings (last errors, names)
// are not metrics.

// fieldPath is the route to one leaf field: struct field indices, -1
// meaning "element 0 of the slice here".
type fieldPath struct {
	name string
	idx  []int
}

// leafPaths lists the leaf fields of t, a struct type.
func leafPaths(t reflect.Type, prefix string, idx []int) []fieldPath {
	var out []fieldPath
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := prefix + f.Name
		at := append(append([]int(nil), idx...), i)
		switch {
		case f.Type.Kind() == reflect.Struct:
			out = append(out, leafPaths(f.Type, name+".", at)...)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			out = append(out, leafPaths(f.Type.Elem(), name+"[0].", append(at, -1))...)
		case f.Type.Kind() == reflect.String:
		default:
			out = append(out, fieldPath{name, at})
		}
	}
	return out
}

// setLeaf changes the field p of *v: numbers to a value they do not
// hold, booleans flipped.
func setLeaf(t *testing.T, v reflect.Value, p fieldPath) {
	t.Helper()
	for i := 0; i < len(p.idx); i++ {
		v = v.Field(p.idx[i])
		if i+1 < len(p.idx) && p.idx[i+1] == -1 {
			v = v.Index(0)
			i++
		}
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 7_000_000_007)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 7_000_000_007)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 7.25)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	default:
		t.Fatalf("%s: a %s field: teach setLeaf its kind", p.name, v.Kind())
	}
}

// gatherValues is every sample c emits in one scrape, by metric name.
func gatherValues(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				out[f.GetName()] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[f.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// checkEveryFieldExported sets each leaf field of fresh() on its own and
// fails unless some metric of collect's collector moves; exempt names the
// fields that need not, with the reason.
func checkEveryFieldExported[S any](t *testing.T, fresh func() S, collect func(func() S) prometheus.Collector, exempt map[string]string) {
	t.Helper()
	base := fresh()
	want := gatherValues(t, collect(func() S { return base }))
	paths := leafPaths(reflect.TypeFor[S](), "", nil)
	known := map[string]bool{}
	for _, p := range paths {
		known[p.name] = true
		s := fresh()
		setLeaf(t, reflect.ValueOf(&s).Elem(), p)
		got := gatherValues(t, collect(func() S { return s }))
		var moved []string
		for name, v := range got {
			if v != want[name] {
				moved = append(moved, name)
			}
		}
		if why, ok := exempt[p.name]; ok {
			if len(moved) > 0 {
				t.Errorf("%T.%s is exempt (%s) but moves %v: drop the exemption", base, p.name, why, moved)
			}
			continue
		}
		if len(moved) == 0 {
			t.Errorf("%T.%s moves no metric: export it (or exempt it, saying why)", base, p.name)
		}
	}
	for name := range exempt {
		if !known[name] {
			t.Errorf("exemption for %T.%s, which is no numeric field", base, name)
		}
	}
}

// statsOf is a collector over metrics reading a snapshot from f.
func statsOf[S any](metrics []statMetric[S]) func(func() S) prometheus.Collector {
	return func(f func() S) prometheus.Collector { return newStatsCollector(f, metrics) }
}

// TestActorMetricsEveryField: every counter of an actor host against one
// replay server (its actors, its Writer, its parameter subscription) is
// an apex actor metric.
func TestActorMetricsEveryField(t *testing.T) {
	checkEveryFieldExported(t, func() actorSnapshot { return actorSnapshot{} }, statsOf(actorMetrics), map[string]string{
		"Host.Pipeline.LearnerSteps": "an actor host has no learner",
	})
}

// TestActorFleetMetricsEveryField: every counter of an actor host's
// ShardedWriter reaches apex actor's metrics through fleetWriterStats.
func TestActorFleetMetricsEveryField(t *testing.T) {
	fresh := func() remote.ShardedWriterStats {
		return remote.ShardedWriterStats{Shards: make([]remote.ShardWriterStats, 1)}
	}
	collect := func(f func() remote.ShardedWriterStats) prometheus.Collector {
		return newStatsCollector(func() actorSnapshot {
			ws, sh := fleetWriterStats(f())
			return actorSnapshot{Writer: ws, Shards: sh}
		}, actorMetrics)
	}
	checkEveryFieldExported(t, fresh, collect, map[string]string{
		"Shards[0].Live":                  "counted in Live",
		"Shards[0].WriterStats.Batches":   "Insert's Batches are exported; a shard's add its adoptions (exported)",
		"Shards[0].WriterStats.Items":     "Insert's Items are exported; a shard's add its adoptions' items",
		"Shards[0].WriterStats.Lost":      "included in Lost (the whole writer's, orphans' too)",
		"Shards[0].WriterStats.LostItems": "included in LostItems",
		"Shards[0].Lineage":               "an identity, not a quantity (64 random bits; a float64 gauge would round it): logged by apex replay",
	})
	// The host's writer counts obey one Writer's identity, a fleet's adoptions
	// and splits notwithstanding: batches = acknowledged + in flight + lost.
	st := remote.ShardedWriterStats{Batches: 12, Items: 120, Live: 1, Orphans: 1, Splits: 1, Lost: 2, LostItems: 20,
		Shards: []remote.ShardWriterStats{
			{WriterStats: remote.WriterStats{Batches: 6, Acked: 2, Pending: 1, Moved: 3}},
			{WriterStats: remote.WriterStats{Batches: 9, Acked: 5, Pending: 1, Lost: 2, Adopted: 4}, Live: true},
		}}
	ws, _ := fleetWriterStats(st)
	if int(ws.Batches) != int(ws.Acked)+ws.Pending+int(ws.Lost) {
		t.Errorf("batches %d, acknowledged %d + in flight %d + lost %d", ws.Batches, ws.Acked, ws.Pending, ws.Lost)
	}
}

// TestLearnerMetricsEveryField: every counter of apex learner's replay
// clients (summed over a fleet's) and of its sharded stage is a metric,
// and both lists are well named and in the README.
func TestLearnerMetricsEveryField(t *testing.T) {
	// Through addClientStats, so a field it forgets to add fails too.
	clients := func(f func() remote.ClientStats) prometheus.Collector {
		return newStatsCollector(func() remote.ClientStats { return addClientStats(remote.ClientStats{}, f()) }, learnerClientMetrics)
	}
	checkEveryFieldExported(t, func() remote.ClientStats { return remote.ClientStats{} }, clients, nil)
	fresh := func() remote.ShardStats { return remote.ShardStats{Shards: []remote.ShardState{{Up: true}}} }
	checkEveryFieldExported(t, fresh, statsOf(learnerShardMetrics), map[string]string{
		"Shards[0].Rows":        "the shards' rows sum to Rows",
		"Shards[0].Dropped":     "the shards' dropped values sum to Dropped",
		"Shards[0].Incarnation": "a shard's own, served by it as apex_replay_incarnation",
		"Shards[0].MinProb":     "a shard's own; the importance weights use the fleet's smallest",
		"Shards[0].Lineage":     "an identity, not a quantity (64 random bits; a float64 gauge would round it): logged by apex replay",
	})
	checkMetricList(t, "apex_learner_", learnerClientMetrics)
}

// TestReplayMetricsEveryField: every counter and gauge of a replay
// server's Stats is an apex replay metric, listed in the README.
func TestReplayMetricsEveryField(t *testing.T) {
	checkEveryFieldExported(t, func() remote.ServerStats { return remote.ServerStats{} }, statsOf(replayMetrics), map[string]string{
		"Lineage": "an identity, not a quantity (64 random bits; a float64 gauge would round it): logged at start, in Info",
	})
	checkMetricList(t, "apex_replay_", replayMetrics)
}

// checkMetricList: metrics are distinct, start with prefix, end in _total
// when and only when they are counters, pass the Prometheus linter and are
// listed in the README.
func checkMetricList[S any](t *testing.T, prefix string, metrics []statMetric[S]) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range metrics {
		if seen[m.name] {
			t.Errorf("%s twice", m.name)
		}
		seen[m.name] = true
		if !strings.HasPrefix(m.name, prefix) {
			t.Errorf("%s: not %s...", m.name, prefix)
		}
		if (m.kind == counter) != strings.HasSuffix(m.name, "_total") {
			t.Errorf("%s: counters and only counters end in _total", m.name)
		}
		if !strings.Contains(string(readme), "`"+m.name+"`") {
			t.Errorf("README.md does not list %s", m.name)
		}
	}
	var zero S
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(newStatsCollector(func() S { return zero }, metrics)); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %s", err, fmt.Sprint(problems))
	}
}
