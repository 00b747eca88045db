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

// TestReplayRestoreMissingOK: with -restore-missing-ok a -restore file
// that does not exist yet starts an empty replay server (a container's
// first start); without it, or without -restore, it is a usage error.
func TestReplayRestoreMissingOK(t *testing.T) {
	bin := apexBinary(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "ckpt", "replay.ckpt")
	var out bytes.Buffer
	for _, args := range [][]string{{"-restore=" + missing}, {"-restore-missing-ok"}} {
		out.Reset()
		if code := run(append([]string{"replay", "-listen=127.0.0.1:0"}, args...), &out, &out); code != 2 {
			t.Errorf("apex replay %v exited %d, want 2:\n%s", args, code, out.String())
		}
	}
	addrFile := filepath.Join(dir, "replay.addr")
	replay := startProc(t, dir, "replay", bin, "replay", "-listen=127.0.0.1:0", "-addr-file="+addrFile,
		"-checkpoint-dir="+filepath.Dir(missing), "-restore="+missing, "-restore-missing-ok", "-env=CartPole-v1", "-actors=2", "-log-format=json")
	waitAddr(t, replay, addrFile)
	replay.stop(t)
	if err, _ := replay.wait(0); err != nil {
		t.Fatalf("replay: %v\n%s", err, replay.output())
	}
	if o := replay.output(); !strings.Contains(o, "no checkpoint yet") || !strings.Contains(o, `"restored":false`) {
		t.Fatalf("the first start does not say it started empty:\n%s", o)
	}
	// Its final checkpoint is there now: the same command line restores it.
	replay2 := startProc(t, dir, "replay2", bin, "replay", "-listen=127.0.0.1:0", "-addr-file="+addrFile+"2",
		"-checkpoint-dir="+filepath.Dir(missing), "-restore="+missing, "-restore-missing-ok", "-env=CartPole-v1", "-actors=2", "-log-format=json")
	waitAddr(t, replay2, addrFile+"2")
	replay2.stop(t)
	if o := replay2.output(); !strings.Contains(o, `"restored":true`) {
		t.Fatalf("the second start did not restore %s:\n%s", missing, o)
	}
}
