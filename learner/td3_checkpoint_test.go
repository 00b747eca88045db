package learner

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// newCkTD3 builds a TD3 over buf with the LAP method (so the buffer's
// priorities carry state too) and networks initialised from netSeed.
func newCkTD3(t *testing.T, cfg TD3Config, buf *buffer.Buffer, netSeed uint64, method string) (*TD3, *model.Store) {
	t.Helper()
	actor, critic := td3Nets(t, 3, 2, []int{8}, model.ReLU, netSeed)
	store := new(model.Store)
	l, err := NewTD3(cfg, actor, critic, buf, td3Method(t, method, buf, nil), store)
	if err != nil {
		t.Fatal(err)
	}
	return l, store
}

// td3State is every parameter vector of a TD3, in checkpoint order.
func td3State(l *TD3) [][]float64 {
	nets, _ := l.td3Nets()
	var s [][]float64
	for _, n := range nets {
		s = append(s, params(n))
	}
	return s
}

func sameState(a, b [][]float64) bool {
	return slices.EqualFunc(a, b, func(x, y []float64) bool { return slices.Equal(x, y) })
}

// TestTD3SaveLoadContinues: a learner restored from a checkpoint (over the
// buffer restored from the same moment) continues the saved run bit for
// bit: the same samples and smoothing noise (RNG state), the same updates
// (six networks and three Adam states), the same delayed steps and
// publishes (step counter), the same priorities.
func TestTD3SaveLoadContinues(t *testing.T) {
	cfg := TD3Config{Batch: 16, PolicyDelay: 2, PublishEvery: 4, MaxAction: rigMaxA, Seed: 5}
	bufA := contBuffer(t, 256, 3, 2, 0)
	fillContinuous(t, bufA, rand.New(rand.NewPCG(1, 1)), 200, rigMaxA)
	a, _ := newCkTD3(t, cfg, bufA, 1, "lap")
	td3Steps(t, a, 7) // an odd step: the next one is delayed

	var bufCk, ck bytes.Buffer
	if err := bufA.Save(&bufCk); err != nil {
		t.Fatal(err)
	}
	if err := a.Save(&ck); err != nil {
		t.Fatal(err)
	}
	saved := slices.Clone(ck.Bytes())
	td3Steps(t, a, 13)

	bufB, err := buffer.Load(&bufCk)
	if err != nil {
		t.Fatal(err)
	}
	// Different initial networks (and so a different twin): Load must
	// replace all of them.
	b, storeB := newCkTD3(t, TD3Config{Batch: 16, PolicyDelay: 2, PublishEvery: 4, MaxAction: rigMaxA, Seed: 5}, bufB, 99, "lap")
	r := bytes.NewReader(append(saved, "tail"...))
	if err := b.Load(r); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(r); string(rest) != "tail" {
		t.Errorf("Load consumed data after the checkpoint: %q left", rest)
	}
	if p := storeB.Load(); p.Version() != 7 || !slices.Equal(p.Weights(), b.actor.Params()) {
		t.Errorf("Load published version %d, want 7 with the restored actor", p.Version())
	}
	if b.Steps() != 7 || b.actorUpdates != 3 || b.actorAdam.Steps() != 3 || b.criticAdam[1].Steps() != 7 {
		t.Errorf("restored steps %d, actor updates %d, Adam %d/%d", b.Steps(), b.actorUpdates, b.actorAdam.Steps(), b.criticAdam[1].Steps())
	}
	td3Steps(t, b, 13)

	if !sameState(td3State(a), td3State(b)) {
		t.Error("networks differ after resuming")
	}
	sa, sb := a.Stats(), b.Stats()
	sb.Publishes-- // b's Load published once more
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
	for slot := range bufA.Capacity() {
		_, pa, _ := bufA.SlotPriority(slot)
		_, pb, _ := bufB.SlotPriority(slot)
		if pa != pb {
			t.Fatalf("slot %d: priority %v vs %v", slot, pa, pb)
		}
	}
}

// TestTD3LoadRefuses: truncated or damaged checkpoints are ErrCorrupt, a
// DQN checkpoint is not a TD3 one, and another config, method or shape is
// ErrMismatch; none of them changes the learner.
func TestTD3LoadRefuses(t *testing.T) {
	cfg := TD3Config{Batch: 8, MaxAction: rigMaxA}
	buf := contBuffer(t, 64, 3, 2, 0)
	fillContinuous(t, buf, rand.New(rand.NewPCG(2, 2)), 64, rigMaxA)
	src, _ := newCkTD3(t, cfg, buf, 1, "uniform")
	td3Steps(t, src, 3)
	var ck bytes.Buffer
	if err := src.Save(&ck); err != nil {
		t.Fatal(err)
	}
	data := ck.Bytes()

	l, _ := newCkTD3(t, cfg, buf, 2, "uniform")
	td3Steps(t, l, 1)
	before, st := td3State(l), l.Stats()
	unchanged := func(what string) {
		t.Helper()
		if !sameState(before, td3State(l)) || l.Stats() != st || l.Steps() != 1 {
			t.Fatalf("%s: a failed Load changed the learner", what)
		}
	}
	if err := l.Load(bytes.NewReader(nil)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("empty: %v", err)
	}
	for n := 1; n < len(data); n += 97 {
		if err := l.Load(bytes.NewReader(data[:n])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d of %d bytes: Load = %v, want ErrCorrupt", n, len(data), err)
		}
	}
	bad := slices.Clone(data)
	for i := 0; i < len(bad); i += 61 {
		bad[i] ^= 0x10
		if err := l.Load(bytes.NewReader(bad)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d of %d changed: Load = %v, want ErrCorrupt", i, len(data), err)
		}
		bad[i] = data[i]
	}
	unchanged("corrupt")

	dqn, _ := dqnCheckpoint(t)
	if err := l.Load(bytes.NewReader(dqn)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "TD3") {
		t.Errorf("a DQN checkpoint: %v", err)
	}

	for name, mk := range map[string]func() *TD3{
		"config": func() *TD3 {
			o, _ := newCkTD3(t, TD3Config{Batch: 8, MaxAction: rigMaxA, Tau: 0.01}, buf, 1, "uniform")
			return o
		},
		"method": func() *TD3 { o, _ := newCkTD3(t, cfg, buf, 1, "pal"); return o },
		"loss": func() *TD3 {
			actor, critic := td3Nets(t, 3, 2, []int{8}, model.ReLU, 1)
			o, err := NewTD3(cfg, actor, critic, buf, sampler.Method{Name: "uniform", Selector: sampler.NewUniform(buf)}, nil) // Huber
			if err != nil {
				t.Fatal(err)
			}
			return o
		},
		"shape": func() *TD3 {
			actor, critic := td3Nets(t, 3, 2, []int{9}, model.ReLU, 1)
			o, err := NewTD3(cfg, actor, critic, buf, td3Method(t, "uniform", buf, nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			return o
		},
	} {
		o := mk()
		if err := o.Load(bytes.NewReader(data)); !errors.Is(err, ErrMismatch) {
			t.Errorf("other %s: Load = %v, want ErrMismatch", name, err)
		}
	}
	if err := l.Load(bytes.NewReader(data)); err != nil || l.Steps() != 3 || !sameState(td3State(src), td3State(l)) {
		t.Fatalf("a good checkpoint: %v (steps %d)", err, l.Steps())
	}
}
