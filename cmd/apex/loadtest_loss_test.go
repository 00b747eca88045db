package main

import (
	"testing"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
)

// TestCountLoss: the acknowledged inserts lost are counted writer by
// writer (a writer's stored surplus does not offset another's loss),
// with the batches stored during a restored checkpoint's copy making a
// range, and a writer the table lacks counted as having stored nothing.
func TestCountLoss(t *testing.T) {
	recs := map[string]*replayv1.WriterRecord{
		"a": {Id: "a", Items: 100},                    // acked 100: none lost
		"b": {Id: "b", Items: 80, UncertainItems: 15}, // acked 100: 5-20 lost
		"c": {Id: "c", Items: 60},                     // acked 50: 10 stored unacknowledged, offsetting nothing
		"x": {Id: "x", Items: 7},                      // not a writer of this run: ignored
	}
	acked := map[string]uint64{"a": 100, "b": 100, "c": 50, "d": 30} // d: absent, all 30 lost
	got := countLoss(acked, recs)
	want := lossCount{stored: 240, uncertain: 15, lost: 50, lostMin: 35, storedUnacked: 10}
	if got != want {
		t.Fatalf("countLoss: %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		lost, lostMin uint64
		exact         bool
		want          string
	}{{0, 0, true, "0"}, {20, 5, true, "5-20"}, {3, 3, false, "3 (not exact)"}} {
		if got := lossText(c.lost, c.lostMin, c.exact); got != c.want {
			t.Errorf("lossText(%d, %d, %v) = %q, want %q", c.lost, c.lostMin, c.exact, got, c.want)
		}
	}
}
