package buffer

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func ckSaveStriped(t testing.TB, b *Buffer) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := b.SaveStriped(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSaveStripedRoundTrip: at rest, a striped checkpoint loads (from a
// stream of known and of unknown length) into an exact copy of the buffer
// (every counter, tree node and column; the same Save bytes), for every
// layout the version 1 round trip covers, stripes of unequal size included.
func TestSaveStripedRoundTrip(t *testing.T) {
	for name, cfg := range ckConfigs() {
		for _, n := range []int{0, 7, 3 * cfg.Capacity / 2} {
			want := ckExercised(t, cfg, n, uint64(n)+1)
			data := ckSaveStriped(t, want)
			if bytes.Equal(data, ckSave(t, want)) {
				t.Fatalf("%s: SaveStriped wrote Save's bytes (version 1), want version 2", name)
			}
			t.Run(name, func(t *testing.T) {
				ckSameBuffer(t, want, ckLoad(t, data))
				got, err := Load(ckHideLen{bytes.NewReader(data)})
				if err != nil {
					t.Fatalf("unknown-length stream: %v", err)
				}
				ckSameBuffer(t, want, got)
			})
		}
	}
}

// TestSaveStripedCorrupt: a striped checkpoint cut anywhere, or with a
// stripe's counters contradicting its leaves, is refused as corrupt.
func TestSaveStripedCorrupt(t *testing.T) {
	b := ckExercised(t, ckAllColumns, 150, 3)
	data := ckSaveStriped(t, b)
	for _, cut := range []int{1, 40, len(data) / 3, len(data) / 2, len(data) - 5, len(data) - 1} {
		if _, err := Load(bytes.NewReader(data[:cut])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d of %d: %v, want ErrCorrupt", cut, len(data), err)
		}
		if _, err := Load(ckHideLen{bytes.NewReader(data[:cut])}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d of %d (unknown length): %v, want ErrCorrupt", cut, len(data), err)
		}
	}
	// Stripe 0's written count (the second value after its section
	// header) raised: its generations then disagree.
	p := ckPayloadStart(data)
	js := int(uint32(data[p]) | uint32(data[p+1])<<8 | uint32(data[p+2])<<16 | uint32(data[p+3])<<24)
	w := p + 4 + js + pad8(js) + ckSectionHeader + 8
	bad := bytes.Clone(data)
	bad[w]++
	bad[w-8]++ // and its cursor, so that cursor = written still holds
	if _, err := Load(bytes.NewReader(ckFixCRC(bad))); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "stripe 0") {
		t.Fatalf("stripe 0 counters raised: %v", err)
	}
}

// TestSaveStripedWhileInUse: SaveStriped runs while inserters, a sampler
// and a write-back goroutine go on; every checkpoint loads (Load checks
// it as a buffer at rest: counters, generations, ring order), its loaded
// copy passes CheckInvariants, no stored item is torn (each item's
// columns carry its id), the running maximum bounds every priority, and
// the writers made progress during the checkpoints.
func TestSaveStripedWhileInUse(t *testing.T) {
	cfg := Config{Capacity: 1 << 12, Stripes: 8, ObsDim: 4, Action: Discrete, NumActions: 3, MaxPriority: 100}
	b := mustNew(t, cfg)
	if err := b.Insert(items(cfg, 0, 64, nil)); err != nil {
		t.Fatal(err)
	}
	var (
		stop     atomic.Bool
		inserted atomic.Int64
		updated  atomic.Int64
		wg       sync.WaitGroup
		errs     = make(chan error, 8)
	)
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; !stop.Load() && i < 1_000_000; i++ {
				k := 1 + rng.IntN(40)
				if err := b.Insert(items(cfg, 1000+g*1_000_000+i*64, k, func(int) float64 { return 1 + rng.Float64() })); err != nil {
					errs <- err
					return
				}
				inserted.Add(int64(k))
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(9, 9))
		bt := mustBatch(t, b, 32)
		for i := 0; !stop.Load() && i < 1_000_000; i++ {
			if err := b.Sample(rng, bt); err != nil {
				errs <- err
				return
			}
			p := make([]float64, len(bt.Refs))
			for j := range p {
				p[j] = 50 * rng.Float64()
			}
			if _, err := b.UpdatePriorities(bt.Refs, p); err != nil {
				errs <- err
				return
			}
			updated.Add(1)
		}
	}()
	for range 20 {
		data := ckSaveStriped(t, b)
		got, err := Load(bytes.NewReader(data))
		if err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("a checkpoint taken in use does not load: %v", err)
		}
		if err := got.CheckInvariants(); err != nil {
			t.Fatalf("loaded: %v", err)
		}
		d := cfg.ObsDim
		all := got.columns()
		maxP := got.MaxPriority()
		for g := range cfg.Capacity {
			ref, p, ok := got.SlotPriority(g)
			if !ok {
				continue
			}
			if id := all.Reward[g]; all.Obs[g*d] != id || all.NextObs[g*d] != id+0.5 {
				t.Fatalf("slot %d (ref %+v) is torn: reward %v obs %v next %v", g, ref, id, all.Obs[g*d], all.NextObs[g*d])
			}
			if p > maxP {
				t.Fatalf("slot %d: priority %v above the running maximum %v", g, p, maxP)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if inserted.Load() == 0 || updated.Load() == 0 {
		t.Fatalf("no progress: %d inserted, %d write-back batches", inserted.Load(), updated.Load())
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestStripeGate: while a snapshot holds a stripe, Insert puts batches
// into the other stripes without waiting, a write-back applies its refs
// of other stripes at once and waits for the stripe's release for its
// refs there (then applies them), a one-stripe
// buffer's Insert waits, and a second SaveStriped is refused.
func TestStripeGate(t *testing.T) {
	cfg := Config{Capacity: 64, Stripes: 4, ObsDim: 1}
	b := mustNew(t, cfg)
	if err := b.Insert(items(cfg, 0, 64, nil)); err != nil {
		t.Fatal(err)
	}
	ref, _, ok := b.SlotPriority(3) // stripe 0
	if !ok {
		t.Fatal("slot 3 empty")
	}
	before := b.stripes[0].written.Load()
	b.freezeStripe(0)
	for i := range 8 {
		if err := b.Insert(items(cfg, 100+i, 2, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if w := b.stripes[0].written.Load(); w != before {
		t.Fatalf("a held stripe took inserts: written %d → %d", before, w)
	}
	other, _, ok := b.SlotPriority(20) // stripe 1
	if !ok {
		t.Fatal("slot 20 empty")
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.UpdatePriorities([]Ref{ref, other}, []float64{7, 5})
		done <- err
	}()
	// The other stripe's write is applied while the held one waits.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, p, _ := b.SlotPriority(20); p == 5 {
			break
		}
		if time.Now().After(deadline) {
			b.thawStripe(0)
			t.Fatal("the write-back to an open stripe waited for the held one")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		b.thawStripe(0)
		t.Fatalf("a write-back to a held stripe returned (%v) before the release", err)
	case <-time.After(50 * time.Millisecond):
	}
	b.thawStripe(0)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write-back did not finish after the release")
	}
	if _, p, _ := b.SlotPriority(3); p != 7 {
		t.Fatalf("the write-back applied %v, want 7", p)
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}

	one := mustNew(t, Config{Capacity: 16, Stripes: 1, ObsDim: 1})
	one.freezeStripe(0)
	ins := make(chan error, 1)
	go func() { ins <- one.Insert(items(one.Config(), 0, 3, nil)) }()
	select {
	case err := <-ins:
		one.thawStripe(0)
		t.Fatalf("a one-stripe Insert returned (%v) while its stripe was held", err)
	case <-time.After(50 * time.Millisecond):
	}
	one.thawStripe(0)
	if err := <-ins; err != nil || one.Size() != 3 {
		t.Fatalf("after the release: %v, size %d", err, one.Size())
	}

	b.snapshotting.Store(true)
	if err := b.SaveStriped(&bytes.Buffer{}); !errors.Is(err, ErrSnapshotBusy) {
		t.Fatalf("overlapping SaveStriped: %v", err)
	}
	b.snapshotting.Store(false)
}

// TestSaveStripedFailingWriter: a writer that fails at any point (within
// stripe k's data) fails the call with its error and leaves every stripe
// open: inserts reach all stripes again and write-backs apply.
func TestSaveStripedFailingWriter(t *testing.T) {
	cfg := ckAllColumns
	b := ckExercised(t, cfg, 300, 5)
	full := len(ckSaveStriped(t, b))
	for _, n := range []int{0, 100, full / 4, full / 2, full - 10} {
		if err := b.SaveStriped(&ckFailWriter{n: n}); !errors.Is(err, errCkDisk) {
			t.Fatalf("writer failing after %d bytes: %v", n, err)
		}
		for s := range b.stripes {
			if g := b.stripes[s].gate.Load(); g != 0 {
				t.Fatalf("after a failed SaveStriped stripe %d's gate is %#x", s, g)
			}
		}
	}
	if err := b.Insert(ckTransitions(cfg, 4*cfg.Stripes, rand.New(rand.NewPCG(1, 1)))); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	ckSameBuffer(t, b, ckLoad(t, ckSaveStriped(t, b)))
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestStripeWaitsBlock: writers waiting for a held stripe (a one-stripe
// Insert, a write-back) and SaveStriped waiting for a writer to leave a
// stripe block instead of spinning: over 400 ms of waiting the process
// burns well under the 400 ms per waiter that spinning would, and each
// wait ends when its stripe is released or left.
func TestStripeWaitsBlock(t *testing.T) {
	one := mustNew(t, Config{Capacity: 16, Stripes: 1, ObsDim: 1})
	if err := one.Insert(items(one.Config(), 0, 4, nil)); err != nil {
		t.Fatal(err)
	}
	ref, _, _ := one.SlotPriority(1)
	one.freezeStripe(0)
	ins, upd := make(chan error, 1), make(chan error, 1)
	go func() { ins <- one.Insert(items(one.Config(), 10, 3, nil)) }()
	go func() { _, err := one.UpdatePriorities([]Ref{ref}, []float64{3}); upd <- err }()
	time.Sleep(50 * time.Millisecond) // past the spinning
	c0 := cpuTime(t)
	time.Sleep(400 * time.Millisecond)
	burnt := cpuTime(t) - c0
	one.thawStripe(0)
	for _, ch := range []chan error{ins, upd} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiting writer did not finish after the release")
		}
	}
	if burnt > 150*time.Millisecond {
		t.Errorf("two writers waiting 400 ms for a held stripe burnt %v of CPU", burnt)
	}
	if _, p, _ := one.SlotPriority(1); p != 3 || one.Size() != 7 {
		t.Fatalf("after the release: priority %v size %d", p, one.Size())
	}

	// A writer inside: the freeze waits for it to leave, blocked.
	if !one.enterStripe(0) {
		t.Fatal("an open stripe refused a writer")
	}
	frozen := make(chan struct{})
	go func() { one.freezeStripe(0); close(frozen) }()
	time.Sleep(50 * time.Millisecond)
	c0 = cpuTime(t)
	time.Sleep(400 * time.Millisecond)
	burnt = cpuTime(t) - c0
	select {
	case <-frozen:
		t.Fatal("freezeStripe returned with a writer inside")
	default:
	}
	one.leaveStripe(0)
	select {
	case <-frozen:
	case <-time.After(10 * time.Second):
		t.Fatal("freezeStripe did not return after the writer left")
	}
	one.thawStripe(0)
	if burnt > 150*time.Millisecond {
		t.Errorf("freezeStripe waiting 400 ms for a writer burnt %v of CPU", burnt)
	}
}
