package meter

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: Linux reports
// them in USER_HZ ticks, 100 per second on every architecture's user ABI.
const userHZ = 100

// PidCPU is the user+system CPU time that process pid has used so far,
// read from /proc/PID/stat (fields 14 and 15), to the kernel's 10 ms tick.
// It fails where there is no /proc (outside Linux) or no such process.
// Cost: one small file read.
func PidCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(b)
}

// parseStat reads utime+stime from the contents of a /proc/PID/stat file.
// The command name (field 2) is in parentheses and may hold spaces or
// parentheses itself, so fields are counted from its last ')'.
func parseStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("meter: /proc stat line without a command name: %.80q", b)
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("meter: /proc stat line has %d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] { // fields 14 (utime) and 15 (stime)
		v, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("meter: /proc stat CPU time %q is not a tick count", s)
		}
		ticks += v
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}
