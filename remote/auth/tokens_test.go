package auth_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/apexrl/apex/remote/auth"
)

const (
	actorTok   = "actor-0123456789abcdef"
	learnerTok = "learner-0123456789abcdef"
	adminTok   = "admin-0123456789abcdef"
)

func TestParseTokens(t *testing.T) {
	in := "# apex tokens\n\nactor " + actorTok + "\n  learner\t" + learnerTok + "  \n# admin below\nadmin " + adminTok + "\n"
	toks, err := auth.ParseTokens(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if toks.Len() != 3 {
		t.Errorf("%d tokens, want 3", toks.Len())
	}
	for tok, want := range map[string]auth.Role{actorTok: auth.RoleActor, learnerTok: auth.RoleLearner, adminTok: auth.RoleAdmin} {
		if got, ok := toks.Lookup(tok); !ok || got != want {
			t.Errorf("Lookup(%s) = %q %v, want %q", tok, got, ok, want)
		}
	}
	for _, tok := range []string{"", actorTok + "x", actorTok[:len(actorTok)-1], strings.ToUpper(actorTok)} {
		if r, ok := toks.Lookup(tok); ok {
			t.Errorf("Lookup(%q) = %q, want not found", tok, r)
		}
	}

	bad := []struct{ in, want string }{
		{"actor", "line 1: want \"role token\", got 1 fields"},
		{"actor a b c", "got 4 fields"},
		{"# c\nroot " + adminTok, `line 2: auth: unknown role "root"`},
		{"actor short", "line 1: auth: actor token has 5 characters, want at least 16"},
		{"actor " + actorTok + "\nadmin " + actorTok, "line 2: auth: the same admin token is configured twice (already for actor)"},
		{"actor " + actorTok + "\u00e9", "not printable ASCII"},
	}
	for _, b := range bad {
		_, err := auth.ParseTokens(strings.NewReader(b.in))
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%q: got %v, want %q", b.in, err, b.want)
		}
		if err != nil && strings.Contains(err.Error(), actorTok) {
			t.Errorf("%q: the error shows the token: %v", b.in, err)
		}
	}
	var empty *auth.Tokens
	if _, ok := empty.Lookup(actorTok); ok || empty.Len() != 0 {
		t.Error("nil Tokens finds a token")
	}
}

func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	if err := os.WriteFile(path, []byte("admin "+adminTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := auth.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := toks.Lookup(adminTok); !ok || r != auth.RoleAdmin {
		t.Errorf("Lookup = %q %v", r, ok)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.LoadTokens(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("group-readable tokens file: %v", err)
	}
	if _, err := auth.LoadTokens(filepath.Join(dir, "none")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing tokens file: %v", err)
	}
	if err := os.WriteFile(path, []byte("admin x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.LoadTokens(path); err == nil || !strings.HasPrefix(err.Error(), path+": line 1:") {
		t.Errorf("bad tokens file: %v", err)
	}
}

func TestAuthorize(t *testing.T) {
	toks, err := auth.ParseTokens(strings.NewReader("actor " + actorTok + "\nlearner " + learnerTok + "\nadmin " + adminTok))
	if err != nil {
		t.Fatal(err)
	}
	policy := auth.Policy{
		"/apex.replay.v1.Replay/Insert":     {auth.RoleActor, auth.RoleLearner},
		"/apex.replay.v1.Replay/Checkpoint": {},
	}
	a, err := auth.NewAuthorizer(toks, policy)
	if err != nil {
		t.Fatal(err)
	}
	md := func(vals ...string) context.Context {
		m := metadata.MD{}
		for _, v := range vals {
			m.Append("authorization", v)
		}
		return metadata.NewIncomingContext(context.Background(), m)
	}
	cases := []struct {
		name   string
		ctx    context.Context
		method string
		want   codes.Code
		role   auth.Role
	}{
		{"actor inserts", md("Bearer " + actorTok), "/apex.replay.v1.Replay/Insert", codes.OK, auth.RoleActor},
		{"lower-case scheme", md("bearer " + learnerTok), "/apex.replay.v1.Replay/Insert", codes.OK, auth.RoleLearner},
		{"admin inserts, unlisted", md("Bearer " + adminTok), "/apex.replay.v1.Replay/Insert", codes.OK, auth.RoleAdmin},
		{"admin checkpoints", md("Bearer " + adminTok), "/apex.replay.v1.Replay/Checkpoint", codes.OK, auth.RoleAdmin},
		{"learner checkpoints", md("Bearer " + learnerTok), "/apex.replay.v1.Replay/Checkpoint", codes.PermissionDenied, ""},
		{"admin calls an unnamed method", md("Bearer " + adminTok), "/apex.replay.v1.Replay/Drop", codes.PermissionDenied, ""},
		{"no metadata", context.Background(), "/apex.replay.v1.Replay/Insert", codes.Unauthenticated, ""},
		{"basic scheme", md("Basic " + actorTok), "/apex.replay.v1.Replay/Insert", codes.Unauthenticated, ""},
		{"no token after the scheme", md("Bearer "), "/apex.replay.v1.Replay/Insert", codes.Unauthenticated, ""},
		{"two values", md("Bearer "+actorTok, "Bearer "+adminTok), "/apex.replay.v1.Replay/Insert", codes.Unauthenticated, ""},
		{"unnamed method without a token", context.Background(), "/apex.replay.v1.Replay/Drop", codes.Unauthenticated, ""},
		{"health without a token", context.Background(), "/grpc.health.v1.Health/Check", codes.OK, ""},
	}
	for _, c := range cases {
		ctx, err := a.Authorize(c.ctx, c.method)
		wantCode(t, c.name, err, c.want, "")
		if r, ok := auth.RoleFromContext(ctx); r != c.role || ok != (c.role != "") {
			t.Errorf("%s: role %q %v, want %q", c.name, r, ok, c.role)
		}
	}
	want := auth.Stats{Allowed: 4, Unchecked: 1, Unauthenticated: 5, Denied: 2}
	if got := a.Stats(); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, p := range []auth.Policy{
		{"apex.replay.v1.Replay/Insert": nil},
		{"/apex.replay.v1.Replay": nil},
		{"/apex.replay.v1.Replay/": nil},
		{"//Insert": nil},
		{"/a.B/C/D": nil},
		{"/a.B/C": {"root"}},
	} {
		if _, err := auth.NewAuthorizer(nil, p); err == nil {
			t.Errorf("policy %v accepted", p)
		}
	}
}

func TestCheckListen(t *testing.T) {
	cases := []struct {
		addr            string
		tls, insecure   bool
		wantErr, warned bool
	}{
		{"127.0.0.1:9000", false, false, false, false},
		{"127.3.4.5:0", false, false, false, false},
		{"[::1]:9000", false, false, false, false},
		{"localhost:9000", false, false, false, false},
		{"LOCALHOST.:9000", false, false, false, false},
		{"[::ffff:127.0.0.1]:9000", false, false, false, false},
		{":9000", false, false, true, false},
		{"0.0.0.0:9000", false, false, true, false},
		{"[::]:9000", false, false, true, false},
		{"10.0.0.1:9000", false, false, true, false},
		{"replay.example.org:9000", false, false, true, false},
		{":9000", true, false, false, false},
		{"10.0.0.1:9000", true, false, false, false},
		{":9000", false, true, false, true},
		{"10.0.0.1:9000", false, true, false, true},
		{"127.0.0.1:9000", false, true, false, false},
		{"10.0.0.1:9000", true, true, false, false},
		{"127.0.0.1", false, false, true, false},
	}
	for _, c := range cases {
		var logged bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logged, nil))
		err := auth.CheckListen(c.addr, c.tls, c.insecure, log)
		if (err != nil) != c.wantErr {
			t.Errorf("CheckListen(%q, tls %v, insecure %v) = %v, want error %v", c.addr, c.tls, c.insecure, err, c.wantErr)
		}
		if err != nil && c.addr != "127.0.0.1" && !strings.Contains(err.Error(), "pass the TLS flags") || err != nil && !strings.Contains(err.Error(), c.addr) {
			t.Errorf("CheckListen(%q): error %q does not name the address or the way out", c.addr, err)
		}
		if w := strings.Contains(logged.String(), "level=WARN"); w != c.warned {
			t.Errorf("CheckListen(%q, tls %v, insecure %v) warned %v, want %v: %s", c.addr, c.tls, c.insecure, w, c.warned, logged.String())
		}
	}
}
