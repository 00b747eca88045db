package learner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/cktest"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

var ckNetCfg = model.Config{In: 4, Hidden: []int{16}, Out: 3, Dueling: true}

// newCkLearner builds a learner over buf with a PER stage and an online
// network initialised from netSeed.
func newCkLearner(t *testing.T, cfg DQNConfig, netCfg model.Config, netSeed uint64, buf *buffer.Buffer) (*DQN, *model.Store) {
	t.Helper()
	net, err := model.NewNet(netCfg, rand.New(rand.NewPCG(netSeed, 0)))
	if err != nil {
		t.Fatal(err)
	}
	per, err := sampler.NewPER(buf, sampler.DefaultPERConfig(100))
	if err != nil {
		t.Fatal(err)
	}
	store := new(model.Store)
	l, err := NewDQN(cfg, net, buf, method("per", per, per), store)
	if err != nil {
		t.Fatal(err)
	}
	return l, store
}

func steps(t *testing.T, l *DQN, n int) {
	t.Helper()
	for range n {
		if err := l.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSaveLoadContinues: a learner restored from a checkpoint (over the
// buffer restored from the same moment) continues the saved run bit for
// bit: same samples (RNG state), same updates (networks and Adam moments),
// same target copies and publishes (step counter), same priorities.
func TestSaveLoadContinues(t *testing.T) {
	cfg := DQNConfig{Batch: 16, TargetEvery: 7, PublishEvery: 3, Seed: 5}
	bufA := newBuffer(t, 512, ckNetCfg.In)
	fillRandom(t, bufA, rand.New(rand.NewPCG(1, 1)), 400, ckNetCfg.In, ckNetCfg.Out)
	a, _ := newCkLearner(t, cfg, ckNetCfg, 1, bufA)
	steps(t, a, 20)

	var bufCk, ck bytes.Buffer
	if err := bufA.Save(&bufCk); err != nil {
		t.Fatal(err)
	}
	if err := a.Save(&ck); err != nil {
		t.Fatal(err)
	}
	steps(t, a, 30)

	bufB, err := buffer.Load(&bufCk)
	if err != nil {
		t.Fatal(err)
	}
	// A different initial network: Load must replace all of it.
	b, storeB := newCkLearner(t, cfg, ckNetCfg, 99, bufB)
	if err := b.Load(&ck); err != nil {
		t.Fatal(err)
	}
	if p := storeB.Load(); p.Version() != 20 || !slices.Equal(p.Weights(), b.net.Params()) {
		t.Errorf("Load published version %d, want 20 with the restored weights", p.Version())
	}
	if b.Steps() != 20 || b.adam.Steps() != 20 {
		t.Errorf("restored steps %d, Adam %d; want 20", b.Steps(), b.adam.Steps())
	}
	steps(t, b, 30)

	if !slices.Equal(a.net.Params(), b.net.Params()) {
		t.Error("online networks differ after resuming")
	}
	if !slices.Equal(a.target.Params(), b.target.Params()) {
		t.Error("target networks differ after resuming")
	}
	sa, sb := a.Stats(), b.Stats()
	// NewDQN's own publish of version 0 is counted by b as by a (restored
	// from the checkpoint), and Load's publish of version 20 is one more.
	sb.Publishes--
	// Wall times differ between the runs; both must have recorded step
	// time, each step's phases within it (no assertion on the durations
	// themselves, which depend on the clock).
	if sa.Timing.Steps <= 0 || sb.Timing.Steps <= 0 ||
		sa.Timing.Steps < sa.Timing.Sample+sa.Timing.WriteBack || sb.Timing.Steps < sb.Timing.Sample+sb.Timing.WriteBack {
		t.Errorf("timing not recorded: saved %+v, resumed %+v", sa.Timing, sb.Timing)
	}
	sa.Timing, sb.Timing = Timing{}, Timing{}
	if sa != sb {
		t.Errorf("stats differ:\n saved run   %+v\n resumed run %+v", sa, sb)
	}
	if bufA.TotalPriority() != bufB.TotalPriority() {
		t.Errorf("buffer priorities differ: %v vs %v", bufA.TotalPriority(), bufB.TotalPriority())
	}
	for slot := range bufA.Capacity() {
		_, pa, _ := bufA.SlotPriority(slot)
		_, pb, _ := bufB.SlotPriority(slot)
		if pa != pb {
			t.Fatalf("slot %d: priority %v vs %v", slot, pa, pb)
		}
	}
}

// dqnCheckpoint returns a saved learner after a few steps, and the learner.
func dqnCheckpoint(t *testing.T) ([]byte, *DQN) {
	t.Helper()
	buf := newBuffer(t, 256, ckNetCfg.In)
	fillRandom(t, buf, rand.New(rand.NewPCG(2, 2)), 200, ckNetCfg.In, ckNetCfg.Out)
	l, _ := newCkLearner(t, DQNConfig{Batch: 8}, ckNetCfg, 3, buf)
	steps(t, l, 5)
	var ck bytes.Buffer
	if err := l.Save(&ck); err != nil {
		t.Fatal(err)
	}
	return ck.Bytes(), l
}

// unchanged fails the test if l's state differs from the saved snapshot.
type snapshot struct {
	net, target []float64
	steps       uint64
	adam        uint64
	stats       DQNStats
}

func snap(l *DQN) snapshot {
	return snapshot{params(l.net), params(l.target), l.steps, l.adam.Steps(), l.Stats()}
}

func (s snapshot) same(l *DQN) bool {
	return slices.Equal(s.net, l.net.Params()) && slices.Equal(s.target, l.target.Params()) &&
		s.steps == l.steps && s.adam == l.adam.Steps() && s.stats == l.Stats()
}

// TestLoadCorrupt: every truncation and every single-byte change of a
// checkpoint is refused with ErrCorrupt, and leaves the learner as it was.
func TestLoadCorrupt(t *testing.T) {
	ck, l := dqnCheckpoint(t)
	steps(t, l, 2) // so that a wrongful partial Load would show
	before := snap(l)
	if err := l.Load(bytes.NewReader(nil)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty input: %v", err)
	}
	for n := 1; n < len(ck); n++ {
		if err := l.Load(bytes.NewReader(ck[:n])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d of %d bytes: Load = %v, want ErrCorrupt", n, len(ck), err)
		}
	}
	bad := slices.Clone(ck)
	for i := range bad {
		bad[i] ^= 0x10
		if err := l.Load(bytes.NewReader(bad)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d of %d changed: Load = %v, want ErrCorrupt", i, len(ck), err)
		}
		bad[i] = ck[i]
	}
	if !before.same(l) {
		t.Fatal("a failed Load changed the learner")
	}

	// Named cases, for their messages.
	bad = slices.Clone(ck)
	binary.LittleEndian.PutUint32(bad[8:], ckVersion+1)
	if err := l.Load(bytes.NewReader(cktest.Reseal(bad))); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("learner.DQN version %d, this build reads learner.DQN up to version %d", ckVersion+1, ckVersion)) {
		t.Errorf("version %d: %v", ckVersion+1, err)
	}
	legacy := binary.LittleEndian.AppendUint32([]byte("APEXDQNL"), 2)
	if err := l.Load(bytes.NewReader(append(legacy, make([]byte, 64)...))); !errors.Is(err, ErrCorrupt) ||
		!strings.Contains(err.Error(), "APEXDQNL version 2 (a DQN learner checkpoint), written by apex before the unified checkpoint format") {
		t.Errorf("a legacy DQN checkpoint: %v", err)
	}
	var netCk bytes.Buffer
	if err := l.net.Save(&netCk); err != nil {
		t.Fatal(err)
	}
	if err := l.Load(&netCk); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "a model.Net version 1 section, want learner.DQN") {
		t.Errorf("a network checkpoint: %v", err)
	}
	kind, js, rest := splitCk(t, ck)
	damaged := slices.Clone(rest)
	damaged[40] ^= 1 // inside the online network's section
	if err := l.Load(bytes.NewReader(joinCk(kind, js, damaged))); !errors.Is(err, ErrCorrupt) || !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "online network") {
		t.Errorf("damaged network: %v", err)
	}
	// Data after the optimizer's section, inside the learner's.
	if err := l.Load(bytes.NewReader(joinCk(kind, js, append(slices.Clone(rest), 7)))); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "1 payload bytes after its state") {
		t.Errorf("trailing payload: %v", err)
	}
	if !before.same(l) {
		t.Fatal("a failed Load changed the learner")
	}

	// A good checkpoint followed by other data: Load reads exactly its own.
	r := bytes.NewReader(append(slices.Clone(ck), "tail"...))
	if err := l.Load(r); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(r); string(rest) != "tail" {
		t.Errorf("Load consumed data after the checkpoint: %q left", rest)
	}
	if l.Steps() != 5 {
		t.Errorf("steps %d after Load, want 5", l.Steps())
	}
}

// TestLoadMismatch: a valid checkpoint from a learner with another config
// or network shape is refused with ErrMismatch naming the difference.
func TestLoadMismatch(t *testing.T) {
	ck, _ := dqnCheckpoint(t)
	buf := newBuffer(t, 256, ckNetCfg.In)
	fillRandom(t, buf, rand.New(rand.NewPCG(2, 2)), 200, ckNetCfg.In, ckNetCfg.Out)

	other, _ := newCkLearner(t, DQNConfig{Batch: 8, LR: 5e-4}, ckNetCfg, 3, buf)
	before := snap(other)
	if err := other.Load(bytes.NewReader(ck)); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "LR") {
		t.Errorf("other LR: %v", err)
	}
	if !before.same(other) {
		t.Error("a failed Load changed the learner")
	}

	wide := ckNetCfg
	wide.Hidden = []int{32}
	other, _ = newCkLearner(t, DQNConfig{Batch: 8}, wide, 3, buf)
	if err := other.Load(bytes.NewReader(ck)); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "shape") {
		t.Errorf("other shape: %v", err)
	}
}

// TestLoadNonFinite: a checkpoint of a poisoned network is refused.
func TestLoadNonFinite(t *testing.T) {
	_, l := dqnCheckpoint(t)
	l.target.Params()[3] = math.Inf(-1)
	var ck bytes.Buffer
	if err := l.Save(&ck); err != nil {
		t.Fatal(err)
	}
	l.target.Params()[3] = 0
	err := l.Load(&ck)
	var nf *model.NonFiniteError
	if !errors.As(err, &nf) || nf.Index != 3 || !strings.Contains(err.Error(), "target network") {
		t.Errorf("Load = %v, want a non-finite error at the target's parameter 3", err)
	}
}

// TestLoadOtherMethod: a checkpoint trained under another replay method,
// or the same method with another loss, is refused with ErrMismatch.
func TestLoadOtherMethod(t *testing.T) {
	ck, _ := dqnCheckpoint(t) // method "per", Huber(1)
	buf := newBuffer(t, 256, ckNetCfg.In)
	fillRandom(t, buf, rand.New(rand.NewPCG(2, 2)), 200, ckNetCfg.In, ckNetCfg.Out)
	net, err := model.NewNet(ckNetCfg, rand.New(rand.NewPCG(3, 0)))
	if err != nil {
		t.Fatal(err)
	}
	per, err := sampler.NewPER(buf, sampler.DefaultPERConfig(100))
	if err != nil {
		t.Fatal(err)
	}
	mse := method("per", per, per)
	mse.Loss = model.Loss{Kind: model.MSE}
	for name, m := range map[string]sampler.Method{
		"uniform": method("uniform", sampler.NewUniform(buf), nil),
		"per+mse": mse,
	} {
		l, err := NewDQN(DQNConfig{Batch: 8}, net.Clone(), buf, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		before := snap(l)
		if err := l.Load(bytes.NewReader(ck)); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "method") {
			t.Errorf("%s: Load = %v, want ErrMismatch naming the method", name, err)
		}
		if !before.same(l) {
			t.Errorf("%s: a failed Load changed the learner", name)
		}
	}
	// Huber with Delta 0 and Delta 1 are one loss.
	same := method("per", per, per)
	same.Loss = model.Loss{Kind: model.Huber, Delta: 1}
	l, err := NewDQN(DQNConfig{Batch: 8}, net.Clone(), buf, same, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Load(bytes.NewReader(ck)); err != nil {
		t.Errorf("Huber(1) spelled with Delta 1: %v", err)
	}
}
