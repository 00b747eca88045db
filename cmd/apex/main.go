// Command apex is the apex runtime's command line: Ape-X training (the
// default command), load tests of the replay path (apex bench) and the
// papers' small experiments (apex experiment ...).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run dispatches a subcommand and returns the exit status: 0 success, 1
// failure, 2 usage error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "-help" && args[0] != "--help" {
		return runTrain(args, stdout, stderr)
	}
	switch args[0] {
	case "train":
		return runTrain(args[1:], stdout, stderr)
	case "bench":
		return runBench(args[1:], stdout, stderr)
	case "experiment":
		return runExperiment(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "apex: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: apex [command] [flags]

commands:
  train        (the default) train an agent with Ape-X (apex train -h)
  bench        load-test the replay path against a mutex baseline (apex bench -h)
  experiment   run a paper's small experiment (apex experiment -h)
`)
}

// parseFlags parses a subcommand's flags. It returns ok false with the exit
// status when the command should stop: 0 after -h (usage on stdout), 2 on a
// bad flag (the flag package has printed why) or a stray argument.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return 2, false
	}
	return 0, true
}
