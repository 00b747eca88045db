package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLearnerFleetLeaseFlag: -fleet-lease reads a duration (0: the
// default lease), a negative one or "off" as no lease (FleetLease < 0),
// and refuses anything else as a usage error naming the flag.
func TestLearnerFleetLeaseFlag(t *testing.T) {
	for in, want := range map[string]time.Duration{"0": 0, "3s": 3 * time.Second, "250ms": 250 * time.Millisecond, "off": -1, "-1s": -1, "-1ns": -1} {
		var f leaseFlag
		if err := f.Set(in); err != nil || f.d != want {
			t.Errorf("-fleet-lease=%s: %v, %v; want %v", in, f.d, err, want)
		}
	}
	for _, in := range []string{"", "3", "soon", "on"} {
		var f leaseFlag
		if err := f.Set(in); err == nil {
			t.Errorf("-fleet-lease=%q accepted (%v)", in, f.d)
		}
	}
	if f := (leaseFlag{-1}); f.String() != "off" {
		t.Errorf("no lease prints %q, want off", f.String())
	}
	var stdout, stderr bytes.Buffer
	if code := runLearner([]string{"-fleet-lease=soon"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "-fleet-lease") {
		t.Fatalf("apex learner -fleet-lease=soon: exit %d, %q; want a usage error naming the flag", code, stderr.String())
	}
	stderr.Reset()
	if code := runLearner([]string{"-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String()+stderr.String(), "-fleet-lease duration") {
		t.Fatalf("apex learner -h: exit %d; want -fleet-lease in the usage:\n%s%s", code, stdout.String(), stderr.String())
	}
}
