package runtime

import (
	"bufio"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strings"
)

// BuildInfo says which apex build ran a run (from the binary's embedded
// build information).
type BuildInfo struct {
	// Version is the main module's version ("(devel)" for a build from a
	// work tree).
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	// Revision is the VCS revision the binary was built from, with
	// "+dirty" when the work tree had changes; empty when unknown (go
	// test and go run builds carry none).
	Revision string `json:"revision,omitempty"`
}

// MachineInfo says where a run ran.
type MachineInfo struct {
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPUModel   string `json:"cpu_model,omitempty"`
	Hostname   string `json:"hostname,omitempty"`
}

// Build returns this binary's BuildInfo. Cost: a read of the embedded
// build information.
func Build() BuildInfo {
	b := BuildInfo{Version: "unknown", GoVersion: goruntime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Version = info.Main.Version
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && b.Revision != "" {
		b.Revision += "+dirty"
	}
	return b
}

// Machine returns a MachineInfo of this machine. Cost: reads
// /proc/cpuinfo where it exists.
func Machine() MachineInfo {
	m := MachineInfo{OS: goruntime.GOOS, Arch: goruntime.GOARCH, CPUs: goruntime.NumCPU(), GOMAXPROCS: goruntime.GOMAXPROCS(0)}
	m.Hostname, _ = os.Hostname()
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// CheckpointError is the error of a checkpoint that could not be written.
// Run returns it with a non-nil result when the run itself completed: the
// caller should still record the result.
type CheckpointError struct {
	Path string // the checkpoint file
	Err  error
}

func (e *CheckpointError) Error() string {
	return "runtime: checkpoint " + e.Path + ": " + e.Err.Error()
}

func (e *CheckpointError) Unwrap() error { return e.Err }
