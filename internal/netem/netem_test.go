package netem

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	mrand "math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer serves on loopback, echoing every connection until it is
// closed; the test's cleanup closes it and its connections and waits for
// its goroutines.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				_, _ = io.Copy(c, c)
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// startProxy starts a proxy on loopback in front of target; the test's
// cleanup closes it.
func startProxy(t *testing.T, cfg Config) *Proxy {
	t.Helper()
	p, err := Listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// roundTrip writes msg and reads its echo, returning how long it took.
func roundTrip(t *testing.T, c net.Conn, msg []byte) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echo differs from what was sent (%d bytes)", len(msg))
	}
	return time.Since(start)
}

// TestForwardsBytesAndHalfClose: without impairments the proxy delivers
// every byte in order both ways, and a client's half-close reaches the
// target (whose echo then ends with EOF).
func TestForwardsBytesAndHalfClose(t *testing.T) {
	p := startProxy(t, Config{Target: echoServer(t), Segment: 1000, Queue: 4})
	c := dial(t, p)
	msg := make([]byte, 1<<20)
	rand.Read(msg)
	var got []byte
	var rerr error
	var wg sync.WaitGroup
	wg.Go(func() { got, rerr = io.ReadAll(c) })
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if rerr != nil || !bytes.Equal(got, msg) {
		t.Fatalf("read %d of %d bytes back (equal %v), err %v", len(got), len(msg), bytes.Equal(got, msg), rerr)
	}
	st := p.Stats()
	if st.Accepted != 1 || st.BytesUp != 1<<20 || st.BytesDown != 1<<20 {
		t.Fatalf("stats %+v: want 1 accepted, %d bytes each way", st, 1<<20)
	}
	waitActive(t, p, 0)
}

// waitActive waits (up to 5 s) for the proxy's open connections to be n.
func waitActive(t *testing.T, p *Proxy, n int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); p.Stats().Active != n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open after 5 s, want %d", p.Stats().Active, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDelay: a round trip through the proxy takes at least the two
// one-way delays, and not much more.
func TestDelay(t *testing.T) {
	p := startProxy(t, Config{Target: echoServer(t), Up: Shape{Delay: 30 * time.Millisecond}, Down: Shape{Delay: 20 * time.Millisecond}})
	c := dial(t, p)
	for i := range 5 {
		rt := roundTrip(t, c, []byte("ping"))
		if rt < 50*time.Millisecond || rt > 400*time.Millisecond {
			t.Fatalf("round trip %d took %v, want 50 ms (30 up + 20 down) plus scheduling", i, rt)
		}
	}
}

// TestStampRateDelayJitterOrder checks the departure times the proxy
// computes: the rate serialises segments, the delay adds to each, and
// jitter never moves a segment before the one ahead of it.
func TestStampRateDelayJitterOrder(t *testing.T) {
	p := &Proxy{cfg: Config{Target: "x:1"}}
	now := time.Unix(1000, 0)
	pp := &pipe{c: &conn{p: p}, shape: Shape{Rate: 1000, Delay: 50 * time.Millisecond}}
	for i := 1; i <= 3; i++ {
		seg := pp.stamp(make([]byte, 100), now)
		if want := now.Add(time.Duration(i)*100*time.Millisecond + 50*time.Millisecond); !seg.at.Equal(want) {
			t.Fatalf("segment %d leaves at %v, want %v (100 bytes at 1000 B/s each, then 50 ms)", i, seg.at.Sub(now), want.Sub(now))
		}
	}
	// A segment read after the link went idle starts afresh.
	later := now.Add(time.Second)
	if seg := pp.stamp(make([]byte, 10), later); !seg.at.Equal(later.Add(60 * time.Millisecond)) {
		t.Fatalf("after an idle link: leaves at +%v, want +60ms", seg.at.Sub(later))
	}
	jit := &pipe{c: &conn{p: p}, shape: Shape{Jitter: 100 * time.Millisecond}, rng: newRand(1)}
	var prev time.Time
	spread := false
	for i := range 1000 {
		at := now.Add(time.Duration(i) * time.Millisecond)
		seg := jit.stamp([]byte{1}, at)
		if seg.at.Before(prev) || seg.at.Before(at) || seg.at.After(at.Add(100*time.Millisecond)) {
			t.Fatalf("segment %d read at +%v leaves at +%v after one leaving at +%v: reordered or out of [0, Jitter)", i, at.Sub(now), seg.at.Sub(now), prev.Sub(now))
		}
		if seg.at.Sub(at) > 50*time.Millisecond {
			spread = true
		}
		prev = seg.at
	}
	if !spread {
		t.Fatal("no segment was delayed by more than half the jitter in 1000")
	}
}

// TestStampLoss: with Loss 0.5 about half the segments stall by an RTO,
// a quarter by three (lost twice), and the stalls are counted.
func TestStampLoss(t *testing.T) {
	p := &Proxy{cfg: Config{Target: "x:1"}}
	pp := &pipe{c: &conn{p: p}, shape: Shape{Loss: 0.5, RTO: time.Millisecond}, rng: newRand(7)}
	now := time.Unix(1000, 0)
	counts := map[time.Duration]int{}
	const n = 20000
	for i := range n {
		// Segments far apart, so no stall carries over to the next.
		at := now.Add(time.Duration(i) * time.Second)
		counts[pp.stamp([]byte{1}, at).at.Sub(at)]++
	}
	for _, c := range []struct {
		stall time.Duration
		p     float64
	}{{0, 0.5}, {time.Millisecond, 0.25}, {3 * time.Millisecond, 0.125}, {7 * time.Millisecond, 0.0625}} {
		if got := float64(counts[c.stall]) / n; got < c.p*0.9 || got > c.p*1.1 {
			t.Errorf("stall %v in %.4f of segments, want %.4f", c.stall, got, c.p)
		}
	}
	if max := time.Duration(1<<maxRetransmits-1) * time.Millisecond; counts[max] == 0 || len(counts) != maxRetransmits+1 {
		t.Errorf("stalls seen %v: want exactly 0 to %v (%d retransmissions at most)", counts, max, maxRetransmits)
	}
	if got := p.loss.Load(); got < n*0.95 || got > n*1.05 { // expected n·Σ 0.5^k ≈ n
		t.Errorf("%d losses counted over %d segments, want about %d", got, n, n)
	}
}

func newRand(seed uint64) *mrand.Rand { return mrand.New(mrand.NewPCG(seed, 0)) }

// TestRateCapsThroughput: 200 KB back through a 1 MB/s cap takes at least
// about 0.2 s.
func TestRateCapsThroughput(t *testing.T) {
	p := startProxy(t, Config{Target: echoServer(t), Down: Shape{Rate: 1 << 20}, Segment: 4096})
	c := dial(t, p)
	msg := make([]byte, 200<<10)
	if rt := roundTrip(t, c, msg); rt < 180*time.Millisecond {
		t.Fatalf("200 KiB at 1 MiB/s came back in %v, want >= ~195 ms", rt)
	}
}

// TestLossStallsButDeliversInOrder: through 30% loss with a 20 ms RTO,
// every message still comes back intact and in order, later than without
// loss, and the losses are counted.
func TestLossStallsButDeliversInOrder(t *testing.T) {
	p := startProxy(t, Config{Target: echoServer(t), Up: Shape{Loss: 0.3, RTO: 20 * time.Millisecond}, Seed: 3})
	c := dial(t, p)
	var total time.Duration
	for i := range 40 {
		total += roundTrip(t, c, []byte(strings.Repeat(string(rune('a'+i%26)), 100)))
	}
	st := p.Stats()
	if st.Losses == 0 {
		t.Fatalf("no losses counted in 40 segments at 30%%: %+v", st)
	}
	if min := time.Duration(st.Losses) * 20 * time.Millisecond; total < min {
		t.Fatalf("40 round trips took %v with %d losses, want at least %v of stalls", total, st.Losses, min)
	}
	t.Logf("40 round trips with %d losses: %v", st.Losses, total)
}

// TestResetEndsTheConnection: a drawn reset ends the connection (the
// client reads a reset or EOF, not data) and is counted; the proxy keeps
// accepting.
func TestResetEndsTheConnection(t *testing.T) {
	p := startProxy(t, Config{Target: echoServer(t), Up: Shape{Reset: 0.999}})
	c := dial(t, p)
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	n, err := c.Read(make([]byte, 10))
	var ne net.Error
	if n != 0 || err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("read %d bytes, err %v: want the connection ended", n, err)
	}
	if st := p.Stats(); st.Resets != 1 {
		t.Fatalf("stats %+v: want 1 reset", st)
	}
	waitActive(t, p, 0)
	dial(t, p)
	waitAccepted(t, p, 2)
}

func waitAccepted(t *testing.T, p *Proxy, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); p.Stats().Accepted < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections accepted after 5 s, want %d", p.Stats().Accepted, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMaxConnsAndDialFailure: connections beyond MaxConns are closed at
// once and counted; so is one whose target cannot be dialed.
func TestMaxConnsAndDialFailure(t *testing.T) {
	p := startProxy(t, Config{Target: echoServer(t), MaxConns: 1})
	first := dial(t, p)
	roundTrip(t, first, []byte("x"))
	second := dial(t, p)
	if n, err := second.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("second connection over MaxConns 1: read %d, %v; want it closed", n, err)
	}
	if st := p.Stats(); st.Refused != 1 || st.Accepted != 1 {
		t.Fatalf("stats %+v: want 1 accepted, 1 refused", st)
	}
	roundTrip(t, first, []byte("still")) // the first is unaffected

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	q := startProxy(t, Config{Target: dead})
	c := dial(t, q)
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("a connection to a dead target: read %d, %v; want it closed", n, err)
	}
	if st := q.Stats(); st.DialFailures != 1 || st.Accepted != 0 {
		t.Fatalf("stats %+v: want 1 dial failure", st)
	}
}

// TestCloseEndsConnections: Close ends open connections, even ones with
// segments queued behind a long delay, and returns once every goroutine
// has (goleak checks at the end of the package's tests).
func TestCloseEndsConnections(t *testing.T) {
	p := startProxy(t, Config{Target: echoServer(t), Up: Shape{Delay: time.Hour}, Queue: 2, Segment: 16})
	conns := []net.Conn{dial(t, p), dial(t, p)}
	for _, c := range conns {
		go c.Write(make([]byte, 4096)) // fills the queue and blocks the reader
	}
	waitAccepted(t, p, 2)
	start := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v", d)
	}
	for _, c := range conns {
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("after Close: read %d, %v; want the connection ended", n, err)
		}
	}
	if st := p.Stats(); st.Active != 0 || st.BytesUp != 0 {
		t.Fatalf("after Close: %+v; want nothing open and nothing delivered", st)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestBadConfig: a bad configuration is refused before anything starts.
func TestBadConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "Target is required"},
		{Config{Target: "nohost"}, "Target"},
		{Config{Target: "h:1", Up: Shape{Loss: 1}}, "Loss and Reset must be in [0, 1)"},
		{Config{Target: "h:1", Down: Shape{Reset: -0.1}}, "Loss and Reset"},
		{Config{Target: "h:1", Down: Shape{Delay: -1}}, "negative Delay"},
		{Config{Target: "h:1", Up: Shape{Rate: -1}}, "negative Rate"},
		{Config{Target: "h:1", Queue: -1}, "negative Segment, Queue"},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(ln, c.cfg)
		ln.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error with %q", c.cfg, err, c.want)
		}
	}
}
