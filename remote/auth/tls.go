package auth

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// ServerTLS returns a server configuration for mutual TLS: TLS 1.3 at
// least, the certificate chain of certFile with the key of keyFile, and
// every client required to present a certificate that verifies against the
// CA certificates of caFile. It checks at load time that the key belongs to
// the certificate and that the certificate is a server certificate signed
// by the CA in caFile (apex's model: one project CA signs both sides), and
// names the file at fault otherwise. Cost: three file reads and one chain
// verification; the returned Config may be shared by any number of
// listeners.
func ServerTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, pool, err := loadSide("server", certFile, keyFile, caFile, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}, nil
}

// ClientTLS returns a client configuration for mutual TLS: TLS 1.3 at
// least, the certificate chain of certFile with the key of keyFile
// presented to the server, and the server's certificate verified against
// the CA certificates of caFile and against serverName (empty: gRPC fills in
// the host of the dial target). It checks what ServerTLS checks, for a
// client certificate. Cost: as ServerTLS.
func ClientTLS(certFile, keyFile, caFile, serverName string) (*tls.Config, error) {
	cert, pool, err := loadSide("client", certFile, keyFile, caFile, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   serverName,
	}, nil
}

// loadSide loads a side's certificate and key and the CA pool, and checks
// that the certificate verifies against the pool for usage.
func loadSide(side, certFile, keyFile, caFile string, usage x509.ExtKeyUsage) (tls.Certificate, *x509.CertPool, error) {
	var none tls.Certificate
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return none, nil, fmt.Errorf("auth: %s certificate: %w", side, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return none, nil, fmt.Errorf("auth: %s key: %w", side, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return none, nil, fmt.Errorf("auth: %s certificate %s with key %s: %w", side, certFile, keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return none, nil, fmt.Errorf("auth: %s: %w", certFile, err)
		}
	}
	pool, err := LoadCertPool(caFile)
	if err != nil {
		return none, nil, fmt.Errorf("%w (the CA file)", err)
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return none, nil, fmt.Errorf("auth: %s: %w", certFile, err)
		}
		inter.AddCert(c)
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return none, nil, fmt.Errorf("auth: %s certificate %s does not verify as a %s certificate against the CA in %s: %w", side, certFile, side, caFile, err)
	}
	return cert, pool, nil
}
