package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apexrl/apex/remote/auth"
)

// runCertsCmd runs apex certs with args and returns its exit status and
// output.
func runCertsCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"certs"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCertsWritesAWorkingPKI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	code, out, errs := runCertsCmd(t, "-out", dir, "-hosts", "localhost, 127.0.0.1,replay1.example.org", "-days", "30", "-role", "learner")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, f := range certFiles {
		p := filepath.Join(dir, f)
		if !strings.Contains(out, "wrote "+p+" ") {
			t.Errorf("output does not list %s:\n%s", p, out)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if (strings.HasSuffix(f, "key.pem") || strings.Contains(f, "token")) && st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("made %s with %v (%v), want mode 0700", dir, st.Mode().Perm(), err)
	}
	// What it wrote is what the servers and clients load: each leaf
	// verifies against the CA for its side.
	f := func(n string) string { return filepath.Join(dir, n) }
	if _, err := auth.ServerTLS(f("server.pem"), f("server-key.pem"), f("ca.pem")); err != nil {
		t.Errorf("server files: %v", err)
	}
	if _, err := auth.ClientTLS(f("client.pem"), f("client-key.pem"), f("ca.pem"), "replay1.example.org"); err != nil {
		t.Errorf("client files: %v", err)
	}
	// The tokens file is what a server's -tokens loads, and each role's
	// file holds that role's token.
	toks, err := auth.LoadTokens(f("tokens"))
	if err != nil {
		t.Fatalf("tokens: %v", err)
	}
	for _, r := range auth.Roles {
		b, err := os.ReadFile(f(string(r) + ".token"))
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := toks.Lookup(strings.TrimSpace(string(b))); !ok || got != r {
			t.Errorf("%s.token holds a token of role %q (found %v) in the tokens file, want %q", r, got, ok, r)
		}
	}
	server, err := auth.LoadKeyPair(f("server.pem"), f("server-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"localhost", "127.0.0.1", "replay1.example.org"} {
		if err := server.Cert.VerifyHostname(h); err != nil {
			t.Errorf("server certificate: %v", err)
		}
	}
	if d := server.Cert.NotAfter.Sub(server.Cert.NotBefore).Hours() / 24; d < 30 || d > 31 {
		t.Errorf("server certificate valid %.2f days, want 30", d)
	}
	client, err := auth.LoadKeyPair(f("client.pem"), f("client-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if ou := client.Cert.Subject.OrganizationalUnit; len(ou) != 1 || ou[0] != "learner" {
		t.Errorf("client OU %v, want [learner]", ou)
	}
	if _, err := auth.LoadKeyPair(f("ca.pem"), f("ca-key.pem")); err != nil {
		t.Errorf("CA files: %v", err)
	}
}

func TestCertsRefusesOverwrite(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := runCertsCmd(t, "-out", dir); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	before := map[string]string{}
	for _, f := range certFiles {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		before[f] = string(b)
	}
	code, out, errs := runCertsCmd(t, "-out", dir)
	if code != 1 || !strings.Contains(errs, "ca.pem: file already exists") || !strings.Contains(errs, "-force") || out != "" {
		t.Errorf("second run: exit %d, stdout %q, stderr %q; want 1 naming ca.pem and -force", code, out, errs)
	}
	for _, f := range certFiles {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != before[f] {
			t.Errorf("%s changed on a refused run", f)
		}
	}
	// One file present is enough to refuse, and nothing is written.
	part := t.TempDir()
	if err := os.WriteFile(filepath.Join(part, "client-key.pem"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCertsCmd(t, "-out", part); code != 1 || !strings.Contains(errs, "client-key.pem: file already exists") {
		t.Errorf("one file present: exit %d, %s", code, errs)
	}
	if left, _ := os.ReadDir(part); len(left) != 1 {
		t.Errorf("a refused run wrote files: %v", left)
	}

	if code, _, errs := runCertsCmd(t, "-out", dir, "-force"); code != 0 {
		t.Fatalf("-force: exit %d: %s", code, errs)
	}
	for _, f := range certFiles {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) == before[f] {
			t.Errorf("%s unchanged by -force", f)
		}
	}
	if _, err := auth.ServerTLS(filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"), filepath.Join(dir, "ca.pem")); err != nil {
		t.Errorf("files after -force: %v", err)
	}
}

func TestCertsErrors(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "-out is required"},
		{[]string{"-out", filepath.Join(notDir, "pki")}, 1, "-out: mkdir"},
		{[]string{"-out", t.TempDir(), "-hosts", "localhost,bad_name"}, 2, `host "bad_name"`},
		{[]string{"-out", t.TempDir(), "-hosts", "localhost,,127.0.0.1"}, 2, "empty host name"},
		{[]string{"-out", t.TempDir(), "-hosts", ""}, 2, "empty host name"},
		{[]string{"-out", t.TempDir(), "-days", "0"}, 2, "-days must be between 1 and 3650, got 0"},
		{[]string{"-out", t.TempDir(), "-role", "root"}, 2, `unknown role "root"`},
		{[]string{"-out", t.TempDir(), "extra"}, 2, `unexpected argument "extra"`},
	}
	for _, c := range cases {
		code, out, errs := runCertsCmd(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) || out != "" {
			t.Errorf("apex certs %q: exit %d, stdout %q, stderr %q; want %d with %q", c.args, code, out, errs, c.code, c.want)
		}
	}
	if code, out, _ := runCertsCmd(t, "-h"); code != 0 || !strings.Contains(out, "usage: apex certs -out DIR") {
		t.Errorf("-h: exit %d, %q", code, out)
	}
}

// TestCertsKeepExisting: -keep-existing leaves a complete folder as it is
// (exit 0, the CA unchanged), writes a missing one, still refuses a folder
// holding some of the files only, and contradicts -force.
func TestCertsKeepExisting(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	if code, _, errs := runCertsCmd(t, "-out", dir, "-keep-existing"); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errs)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCertsCmd(t, "-out", dir, "-keep-existing")
	if code != 0 || !strings.Contains(out, "kept "+dir) {
		t.Fatalf("second run: exit %d, %q, %s", code, out, errs)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); !bytes.Equal(again, ca) {
		t.Fatal("-keep-existing replaced the CA")
	}
	if err := os.Remove(filepath.Join(dir, "admin.token")); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCertsCmd(t, "-out", dir, "-keep-existing"); code != 1 || !strings.Contains(errs, "exist") {
		t.Fatalf("a partial folder: exit %d, %s", code, errs)
	}
	if code, _, errs := runCertsCmd(t, "-out", dir, "-keep-existing", "-force"); code != 2 {
		t.Fatalf("-force with -keep-existing: exit %d, %s", code, errs)
	}
}
