// Command apex is the apex runtime's command line: Ape-X training (the
// default command), load tests of the replay path (apex bench) and of a
// replay server over gRPC (apex loadtest), the papers' small experiments
// (apex experiment ...), the list of the registered replay methods (apex
// methods), the certificates for the network path's mutual TLS (apex
// certs), and a health probe for containers (apex health).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run dispatches a subcommand and returns the exit status: 0 success, 1
// failure, 2 usage error, 128+signal when a signal (SIGINT 130, SIGTERM 143,
// SIGHUP 129) stopped a training run, apex bench or an experiment.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "-help" && args[0] != "--help" {
		return runTrain(args, stdout, stderr)
	}
	switch args[0] {
	case "train":
		return runTrain(args[1:], stdout, stderr)
	case "bench":
		return runBench(args[1:], stdout, stderr)
	case "loadtest":
		return runLoadtest(args[1:], stdout, stderr)
	case loadtestPartCmd: // hidden: a fleet load test's child process
		return runLoadtestPart(args[1:], stdout, stderr)
	case "experiment":
		return runExperiment(args[1:], stdout, stderr)
	case "methods":
		return runMethods(args[1:], stdout, stderr)
	case "certs":
		return runCerts(args[1:], stdout, stderr)
	case "replay":
		return runReplay(args[1:], stdout, stderr)
	case "learner":
		return runLearner(args[1:], stdout, stderr)
	case "actor":
		return runActor(args[1:], stdout, stderr)
	case "health":
		return runHealth(args[1:], stdout, stderr)
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
  loadtest     load-test a replay server over gRPC (apex loadtest -h)
  experiment   run a paper's small experiment (apex experiment -h)
  methods      list the replay methods (-sampler), their learners and options
  replay       serve a run's replay over gRPC: buffer, stage, limiter (apex replay -h)
  learner      learn from a replay server, serve parameters (apex learner -h)
  actor        run actors that insert into a replay server (apex actor -h)
  certs        make a CA, certificates and tokens for the network (apex certs -h)
  health       ask a replay server or learner whether it serves (apex health -h)
`)
}

// parseFlags parses a subcommand's flags. It returns ok false with the exit
// status when the command should stop: 0 after -h (usage once, on stdout),
// 2 on a bad flag (the flag package's message and the usage on stderr), a
// stray argument, or a float flag that is NaN or infinite (every float flag
// of every subcommand must be a finite number: NaN would otherwise pass
// every range check and surface only when the results are written).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	// The flag package prints its message and the usage itself; hold them
	// until it is known whether this is -h (usage on stdout, once) or an
	// error (both on stderr).
	var held bytes.Buffer
	fs.SetOutput(&held)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			fs.SetOutput(stderr)
			return 0, false
		}
		_, _ = held.WriteTo(stderr)
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return 2, false
	}
	if msg := nonFinite(fs); msg != "" {
		fmt.Fprintf(stderr, "%s: %s\n", fs.Name(), msg)
		return 2, false
	}
	return 0, true
}

// nonFinite names the first float flag of fs (in name order) whose value is
// NaN or infinite, or returns "".
func nonFinite(fs *flag.FlagSet) string {
	var msg string
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok || msg != "" {
			return
		}
		if v, ok := g.Get().(float64); ok && (math.IsNaN(v) || math.IsInf(v, 0)) {
			msg = fmt.Sprintf("-%s must be a finite number, got %v", f.Name, v)
		}
	})
	return msg
}
