package remote

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/remote/auth"
	"github.com/apexrl/apex/runtime"
)

// ErrClientClosed is returned by the calls of a Client (and of the
// writers, stages and subscribers made from it) after Close.
var ErrClientClosed = errors.New("remote: client closed")

// DefaultCallTimeout is ClientOptions.CallTimeout's default: the deadline
// of every unary call (Info, Fetch, Evaluated, ...) that the caller's
// context does not bound more tightly.
const DefaultCallTimeout = 10 * time.Second

// ClientOptions configure Dial. The zero value dials a loopback target
// without TLS and without a token.
type ClientOptions struct {
	// TLS, if not nil, secures the connection (remote/auth builds one for
	// mutual TLS against the project CA). Nil dials without transport
	// security, which Dial allows only for a loopback target (127.0.0.0/8,
	// ::1, localhost) unless Insecure is set.
	TLS *tls.Config
	// Insecure allows a non-loopback target without TLS (a bufconn or a
	// trusted network); a Token is still refused there (it would travel
	// in the clear).
	Insecure bool
	// Token is the bearer token of the caller's role (actor, learner,
	// admin), sent as `authorization: Bearer <Token>` on every call
	// (auth.NewBearer; without TLS only to a loopback target,
	// auth.NewLoopbackBearer); empty sends none.
	Token string
	// CallTimeout bounds every unary call and every wait of a stream call
	// for its reply (DefaultCallTimeout when 0).
	CallTimeout time.Duration
	// DrawTimeout bounds a remote stage's wait for a draw's batch (0: no
	// bound, the draw waits as long as the server's rate limiter holds it,
	// and a dead server is noticed by keepalive).
	DrawTimeout time.Duration
	// Pipeline makes a remote stage's (Client.Method's) write-backs not
	// wait for their results: Update and UpdateFeatures send the
	// write-back and return, the next Sample sends its draw right behind
	// it on the same ordered stream and reads the write-back's result
	// before the batch. The server applies the write-back before it
	// samples, so what is sampled is what an unpipelined stage samples,
	// and a learner step costs one round trip instead of two. The price
	// is a lag: Update returns the counts of the write-backs answered
	// since the previous Update (the previous write-back's; zero for the
	// first), and the last write-back's counts come from Settle (see
	// Settle), which the learner calls once it stops. A pipelined
	// write-back whose result is lost with its stream is counted in
	// ClientStats.WriteBacksLost and reported as the next call's error,
	// never re-sent. A ShardedMethod's shards do not pipeline.
	Pipeline bool
	// Keepalive is the interval of HTTP/2 pings on an idle connection, so
	// a dead peer is noticed (30 s when 0; gRPC's minimum is 10 s).
	Keepalive time.Duration
	// Dialer, if not nil, makes the client's network connections to addr
	// (the address gRPC resolved the target to): a bufconn in tests,
	// ShardTracker.Dialer for a shard that follows a DNS name. Nil dials
	// TCP directly (a "unix:" target dials its socket; an HTTPS_PROXY in
	// the environment is not used). Either way Dial keeps the recent
	// connections, so ResetConnection can end them.
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// DialOptions are appended to Dial's own (interceptors). A dialer
	// given here (grpc.WithContextDialer) replaces Dial's, and
	// ResetConnection then has no connection to end: give it as Dialer.
	DialOptions []grpc.DialOption
}

func (o *ClientOptions) fill() {
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.Keepalive <= 0 {
		o.Keepalive = 30 * time.Second
	}
}

// Client is a connection to an apex replay server (the Replay service) or
// to a learner's parameter service (the Params service): one
// grpc.ClientConn that every writer, sampling stage and subscriber made
// from it shares (gRPC multiplexes their streams).
//
// A Client is safe for concurrent use by any number of goroutines. Close
// it when done; the writers, stages and subscribers made from it must be
// closed first. A sharded stage or writer made from it ends its
// connection when the server misses a deadline (ResetConnection): the
// calls of the client's other users in flight on it then fail once.
type Client struct {
	conn   *grpc.ClientConn
	replay replayv1.ReplayClient
	params replayv1.ParamsClient
	opts   ClientOptions

	closeOnce sync.Once
	closed    chan struct{}

	dialer func(ctx context.Context, addr string) (net.Conn, error) // opts.Dialer, or TCP (unix for a "unix:" target)
	netMu  sync.Mutex
	// recent are the latest connections dialer made since the last
	// ResetConnection, newest last, at most maxRecentConns: the one
	// gRPC's transport uses is normally among them (gRPC may race a few
	// attempts at a name's addresses; it closes the losers, and closing
	// them again is a no-op). gen counts the connections dialer made.
	// Both guarded by netMu.
	recent []net.Conn
	gen    uint64

	statsMu sync.Mutex
	stats   ClientStats
}

// Dial connects to target ("host:port", or any gRPC target name) with
// opts: TLS when given (a nil TLS is refused for a non-loopback target
// unless opts.Insecure), the bearer token per call, message limits of
// replayv1.MaxMessageBytes each way, keepalive pings. Like
// grpc.NewClient, it does no I/O: the connection is made by the first
// call, and ctx only bounds Dial itself (it is checked, not kept).
func Dial(ctx context.Context, target string, opts ClientOptions) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("remote: dial %q: %w", target, err)
	}
	opts.fill()
	var dopts []grpc.DialOption
	addr, host := targetHost(target)
	loopback := auth.IsLoopback(host)
	if opts.TLS != nil {
		dopts = append(dopts, grpc.WithTransportCredentials(credentials.NewTLS(opts.TLS)))
	} else {
		if !opts.Insecure && !loopback {
			return nil, fmt.Errorf("remote: dial %q: a non-loopback target needs TLS (ClientOptions.TLS) or an explicit ClientOptions.Insecure", target)
		}
		dopts = append(dopts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if opts.Token != "" {
		var b *auth.Bearer
		var err error
		if opts.TLS != nil {
			b, err = auth.NewBearer(opts.Token)
		} else {
			b, err = auth.NewLoopbackBearer(opts.Token, addr) // refuses a non-loopback target
		}
		if err != nil {
			return nil, fmt.Errorf("remote: dial %q: %w", target, err)
		}
		dopts = append(dopts, grpc.WithPerRPCCredentials(b))
	}
	dopts = append(dopts,
		// apex configures its clients in code. Without this, gRPC's DNS
		// resolver also looks up a TXT record for a service config and
		// holds the first connection until that lookup ends: where the
		// DNS server cannot answer it (Docker's embedded DNS on an
		// internal network forwards it to an upstream it cannot reach)
		// that is the resolver's 30 s timeout, past every call's deadline.
		grpc.WithDisableServiceConfig(),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                opts.Keepalive,
			Timeout:             opts.Keepalive,
			PermitWithoutStream: false,
		}),
	)
	c := &Client{opts: opts, closed: make(chan struct{}), dialer: opts.Dialer}
	if c.dialer == nil {
		network := "tcp"
		if strings.HasPrefix(target, "unix:") || strings.HasPrefix(target, "unix-abstract:") {
			network = "unix"
		}
		c.dialer = func(ctx context.Context, addr string) (net.Conn, error) {
			if network == "unix" {
				// gRPC hands a custom dialer "unix://" + an absolute path,
				// "unix:" + a relative one, or "unix:@name" for an abstract
				// socket (Go dials "@name" as one).
				addr = strings.TrimPrefix(strings.TrimPrefix(addr, "unix://"), "unix:")
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	}
	dopts = append(dopts, grpc.WithContextDialer(c.dial))
	dopts = append(dopts, WireDialOptions()...)
	dopts = append(dopts, opts.DialOptions...)
	conn, err := grpc.NewClient(target, dopts...)
	if err != nil {
		return nil, fmt.Errorf("remote: dial %q: %w", target, err)
	}
	c.conn = conn
	c.replay = replayv1.NewReplayClient(conn)
	c.params = replayv1.NewParamsClient(conn)
	return c, nil
}

// dial is the client's gRPC dialer: c.dialer, keeping the connection it
// makes for ResetConnection.
func (c *Client) dial(ctx context.Context, addr string) (net.Conn, error) {
	nc, err := c.dialer(ctx, addr)
	if err != nil {
		return nil, err
	}
	c.netMu.Lock()
	if len(c.recent) == maxRecentConns {
		c.recent = append(c.recent[:0], c.recent[1:]...)
	}
	c.recent = append(c.recent, nc)
	c.gen++
	c.netMu.Unlock()
	return nc, nil
}

// maxRecentConns bounds Client.recent: gRPC's pick_first races at most a
// few attempts at once.
const maxRecentConns = 4

// ResetConnection ends the client's network connection, so that the
// next call dials a new one at once (gRPC's reconnection backoff reset):
// every call and stream on the old connection fails. It is for a peer
// that stopped answering within a deadline. After a network partition a
// connection gRPC still holds may be silent for a long time (the
// kernel's retransmission timer backs off through the cut, and a
// middlebox may have dropped it for good) while keepalive notices it only
// after ClientOptions.Keepalive twice; a new connection reaches the peer
// once the network does and gRPC's next connection attempt starts (how
// long an attempt begun during the cut may hang is the connect params':
// gRPC's MinConnectTimeout, 20 s unless DialOptions set it; apex's fleet
// clients use 1 s). A call made in the microseconds before gRPC sees the
// old connection end may still fail on it. It reports whether it had
// connections dialed since the last reset to end (false before the
// first, after Close, or when a dialer in DialOptions replaced Dial's;
// gRPC may already have ended them). Counted in
// ClientStats.ConnectionResets. O(1); safe for concurrent use.
func (c *Client) ResetConnection() bool {
	return c.reset(0, false)
}

// reset is ResetConnection; with onlyGen it ends the connections only if
// none was dialed after the gen-th.
func (c *Client) reset(gen uint64, onlyGen bool) bool {
	if c.isClosed() {
		return false
	}
	c.netMu.Lock()
	if onlyGen && c.gen != gen {
		c.netMu.Unlock()
		return false
	}
	ncs := c.recent
	c.recent = nil
	c.netMu.Unlock()
	if len(ncs) == 0 {
		return false
	}
	for _, nc := range ncs {
		_ = nc.Close()
	}
	c.conn.ResetConnectBackoff()
	c.count(func(st *ClientStats) { st.ConnectionResets++ })
	return true
}

// connGen names the connection a call is about to go out on: the number
// of connections dialed so far, and whether gRPC holds one ready now.
// Taken before a call (or when a stream opens), it is what resetIfSilent
// needs after the call missed its deadline. O(1).
func (c *Client) connGen() (gen uint64, ready bool) {
	ready = c.conn.GetState() == connectivity.Ready
	c.netMu.Lock()
	defer c.netMu.Unlock()
	return c.gen, ready
}

// resetIfSilent ends the connection (ResetConnection) after a call that
// missed its deadline, if the call went out on a ready connection
// (connGen's, taken before it) and no connection was dialed since: that
// connection is silent. A call that went out while gRPC was connecting,
// or one older than the connection now, leaves it alone: ending a
// connection still being set up, or a new one, would only start it over.
// O(1).
func (c *Client) resetIfSilent(gen uint64, ready bool) bool {
	if !ready {
		return false
	}
	return c.reset(gen, true)
}

// missedDeadline reports whether err is a deadline that passed (a call's
// or a stage's wait for a reply): the peer did not answer in time, as
// opposed to refusing or breaking the stream.
func missedDeadline(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
}

// targetHost splits target ("host:port", with or without a "dns:///"
// or "passthrough:///" scheme) into its address and host.
func targetHost(target string) (addr, host string) {
	if i := strings.Index(target, ":///"); i >= 0 {
		target = target[i+4:]
	}
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		host = target
	}
	return target, host
}

// Close ends the connection: calls in flight fail. Idempotent; later
// calls return ErrClientClosed.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.closed)
		err = c.conn.Close()
	})
	return err
}

// Target is the target the client was dialed with (Dial's target), which
// names it in a ShardedWriter's statistics and placement.
func (c *Client) Target() string { return c.conn.Target() }

// isClosed reports whether Close has been called.
func (c *Client) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// callCtx bounds a unary call by the client's CallTimeout (the caller's
// own deadline wins when it is earlier).
func (c *Client) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.opts.CallTimeout)
}

// ClientStats are a Client's counters over its remote stages (Method), a
// snapshot for diagnostics.
type ClientStats struct {
	// Draws and Rows count the batches and rows drawn.
	Draws, Rows uint64
	// WriteBacks counts write-backs answered; Applied and Stale their
	// values applied and dropped (Stale includes WrongIncarnation: keys
	// of an earlier incarnation of the server, all of a write-back's keys
	// after a server restart).
	WriteBacks, Applied, Stale, WrongIncarnation uint64
	// WriteBacksLost counts pipelined write-backs (ClientOptions.Pipeline)
	// whose result was lost with their stream: the server may or may not
	// have applied them (each reported as an error by the stage's next
	// call).
	WriteBacksLost uint64
	// StreamOpens counts Sample streams opened (the first included);
	// StreamErrors the calls that failed on a broken stream.
	StreamOpens, StreamErrors uint64
	// EpisodeResyncs counts the times a ReF-ER learner's episode feed was
	// subscribed again on a new stream (Method.Episodes: its observer then
	// starts over from the stage's stored episodes).
	EpisodeResyncs uint64
	// ConnectionResets counts the network connections ResetConnection
	// ended (a sharded stage's or writer's shard that missed a deadline).
	ConnectionResets uint64
}

// Stats snapshots the client's counters. Safe for concurrent use.
func (c *Client) Stats() ClientStats {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	return c.stats
}

func (c *Client) count(f func(*ClientStats)) {
	c.statsMu.Lock()
	f(&c.stats)
	c.statsMu.Unlock()
}

// Info describes the replay server: its incarnation, the run
// configuration it serves and each table's size, limiter, counters and
// method statistics. One unary call, bounded by CallTimeout. Safe for
// concurrent use.
func (c *Client) Info(ctx context.Context) (*replayv1.InfoReply, error) {
	if c.isClosed() {
		return nil, ErrClientClosed
	}
	ctx, cancel := c.callCtx(ctx)
	defer cancel()
	r, err := c.replay.Info(ctx, &replayv1.InfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("remote: info: %w", err)
	}
	return r, nil
}

// Config is the run configuration the replay server was started with
// (InfoReply.config decoded), from which learners and actor hosts build
// their parts so that they match the server's table and method. One Info
// call. An error names a server that sent none or one that does not
// decode.
func (c *Client) Config(ctx context.Context) (runtime.TrainConfig, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return runtime.TrainConfig{}, err
	}
	return decodeConfig(info.GetConfig())
}

func decodeConfig(b []byte) (runtime.TrainConfig, error) {
	if len(b) == 0 {
		return runtime.TrainConfig{}, errors.New("remote: config: the server sent no run configuration")
	}
	cfg, err := runtime.DecodeTrainConfig(b)
	if err != nil {
		return runtime.TrainConfig{}, fmt.Errorf("remote: config: the server's run configuration: %w", err)
	}
	return cfg, nil
}
