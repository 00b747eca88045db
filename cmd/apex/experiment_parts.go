package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// partsCmd is the frame every experiment command made of named parts
// shares: its flag set with -parts, -workers and -out, the usage text,
// the parsing and checks, the output directory, a context that ends on
// SIGINT or SIGTERM, the error exit and the JSON report.
type partsCmd struct {
	name    string // "apex experiment ter"
	valid   []string
	fs      *flag.FlagSet
	parts   *string
	workers *int
	out     *string
	stdout  io.Writer
	stderr  io.Writer
	want    []string
	begin   time.Time
}

// newPartsCmd starts the flag set of `apex experiment <exp>` with -parts
// (all of parts by default), -workers and -out (defaults workers and
// out), and the usage text about (its first line is the usage line). The
// caller adds its own flags on c.fs, then calls start.
func newPartsCmd(exp string, parts []string, workers int, out, about string, stdout, stderr io.Writer) *partsCmd {
	name := "apex experiment " + exp
	c := &partsCmd{name: name, valid: parts, fs: flag.NewFlagSet(name, flag.ContinueOnError), stdout: stdout, stderr: stderr}
	c.fs.SetOutput(stderr)
	c.parts = c.fs.String("parts", strings.Join(parts, ","), "comma-separated parts to run: "+strings.Join(parts, ", "))
	c.workers = c.fs.Int("workers", workers, "runs trained at once")
	c.out = c.fs.String("out", out, "directory for the JSON report and the plots")
	c.fs.Usage = func() {
		fmt.Fprintf(c.fs.Output(), "usage: %s [flags]\n\n%s\n\nflags:\n", name, about)
		c.fs.PrintDefaults()
	}
	return c
}

// start parses args and checks them: bad is called after parsing and
// returns what is wrong with the command's own flags ("" if nothing).
// It creates the output directory and returns a context that ends on
// SIGINT or SIGTERM (call cancel when done). With ok false the command
// returns code (0 for -h, 2 for a usage error, 1 if the directory cannot
// be made).
func (c *partsCmd) start(args []string, bad func() string) (ctx context.Context, cancel context.CancelFunc, code int, ok bool) {
	if code, ok := parseFlags(c.fs, args, c.stdout, c.stderr); !ok {
		return nil, nil, code, false
	}
	want, ok := selectParts(c.name, *c.parts, c.valid, c.stderr)
	if !ok {
		return nil, nil, 2, false
	}
	if *c.workers < 1 {
		fmt.Fprintf(c.stderr, "%s: -workers must be >= 1, got %d\n", c.name, *c.workers)
		return nil, nil, 2, false
	}
	if msg := bad(); msg != "" {
		fmt.Fprintf(c.stderr, "%s: %s\n", c.name, msg)
		return nil, nil, 2, false
	}
	if !makeOut(c.name, *c.out, c.stderr) {
		return nil, nil, 1, false
	}
	c.want, c.begin = want, time.Now()
	ctx, cancel = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return ctx, cancel, 0, true
}

// has reports whether part was asked for.
func (c *partsCmd) has(part string) bool { return slices.Contains(c.want, part) }

// fail prints err under the command's name and returns the exit code 1.
func (c *partsCmd) fail(err error) int {
	fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
	return 1
}

// finish writes report to file in the output directory (finishReport).
func (c *partsCmd) finish(file string, report any, failed bool) int {
	return finishReport(c.name, *c.out, file, report, c.begin, failed, c.stdout, c.stderr)
}
