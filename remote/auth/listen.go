package auth

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
)

// CheckListen applies the listening policy to addr (host:port, as given to
// net.Listen) before a server listens on it. A loopback address
// (127.0.0.0/8, ::1, "localhost") is always allowed. Any other address —
// an unspecified one (":9000", "0.0.0.0:9000", "[::]:9000"), another IP, a
// host name (not resolved) — needs tlsOn; without it, the call is refused
// with an error that says to pass the TLS flags or the explicit insecure
// flag, unless insecure is set, which allows it and logs a warning on log
// (nil: slog.Default()). A malformed addr is an error. Cost: a parse; safe
// for concurrent use.
func CheckListen(addr string, tlsOn, insecure bool, log *slog.Logger) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("auth: listen address %q: %w", addr, err)
	}
	if IsLoopback(host) || tlsOn {
		return nil
	}
	what := "non-loopback address"
	if host == "" || isUnspecified(host) {
		what = "every interface"
	}
	if !insecure {
		return fmt.Errorf("auth: refusing to listen on %s (%s) without TLS: pass the TLS flags (certificate, key and CA) or the explicit insecure flag, or listen on a loopback address such as 127.0.0.1", addr, what)
	}
	if log == nil {
		log = slog.Default()
	}
	log.Warn("listening without TLS beyond loopback: traffic and bearer tokens travel in the clear, and anyone who can reach the address can connect", "addr", addr, "scope", what)
	return nil
}

// IsLoopback reports whether host (no port, IPv6 without brackets) names a
// loopback address: an IP in 127.0.0.0/8 or ::1 (an IPv4-mapped one
// included) or the name "localhost" (any case, with or without a trailing
// dot). Other names are not resolved and count as not loopback.
func IsLoopback(host string) bool {
	if h := strings.TrimSuffix(host, "."); strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

func isUnspecified(host string) bool {
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsUnspecified()
}
