package auth

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"
)

// Bearer is the client side of the tokens: gRPC per-RPC credentials that
// send "authorization: Bearer <token>" with every call
// (grpc.WithPerRPCCredentials). It is immutable and safe for concurrent
// use; each call costs one small map.
type Bearer struct {
	header   string
	insecure bool
}

var _ credentials.PerRPCCredentials = (*Bearer)(nil)

// NewBearer returns credentials for token that gRPC sends only over a
// secure (TLS) connection. The token must pass the checks of Tokens.Add.
func NewBearer(token string) (*Bearer, error) {
	if err := checkToken(token); err != nil {
		return nil, fmt.Errorf("auth: bearer token %w", err)
	}
	return &Bearer{header: "Bearer " + token}, nil
}

// NewLoopbackBearer returns credentials for token that gRPC also sends over
// a plain-text connection, which is allowed only to a loopback address:
// addr (host:port, the server's address) must be one (see IsLoopback), or
// the result is an error. Over TLS it behaves as NewBearer's.
func NewLoopbackBearer(token, addr string) (*Bearer, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("auth: server address %q: %w", addr, err)
	}
	if !IsLoopback(host) {
		return nil, fmt.Errorf("auth: server address %s is not loopback: a token goes in the clear only to a loopback address (use TLS)", addr)
	}
	b, err := NewBearer(token)
	if err != nil {
		return nil, err
	}
	b.insecure = true
	return b, nil
}

// GetRequestMetadata returns the authorization header.
func (b *Bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": b.header}, nil
}

// RequireTransportSecurity reports true unless b was made by
// NewLoopbackBearer.
func (b *Bearer) RequireTransportSecurity() bool { return !b.insecure }
