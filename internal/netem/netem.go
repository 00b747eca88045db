// Package netem is a small TCP proxy that forwards connections with a
// one-way delay, jitter, a bandwidth cap and loss, for tests where the
// kernel's tc netem is not available (containers without the sch_netem
// module or without CAP_NET_ADMIN on the host). It is test support: the
// multi-host tests put it between apex's processes in network namespaces.
//
// # What loss means on a TCP stream
//
// The proxy sits above TCP: it reads bytes from one connection and writes
// them to another, so it cannot drop a packet the way netem drops one. And
// dropping bytes would not model loss either: TCP retransmits a lost
// segment and delivers every byte in order, so what an application sees of
// packet loss is a stall. The receiver's kernel holds every later byte
// until the lost segment arrives again, after a retransmission timeout
// (Linux's floor is 200 ms, TCP_RTO_MIN) or, with enough data behind it,
// after a fast retransmit about one round trip later; the retransmission
// can be lost again, and each further timeout doubles. Sustained loss ends
// in a reset (the sender gives up after tcp_retries2) or a middlebox
// dropping the connection. The proxy models exactly those two visible
// effects:
//
//   - Shape.Loss is the probability that a forwarded segment (one read,
//     at most Config.Segment bytes) is lost. A lost segment is delivered
//     Shape.RTO late, and each retransmission is lost again with the same
//     probability, the wait doubling each time (at most 6 times, as a
//     bounded stand-in for the kernel's backoff). Every segment behind it
//     waits too: delivery stays in order.
//   - Shape.Reset is the probability that a forwarded segment instead ends
//     the connection: both sides are closed with a reset (SO_LINGER 0), as
//     when a path fails for good. Clients must reconnect.
//
// The fast-retransmit case (a stall of about one round trip) is not
// modelled separately: with RTO set to a round trip it is the same thing.
//
// # Delay, jitter and rate
//
// Each direction of a connection is a pipe with its own Shape. A segment
// read at time t leaves the proxy at
//
//	max(previous segment's departure, t' + Delay + U[0, Jitter) + stalls)
//
// where t' is when the cap lets its last byte through (Rate bytes per
// second, serialised: t' = max(t, link free) + len/Rate). Jitter never
// reorders bytes (TCP would not deliver them reordered either), so with a
// large Jitter it shows as bunching, not reordering.
//
// # Bounds
//
// Each direction buffers at most Config.Queue segments of at most
// Config.Segment bytes; when it is full the proxy stops reading and TCP's
// flow control pushes back on the sender. At most Config.MaxConns
// connections are forwarded at once; more are closed as soon as accepted
// (counted in Stats.Refused). Close ends every connection and waits for
// every goroutine the proxy started.
package netem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Shape is one direction's impairment.
type Shape struct {
	// Delay is the one-way delay added to every segment.
	Delay time.Duration
	// Jitter adds a uniform random delay in [0, Jitter) to each segment,
	// never reordering (see the package doc).
	Jitter time.Duration
	// Rate caps the direction's throughput in bytes per second (0: no
	// cap).
	Rate int64
	// Loss is the probability in [0, 1) that a segment is lost and
	// delivered after a retransmission stall (see the package doc).
	Loss float64
	// RTO is the first retransmission stall of a lost segment (0: 200 ms,
	// Linux's TCP_RTO_MIN); each further loss of the same segment doubles
	// it.
	RTO time.Duration
	// Reset is the probability in [0, 1) that a segment ends the
	// connection with a reset instead of being delivered.
	Reset float64
}

// maxRetransmits bounds the losses of one segment: the stall of a segment
// is at most RTO·(2^maxRetransmits − 1).
const maxRetransmits = 6

func (s Shape) validate(dir string) error {
	switch {
	case s.Delay < 0 || s.Jitter < 0 || s.RTO < 0:
		return fmt.Errorf("netem: %s: negative Delay, Jitter or RTO (%v, %v, %v)", dir, s.Delay, s.Jitter, s.RTO)
	case s.Rate < 0:
		return fmt.Errorf("netem: %s: negative Rate %d", dir, s.Rate)
	case !(s.Loss >= 0 && s.Loss < 1) || !(s.Reset >= 0 && s.Reset < 1):
		return fmt.Errorf("netem: %s: Loss and Reset must be in [0, 1), got %v and %v", dir, s.Loss, s.Reset)
	}
	return nil
}

// Config is a proxy's target and impairments.
type Config struct {
	// Target is the host:port every accepted connection is forwarded to
	// (required).
	Target string
	// Up shapes what the client sends to the target; Down what the target
	// sends back.
	Up, Down Shape
	// Segment is the most bytes read and forwarded as one segment (0: 16
	// KiB). Loss and Reset are drawn once per segment.
	Segment int
	// Queue is the most segments buffered per direction of a connection
	// (0: 64).
	Queue int
	// MaxConns is the most connections forwarded at once (0: 256).
	MaxConns int
	// DialTimeout bounds dialing Target (0: 5 s); a failed dial closes the
	// accepted connection (Stats.DialFailures).
	DialTimeout time.Duration
	// Dial dials Target for each accepted connection (nil: a net.Dialer);
	// tests use it to dial from another network namespace than the
	// listener's.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Seed seeds the loss, reset and jitter draws (each connection's
	// directions draw from their own stream derived from it).
	Seed uint64
}

func (c *Config) fill() error {
	if c.Target == "" {
		return errors.New("netem: Config.Target is required")
	}
	if _, _, err := net.SplitHostPort(c.Target); err != nil {
		return fmt.Errorf("netem: Config.Target: %w", err)
	}
	if c.Segment < 0 || c.Queue < 0 || c.MaxConns < 0 || c.DialTimeout < 0 {
		return fmt.Errorf("netem: negative Segment, Queue, MaxConns or DialTimeout (%d, %d, %d, %v)", c.Segment, c.Queue, c.MaxConns, c.DialTimeout)
	}
	if err := c.Up.validate("Up"); err != nil {
		return err
	}
	if err := c.Down.validate("Down"); err != nil {
		return err
	}
	if c.Segment == 0 {
		c.Segment = 16 << 10
	}
	if c.Queue == 0 {
		c.Queue = 64
	}
	if c.MaxConns == 0 {
		c.MaxConns = 256
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 5 * time.Second
	}
	for _, s := range []*Shape{&c.Up, &c.Down} {
		if s.RTO == 0 {
			s.RTO = 200 * time.Millisecond
		}
	}
	return nil
}

// Stats is a snapshot of a proxy's counters.
type Stats struct {
	Accepted     uint64 // connections accepted and forwarded
	Refused      uint64 // connections closed at once: MaxConns were open
	DialFailures uint64 // connections closed because Target could not be dialed
	Active       int64  // connections open now
	BytesUp      uint64 // bytes delivered to the target
	BytesDown    uint64 // bytes delivered back to clients
	Losses       uint64 // segment losses (each one a retransmission stall)
	Resets       uint64 // connections ended by a drawn reset
}

// Proxy forwards the connections of one listener to one target. Its
// methods are safe for concurrent use.
type Proxy struct {
	cfg  Config
	ln   net.Listener
	done chan struct{} // closed by Close
	once sync.Once
	wg   sync.WaitGroup

	mu    sync.Mutex
	conns map[*conn]struct{} // open connections; guarded by mu

	seq                                                   atomic.Uint64
	accepted, refused, dialFailures, up, down, loss, rsts atomic.Uint64
	active                                                atomic.Int64
}

// New starts forwarding ln's connections as cfg says and owns ln from
// then on (Close closes it). It returns an error, without starting
// anything, for a bad cfg. One goroutine accepts; each connection runs
// four (a reader and a writer per direction).
func New(ln net.Listener, cfg Config) (*Proxy, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, ln: ln, done: make(chan struct{}), conns: make(map[*conn]struct{})}
	p.wg.Go(p.accept)
	return p, nil
}

// Listen listens on addr (host:port; port 0 picks one) and starts a proxy
// on it.
func Listen(addr string, cfg Config) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p, err := New(ln, cfg)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

// Stats returns a snapshot of the counters. O(1).
func (p *Proxy) Stats() Stats {
	return Stats{Accepted: p.accepted.Load(), Refused: p.refused.Load(), DialFailures: p.dialFailures.Load(),
		Active: p.active.Load(), BytesUp: p.up.Load(), BytesDown: p.down.Load(), Losses: p.loss.Load(), Resets: p.rsts.Load()}
}

// Close stops accepting, ends every connection at once (what is queued is
// not delivered) and waits for the proxy's goroutines to return. Later
// calls return nil.
func (p *Proxy) Close() error {
	var err error
	p.once.Do(func() {
		close(p.done)
		err = p.ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.abort(false)
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return err
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// A listener error other than Close: back off briefly, as
			// net/http does, unless closing.
			select {
			case <-p.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		p.mu.Lock()
		full := len(p.conns) >= p.cfg.MaxConns
		closing := false
		select {
		case <-p.done:
			closing = true
		default:
		}
		var pc *conn
		if !full && !closing {
			pc = &conn{p: p, client: c, done: make(chan struct{})}
			p.conns[pc] = struct{}{}
			p.active.Add(1)
			p.wg.Add(1)
		}
		p.mu.Unlock()
		if pc == nil {
			if full {
				p.refused.Add(1)
			}
			c.Close()
			continue
		}
		go pc.run()
	}
}

// conn is one forwarded connection.
type conn struct {
	p      *Proxy
	client net.Conn
	mu     sync.Mutex
	target net.Conn // set once dialed; guarded by mu
	done   chan struct{}
	once   sync.Once
}

// abort ends c at once; with reset, both sides get a reset rather than a
// close.
func (c *conn) abort(reset bool) {
	c.once.Do(func() {
		close(c.done)
		c.mu.Lock()
		t := c.target
		c.mu.Unlock()
		for _, nc := range []net.Conn{c.client, t} {
			if nc == nil {
				continue
			}
			if tc, ok := nc.(*net.TCPConn); ok && reset {
				_ = tc.SetLinger(0)
			}
			nc.Close()
		}
	})
}

func (c *conn) run() {
	p := c.p
	defer func() {
		c.abort(false)
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		p.active.Add(-1)
		p.wg.Done()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout)
	go func() {
		select {
		case <-c.done:
		case <-ctx.Done():
		}
		cancel()
	}()
	dial := p.cfg.Dial
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	t, err := dial(ctx, p.cfg.Target)
	cancel()
	if err != nil {
		select {
		case <-c.done: // Close ended the dial
		default:
			p.dialFailures.Add(1)
		}
		return
	}
	c.mu.Lock()
	c.target = t
	c.mu.Unlock()
	select {
	case <-c.done: // aborted while dialing: abort closed the client only
		t.Close()
		return
	default:
	}
	p.accepted.Add(1)
	n := p.seq.Add(1)
	var wg sync.WaitGroup
	for i, dir := range []struct {
		src, dst net.Conn
		shape    Shape
		count    *atomic.Uint64
	}{{c.client, t, p.cfg.Up, &p.up}, {t, c.client, p.cfg.Down, &p.down}} {
		pp := &pipe{c: c, src: dir.src, dst: dir.dst, shape: dir.shape, count: dir.count,
			rng: rand.New(rand.NewPCG(p.cfg.Seed, n<<1|uint64(i))), q: make(chan segment, p.cfg.Queue)}
		wg.Go(pp.read)
		wg.Go(pp.write)
	}
	wg.Wait()
}

// segment is a read's bytes and when they may leave.
type segment struct {
	b     []byte
	at    time.Time
	reset bool // end the connection instead of delivering b
}

// pipe is one direction of a connection: read feeds q, write drains it.
type pipe struct {
	c        *conn
	src, dst net.Conn
	shape    Shape
	count    *atomic.Uint64
	rng      *rand.Rand // read's only
	q        chan segment
	linkFree time.Time // read's only
	last     time.Time // read's only: the previous segment's departure
}

// read reads segments from src, stamps each with its departure and queues
// it; at EOF it closes q (write then half-closes dst), on an error it
// aborts the connection.
func (pp *pipe) read() {
	defer close(pp.q)
	buf := make([]byte, pp.c.p.cfg.Segment)
	for {
		n, err := pp.src.Read(buf)
		if n > 0 {
			seg := pp.stamp(bytes.Clone(buf[:n]), time.Now())
			select {
			case pp.q <- seg:
			case <-pp.c.done:
				return
			}
			if seg.reset {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				pp.c.abort(false)
			}
			return
		}
	}
}

// stamp draws b's fate and departure time, read at now.
func (pp *pipe) stamp(b []byte, now time.Time) segment {
	s := pp.shape
	if s.Reset > 0 && pp.rng.Float64() < s.Reset {
		return segment{reset: true}
	}
	sent := now
	if s.Rate > 0 {
		if pp.linkFree.After(sent) {
			sent = pp.linkFree
		}
		sent = sent.Add(time.Duration(float64(len(b)) / float64(s.Rate) * float64(time.Second)))
		pp.linkFree = sent
	}
	at := sent.Add(s.Delay)
	if s.Jitter > 0 {
		at = at.Add(time.Duration(pp.rng.Int64N(int64(s.Jitter))))
	}
	if s.Loss > 0 {
		rto := s.RTO
		for range maxRetransmits {
			if pp.rng.Float64() >= s.Loss {
				break
			}
			pp.c.p.loss.Add(1)
			at = at.Add(rto)
			rto *= 2
		}
	}
	if at.Before(pp.last) {
		at = pp.last
	}
	pp.last = at
	return segment{b: b, at: at}
}

// write delivers q's segments to dst at their departure times; when q is
// closed after an EOF it half-closes dst.
func (pp *pipe) write() {
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for seg := range pp.q {
		if seg.reset {
			pp.c.p.rsts.Add(1)
			pp.c.abort(true)
			return
		}
		if d := time.Until(seg.at); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-pp.c.done:
				return
			}
		}
		if _, err := pp.dst.Write(seg.b); err != nil {
			pp.c.abort(false)
			return
		}
		pp.count.Add(uint64(len(seg.b)))
	}
	select {
	case <-pp.c.done:
		return
	default:
	}
	if cw, ok := pp.dst.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	pp.c.abort(false)
}
