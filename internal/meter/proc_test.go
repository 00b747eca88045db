package meter

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with a space and a parenthesis; utime 250, stime 31.
	line := "1234 (a b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 3 0 100 0 0\n"
	d, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := 2810 * time.Millisecond; d != want {
		t.Errorf("parseStat = %v, want %v", d, want)
	}
	for _, bad := range []string{"", "1 (x S 1 2", "1 (x) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 -3 4 0"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

func TestPidCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	self, err := PidCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// /proc counts whole ticks; getrusage is finer. They agree to a few ticks.
	if ru := ProcessCPU(); self > ru+50*time.Millisecond {
		t.Errorf("PidCPU(self) = %v, getrusage %v", self, ru)
	}
	if _, err := PidCPU(-1); err == nil {
		t.Error("PidCPU(-1) accepted")
	}
}
