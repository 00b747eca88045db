package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// clockSkew is how far before its creation a certificate becomes valid, so a
// peer whose clock runs a little behind still accepts it.
const clockSkew = 5 * time.Minute

// KeyPair is a certificate with its ECDSA private key: a CA that signs
// leaves, or a leaf that a server or client presents. A KeyPair is not
// modified after creation and may be shared between goroutines.
type KeyPair struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA makes a self-signed CA certificate (CA:true, no intermediates below
// it) with a fresh ECDSA P-256 key, valid from a few minutes ago for
// validity. Cost: one key generation and one signature (well under a
// millisecond each).
func NewCA(commonName string, validity time.Duration) (*KeyPair, error) {
	if commonName == "" {
		return nil, errors.New("auth: CA common name is empty")
	}
	tmpl, key, err := template(pkix.Name{CommonName: commonName, Organization: []string{"apex"}}, validity)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.MaxPathLenZero = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	return sign(tmpl, tmpl, key, key)
}

// NewServerCert makes a server leaf signed by ca for hosts: each an IP
// address or a DNS name (a leading "*." label is allowed), written into the
// certificate's subject alternative names; the first is its common name. A
// bad or empty host is an error that names it. Cost: as NewCA.
func NewServerCert(ca *KeyPair, hosts []string, validity time.Duration) (*KeyPair, error) {
	if err := checkCA(ca); err != nil {
		return nil, err
	}
	if len(hosts) == 0 {
		return nil, errors.New("auth: a server certificate needs at least one host name or IP address")
	}
	var dns []string
	var ips []netip.Addr
	for _, h := range hosts {
		ip, err := CheckHost(h)
		if err != nil {
			return nil, err
		}
		if ip.IsValid() {
			ips = append(ips, ip)
		} else {
			dns = append(dns, h)
		}
	}
	tmpl, key, err := template(pkix.Name{CommonName: hosts[0], Organization: []string{"apex"}}, validity)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.DNSNames = dns
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
	}
	return sign(tmpl, ca.Cert, key, ca.Key)
}

// NewClientCert makes a client leaf signed by ca for role, which its
// subject carries as organizational unit (common name "apex <role>"). The
// role is a label for logs and audits: what a caller may do comes from its
// bearer token. Cost: as NewCA.
func NewClientCert(ca *KeyPair, role Role, validity time.Duration) (*KeyPair, error) {
	if err := checkCA(ca); err != nil {
		return nil, err
	}
	if err := role.Validate(); err != nil {
		return nil, err
	}
	name := pkix.Name{CommonName: "apex " + string(role), Organization: []string{"apex"}, OrganizationalUnit: []string{string(role)}}
	tmpl, key, err := template(name, validity)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return sign(tmpl, ca.Cert, key, ca.Key)
}

// CheckHost checks that h can name a server in a certificate: an IP address
// (no zone) or a DNS name of letters, digits and hyphens in labels of 1 to
// 63 characters, at most 253 in all, optionally starting with a "*." label.
// It returns the address when h is one, the zero Addr for a name.
func CheckHost(h string) (netip.Addr, error) {
	if h == "" {
		return netip.Addr{}, errors.New("auth: empty host name")
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		if ip.Zone() != "" {
			return netip.Addr{}, fmt.Errorf("auth: host %q: an IP address in a certificate has no zone", h)
		}
		return ip.Unmap(), nil
	}
	name := strings.TrimPrefix(h, "*.")
	if len(h) > 253 {
		return netip.Addr{}, fmt.Errorf("auth: host %q: longer than 253 characters", h)
	}
	for _, label := range strings.Split(name, ".") {
		if len(label) == 0 || len(label) > 63 {
			return netip.Addr{}, fmt.Errorf("auth: host %q: each dot-separated label must have 1 to 63 characters", h)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return netip.Addr{}, fmt.Errorf("auth: host %q: a label may not start or end with '-'", h)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return netip.Addr{}, fmt.Errorf("auth: host %q: %q is neither a letter, a digit nor '-' (nor is it an IP address)", h, c)
			}
		}
	}
	return netip.Addr{}, nil
}

func checkCA(ca *KeyPair) error {
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return errors.New("auth: no CA certificate and key")
	}
	if !ca.Cert.IsCA {
		return fmt.Errorf("auth: certificate %q is not a CA", ca.Cert.Subject.CommonName)
	}
	return nil
}

// template returns a certificate template for subject with a random serial,
// valid from clockSkew ago for validity, and a fresh P-256 key.
func template(subject pkix.Name, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	if validity <= 0 {
		return nil, nil, fmt.Errorf("auth: certificate validity %v is not positive", validity)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, fmt.Errorf("auth: serial number: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("auth: key: %w", err)
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subject,
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		BasicConstraintsValid: true,
	}, key, nil
}

func sign(tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) (*KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, fmt.Errorf("auth: signing %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("auth: signing %q: %w", tmpl.Subject.CommonName, err)
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// CertPEM returns the certificate as a PEM "CERTIFICATE" block.
func (k *KeyPair) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.Cert.Raw})
}

// KeyPEM returns the private key as a PEM "PRIVATE KEY" (PKCS #8) block.
func (k *KeyPair) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.Key)
	if err != nil {
		return nil, fmt.Errorf("auth: key of %q: %w", k.Cert.Subject.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// WriteFiles writes the certificate to certFile (mode 0644) and the key to
// keyFile (mode 0600, whatever the file's mode before). Without overwrite an
// existing file is an error wrapping fs.ErrExist, and then neither file is
// written; with overwrite each file is replaced by a rename, so a reader
// sees the old file or the new one, never a part. Safe for concurrent use
// with other writers only on distinct files.
func (k *KeyPair) WriteFiles(certFile, keyFile string, overwrite bool) error {
	keyPEM, err := k.KeyPEM()
	if err != nil {
		return err
	}
	if !overwrite {
		if err := CheckAbsent(certFile, keyFile); err != nil {
			return err
		}
	}
	if err := writeFile(certFile, k.CertPEM(), 0o644, overwrite); err != nil {
		return err
	}
	return writeFile(keyFile, keyPEM, 0o600, overwrite)
}

// CheckAbsent returns an error wrapping fs.ErrExist that names the first of
// paths that exists (as anything, a dangling link included), or nil.
func CheckAbsent(paths ...string) error {
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("auth: %s: %w", p, fs.ErrExist)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("auth: %w", err)
		}
	}
	return nil
}

// writeFile writes data to path with mode perm: with O_EXCL when not
// overwriting, else through a temporary file in the same directory renamed
// over path.
func writeFile(path string, data []byte, perm os.FileMode, overwrite bool) (err error) {
	var f *os.File
	if overwrite {
		f, err = os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
		if err == nil {
			err = f.Chmod(perm)
		}
	} else {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	}
	if err != nil {
		if f != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
		return fmt.Errorf("auth: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
			err = fmt.Errorf("auth: writing %s: %w", path, err)
		}
	}()
	if _, err = f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if overwrite {
		return os.Rename(f.Name(), path)
	}
	return nil
}

// LoadKeyPair reads a PEM certificate and its PEM ECDSA private key (PKCS #8
// or SEC 1), as WriteFiles writes them, and checks that the key belongs to
// the certificate. Errors name the file at fault. Cost: two file reads.
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	certs, err := readCerts(certFile)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("auth: key: %w", err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, fmt.Errorf("auth: %s: no PEM block", keyFile)
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("auth: %s: PEM block %q is not a private key", keyFile, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: %s: %w", keyFile, err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("auth: %s: a %T, not an ECDSA key", keyFile, key)
	}
	if !ec.PublicKey.Equal(certs[0].PublicKey) {
		return nil, fmt.Errorf("auth: %s is not the key of the certificate in %s", keyFile, certFile)
	}
	return &KeyPair{Cert: certs[0], Key: ec}, nil
}

// LoadCertPool reads the PEM certificates of caFile into a pool. A file
// that holds no certificate is an error. Cost: one file read.
func LoadCertPool(caFile string) (*x509.CertPool, error) {
	certs, err := readCerts(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// readCerts parses every CERTIFICATE block of file, at least one.
func readCerts(file string) ([]*x509.Certificate, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("auth: certificate: %w", err)
	}
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, raw = pem.Decode(raw)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("auth: %s: %w", file, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("auth: %s: no PEM CERTIFICATE block", file)
	}
	return certs, nil
}
