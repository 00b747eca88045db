package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestLoadtestBadFlags(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct{ args, want string }{
		{"-streams=0", "-streams=0 must be in 1..4096"},
		{"-insert-batch=9000", "-insert-batch=9000 must be in 1..8192"},
		{"-window=0", "-window=0 must be in 1..1024"},
		{"-streams=4 -conns=5", "-conns=5 must be in 0..4"},
		{"-insert-rate=-1", "-insert-rate=-1 must be a finite rate >= 0"},
		{"-insert-rate=NaN", "-insert-rate must be a finite number, got NaN"},
		{"-sample-batch=0", "-sample-batch=0 must be in 1..8192"},
		{"-sample-inflight=65", "-sample-inflight=65 must be in 1..64"},
		{"-sample-streams=0", "-sample-streams=0 must be in 1..16"},
		{"-warmup=-1s", "-warmup=-1s must not be negative"},
		{"-duration=0s", "-duration=0s must be positive"},
		{"-server=nohost", `-server="nohost" is not HOST:PORT`},
		{"-server=192.0.2.1:80", `-server="192.0.2.1:80" is not a loopback address: give -tls-cert, -tls-key and -tls-ca (or -insecure)`},
		{"-token-file=/nonexistent", "apply to -server only"},
		{"-tls-cert=c.pem", "apply to -server only"},
		{"-server=127.0.0.1:80 -tls-cert=c.pem", "go together"},
		{"-server=127.0.0.1:80 -token-file=/nonexistent/token", "-token-file"},
		{"-server=127.0.0.1:80 -replay-args=-x", "-replay-args applies only to the server this command starts"},
		{"-chaos", "-chaos applies with -shards only"},
		{"-sample-rate=100", "-sample-rate applies with -shards only"},
		{"-shards=2 -actor-hosts=0", "-actor-hosts=0 must be in 1..64"},
		{"-shards=2 -streams=4 -actor-hosts=5", "-actor-hosts=5 must be in 1..4"},
		{"-shards=99", "-shards=99 must be in 1..64"},
		{"-shards=1 -chaos", "-chaos needs -shards >= 2"},
		{"-shards=2 -chaos -chaos-shard=2", "-chaos-shard=2 must be in [0, 2)"},
		{"-shards=2 -chaos -duration=2s -chaos-at=1s -chaos-down=1s", "must fall inside -duration=2s"},
		{"-shards=2 -sample-rate=-1", "-sample-rate=-1 must be a finite rate >= 0"},
		{"-shards=2 -sample-streams=2", "-sample-streams does not apply with -shards"},
		{"-shards=2 -shard-sampling=all", `-shard-sampling="all": want exact or one`},
		{"-shard-sampling=one", "-shard-sampling applies with -shards only"},
		{"-shards=2 -capacity=10", "-capacity=10 must hold at least -sample-batch=512"},
		{"-shards=2 -server=127.0.0.1:80", "-server and -conns do not apply with -shards"},
		{"-nosuchflag", "flag provided but not defined: -nosuchflag"},
		{"extra", `unexpected argument "extra"`},
	} {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"loadtest"}, strings.Fields(tc.args)...), &out, &errOut); code != 2 {
			t.Errorf("%s: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%s: stderr lacks %q:\n%s", tc.args, tc.want, errOut.String())
		}
		if out.Len() != 0 {
			t.Errorf("%s: wrote to stdout:\n%s", tc.args, out.String())
		}
	}
}

func TestLoadtestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"loadtest", "-h"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	for _, f := range []string{"server", "replay-args", "table", "streams", "insert-batch", "window", "conns", "insert-rate",
		"sample-batch", "sample-streams", "sample-inflight", "warmup", "duration", "seed", "json", "cpuprofile",
		"tls-cert", "tls-key", "tls-ca", "tls-server-name", "token-file", "insecure",
		"shards", "actor-hosts", "shard-sampling", "prefetch", "sample-rate", "capacity", "chaos", "chaos-shard", "chaos-at", "chaos-down", "checkpoint-every"} {
		if !strings.Contains(out.String(), "\n  -"+f+" ") && !strings.Contains(out.String(), "\n  -"+f+"\n") {
			t.Errorf("-h does not document -%s:\n%s", f, out.String())
		}
	}
}
