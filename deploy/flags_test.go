package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// apexCLI is what the apex binary says about its subcommands: each one's
// flags with their defaults (from `apex SUB -h`), and the files apex certs
// writes.
type apexCLI struct {
	bin   string
	flags map[string]map[string]string // subcommand -> flag -> default ("" if none)
	bools map[string]map[string]bool   // subcommand -> its boolean flags
	certs []string                     // file names apex certs writes
}

// flagLine and defaultRe read flag.PrintDefaults' output.
var (
	flagLine  = regexp.MustCompile(`^  -([A-Za-z0-9_.-]+)( \S+)?$`)
	defaultRe = regexp.MustCompile(`\(default "?([^")]*)"?\)$`)
)

// newCLI asks the binary bin for its subcommands' flags.
func newCLI(t testing.TB, bin string) *apexCLI {
	t.Helper()
	c := &apexCLI{bin: bin, flags: map[string]map[string]string{}, bools: map[string]map[string]bool{}}
	dir := t.TempDir()
	out, err := exec.Command(bin, "certs", "-out="+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("apex certs: %v\n%s", err, out)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		c.certs = append(c.certs, e.Name())
	}
	return c
}

// flagsOf returns the flags of apex sub (nil if apex has no such
// subcommand): `apex sub -h` must exit 0 and print the flag list.
func (c *apexCLI) flagsOf(sub string) map[string]string {
	if f, ok := c.flags[sub]; ok {
		return f
	}
	var out bytes.Buffer
	cmd := exec.Command(c.bin, sub, "-h")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || strings.HasPrefix(sub, "-") {
		c.flags[sub] = nil
		return nil
	}
	fl := map[string]string{}
	bools := map[string]bool{}
	var last string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := sc.Text()
		if m := flagLine.FindStringSubmatch(line); m != nil {
			last = m[1]
			fl[last] = ""
			bools[last] = m[2] == ""
		} else if last != "" {
			if m := defaultRe.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				fl[last] = m[1]
			}
		}
	}
	c.flags[sub] = fl
	c.bools[sub] = bools
	return fl
}

// invocation is one apex command line of a deployment file: args are
// what follows the binary (the subcommand first).
type invocation struct {
	where string // "docker-compose.yml: service learner"
	args  []string
}

// parsed is an invocation's subcommand and flag values (a flag without
// "=value" is "true").
type parsed struct {
	sub  string
	vals map[string]string
}

// check parses inv against the binary's flags: the subcommand must exist,
// every argument must be a -flag of it (given once), and every path under
// a pki folder must be a file apex certs writes. Problems are appended to
// probs.
func (c *apexCLI) check(inv invocation, probs *[]string) parsed {
	p := parsed{vals: map[string]string{}}
	if len(inv.args) == 0 {
		*probs = append(*probs, inv.where+": no apex subcommand")
		return p
	}
	p.sub = inv.args[0]
	fl := c.flagsOf(p.sub)
	if fl == nil {
		*probs = append(*probs, fmt.Sprintf("%s: apex has no subcommand %q", inv.where, p.sub))
		return p
	}
	args := inv.args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			*probs = append(*probs, fmt.Sprintf("%s: apex %s: argument %q is not a flag (apex takes no positional arguments)", inv.where, p.sub, a))
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasVal {
			val = "true"
			if _, ok := fl[name]; ok && !c.bools[p.sub][name] && i+1 < len(args) {
				i++ // "-flag value", as the flag package reads it
				val = args[i]
			}
		}
		if _, ok := fl[name]; !ok {
			*probs = append(*probs, fmt.Sprintf("%s: apex %s has no flag -%s (in %q)", inv.where, p.sub, name, a))
			continue
		}
		if _, dup := p.vals[name]; dup {
			*probs = append(*probs, fmt.Sprintf("%s: apex %s: -%s given twice", inv.where, p.sub, name))
		}
		p.vals[name] = val
		if strings.Contains(val, "/pki/") && !slices.Contains(c.certs, filepath.Base(val)) {
			*probs = append(*probs, fmt.Sprintf("%s: apex %s -%s=%s: apex certs writes no file %q (it writes %s)", inv.where, p.sub, name, val, filepath.Base(val), strings.Join(c.certs, ", ")))
		}
	}
	return p
}

// value is -name's value, given or the binary's default.
func (c *apexCLI) value(p parsed, name string) string {
	if v, ok := p.vals[name]; ok {
		return v
	}
	return c.flagsOf(p.sub)[name]
}

// listens returns the ports p serves on: -listen (given or default) for
// apex replay and apex learner, and -health-listen; health names the
// plaintext probe ports among them.
func (c *apexCLI) listens(p parsed, where string, probs *[]string) (ports, health []int) {
	if p.sub != "replay" && p.sub != "learner" {
		return nil, nil
	}
	for _, name := range []string{"listen", "health-listen"} {
		v := c.value(p, name)
		if v == "" {
			continue
		}
		port, err := portOf(v)
		if err != nil {
			*probs = append(*probs, fmt.Sprintf("%s: apex %s -%s=%s: %v", where, p.sub, name, v, err))
			continue
		}
		ports = append(ports, port)
		if name == "health-listen" {
			health = append(health, port)
		}
	}
	return ports, health
}

// portOf is the port of a host:port.
func portOf(hostport string) (int, error) {
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}

// dialed are the host:port entries p connects to: -replay's list and
// -learner for apex learner and apex actor, -addr for apex health.
func dialed(p parsed) map[string][]string {
	out := map[string][]string{}
	for _, name := range []string{"replay", "learner", "addr"} {
		if v, ok := p.vals[name]; ok && (p.sub != "learner" || name == "replay") {
			for _, e := range strings.Split(v, ",") {
				out[name] = append(out[name], strings.TrimSpace(e))
			}
		}
	}
	return out
}

// dockerfilePorts reads the EXPOSE lines and the ENTRYPOINT of the
// Dockerfile.
func dockerfilePorts(t testing.TB) (ports []int, entrypoint string) {
	t.Helper()
	for _, line := range strings.Split(string(readFile(t, "Dockerfile")), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "EXPOSE" {
			for _, s := range f[1:] {
				p, err := strconv.Atoi(strings.TrimSuffix(s, "/tcp"))
				if err != nil {
					t.Fatalf("Dockerfile: EXPOSE %s: %v", s, err)
				}
				ports = append(ports, p)
			}
		}
		if len(f) > 1 && f[0] == "ENTRYPOINT" {
			entrypoint = strings.Trim(strings.Join(f[1:], " "), `[]" `)
		}
	}
	return ports, entrypoint
}

// composeFile is what the checks read of a compose file.
type composeFile struct {
	Services map[string]struct {
		Image       string   `yaml:"image"`
		Command     []string `yaml:"command"`
		Entrypoint  []string `yaml:"entrypoint"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		DependsOn map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Networks []string `yaml:"networks"`
	} `yaml:"services"`
	Networks map[string]struct {
		Internal bool `yaml:"internal"`
	} `yaml:"networks"`
}

// checkCompose checks a compose file's apex command lines, health checks,
// ports and fleet shape; it returns the problems found.
func checkCompose(c *apexCLI, name string, data []byte, exposed []int) []string {
	var probs []string
	var cf composeFile
	if err := yaml.Unmarshal(data, &cf); err != nil {
		return []string{fmt.Sprintf("%s: %v", name, err)}
	}
	if len(cf.Services) == 0 {
		return []string{name + ": no services"}
	}
	type svc struct {
		p      parsed
		listen []int
	}
	svcs := map[string]svc{}
	names := make([]string, 0, len(cf.Services))
	for n := range cf.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	bySub := map[string][]string{}
	for _, n := range names {
		s := cf.Services[n]
		where := fmt.Sprintf("%s: service %s", name, n)
		if len(s.Entrypoint) > 0 {
			probs = append(probs, where+": sets an entrypoint; the image's /apex is the one checked")
		}
		p := c.check(invocation{where + " command", s.Command}, &probs)
		ports, _ := c.listens(p, where, &probs)
		for _, port := range ports {
			if !slices.Contains(exposed, port) {
				probs = append(probs, fmt.Sprintf("%s: listens on %d, which the Dockerfile does not EXPOSE (%v)", where, port, exposed))
			}
		}
		svcs[n] = svc{p, ports}
		bySub[p.sub] = append(bySub[p.sub], n)
		if ht := s.Healthcheck.Test; len(ht) > 0 {
			if len(ht) < 3 || ht[0] != "CMD" || ht[1] != "/apex" {
				probs = append(probs, fmt.Sprintf("%s: healthcheck %q: want [\"CMD\", \"/apex\", \"health\", ...] (the image has no shell)", where, ht))
				continue
			}
			hp := c.check(invocation{where + " healthcheck", ht[2:]}, &probs)
			addr := hp.vals["addr"]
			if hp.sub != "health" {
				probs = append(probs, fmt.Sprintf("%s: healthcheck runs apex %s, not apex health", where, hp.sub))
			} else if port, err := portOf(addr); err != nil || !slices.Contains(ports, port) {
				probs = append(probs, fmt.Sprintf("%s: healthcheck -addr=%s: not a port the service listens on (%v)", where, addr, ports))
			}
		}
		for dep, d := range s.DependsOn {
			if _, ok := cf.Services[dep]; !ok {
				probs = append(probs, fmt.Sprintf("%s: depends on %s, which is no service", where, dep))
			} else if d.Condition == "service_healthy" && len(cf.Services[dep].Healthcheck.Test) == 0 {
				probs = append(probs, fmt.Sprintf("%s: waits for %s to be healthy, which has no healthcheck", where, dep))
			}
		}
		for _, nw := range s.Networks {
			if _, ok := cf.Networks[nw]; !ok {
				probs = append(probs, fmt.Sprintf("%s: network %s is not defined", where, nw))
			}
		}
	}
	// Every address dialed is a service of the file and a port it serves.
	for _, n := range names {
		for flag, addrs := range dialed(svcs[n].p) {
			for _, a := range addrs {
				host, port := splitHostPort(a)
				target, ok := svcs[host]
				if !ok || !slices.Contains(target.listen, port) {
					probs = append(probs, fmt.Sprintf("%s: service %s: -%s entry %s: no service %q listening on %d", name, n, flag, a, host, port))
				}
			}
		}
	}
	var shards []string
	for _, r := range bySub["replay"] {
		for _, port := range svcs[r].listen[:min(1, len(svcs[r].listen))] {
			shards = append(shards, net.JoinHostPort(r, strconv.Itoa(port)))
		}
	}
	probs = append(probs, checkFleet(name, "service", bySub, func(n string) parsed { return svcs[n].p }, len(bySub["actor"]), shards)...)
	return probs
}

// checkFleet checks a fleet's shape: every replay shard runs the same run
// flags, the learner and every actor host list every shard, and the actor
// hosts' -hosts is their number and their -host values differ; shards
// are the replay shards' addresses.
func checkFleet(name, unit string, bySub map[string][]string, p func(string) parsed, actorHosts int, shards []string) []string {
	var probs []string
	for _, sub := range []string{"learner", "actor"} {
		for _, n := range bySub[sub] {
			list := dialed(p(n))["replay"]
			a, b := slices.Clone(list), slices.Clone(shards)
			slices.Sort(a)
			slices.Sort(b)
			if !slices.Equal(a, b) {
				probs = append(probs, fmt.Sprintf("%s: %s %s: apex %s -replay=%s does not list the fleet's shards %s", name, unit, n, sub, strings.Join(list, ","), strings.Join(b, ",")))
			}
		}
	}
	replays := bySub["replay"]
	for _, r := range replays[min(1, len(replays)):] {
		a, b := p(replays[0]).vals, p(r).vals
		for k := range mergeKeys(a, b) {
			if k != "checkpoint-dir" && a[k] != b[k] {
				probs = append(probs, fmt.Sprintf("%s: %s %s: differs from replay shard %s in -%s (%q, %q): a fleet's shards serve one run", name, unit, r, replays[0], k, a[k], b[k]))
			}
		}
	}
	seen := map[string]bool{}
	for _, n := range bySub["actor"] {
		v := p(n).vals
		if v["hosts"] != strconv.Itoa(actorHosts) {
			probs = append(probs, fmt.Sprintf("%s: %s %s: apex actor -hosts=%s, but %d actor hosts run", name, unit, n, v["hosts"], actorHosts))
		}
		if h := v["host"]; !strings.HasPrefix(h, "$(") {
			if seen[h] {
				probs = append(probs, fmt.Sprintf("%s: %s %s: apex actor -host=%s twice", name, unit, n, h))
			}
			seen[h] = true
		}
	}
	return probs
}

// mergeKeys is the union of a's and b's keys.
func mergeKeys(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// splitHostPort splits a host:port (port -1 if absent or not a number).
func splitHostPort(a string) (string, int) {
	h, p, err := net.SplitHostPort(a)
	if err != nil {
		return a, -1
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return h, -1
	}
	return h, port
}

// TestComposeFlags checks docker-compose.yml against the binary.
func TestComposeFlags(t *testing.T) {
	c := newCLI(t, apexBinary(t))
	exposed, entry := dockerfilePorts(t)
	if entry != "/apex" {
		t.Fatalf("Dockerfile: ENTRYPOINT %q, want /apex (the compose file and the manifests give apex's arguments only)", entry)
	}
	for _, p := range checkCompose(c, "docker-compose.yml", readFile(t, "docker-compose.yml"), exposed) {
		t.Error(p)
	}
}

// TestChecksFindMistakes feeds the checks broken files: each mistake must
// be reported, naming the file, the service and the flag or port.
func TestChecksFindMistakes(t *testing.T) {
	c := newCLI(t, apexBinary(t))
	good := string(readFile(t, "docker-compose.yml"))
	exposed, _ := dockerfilePorts(t)
	for _, m := range []struct{ old, new, want string }{
		{`"-checkpoint-every=10s"`, `"-checkpoint-evry=10s"`, "apex replay has no flag -checkpoint-evry"},
		{`["learner", `, `["lerner", `, `apex has no subcommand "lerner"`},
		{`"-learner=learner:7701"`, `"-learner=learner:7799"`, "-learner entry learner:7799"},
		{`-addr=127.0.0.1:7701`, `-addr=127.0.0.1:7705`, "healthcheck -addr=127.0.0.1:7705"},
		{`"-hosts=2", "-host=1"`, `"-hosts=3", "-host=1"`, "-hosts=3, but 2 actor hosts run"},
		{`/var/lib/apex/pki/learner.token`, `/var/lib/apex/pki/learner.tok`, `apex certs writes no file "learner.tok"`},
		{`"-listen=:7700",`, `"-listen=:7700", "-health-listen=:7788",`, "listens on 7788, which the Dockerfile does not EXPOSE"},
	} {
		if !strings.Contains(good, m.old) {
			t.Fatalf("docker-compose.yml no longer holds %q: update this test", m.old)
		}
		bad := strings.Replace(good, m.old, m.new, 1)
		probs := checkCompose(c, "bad.yml", []byte(bad), exposed)
		if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, m.want) && strings.HasPrefix(p, "bad.yml: service ") }) {
			t.Errorf("%s -> %s: want a problem with %q, got %q", m.old, m.new, m.want, probs)
		}
	}
	for _, m := range []struct{ file, old, new, want string }{
		{"actor.yaml", "-token-file=", "-token-fil=", "apex actor has no flag -token-fil"},
		{"actor.yaml", "replicas: 2", "replicas: 3", "-hosts=2, but 3 actor hosts run"},
		{"actor.yaml", "apex-learner:7701", "apex-learner:7700", "-learner entry apex-learner:7700"},
		{"actor.yaml", "apex-replay-1.apex-replay:7700", "apex-replay-2.apex-replay:7700", "apex-replay-2.apex-replay:7700"},
		{"replay.yaml", "grpc: {port: 7702}", "grpc: {port: 7700}", "probe on port 7700"},
		{"replay.yaml", "- -health-listen=:7702", "- -health-listen=:7703", "containerPort 7702 is not a port apex replay listens on"},
		{"learner.yaml", "targetPort: grpc", "targetPort: grpcx", `targetPort "grpcx"`},
	} {
		docs := map[string][]byte{}
		for _, f := range kubeFiles(t) {
			docs[filepath.Base(f)] = readFile(t, f)
		}
		src := string(docs[m.file])
		if !strings.Contains(src, m.old) {
			t.Fatalf("kubernetes/%s no longer holds %q: update this test", m.file, m.old)
		}
		docs[m.file] = []byte(strings.Replace(src, m.old, m.new, 1))
		probs := checkKube(c, docs, exposed)
		if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, m.want) }) {
			t.Errorf("kubernetes/%s: %s -> %s: want a problem with %q, got %q", m.file, m.old, m.new, m.want, probs)
		}
	}
}
