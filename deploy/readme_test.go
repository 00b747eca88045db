package deploy

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// readmeCommands returns the apex command lines (continuations joined) of
// the sh blocks in the README's section whose heading starts with
// heading, each with its line number.
func readmeCommands(t testing.TB, heading string) []invocation {
	t.Helper()
	lines := strings.Split(string(readFile(t, filepath.Join("..", "README.md"))), "\n")
	var out []invocation
	in, block := false, false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "## "):
			in = strings.HasPrefix(l, heading)
			continue
		case !in:
			continue
		case strings.HasPrefix(l, "```"):
			block = !block
			continue
		case !block:
			continue
		}
		start := i + 1
		for strings.HasSuffix(strings.TrimSpace(l), `\`) && i+1 < len(lines) {
			i++
			l = strings.TrimSuffix(strings.TrimSpace(l), `\`) + " " + strings.TrimSpace(lines[i])
		}
		if c, _, _ := strings.Cut(l, "#"); strings.HasPrefix(strings.TrimSpace(c), "apex ") {
			out = append(out, invocation{fmt.Sprintf("README.md:%d", start), strings.Fields(c)[1:]})
		}
	}
	return out
}

// TestReadmeDeploymentCommands checks the apex commands of the README's
// Deployment section (the static-address recipe, the Secret) against the
// binary.
func TestReadmeDeploymentCommands(t *testing.T) {
	c := newCLI(t, apexBinary(t))
	cmds := readmeCommands(t, "## Deployment")
	subs := map[string]bool{}
	var probs []string
	for _, inv := range cmds {
		p := c.check(inv, &probs)
		subs[p.sub] = true
	}
	for _, want := range []string{"certs", "replay", "learner", "actor", "health"} {
		if !subs[want] {
			t.Errorf("README.md's Deployment section shows no apex %s command (found %v)", want, subs)
		}
	}
	for _, p := range probs {
		t.Error(p)
	}
}
