//go:build linux

package netns

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apexrl/apex/internal/netem"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo serves an echo on ln until ln is closed; the test's cleanup closes
// it and waits.
func echo(t *testing.T, ln net.Listener) {
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
			wg.Go(func() { _, _ = io.Copy(c, c); c.Close() })
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
}

func roundTrip(c net.Conn, msg string) (time.Duration, error) {
	start := time.Now()
	if _, err := io.WriteString(c, msg); err != nil {
		return 0, err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return 0, err
	}
	if string(got) != msg {
		return 0, errors.New("echo differs")
	}
	return time.Since(start), nil
}

// TestHostsTalkThroughTheSwitchAndTheProxy: hosts reach each other by
// their own addresses, not the machine's; a netem proxy in a third host
// adds its delay; a cut host is unreachable until restored; Close leaves
// no namespace behind.
func TestHostsTalkThroughTheSwitchAndTheProxy(t *testing.T) {
	n := New(t)
	server, client, proxy := n.AddHost(t, "server"), n.AddHost(t, "client"), n.AddHost(t, "proxy")
	for _, h := range []*Host{server, client, proxy} {
		if !n.Subnet().Contains(h.Addr) {
			t.Fatalf("host %s has %v, outside the subnet %v", h.Name, h.Addr, n.Subnet())
		}
	}
	ln, err := server.Listen(server.HostPort(7000))
	if err != nil {
		t.Fatal(err)
	}
	echo(t, ln)
	// The addresses exist only inside the network: the machine's own
	// namespace has none of the subnet's.
	own, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range own {
		if ip, ok := a.(*net.IPNet); ok {
			if addr, ok := netip.AddrFromSlice(ip.IP); ok && n.Subnet().Contains(addr.Unmap()) {
				t.Fatalf("the machine's own namespace has %v, in the network's subnet %v", addr, n.Subnet())
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, server.HostPort(7000))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := roundTrip(c, "direct"); err != nil {
		t.Fatal(err)
	}
	if got := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr(); got != client.Addr {
		t.Fatalf("the client's connection comes from %v, want its own address %v", got, client.Addr)
	}

	pln, err := proxy.Listen(proxy.HostPort(8000))
	if err != nil {
		t.Fatal(err)
	}
	p, err := netem.New(pln, netem.Config{Target: server.HostPort(7000), Dial: proxy.DialContext,
		Up: netem.Shape{Delay: 20 * time.Millisecond}, Down: netem.Shape{Delay: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pc, err := client.DialContext(ctx, proxy.HostPort(8000))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	rt, err := roundTrip(pc, "through the proxy")
	if err != nil || rt < 40*time.Millisecond {
		t.Fatalf("through the proxy: %v, %v; want the echo after >= 40 ms", rt, err)
	}

	// Cut: the established connection stalls and a new dial fails.
	if err := n.Cut(server); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := roundTrip(c, "cut"); err == nil {
		t.Fatal("an echo came back from a cut host")
	}
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	if c2, err := client.DialContext(short, server.HostPort(7000)); err == nil {
		c2.Close()
		t.Fatal("dialed a cut host")
	}
	cancelShort()
	if err := n.Restore(server); err != nil {
		t.Fatal(err)
	}
	// The stalled connection delivers once the link is back (TCP
	// retransmits); its echo arrives within TCP's backoff.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len("cut"))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "cut" {
		t.Fatalf("after Restore the stalled echo: %q, %v", got, err)
	}
	c3, err := client.DialContext(ctx, server.HostPort(7000))
	if err != nil {
		t.Fatalf("after Restore: %v", err)
	}
	c3.Close()

	names, err := n.Namespaces()
	if err != nil || len(names) != 4 {
		t.Fatalf("namespaces %v (%v): want the switch and 3 hosts", names, err)
	}
	p.Close()
	pc.Close()
	c.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	all, err := namespaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range names {
		if slices.Contains(all, ns) {
			t.Errorf("namespace %s left after Close", ns)
		}
	}
}

// TestSubnetAvoidsRoutes: the picked /24 overlaps none of the machine's
// routes.
func TestSubnetAvoidsRoutes(t *testing.T) {
	p, err := pickSubnet()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		if len(f) > 1 && (f[0] == "local" || f[0] == "broadcast" || f[0] == "unicast") {
			dst = f[1]
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if q, err := netip.ParsePrefix(dst); err == nil && q.Bits() > 0 && q.Overlaps(p) {
			t.Errorf("picked %v, which overlaps the route %q", p, line)
		}
	}
	if !strings.HasPrefix(p.String(), "10.") || p.Bits() != 24 {
		t.Errorf("picked %v, want a /24 in 10.0.0.0/8", p)
	}
}
