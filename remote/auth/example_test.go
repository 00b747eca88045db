package auth_test

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/apexrl/apex/remote/auth"
)

// A replay server's policy: actors insert, the learner samples, admins alone
// checkpoint. The server passes a.Unary() and a.Stream() to
// grpc.ChainUnaryInterceptor and grpc.ChainStreamInterceptor; here the check
// is called directly with the metadata a client's Bearer would send.
func ExampleAuthorizer() {
	tokens, err := auth.ParseTokens(strings.NewReader(`
# role token
actor   actor-token-0123456789
learner learner-token-0123456789
admin   admin-token-0123456789
`))
	if err != nil {
		panic(err)
	}
	a, err := auth.NewAuthorizer(tokens, auth.Policy{
		"/apex.replay.v1.Replay/Insert":     {auth.RoleActor},
		"/apex.replay.v1.Replay/Sample":     {auth.RoleLearner},
		"/apex.replay.v1.Replay/Checkpoint": {}, // admin only
	})
	if err != nil {
		panic(err)
	}
	call := func(token, method string) {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
		ctx, err := a.Authorize(ctx, method)
		role, _ := auth.RoleFromContext(ctx)
		line := fmt.Sprintf("%-26s %-11s %v %s", token, method[strings.LastIndex(method, "/")+1:], status.Code(err), role)
		fmt.Println(strings.TrimSpace(line))
	}
	call("actor-token-0123456789", "/apex.replay.v1.Replay/Insert")
	call("actor-token-0123456789", "/apex.replay.v1.Replay/Sample")
	call("learner-token-0123456789", "/apex.replay.v1.Replay/Checkpoint")
	call("admin-token-0123456789", "/apex.replay.v1.Replay/Checkpoint")
	call("guessed-token-0123456789", "/apex.replay.v1.Replay/Insert")
	fmt.Printf("%+v\n", a.Stats())
	// Output:
	// actor-token-0123456789     Insert      OK actor
	// actor-token-0123456789     Sample      PermissionDenied
	// learner-token-0123456789   Checkpoint  PermissionDenied
	// admin-token-0123456789     Checkpoint  OK admin
	// guessed-token-0123456789   Insert      Unauthenticated
	// {Allowed:2 Unchecked:0 Unauthenticated:1 Denied:2}
}
