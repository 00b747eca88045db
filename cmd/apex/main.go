// Command apex is the apex runtime's command line: Ape-X training (the
// default command), load tests of the replay path (apex bench) and the
// papers' small experiments (apex experiment ...).
package main

import (
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
