package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apexrl/apex/remote/auth"
)

const certsUsage = `usage: apex certs -out DIR [flags]

Makes a private CA and the certificates for mutual TLS between apex's
processes, with the standard library: ECDSA P-256 keys, random 128-bit
serials, valid from now for -days. Writes into DIR (made, mode 0700, if
absent):

  ca.pem, ca-key.pem          the CA: every process gets ca.pem; keep
                              ca-key.pem offline, it signs new certificates
  server.pem, server-key.pem  the server certificate, for each of -hosts
  client.pem, client-key.pem  the client certificate actors, learners and
                              admin tools present (its subject carries -role
                              as a label; bearer tokens decide what a
                              caller may do)
  tokens                      a fresh bearer token per role, "role token"
                              lines: the servers' -tokens file
  actor.token, learner.token, admin.token
                              each role's token alone: a client's
                              -token-file

Keys and tokens are written with mode 0600. An existing file is an error, and nothing
is written, unless -force replaces them all. With -keep-existing, a DIR that
already holds every one of these files is kept as it is (exit 0, nothing
written): an init container or one-shot service may run again without
rotating the CA under running processes; a DIR holding only some of them is
still an error.

Typical: apex certs -out ./pki -hosts=localhost,127.0.0.1,replay1.example.org

flags:
`

// certFiles are the files apex certs writes, in the order it writes them.
var certFiles = []string{"ca.pem", "ca-key.pem", "server.pem", "server-key.pem", "client.pem", "client-key.pem",
	"tokens", "actor.token", "learner.token", "admin.token"}

// runCerts is `apex certs`. Exit status: 0 success, 1 failure (DIR cannot
// be made or written, files exist without -force), 2 usage error (no -out,
// a bad host name, -days out of range, an unknown -role).
func runCerts(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apex certs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "directory to write the CA, server and client files into (required)")
	hosts := fs.String("hosts", "localhost,127.0.0.1,::1", "comma-separated DNS names and IP addresses the server certificate is valid for")
	days := fs.Int("days", 365, "validity of every certificate in days (1 to 3650)")
	role := fs.String("role", string(auth.RoleActor), "role written into the client certificate's subject: actor, learner or admin")
	force := fs.Bool("force", false, "overwrite existing files")
	keep := fs.Bool("keep-existing", false, "when -out already holds every file apex certs writes, keep them and exit 0 (an init step run again); some but not all present is still an error")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), certsUsage)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "apex certs: "+format+"\n", a...)
		return 2
	}
	if *out == "" {
		return usageErr("-out is required: the directory to write the certificates into")
	}
	if *days < 1 || *days > 3650 {
		return usageErr("-days must be between 1 and 3650, got %d", *days)
	}
	if err := auth.Role(*role).Validate(); err != nil {
		return usageErr("-role: %v", err)
	}
	if *force && *keep {
		return usageErr("-force and -keep-existing contradict each other: give one")
	}
	var hostList []string
	for _, h := range strings.Split(*hosts, ",") {
		h = strings.TrimSpace(h)
		if _, err := auth.CheckHost(h); err != nil {
			return usageErr("-hosts %q: %v", *hosts, err)
		}
		hostList = append(hostList, h)
	}
	if *keep {
		present := 0
		for _, f := range certFiles {
			if _, err := os.Stat(filepath.Join(*out, f)); err == nil {
				present++
			}
		}
		if present == len(certFiles) {
			fmt.Fprintf(stdout, "kept %s: it holds every file already (-keep-existing)\n", *out)
			return 0
		}
	}
	if err := writeCerts(*out, hostList, time.Duration(*days)*24*time.Hour, auth.Role(*role), *force, stdout); err != nil {
		fmt.Fprintf(stderr, "apex certs: %v\n", err)
		return 1
	}
	return 0
}

// writeCerts makes the CA and the leaves and writes them into dir, then
// lists what it wrote on w.
func writeCerts(dir string, hosts []string, validity time.Duration, role auth.Role, force bool, w io.Writer) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	paths := make([]string, len(certFiles))
	for i, f := range certFiles {
		paths[i] = filepath.Join(dir, f)
	}
	if !force {
		if err := auth.CheckAbsent(paths...); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%w; nothing written (pass -force to replace every file)", err)
			}
			return err
		}
	}
	ca, err := auth.NewCA("apex CA", validity)
	if err != nil {
		return err
	}
	server, err := auth.NewServerCert(ca, hosts, validity)
	if err != nil {
		return err
	}
	client, err := auth.NewClientCert(ca, role, validity)
	if err != nil {
		return err
	}
	pairs := []*auth.KeyPair{ca, server, client}
	for i, kp := range pairs {
		if err := kp.WriteFiles(paths[2*i], paths[2*i+1], force); err != nil {
			return err
		}
	}
	if err := writeTokens(paths[6], paths[7:], force); err != nil {
		return err
	}
	until := ca.Cert.NotAfter.UTC().Format("2006-01-02")
	what := []string{
		"the CA certificate (every process gets it), valid until " + until,
		"the CA key, mode 0600: keep it offline",
		"the server certificate for " + strings.Join(hosts, ", "),
		"the server key, mode 0600",
		"the client certificate (role " + string(role) + ")",
		"the client key, mode 0600",
		"the servers' -tokens file: one token per role, mode 0600",
		"the actor role's token (-token-file of apex actor), mode 0600",
		"the learner role's token (-token-file of apex learner), mode 0600",
		"the admin role's token (checkpoints, limiter changes), mode 0600",
	}
	width := 0
	for _, p := range paths {
		width = max(width, len(p))
	}
	for i, p := range paths {
		fmt.Fprintf(w, "wrote %-*s  %s\n", width, p, what[i])
	}
	return nil
}

// writeTokens makes a fresh token for each of auth.Roles and writes them
// all to list ("role token" lines, the servers' -tokens file) and each
// alone to perRole (in auth.Roles' order), every file with mode 0600.
func writeTokens(list string, perRole []string, force bool) error {
	var all strings.Builder
	all.WriteString("# apex bearer tokens: role token\n")
	for i, r := range auth.Roles {
		tok, err := auth.NewToken()
		if err != nil {
			return err
		}
		fmt.Fprintf(&all, "%s %s\n", r, tok)
		if err := writeSecret(perRole[i], []byte(tok+"\n"), force); err != nil {
			return err
		}
	}
	return writeSecret(list, []byte(all.String()), force)
}

// writeSecret writes data to path with mode 0600, refusing an existing
// file unless force.
func writeSecret(path string, data []byte, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
