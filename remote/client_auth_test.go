package remote

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/remote/auth"
)

// TestClientTLSAndTokens dials a replay server on loopback TCP with
// mutual TLS and per-role tokens: the actor's writer inserts, its draws
// are refused; the learner draws; a call without a token, or without
// TLS, is refused.
func TestClientTLSAndTokens(t *testing.T) {
	checkLeaks(t)
	dir := t.TempDir()
	ca, err := auth.NewCA("apex test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, kp *auth.KeyPair) (string, string) {
		cert, key := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		if err := kp.WriteFiles(cert, key, false); err != nil {
			t.Fatal(err)
		}
		return cert, key
	}
	caCert, _ := write("ca", ca)
	srvKP, err := auth.NewServerCert(ca, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey := write("server", srvKP)
	cliKP, err := auth.NewClientCert(ca, auth.RoleLearner, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cliCert, cliKey := write("client", cliKP)
	serverTLS, err := auth.ServerTLS(srvCert, srvKey, caCert)
	if err != nil {
		t.Fatal(err)
	}
	clientTLS, err := auth.ClientTLS(cliCert, cliKey, caCert, "")
	if err != nil {
		t.Fatal(err)
	}
	var tokens auth.Tokens
	actorTok, learnerTok := "actor-token-0123456789", "learner-token-0123456789"
	if err := tokens.Add(auth.RoleActor, actorTok); err != nil {
		t.Fatal(err)
	}
	if err := tokens.Add(auth.RoleLearner, learnerTok); err != nil {
		t.Fatal(err)
	}
	az, err := auth.NewAuthorizer(&tokens, ReplayPolicy())
	if err != nil {
		t.Fatal(err)
	}
	layout := testLayout
	buf, err := buffer.New(layout)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(Table{Buffer: buf, Method: mustMethod(t, "per", buf)}, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := NewGRPCServer(srv, GRPCOptions{TLS: serverTLS, Auth: az})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	defer func() {
		gs.Shutdown(context.Background())
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	addr := lis.Addr().String()
	ctx := context.Background()
	dial := func(opts ClientOptions) *Client {
		c, err := Dial(ctx, addr, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	actor := dial(ClientOptions{TLS: clientTLS, Token: actorTok})
	defer actor.Close()
	w, err := actor.NewWriter("actor-1", WriterOptions{Layout: layout})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Insert(rows(20, 0)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("the actor's writer: %v", err)
	}
	local, lbuf := perTwin(t)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	am, err := actor.Method(sctx, local, 0) // Info is the actor's too
	if err != nil {
		t.Fatal(err)
	}
	bt, _ := lbuf.NewBatch(4)
	if err := am.Selector.Sample(newRand(1), bt); status.Code(errors.Unwrap(err)) != codes.PermissionDenied {
		t.Errorf("the actor draws: %v, want PermissionDenied", err)
	}

	learner := dial(ClientOptions{TLS: clientTLS, Token: learnerTok})
	defer learner.Close()
	lm, err := learner.Method(sctx, local, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := lm.Selector.Sample(newRand(1), bt); err != nil {
		t.Errorf("the learner draws: %v", err)
	}

	none := dial(ClientOptions{TLS: clientTLS})
	defer none.Close()
	if _, err := none.Info(ctx); status.Code(errors.Unwrap(err)) != codes.Unauthenticated {
		t.Errorf("no token: %v, want Unauthenticated", err)
	}
	plain := dial(ClientOptions{Token: learnerTok}) // loopback without TLS: allowed to dial, refused by the TLS server
	defer plain.Close()
	if _, err := plain.Info(ctx); status.Code(errors.Unwrap(err)) != codes.Unavailable {
		t.Errorf("no TLS: %v, want Unavailable", err)
	}
	cancel()
}
