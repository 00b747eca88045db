package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDistributedUsageErrors: the network programs refuse bad flags with
// exit status 2 and a message naming what was wrong, before they listen
// or dial.
func TestDistributedUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "-listen=0.0.0.0:0"}, "without TLS"},
		{[]string{"replay", "-tls-cert=x.pem"}, "go together"},
		{[]string{"replay", "-checkpoint-every=1s"}, "needs -checkpoint-dir"},
		{[]string{"replay", "-sampler=nope"}, "unknown -sampler"},
		{[]string{"replay", "-tokens=/nonexistent/tokens"}, "tokens"},
		{[]string{"replay", "-limiter-from=flags"}, "-limiter-from needs -restore"},
		{[]string{"replay", "-restore=x.ckpt", "-limiter-from=both"}, "-limiter-from=both: want checkpoint or flags"},
		{[]string{"learner", "-listen=10.1.2.3:7701"}, "without TLS"},
		{[]string{"learner", "-tls-client-cert=c.pem"}, "go together"},
		{[]string{"learner", "-steps=-1"}, "-steps must not be negative"},
		{[]string{"actor", "-hosts=2", "-host=2"}, "-host must be in [0, 2)"},
		{[]string{"actor", "-hosts=0"}, "-hosts must be >= 1"},
		{[]string{"actor", "-window=-1"}, "-window must not be negative"},
		{[]string{"actor", "-shard-ack-timeout=0s"}, "must be positive"},
		{[]string{"actor", "-replay=127.0.0.1:7700,"}, "an empty entry"},
		{[]string{"actor", "-token-file=/nonexistent/token"}, "-token-file"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("apex %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), code, errb.String(), c.want)
		}
	}
}
