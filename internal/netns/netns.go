//go:build linux

// Package netns builds throwaway networks of Linux network namespaces for
// multi-host tests: each host is a namespace with its own address on a
// private /24, joined by a veth pair to a bridge that lives in a namespace
// of its own (the switch). Nothing is added to the test machine's own
// namespace: every link and address is inside namespaces the test creates,
// and deleting them (Close, run by t.Cleanup) deletes every link.
//
// It needs root and iproute2's ip with netns support; New fails the test
// with a message saying which is missing (the multi-host tests must not
// pass silently where they cannot run).
//
// Processes run in a host with Host.Command (ip netns exec); the test
// process itself listens and dials inside a host with Host.Listen and
// Host.DialContext, which create the socket on an OS thread switched into
// the namespace for just that call (a socket stays in the namespace it was
// created in).
package netns

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Net is a throwaway network: a switch namespace with a bridge and the
// hosts attached to it. Its methods are safe for concurrent use.
type Net struct {
	prefix string       // every namespace's name starts with it
	subnet netip.Prefix // the hosts' /24

	addMu  sync.Mutex // serialises AddHost
	mu     sync.Mutex
	hosts  []*Host // guarded by mu
	closed bool    // guarded by mu
}

// Host is one namespace on a Net with its own address.
type Host struct {
	Name string     // the name AddHost was given
	NS   string     // the namespace's name (for ip netns exec, ip -n)
	Addr netip.Addr // the host's address on the Net's subnet
	port string     // the switch-side end of its veth pair
	net  *Net
}

// seq makes namespace names unique within a process; the pid makes them
// unique on the machine.
var seq atomic.Uint64

// namePattern matches the namespaces New makes: apx<pid>-<n>-<host>.
var namePattern = regexp.MustCompile(`^apx([0-9]+)-[0-9]+-`)

// New makes a network: a switch namespace holding a bridge, and a /24 in
// 10.0.0.0/8 that overlaps none of the machine's own routes (its
// addresses live only inside the network's namespaces, but a subnet the
// machine routes elsewhere would make the test's logs misleading). It
// registers Close with t.Cleanup. It fails t when not root, without ip,
// or when ip netns does not work. It first deletes namespaces left by
// earlier test processes that died before their cleanup (names of this
// package's pattern whose pid is gone). Cost: a few ip commands.
func New(t testing.TB) *Net {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("netns: the multi-host tests need root to create network namespaces (running as uid %d): run them as root, as CI does", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("netns: the multi-host tests need iproute2's ip (apt-get install iproute2; .ci/run installs it): %v", err)
	}
	sweep(t)
	subnet, err := pickSubnet()
	if err != nil {
		t.Fatalf("netns: %v", err)
	}
	n := &Net{prefix: fmt.Sprintf("apx%d-%d-", os.Getpid(), seq.Add(1)), subnet: subnet}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("netns: %v", err)
		}
	})
	sw := n.prefix + "sw"
	if err := ipRun("netns", "add", sw); err != nil {
		t.Fatalf("netns: ip netns does not work here (root and a kernel with network namespaces are needed): %v", err)
	}
	n.hosts = append(n.hosts, &Host{Name: "sw", NS: sw, net: n}) // deleted last by Close
	for _, args := range [][]string{
		{"-n", sw, "link", "add", "br0", "type", "bridge"},
		{"-n", sw, "link", "set", "br0", "up"},
		{"-n", sw, "link", "set", "lo", "up"},
	} {
		if err := ipRun(args...); err != nil {
			t.Fatalf("netns: making the switch: %v", err)
		}
	}
	t.Logf("netns: network %s on %s (switch namespace %s)", strings.TrimSuffix(n.prefix, "-"), subnet, sw)
	return n
}

// Subnet is the hosts' /24.
func (n *Net) Subnet() netip.Prefix { return n.subnet }

// AddHost makes a namespace named after name, a veth pair from it to the
// switch's bridge, and gives the namespace the next address of the subnet
// (.10, .11, ...; at most 200 hosts). Loopback is up inside it. It fails t
// on any error. Cost: about ten ip commands.
func (n *Net) AddHost(t testing.TB, name string) *Host {
	t.Helper()
	n.addMu.Lock()
	defer n.addMu.Unlock()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		t.Fatalf("netns: AddHost(%q) after Close", name)
	}
	idx := len(n.hosts) - 1 // the switch is hosts[0]
	if idx >= 200 {
		n.mu.Unlock()
		t.Fatalf("netns: more than 200 hosts")
	}
	a := n.subnet.Addr().As4()
	a[3] = byte(10 + idx)
	h := &Host{Name: name, NS: n.prefix + name, Addr: netip.AddrFrom4(a), port: "p" + strconv.Itoa(idx), net: n}
	n.mu.Unlock()
	if len(h.NS) > 64 || strings.ContainsAny(name, "/ \t\n") || name == "" || name == "sw" {
		t.Fatalf("netns: bad host name %q", name)
	}
	if err := ipRun("netns", "add", h.NS); err != nil {
		t.Fatalf("netns: %v", err)
	}
	n.mu.Lock()
	n.hosts = append(n.hosts, h)
	n.mu.Unlock()
	sw := n.prefix + "sw"
	for _, args := range [][]string{
		{"link", "add", "v0", "netns", h.NS, "type", "veth", "peer", "name", h.port, "netns", sw},
		{"-n", sw, "link", "set", h.port, "master", "br0"},
		{"-n", sw, "link", "set", h.port, "up"},
		{"-n", h.NS, "addr", "add", netip.PrefixFrom(h.Addr, 24).String(), "dev", "v0"},
		{"-n", h.NS, "link", "set", "v0", "up"},
		{"-n", h.NS, "link", "set", "lo", "up"},
	} {
		if err := ipRun(args...); err != nil {
			t.Fatalf("netns: host %s: %v", name, err)
		}
	}
	return h
}

// Cut takes h's switch port down: h stays up but nothing reaches it or
// leaves it (packets are dropped, connections stall; no resets), as when
// a cable is pulled. Restore undoes it.
func (n *Net) Cut(h *Host) error {
	return ipRun("-n", n.prefix+"sw", "link", "set", h.port, "down")
}

// Restore brings h's switch port back up after Cut.
func (n *Net) Restore(h *Host) error {
	return ipRun("-n", n.prefix+"sw", "link", "set", h.port, "up")
}

// Close deletes every namespace of the network (hosts first, the switch
// last), which deletes their links. Processes still running inside a
// namespace keep it alive: end them first (a test's process cleanups,
// registered after New, run before New's). It returns the errors of
// every deletion that failed and checks that none of the names is left.
// Later calls return nil.
func (n *Net) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	hosts := n.hosts
	n.mu.Unlock()
	var errs []error
	for i := len(hosts) - 1; i >= 0; i-- {
		if err := ipRun("netns", "del", hosts[i].NS); err != nil {
			errs = append(errs, err)
		}
	}
	left, err := namespaces()
	if err != nil {
		errs = append(errs, err)
	}
	for _, ns := range left {
		if strings.HasPrefix(ns, n.prefix) {
			errs = append(errs, fmt.Errorf("namespace %s is still there after ip netns del", ns))
		}
	}
	return errors.Join(errs...)
}

// Namespaces is the names of the network's namespaces that exist now
// (the switch's included), for tests that check the cleanup.
func (n *Net) Namespaces() ([]string, error) {
	all, err := namespaces()
	if err != nil {
		return nil, err
	}
	var mine []string
	for _, ns := range all {
		if strings.HasPrefix(ns, n.prefix) {
			mine = append(mine, ns)
		}
	}
	return mine, nil
}

// Command returns a command that runs name with args inside h (ip netns
// exec, which execs name: the process's pid is the command's). The caller
// starts it and ends it by its pid.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// HostPort is h's address with port.
func (h *Host) HostPort(port int) string {
	return netip.AddrPortFrom(h.Addr, uint16(port)).String()
}

// Listen listens on addr (host:port) inside h.
func (h *Host) Listen(addr string) (net.Listener, error) {
	var ln net.Listener
	err := h.in(func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

// DialContext dials addr (an IP address and port: no name lookups) over
// TCP from inside h. It has the signature netem.Config.Dial wants.
func (h *Host) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	var c net.Conn
	err := h.in(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}

// in runs f on a goroutine locked to an OS thread that is switched into
// h's network namespace, and switched back before the thread is released
// (a thread that cannot be switched back ends with its goroutine). f must
// not start goroutines that create sockets.
func (h *Host) in(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored := false
		defer func() {
			if restored {
				runtime.UnlockOSThread()
			}
		}()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			restored = true
			errc <- err
			return
		}
		defer self.Close()
		target, err := os.Open("/run/netns/" + h.NS)
		if err != nil {
			restored = true
			errc <- fmt.Errorf("netns %s: %w", h.NS, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			restored = true
			errc <- fmt.Errorf("setns %s: %w", h.NS, err)
			return
		}
		ferr := f()
		restored = unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil
		errc <- ferr
	}()
	return <-errc
}

// ipRun runs ip with args, bounded to 30 s, and returns its output in the
// error.
func ipRun(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// namespaces lists the machine's named network namespaces.
func namespaces() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("ip netns list: %w", err)
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, sc.Err()
}

// sweep deletes namespaces of this package's naming whose creating
// process is gone (a test killed before its cleanup ran).
func sweep(t testing.TB) {
	names, err := namespaces()
	if err != nil {
		return
	}
	for _, ns := range names {
		m := namePattern.FindStringSubmatch(ns)
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if pid == os.Getpid() || pid <= 0 {
			continue
		}
		if err := unix.Kill(pid, 0); err == nil || errors.Is(err, unix.EPERM) {
			continue // its test is still running
		}
		if err := ipRun("netns", "del", ns); err == nil {
			t.Logf("netns: deleted %s, left by pid %d which is gone", ns, pid)
		}
	}
}

// pickSubnet picks a /24 in 10.0.0.0/8, starting from one derived from the
// pid, that overlaps none of the machine's IPv4 routes (in any table) or
// addresses.
func pickSubnet() (netip.Prefix, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var used []netip.Prefix
	for _, args := range [][]string{{"-4", "route", "show", "table", "all"}, {"-4", "-o", "addr", "show"}} {
		out, err := exec.CommandContext(ctx, "ip", args...).Output()
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
		}
		for _, f := range strings.Fields(string(out)) {
			if p, err := netip.ParsePrefix(f); err == nil && p.Addr().Is4() {
				used = append(used, p.Masked())
			} else if a, err := netip.ParseAddr(f); err == nil && a.Is4() {
				used = append(used, netip.PrefixFrom(a, 32))
			}
		}
	}
	start := os.Getpid()*7 + int(seq.Load())*13
	for i := range 1 << 16 {
		k := (start + i) % (1 << 16)
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(k >> 8), byte(k), 0}), 24)
		free := true
		for _, u := range used {
			if u.Bits() > 0 && u.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("no /24 in 10.0.0.0/8 is free of the machine's routes")
}
