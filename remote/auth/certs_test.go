package auth_test

import (
	"crypto/x509"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apexrl/apex/remote/auth"
)

const day = 24 * time.Hour

// pki is a CA with a server and a client leaf, written to dir.
type pki struct {
	dir                   string
	ca, server, client    *auth.KeyPair
	caFile                string
	serverFile, serverKey string
	clientFile, clientKey string
}

// newPKI makes a CA, a server leaf for localhost and 127.0.0.1 and a client
// leaf for role, and writes them to a fresh directory.
func newPKI(t *testing.T, role auth.Role) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	var err error
	if p.ca, err = auth.NewCA("apex test CA", day); err != nil {
		t.Fatal(err)
	}
	if p.server, err = auth.NewServerCert(p.ca, []string{"localhost", "127.0.0.1", "::1"}, day); err != nil {
		t.Fatal(err)
	}
	if p.client, err = auth.NewClientCert(p.ca, role, day); err != nil {
		t.Fatal(err)
	}
	f := func(n string) string { return filepath.Join(p.dir, n) }
	p.caFile, p.serverFile, p.serverKey, p.clientFile, p.clientKey = f("ca.pem"), f("server.pem"), f("server-key.pem"), f("client.pem"), f("client-key.pem")
	for _, w := range []struct {
		kp        *auth.KeyPair
		cert, key string
	}{{p.ca, p.caFile, f("ca-key.pem")}, {p.server, p.serverFile, p.serverKey}, {p.client, p.clientFile, p.clientKey}} {
		if err := w.kp.WriteFiles(w.cert, w.key, false); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func TestCertChainVerifies(t *testing.T) {
	p := newPKI(t, auth.RoleLearner)
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.Cert)

	if !p.ca.Cert.IsCA || !p.ca.Cert.BasicConstraintsValid || p.ca.Cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA: IsCA %v, basic constraints %v, key usage %b", p.ca.Cert.IsCA, p.ca.Cert.BasicConstraintsValid, p.ca.Cert.KeyUsage)
	}
	if err := p.ca.Cert.CheckSignatureFrom(p.ca.Cert); err != nil {
		t.Errorf("CA is not self-signed: %v", err)
	}
	if p.ca.Cert.PublicKeyAlgorithm != x509.ECDSA || !p.ca.Key.PublicKey.Equal(p.ca.Cert.PublicKey) {
		t.Errorf("CA key algorithm %v, or the key is not the certificate's", p.ca.Cert.PublicKeyAlgorithm)
	}
	if got := p.ca.Key.Curve.Params().Name; got != "P-256" {
		t.Errorf("CA curve %s, want P-256", got)
	}

	for _, host := range []string{"localhost", "127.0.0.1", "::1"} {
		if _, err := p.server.Cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("server certificate for %s: %v", host, err)
		}
	}
	if err := p.server.Cert.VerifyHostname("example.com"); err == nil {
		t.Error("server certificate verifies for example.com, a name it was not made for")
	}
	if _, err := p.server.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("server certificate verifies for client authentication")
	}
	if _, err := p.client.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if _, err := p.client.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("client certificate verifies for server authentication")
	}
	if ou := p.client.Cert.Subject.OrganizationalUnit; len(ou) != 1 || ou[0] != "learner" {
		t.Errorf("client subject OU %q, want [learner]", ou)
	}
	if p.server.Cert.IsCA || p.client.Cert.IsCA {
		t.Error("a leaf is a CA")
	}
	// A leaf cannot sign: the CA's MaxPathLen 0 forbids intermediates.
	if _, err := auth.NewServerCert(p.server, []string{"x"}, day); err == nil {
		t.Error("a server leaf signed a certificate")
	}
	// Serials are random and distinct.
	s := map[string]bool{}
	for _, c := range []*x509.Certificate{p.ca.Cert, p.server.Cert, p.client.Cert} {
		s[c.SerialNumber.String()] = true
		if c.SerialNumber.BitLen() < 64 {
			t.Errorf("serial %v has %d bits", c.SerialNumber, c.SerialNumber.BitLen())
		}
	}
	if len(s) != 3 {
		t.Errorf("serials not distinct: %v", s)
	}
	// Validity: from before now to about a day later.
	now := time.Now()
	if nb, na := p.server.Cert.NotBefore, p.server.Cert.NotAfter; !nb.Before(now) || na.Before(now.Add(day-time.Hour)) || na.After(now.Add(day+time.Hour)) {
		t.Errorf("server valid %v to %v, want now to a day after %v", nb, na, now)
	}
	if ips := p.server.Cert.IPAddresses; len(ips) != 2 || !ips[0].Equal(net.ParseIP("127.0.0.1")) || !ips[1].Equal(net.IPv6loopback) {
		t.Errorf("server IP SANs %v", ips)
	}
	if dns := p.server.Cert.DNSNames; len(dns) != 1 || dns[0] != "localhost" {
		t.Errorf("server DNS SANs %v", dns)
	}
}

func TestPEMRoundTrip(t *testing.T) {
	p := newPKI(t, auth.RoleActor)
	got, err := auth.LoadKeyPair(p.serverFile, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Cert.Equal(p.server.Cert) || !got.Key.Equal(p.server.Key) {
		t.Error("server certificate or key changed through PEM")
	}
	for name, want := range map[string]os.FileMode{"ca.pem": 0o644, "ca-key.pem": 0o600, "server-key.pem": 0o600, "client-key.pem": 0o600} {
		st, err := os.Stat(filepath.Join(p.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		// Umask may take bits from a certificate, never add any.
		if perm := st.Mode().Perm(); perm&^want != 0 || strings.HasSuffix(name, "key.pem") && perm != want {
			t.Errorf("%s has mode %v, want %v", name, perm, want)
		}
	}
	pool, err := auth.LoadCertPool(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := got.Cert.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
		t.Errorf("round-tripped server certificate does not verify against the round-tripped CA: %v", err)
	}

	// A mismatched key names both files.
	if _, err := auth.LoadKeyPair(p.serverFile, p.clientKey); err == nil || !strings.Contains(err.Error(), "client-key.pem is not the key of the certificate in") {
		t.Errorf("mismatched key: %v", err)
	}
	if _, err := auth.LoadKeyPair(filepath.Join(p.dir, "nope.pem"), p.serverKey); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing certificate: %v", err)
	}
	if _, err := auth.LoadKeyPair(p.serverKey, p.serverKey); err == nil || !strings.Contains(err.Error(), "no PEM CERTIFICATE") {
		t.Errorf("key as certificate: %v", err)
	}
	if _, err := auth.LoadCertPool(p.serverKey); err == nil {
		t.Error("a key file loaded as a CA pool")
	}
}

func TestWriteFilesRefusesOverwrite(t *testing.T) {
	p := newPKI(t, auth.RoleActor)
	before, err := os.ReadFile(p.serverFile)
	if err != nil {
		t.Fatal(err)
	}
	other, err := auth.NewServerCert(p.ca, []string{"localhost"}, day)
	if err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(p.dir, "fresh-key.pem")
	if err := other.WriteFiles(p.serverFile, fresh, false); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "server.pem") {
		t.Fatalf("overwrite without asking: %v", err)
	}
	if _, err := os.Stat(fresh); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the key was written although the certificate exists: %v", err)
	}
	if after, _ := os.ReadFile(p.serverFile); string(after) != string(before) {
		t.Error("server.pem changed on a refused write")
	}
	// Asked: replaced, and the key keeps mode 0600 even if it was wider.
	if err := os.Chmod(p.serverKey, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := other.WriteFiles(p.serverFile, p.serverKey, true); err != nil {
		t.Fatal(err)
	}
	got, err := auth.LoadKeyPair(p.serverFile, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Cert.Equal(other.Cert) {
		t.Error("overwrite kept the old certificate")
	}
	if st, _ := os.Stat(p.serverKey); st.Mode().Perm() != 0o600 {
		t.Errorf("overwritten key has mode %v", st.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(p.dir, ".*tmp*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestBadCertInput(t *testing.T) {
	ca, err := auth.NewCA("ca", day)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"", "-bad.example", "bad-.example", "a..b", "under_score", "sp ace", "fe80::1%eth0", strings.Repeat("a", 64) + ".x", "*"} {
		if _, err := auth.NewServerCert(ca, []string{"localhost", h}, day); err == nil || !strings.Contains(err.Error(), "host") {
			t.Errorf("host %q: %v", h, err)
		}
	}
	for _, h := range []string{"localhost", "apex-1.example.org", "*.example.org", "10.0.0.1", "::1", "::ffff:127.0.0.1"} {
		if _, err := auth.CheckHost(h); err != nil {
			t.Errorf("host %q: %v", h, err)
		}
	}
	if _, err := auth.NewServerCert(ca, nil, day); err == nil {
		t.Error("a server certificate with no hosts")
	}
	if _, err := auth.NewClientCert(ca, "root", day); err == nil || !strings.Contains(err.Error(), `unknown role "root"`) {
		t.Errorf("role root: %v", err)
	}
	if _, err := auth.NewCA("ca", 0); err == nil || !strings.Contains(err.Error(), "validity") {
		t.Errorf("zero validity: %v", err)
	}
	if _, err := auth.NewClientCert(nil, auth.RoleActor, day); err == nil {
		t.Error("a client certificate without a CA")
	}
}
