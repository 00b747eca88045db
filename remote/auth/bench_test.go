package auth_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/apexrl/apex/remote/auth"
)

// BenchmarkAuthorize measures the check of one allowed call with a token
// per role configured: go test -run='^$' -bench=Authorize ./remote/auth
func BenchmarkAuthorize(b *testing.B) {
	var toks auth.Tokens
	tok := map[auth.Role]string{}
	for _, r := range auth.Roles {
		t, err := auth.NewToken()
		if err != nil {
			b.Fatal(err)
		}
		if err := toks.Add(r, t); err != nil {
			b.Fatal(err)
		}
		tok[r] = t
	}
	const method = "/apex.replay.v1.Replay/Insert"
	a, err := auth.NewAuthorizer(&toks, auth.Policy{method: {auth.RoleActor}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+tok[auth.RoleActor]))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Authorize(ctx, method); err != nil {
			b.Fatal(err)
		}
	}
}
