// Package auth is the security layer of apex's network path: the
// certificates, TLS configurations, listening policy and per-role bearer
// tokens that `apex replay`, `apex learner` and `apex actor` share.
//
// # Security model
//
//  1. Loopback by default. A server listens on a loopback address unless
//     told otherwise, and CheckListen refuses a non-loopback or unspecified
//     address (":9000", "0.0.0.0:9000", a host name) without TLS. The
//     explicit insecure flag overrides the refusal and logs a warning: it
//     is for networks the operator already trusts (a namespace, a VPN).
//  2. TLS 1.3 with mutual TLS against one project CA. ServerTLS and
//     ClientTLS build configurations with TLS 1.3 as the minimum; the server
//     requires and verifies a client certificate signed by the CA, the
//     client verifies the server's certificate against the same CA and its
//     name. `apex certs` (NewCA, NewServerCert, NewClientCert) makes such a
//     CA and its leaves with the standard library: ECDSA P-256, random
//     128-bit serials. Both functions check at load time that the leaf is
//     signed by the CA and fit for its side, so a mixed-up file is an error
//     at startup, not a failed handshake later.
//  3. Bearer tokens per role. Every call carries "authorization: Bearer
//     <token>"; Tokens maps each configured token to a role (RoleActor,
//     RoleLearner, RoleAdmin), comparing digests in constant time against
//     every configured token. A Policy, supplied by the server that
//     registers a service, maps each gRPC full method name to the roles
//     allowed to call it. RoleAdmin may call every method a policy names;
//     no other role is implied by another (a learner that should also
//     insert is listed for Insert). Methods the policy does not name are
//     denied to every caller, admin included, so a method added to a
//     service without a policy entry fails closed; the exception is the
//     standard health service (grpc.health.v1.Health), whose methods are
//     open to every caller, with or without a token, unless the policy
//     names them. The replay service keeps Checkpoint and SetLimiter for
//     RoleAdmin alone.
//  4. No tokens, no checks. An Authorizer built with no tokens allows every
//     call (counted as unchecked): the single-user loopback setup needs no
//     configuration. Anyone who can reach the port can then do anything, so
//     a server that listens beyond loopback should configure tokens.
//
// The certificate says who is connected (its subject carries the role as
// organizational unit, for logs and audits); the token says what the caller
// may do. Interceptors authorise by token alone.
//
// # Usage
//
// A server:
//
//  1. CheckListen(addr, tlsOn, insecure, log) before net.Listen.
//  2. ServerTLS(cert, key, ca) and grpc.Creds(credentials.NewTLS(cfg)).
//  3. LoadTokens (or Tokens.Add from flags), NewAuthorizer(tokens, policy),
//     and grpc.ChainUnaryInterceptor(a.Unary()),
//     grpc.ChainStreamInterceptor(a.Stream()).
//  4. Export Authorizer.Stats through its metrics.
//
// A client: ClientTLS(cert, key, ca, serverName) with
// grpc.WithTransportCredentials, and NewBearer(token) with
// grpc.WithPerRPCCredentials (NewLoopbackBearer when the connection is
// plain-text loopback).
//
// Nothing in this package starts a goroutine. Everything here is safe for
// concurrent use once built; Tokens.Add must finish before the tokens are
// handed to NewAuthorizer.
package auth
