package main

import (
	"bytes"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// freePort returns a loopback host:port nothing listens on right now (a
// listener on port 0, closed): for a flag that has no -addr-file of its own.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestHealthProbe runs apex replay with mutual TLS, tokens and a plaintext
// probe port (-health-listen), and asks it with apex health: SERVING (exit
// 0) on the probe port without certificates and on the service port with
// them; exit 1 on the service port without a client certificate, for an
// unknown service, and on both ports once the server has stopped; exit 2
// for usage errors.
func TestHealthProbe(t *testing.T) {
	bin := apexBinary(t)
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	var out bytes.Buffer
	if code := run([]string{"certs", "-out=" + pki, "-hosts=localhost,127.0.0.1"}, &out, &out); code != 0 {
		t.Fatalf("apex certs: %d\n%s", code, out.String())
	}
	f := func(name string) string { return filepath.Join(pki, name) }
	probe := freePort(t)
	addrFile := filepath.Join(dir, "replay.addr")
	replay := startProc(t, dir, "replay", bin, "replay", "-listen=127.0.0.1:0", "-addr-file="+addrFile, "-health-listen="+probe,
		"-tls-cert="+f("server.pem"), "-tls-key="+f("server-key.pem"), "-tls-ca="+f("ca.pem"), "-tokens="+f("tokens"),
		"-env=CartPole-v1", "-actors=2")
	addr := waitAddr(t, replay, addrFile)
	tlsFlags := []string{"-tls-cert=" + f("client.pem"), "-tls-key=" + f("client-key.pem"), "-tls-ca=" + f("ca.pem")}

	health := func(args ...string) (int, string) {
		var o bytes.Buffer
		code := run(append([]string{"health"}, args...), &o, &o)
		return code, o.String()
	}
	for _, c := range []struct {
		name string
		args []string
		want int
	}{
		{"probe port", []string{"-addr=" + probe}, 0},
		{"probe port, the Replay service", []string{"-addr=" + probe, "-service=apex.replay.v1.Replay"}, 0},
		{"service port with mutual TLS", append([]string{"-addr=" + addr}, tlsFlags...), 0},
		{"service port without a certificate", []string{"-addr=" + addr, "-timeout=1s"}, 1},
		{"an unknown service", []string{"-addr=" + probe, "-service=no.such.Service"}, 1},
		{"no -addr", nil, 2},
		{"a bad -addr", []string{"-addr=nohostport"}, 2},
		{"half the TLS flags", []string{"-addr=" + addr, tlsFlags[0]}, 2},
		{"a zero timeout", []string{"-addr=" + probe, "-timeout=0s"}, 2},
	} {
		if code, o := health(c.args...); code != c.want {
			t.Errorf("%s: apex health %v exited %d, want %d:\n%s", c.name, c.args, code, c.want, o)
		}
	}
	if code, o := health("-addr=" + probe); !strings.Contains(o, "SERVING") || code != 0 {
		t.Errorf("apex health prints %q (%d), want SERVING", o, code)
	}
	replay.stop(t)
	for _, args := range [][]string{{"-addr=" + probe, "-timeout=1s"}, append([]string{"-addr=" + addr, "-timeout=1s"}, tlsFlags...)} {
		if code, o := health(args...); code != 1 {
			t.Errorf("after the server stopped: apex health %v exited %d, want 1:\n%s", args, code, o)
		}
	}
}
