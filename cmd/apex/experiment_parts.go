package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// partsCmd is the frame every experiment command made of named parts
// shares: its flag set with -parts, -workers, -seed, -timeout and -out,
// the usage text, the parsing and checks, the output directory, a context
// that ends on a signal (watchSignals) or at the timeout, the error exit,
// the record of what finished and the JSON report, complete or not.
type partsCmd struct {
	name    string // "apex experiment ter"
	valid   []string
	fs      *flag.FlagSet
	parts   *string
	workers *int
	seed    *uint64
	timeout *time.Duration
	out     *string
	f32     *bool    // -float32, for the commands that offer it (nil otherwise)
	f32For  []string // the parts -float32 applies to
	stdout  io.Writer
	stderr  io.Writer
	want    []string
	begin   time.Time
	stop    *stopWatch

	mu       sync.Mutex // guards the fields below (record runs on workers)
	finished []string   // parts that ran to their end
	cut      string     // the part the stop cut short, "" if none
	current  string     // the part running
	total    int        // runs in the current part (0: it has no runs)
	runs     []finishedRun
}

// finishedRun is one run of the part a stop cut short that had finished
// all its steps before it (the runs in flight are dropped).
type finishedRun struct {
	Arm  string `json:"arm,omitempty"`
	Seed uint64 `json:"seed"`
	Run  any    `json:"run"`
}

// incompleteReport is the "incomplete" entry of a report whose command
// was stopped before every part it was asked for ran to its end.
type incompleteReport struct {
	// Reason is "interrupted" (a signal; Signal names it) or "timeout".
	Reason  string  `json:"reason"`
	Signal  string  `json:"signal,omitempty"`
	Seconds float64 `json:"seconds"`
	// FinishedParts ran to their end: their entries in the report are
	// final. CutPart was running: none of its results are in the report
	// but the runs it finished (FinishedRuns, of CutRuns in all). NotRun
	// were asked for and never started.
	FinishedParts []string      `json:"finished_parts"`
	CutPart       string        `json:"cut_part,omitempty"`
	CutRuns       int           `json:"cut_part_runs,omitempty"`
	FinishedRuns  []finishedRun `json:"finished_runs,omitempty"`
	NotRun        []string      `json:"not_run"`
}

// newPartsCmd starts the flag set of `apex experiment <exp>` with -parts
// (all of parts by default), -workers, -seed (default 1), -timeout and
// -out (defaults workers and out), and the usage text about (its first
// line is the usage line). The caller adds its own flags on c.fs, then
// calls start.
func newPartsCmd(exp string, parts []string, workers int, out, about string, stdout, stderr io.Writer) *partsCmd {
	name := "apex experiment " + exp
	c := &partsCmd{name: name, valid: parts, fs: flag.NewFlagSet(name, flag.ContinueOnError), stdout: stdout, stderr: stderr}
	c.fs.SetOutput(stderr)
	c.parts = c.fs.String("parts", strings.Join(parts, ","), "comma-separated parts to run: "+strings.Join(parts, ", "))
	c.workers = c.fs.Int("workers", workers, "runs trained at once")
	c.seed = c.fs.Uint64("seed", 1, "base seed: a part with k seeds uses seed, seed+1, ..., seed+k-1 (the defaults reproduce the committed results)")
	c.timeout = c.fs.Duration("timeout", 0, "stop after this wall time and report the run as incomplete (0: no limit)")
	c.out = c.fs.String("out", out, "directory for the JSON report and the plots")
	c.fs.Usage = func() {
		fmt.Fprintf(c.fs.Output(), "usage: %s [flags]\n\n%s\n\nA run stopped by SIGINT, SIGTERM or SIGHUP (a second signal exits at once) or by\n-timeout writes what finished, marked incomplete, and exits 128+signal (1 for\nthe timeout).\n\nflags:\n", name, about)
		c.fs.PrintDefaults()
	}
	return c
}

// start parses args and checks them: bad is called after parsing and
// returns what is wrong with the command's own flags ("" if nothing).
// It creates the output directory and returns the context the work runs
// under, which ends on a signal or at -timeout (call done when finished).
// With ok false the command returns code (0 for -h, 2 for a usage error,
// 1 if the directory cannot be made).
func (c *partsCmd) start(args []string, bad func() string) (ctx context.Context, done func(), code int, ok bool) {
	if code, ok := parseFlags(c.fs, args, c.stdout, c.stderr); !ok {
		return nil, nil, code, false
	}
	want, ok := selectParts(c.name, *c.parts, c.valid, c.stderr)
	if !ok {
		return nil, nil, 2, false
	}
	msg := ""
	switch {
	case *c.workers < 1:
		msg = fmt.Sprintf("-workers must be >= 1, got %d", *c.workers)
	case *c.timeout < 0:
		msg = fmt.Sprintf("-timeout must not be negative, got %v", *c.timeout)
	default:
		msg = bad()
	}
	if msg != "" {
		fmt.Fprintf(c.stderr, "%s: %s\n", c.name, msg)
		return nil, nil, 2, false
	}
	if !makeOut(c.name, *c.out, c.stderr) {
		return nil, nil, 1, false
	}
	c.want, c.begin = want, time.Now()
	c.stop = watchExperiment(c.name, *c.timeout, c.stderr)
	return c.stop.ctx, c.stop.done, 0, true
}

// offerFloat32 adds -float32 to the command: the runs of parts (those
// that train through the runtime) then build their learners' networks in
// float32 (TrainConfig.Float32, apex train's default). The experiments
// keep float64 by default: their committed results are float64 runs.
// Call it before start.
func (c *partsCmd) offerFloat32(parts ...string) {
	c.f32For = parts
	c.f32 = c.fs.Bool("float32", false, "opt-in: the runs of the "+strings.Join(parts, ", ")+
		" parts train with float32 learner networks (as apex train does by default); without it they stay float64, as the committed results were run; the other parts' learners are their own and stay float64")
}

// float32 says whether -float32 was given.
func (c *partsCmd) float32() bool { return c.f32 != nil && *c.f32 }

// seeds is the k seeds of a part: -seed, -seed+1, ..., -seed+k-1.
func (c *partsCmd) seeds(k int) []uint64 { return seedRange(*c.seed, k) }

// seedsFit says what is wrong with -seed as the base of k seeds ("" if
// nothing): the last one must not pass the largest uint64.
func (c *partsCmd) seedsFit(flagName string, k int) string { return seedsFit(*c.seed, flagName, k) }

// has reports whether part was asked for.
func (c *partsCmd) has(part string) bool { return slices.Contains(c.want, part) }

// part runs fn as the part name with runs runs (0 if it has none), if it
// was asked for and the command has not been stopped. An error that comes
// with the stop marks the part cut short and is not returned; another
// error is returned (the caller fails with it).
func (c *partsCmd) part(name string, runs int, fn func() error) error {
	if !c.has(name) || c.stop.ctx.Err() != nil {
		return nil
	}
	c.mu.Lock()
	c.current, c.total, c.runs = name, runs, nil
	c.mu.Unlock()
	err := fn()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.current = ""
	switch {
	case err != nil && c.stop.ctx.Err() != nil:
		c.cut = name
		return nil
	case err != nil:
		return err
	}
	c.finished = append(c.finished, name)
	return nil
}

// record notes that a run of the current part finished all its steps:
// if the part is cut short, the report lists it. Safe from any goroutine.
func (c *partsCmd) record(arm string, seed uint64, run any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs = append(c.runs, finishedRun{Arm: arm, Seed: seed, Run: run})
}

// fail prints err under the command's name and returns the exit code 1.
func (c *partsCmd) fail(err error) int {
	fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
	return 1
}

// finish writes report to file in the output directory (finishReport)
// with its "status": "complete" when every part asked for ran to its end,
// else "incomplete", with an "incomplete" entry (incompleteReport) and a
// line saying what finished; the exit code is then 128+signal, or 1 for
// the timeout.
func (c *partsCmd) finish(file string, report map[string]any, failed bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.float32() {
		report["float32"], report["float32_parts"] = true, c.f32For
	}
	var notRun []string
	for _, p := range c.want {
		if !slices.Contains(c.finished, p) && p != c.cut {
			notRun = append(notRun, p)
		}
	}
	if c.cut == "" && len(notRun) == 0 {
		report["status"] = statusComplete
		return finishReport(c.name, *c.out, file, report, c.begin, failed, c.stdout, c.stderr)
	}
	inc := incompleteReport{Seconds: time.Since(c.begin).Seconds(), FinishedParts: slices.Clone(c.finished), NotRun: notRun}
	if inc.FinishedParts == nil {
		inc.FinishedParts = []string{}
	}
	inc.Reason, inc.Signal = c.stop.reason()
	if c.cut != "" {
		inc.CutPart, inc.CutRuns, inc.FinishedRuns = c.cut, c.total, c.runs
	}
	report["status"], report["incomplete"] = statusIncomplete, inc
	fmt.Fprintln(c.stdout, incompleteLine(c.stop.why(), inc))
	if code := finishReport(c.name, *c.out, file, report, c.begin, false, c.stdout, c.stderr); code != 0 {
		return code
	}
	fmt.Fprintf(c.stderr, "%s: %s after %.1fs: the finished results are written to %s, marked incomplete\n", c.name, c.stop.why(), inc.Seconds, *c.out)
	return c.stop.exitCode()
}

// The values of a report's "status".
const (
	statusComplete   = "complete"
	statusIncomplete = "incomplete"
)

// incompleteLine is the summary line of a stopped command: why, which
// parts finished, which was cut short with the runs it finished, and which
// never ran.
func incompleteLine(why string, inc incompleteReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "INCOMPLETE: %s after %.0fs. Finished parts: %s.", why, inc.Seconds, listOrNone(inc.FinishedParts))
	if inc.CutPart != "" {
		fmt.Fprintf(&b, " Cut short: %s", inc.CutPart)
		if inc.CutRuns > 0 {
			var names []string
			for _, r := range inc.FinishedRuns {
				names = append(names, strings.TrimSpace(fmt.Sprintf("%s seed %d", r.Arm, r.Seed)))
			}
			fmt.Fprintf(&b, " (%d of %d runs finished: %s)", len(inc.FinishedRuns), inc.CutRuns, listOrNone(names))
		}
		b.WriteString("; it has no table and no final results, and the runs cut short are dropped.")
	}
	fmt.Fprintf(&b, " Not run: %s.", listOrNone(inc.NotRun))
	return b.String()
}

// listOrNone joins xs with ", ", or is "none".
func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// stopWatch is what stops an experiment early: the first of
// gracefulSignals (a second one exits at once, watchSignals) or the
// -timeout.
type stopWatch struct {
	ctx     context.Context
	got     func() os.Signal
	done    func()
	timeout time.Duration
}

// watchExperiment starts watching for the signals, and for timeout (0:
// none), on behalf of the command cmd, which says on stderr that it stops.
func watchExperiment(cmd string, timeout time.Duration, stderr io.Writer) *stopWatch {
	ctx, got, stop := watchSignals(func(s os.Signal) {
		fmt.Fprintf(stderr, "%s: interrupted by %s: stopping; the runs in flight are dropped, what finished is written, marked incomplete (a second signal exits at once)\n",
			cmd, signalName(s))
	}, func(s os.Signal) {
		fmt.Fprintf(stderr, "%s: second interrupt (%s): exiting now; nothing more is written\n", cmd, signalName(s))
	})
	cancel := context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	return &stopWatch{ctx: ctx, got: got, timeout: timeout, done: func() { cancel(); stop() }}
}

// reason is "interrupted" with the signal's name, or "timeout".
func (w *stopWatch) reason() (reason, signal string) {
	if s := w.got(); s != nil {
		return "interrupted", signalName(s)
	}
	return "timeout", ""
}

// why says in words why the work stopped.
func (w *stopWatch) why() string {
	if s := w.got(); s != nil {
		return "interrupted by " + signalName(s)
	}
	return fmt.Sprintf("stopped by -timeout %v", w.timeout)
}

// exitCode is 128+signal for a signal, 1 for the timeout.
func (w *stopWatch) exitCode() int {
	if s := w.got(); s != nil {
		return signalExitCode(s)
	}
	return 1
}

// seedRange is the k seeds base, base+1, ..., base+k-1.
func seedRange(base uint64, k int) []uint64 {
	out := make([]uint64, k)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
}

// seedsFit says what is wrong with base as the base of the k seeds that
// flagName counts ("" if nothing): the last must not pass the largest
// uint64.
func seedsFit(base uint64, flagName string, k int) string {
	if k > 0 && base > math.MaxUint64-uint64(k-1) {
		return fmt.Sprintf("-seed %d with %s %d passes the largest seed %d", base, flagName, k, uint64(math.MaxUint64))
	}
	return ""
}
