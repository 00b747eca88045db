package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/apexrl/apex/sampler"
)

const methodsUsage = `usage: apex methods

Lists the registered replay methods (the values of -sampler): for each, what
it is, the learners it pairs with (the first that takes the environment's
actions is the default -algo) and its options (the train command's flags).

`

// runMethods prints every registered replay method, from its Spec.
func runMethods(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apex methods", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), methodsUsage)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	writeMethods(stdout)
	return 0
}

// writeMethods writes one paragraph per registered method.
func writeMethods(w io.Writer) {
	for _, s := range sampler.Specs() {
		fmt.Fprintf(w, "%s\n    %s\n    learners: %s\n", s.Name, s.Doc, strings.Join(s.Learners, ", "))
		if s.OwnLoss != nil {
			if l, err := s.OwnLoss(sampler.MethodConfig{}); err == nil {
				fmt.Fprintf(w, "    loss: its own, %s by default (-loss may only name its kind)\n", sampler.LossName(l))
			}
		}
		for _, o := range s.Options {
			kind := "float"
			if o.Int {
				kind = "int"
			}
			fmt.Fprintf(w, "    -%s %s: %s\n", o.Name, kind, o.Usage)
		}
	}
}
