package remote

import (
	"context"
	"testing"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/remote/auth"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// TestReplayPolicy: with tokens configured, each role reaches the calls
// replay.proto gives it and is refused the others; health stays open.
func TestReplayPolicy(t *testing.T) {
	tokens := &auth.Tokens{}
	tok := map[auth.Role]string{}
	for _, r := range auth.Roles {
		s, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if err := tokens.Add(r, s); err != nil {
			t.Fatal(err)
		}
		tok[r] = s
	}
	az, err := auth.NewAuthorizer(tokens, ReplayPolicy())
	if err != nil {
		t.Fatal(err)
	}
	h := serveWith(t, testTable(t, "per", smallCfg(16, 1), nil), ServerOptions{}, GRPCOptions{Auth: az})
	as := func(r auth.Role) context.Context {
		return metadata.AppendToOutgoingContext(ctx(t), "authorization", "Bearer "+tok[r])
	}
	info := func(c context.Context) error { _, err := h.cli.Info(c, &replayv1.InfoRequest{}); return err }
	setLim := func(c context.Context) error {
		_, err := h.cli.SetLimiter(c, &replayv1.SetLimiterRequest{})
		return err
	}
	fetch := func(c context.Context) error { _, err := h.cli.Fetch(c, &replayv1.FetchRequest{}); return err }
	for _, tc := range []struct {
		role auth.Role
		call func(context.Context) error
		name string
		code codes.Code
	}{
		{auth.RoleActor, info, "actor Info", codes.OK},
		{auth.RoleActor, fetch, "actor Fetch", codes.PermissionDenied},
		{auth.RoleActor, setLim, "actor SetLimiter", codes.PermissionDenied},
		{auth.RoleLearner, fetch, "learner Fetch", codes.OK},
		{auth.RoleLearner, setLim, "learner SetLimiter", codes.PermissionDenied},
		{auth.RoleAdmin, setLim, "admin SetLimiter", codes.FailedPrecondition}, // allowed; the table has no limiter
	} {
		wantCode(t, tc.name, tc.call(as(tc.role)), tc.code)
	}
	wantCode(t, "no token", info(ctx(t)), codes.Unauthenticated)
	// Streams: an actor may not open Sample.
	st, err := h.cli.Sample(as(auth.RoleActor))
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	wantCode(t, "actor Sample", err, codes.PermissionDenied)
	if _, err := healthpb.NewHealthClient(h.conn).Check(ctx(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health without a token: %v", err)
	}
}
