package learner

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apexrl/apex/checkpoint"
	"github.com/apexrl/apex/internal/cktest"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// allocated returns the bytes f allocated (runtime.MemStats.TotalAlloc,
// every goroutine's: callers keep the test single-threaded).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// loadBudget is the most a Load may allocate for an input of n bytes.
func loadBudget(n int) uint64 { return 64*uint64(n) + 64<<20 }

// fixFrames returns a copy of a learner checkpoint with every section's
// checksums recomputed (the learner's, and each network's and optimizer's
// nested in it), so that a fuzzer's mutations get past the checksums.
func fixFrames(data []byte) []byte { return cktest.Reseal(data) }

// tailLen is the number of bytes after the last value of a small learner
// checkpoint: the last optimizer's chunk checksum and end marker, then the
// learner's (everything fits one chunk).
const tailLen = 4 + 16 + 4 + 16

// netFrame is a network section with the given JSON header and count zero
// values, checksums included: what an editor that re-frames checkpoints
// could write.
func netFrame(header string, count int) []byte {
	var b bytes.Buffer
	checkpoint.Save(&b, "model.Net", 1, func(w io.Writer) error {
		p := binary.LittleEndian.AppendUint32(nil, uint32(len(header)))
		p = append(p, header...)
		p = binary.LittleEndian.AppendUint64(p, uint64(count))
		_, err := w.Write(append(p, make([]byte, 8*count)...))
		return err
	})
	return b.Bytes()
}

// splitCk splits a learner checkpoint into its kind, its JSON header and
// the rest of its payload (the nested sections).
func splitCk(t testing.TB, ck []byte) (kind string, js, rest []byte) {
	t.Helper()
	r := checkpoint.NewReader(bytes.NewReader(ck))
	h, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	p, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint32(p)
	return h.Kind, p[4 : 4+n], p[4+n:]
}

// joinCk builds a learner checkpoint (valid checksums) from its parts.
func joinCk(kind string, js, rest []byte) []byte {
	var b bytes.Buffer
	checkpoint.Save(&b, kind, ckVersion, func(w io.Writer) error {
		p := binary.LittleEndian.AppendUint32(nil, uint32(len(js)))
		p = append(append(p, js...), rest...)
		_, err := w.Write(p)
		return err
	})
	return b.Bytes()
}

// fuzzDQN is a small DQN learner after a few steps.
func fuzzDQN(t testing.TB, netSeed uint64) *DQN {
	t.Helper()
	netCfg := model.Config{In: 3, Hidden: []int{6}, Out: 2, Dueling: true}
	buf := newBuffer(t, 128, netCfg.In)
	fillRandom(t, buf, rand.New(rand.NewPCG(1, 1)), 100, netCfg.In, netCfg.Out)
	net, err := model.NewNet(netCfg, rand.New(rand.NewPCG(netSeed, 0)))
	if err != nil {
		t.Fatal(err)
	}
	per, err := sampler.NewPER(buf, sampler.DefaultPERConfig(100))
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewDQN(DQNConfig{Batch: 8, TargetEvery: 3, Seed: 2}, net, buf, method("per", per, per), new(model.Store))
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := l.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// fuzzTD3 is a small TD3 learner (LAP, or ReF-ER when refer) after a few
// steps.
func fuzzTD3(t testing.TB, refer bool, netSeed uint64) *TD3 {
	t.Helper()
	const nS, nA = 3, 2
	var l *TD3
	var err error
	if refer {
		buf := referBuffer(t, 256, nS, nA)
		fillEpisodes(t, buf, rand.New(rand.NewPCG(7, 3)), 0, 8, 20)
		actor, critic := td3Nets(t, nS, nA, []int{4}, model.Tanh, netSeed)
		m := referMethod(t, buf, sampler.REFERConfig{TotalSteps: 100})
		m.Loss = model.Loss{Kind: model.MSE}
		l, err = NewTD3(TD3Config{Batch: 8, MaxAction: rigMaxA, Seed: 3}, actor, critic, buf, m, nil)
	} else {
		buf := contBuffer(t, 128, nS, nA, 0)
		fillContinuous(t, buf, rand.New(rand.NewPCG(1, 1)), 100, rigMaxA)
		actor, critic := td3Nets(t, nS, nA, []int{4}, model.ReLU, netSeed)
		l, err = NewTD3(TD3Config{Batch: 8, PolicyDelay: 2, MaxAction: rigMaxA, Seed: 5}, actor, critic, buf, td3Method(t, "lap", buf, nil), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	td3Steps(t, l, 3)
	return l
}

// fuzzVRACER is a small V-RACER learner after a few steps.
func fuzzVRACER(t testing.TB) *VRACER {
	t.Helper()
	l := newTestVRACER(t, VRACERConfig{Batch: 8, Seed: 8}, sampler.REFERConfig{TotalSteps: 50, BetaRate: 0.2}, 3, 1, []int{4})
	for range 3 {
		if err := l.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// checkLoad runs one fuzz input through load: no panic, at most
// loadBudget allocated, an error wraps ErrCorrupt or ErrMismatch and
// leaves the learner's state (its Save) unchanged, and a learner that
// loaded saves a checkpoint that loads again and re-saves to the same
// bytes.
func checkLoad(t *testing.T, data []byte, save func(*bytes.Buffer) error, load func([]byte) error) {
	var before bytes.Buffer
	if err := save(&before); err != nil {
		t.Fatal(err)
	}
	var err error
	alloc := allocated(func() { err = load(data) })
	if alloc > loadBudget(len(data)) {
		t.Fatalf("Load allocated %d bytes for %d input bytes", alloc, len(data))
	}
	var after bytes.Buffer
	if serr := save(&after); serr != nil {
		t.Fatalf("Save after Load (%v): %v", err, serr)
	}
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrMismatch) {
			t.Fatalf("Load: %v wraps neither ErrCorrupt nor ErrMismatch", err)
		}
		if !bytes.Equal(before.Bytes(), after.Bytes()) {
			t.Fatalf("a failed Load (%v) changed the learner", err)
		}
		return
	}
	if err := load(after.Bytes()); err != nil {
		t.Fatalf("the re-saved checkpoint does not load: %v", err)
	}
	var again bytes.Buffer
	if err := save(&again); err != nil {
		t.Fatal(err)
	}
	if !sameCheckpoint(t, after.Bytes(), again.Bytes()) {
		t.Fatal("Save∘Load is not the identity on a saved checkpoint")
	}
}

// sameCheckpoint reports whether two learner checkpoints hold the same
// state but for the publish counter (each Load publishes once).
func sameCheckpoint(t *testing.T, a, b []byte) bool {
	_, jsa, ra := splitCk(t, a)
	_, jsb, rb := splitCk(t, b)
	if !bytes.Equal(ra, rb) {
		return false
	}
	var ja, jb map[string]any
	if err := json.Unmarshal(jsa, &ja); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(jsb, &jb); err != nil {
		t.Fatal(err)
	}
	delete(ja["stats"].(map[string]any), "publishes")
	delete(jb["stats"].(map[string]any), "publishes")
	return reflect.DeepEqual(ja, jb)
}

// addSeeds adds a real checkpoint, a truncation, and header and network
// edits with their checksums recomputed.
func addSeeds(f *testing.F, ck []byte, extra ...any) {
	add := func(data []byte, fix bool) { f.Add(append([]any{data, fix}, extra...)...) }
	add(ck, false)
	add(ck, true)
	add(ck[:len(ck)*2/3], false)
	add(bytes.Replace(ck, []byte(`"steps":`), []byte(`"steps":1`), 1), true)
	add(bytes.Replace(ck, []byte(`"hidden":[`), []byte(`"hidden":[9`), 1), true)
	nan := slices.Clone(ck)
	binary.LittleEndian.PutUint64(nan[len(nan)-tailLen-8:], math.Float64bits(math.NaN()))
	add(nan, true)
}

func FuzzDQNLoad(f *testing.F) {
	l := fuzzDQN(f, 1)
	var ck bytes.Buffer
	if err := l.Save(&ck); err != nil {
		f.Fatal(err)
	}
	addSeeds(f, ck.Bytes())
	target := fuzzDQN(f, 9)
	if err := target.Load(bytes.NewReader(ck.Bytes())); err != nil {
		f.Fatalf("the real checkpoint does not load: %v", err)
	}
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = fixFrames(data)
		}
		checkLoad(t, data, func(b *bytes.Buffer) error { return target.Save(b) },
			func(d []byte) error { return target.Load(bytes.NewReader(d)) })
	})
}

func FuzzTD3Load(f *testing.F) {
	var targets [2]*TD3
	for i, refer := range []bool{false, true} {
		var ck bytes.Buffer
		if err := fuzzTD3(f, refer, 1).Save(&ck); err != nil {
			f.Fatal(err)
		}
		addSeeds(f, ck.Bytes(), refer)
		targets[i] = fuzzTD3(f, refer, 9)
		if err := targets[i].Load(bytes.NewReader(ck.Bytes())); err != nil {
			f.Fatalf("the real checkpoint does not load: %v", err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, fix, refer bool) {
		if fix {
			data = fixFrames(data)
		}
		target := targets[0]
		if refer {
			target = targets[1]
		}
		checkLoad(t, data, func(b *bytes.Buffer) error { return target.Save(b) },
			func(d []byte) error { return target.Load(bytes.NewReader(d)) })
	})
}

func FuzzVRACERLoad(f *testing.F) {
	var ck bytes.Buffer
	if err := fuzzVRACER(f).Save(&ck); err != nil {
		f.Fatal(err)
	}
	addSeeds(f, ck.Bytes())
	target := fuzzVRACER(f)
	if err := target.Load(bytes.NewReader(ck.Bytes())); err != nil {
		f.Fatalf("the real checkpoint does not load: %v", err)
	}
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = fixFrames(data)
		}
		checkLoad(t, data, func(b *bytes.Buffer) error { return target.Save(b) },
			func(d []byte) error { return target.Load(bytes.NewReader(d)) })
	})
}

// TestLoadRefusesNonFiniteState: a learner checkpoint holding a NaN
// parameter or a NaN, infinite or negative Adam second moment is refused
// with ErrCorrupt naming the part and the value (a NaN optimizer state
// used to load, and the run then failed at its first step as if it had
// diverged); the learner is left as it was.
func TestLoadRefusesNonFiniteState(t *testing.T) {
	src := fuzzDQN(t, 1)
	src.net.Params()[5] = math.NaN()
	var ck bytes.Buffer
	if err := src.Save(&ck); err != nil {
		t.Fatalf("Save of a diverged learner (a failed run's diagnostic checkpoint): %v", err)
	}
	dst := fuzzDQN(t, 9)
	before := params(dst.net)
	err := dst.Load(bytes.NewReader(ck.Bytes()))
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, model.ErrNonFinite) || !strings.Contains(err.Error(), "online network") ||
		!strings.Contains(err.Error(), "params[5] ("+src.net.Where(5)+") is NaN") {
		t.Errorf("Load of a NaN network: %v", err)
	}
	if !slices.Equal(before, dst.net.Params()) {
		t.Error("a refused Load changed the network")
	}

	good := fuzzDQN(t, 1)
	ck.Reset()
	if err := good.Save(&ck); err != nil {
		t.Fatal(err)
	}
	n := good.adam.Len()
	for _, c := range []struct {
		v    float64
		want string
	}{
		{math.NaN(), "is NaN"}, {math.Inf(1), "is +Inf"}, {-1, "is -1 (must be >= 0)"},
	} {
		// The optimizer is the last frame: its last value is v[n-1].
		bad := slices.Clone(ck.Bytes())
		binary.LittleEndian.PutUint64(bad[len(bad)-tailLen-8:], math.Float64bits(c.v))
		bad = fixFrames(bad)
		err := dst.Load(bytes.NewReader(bad))
		want := "Adam second moment v[" + strconv.Itoa(n-1) + "] " + c.want
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "optimizer") || !strings.Contains(err.Error(), want) {
			t.Errorf("Load with v[%d] = %v: %v, want ErrCorrupt saying %q", n-1, c.v, err, want)
		}
	}
}

// TestLoadRefusesHugeNetworkHeader: a learner checkpoint whose network
// frame was replaced by one declaring enormous hidden layers (checksums
// recomputed) is refused quickly, without building the network.
func TestLoadRefusesHugeNetworkHeader(t *testing.T) {
	var ck bytes.Buffer
	if err := fuzzDQN(t, 1).Save(&ck); err != nil {
		t.Fatal(err)
	}
	kind, js, rest := splitCk(t, ck.Bytes())
	for _, c := range []struct {
		header string
		count  int
		want   string
	}{
		{`{"config":{"in":3,"hidden":[16000,16000],"out":2,"dueling":true}}`, 2, "2 values stored, want"},
		{`{"config":{"in":3,"hidden":[100000000,100000000],"out":2}}`, 0, "more than 268435456 parameters"},
	} {
		data := joinCk(kind, js, netFrame(c.header, c.count))
		dst := fuzzDQN(t, 9)
		var err error
		alloc := allocated(func() { err = dst.Load(bytes.NewReader(data)) })
		if !errors.Is(err, ErrCorrupt) || !errors.Is(err, model.ErrCorrupt) || !strings.Contains(err.Error(), "online network") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load: %v, want ErrCorrupt saying %q", err, c.want)
		}
		if alloc > 4<<20 {
			t.Errorf("Load allocated %d bytes to refuse a %d-byte checkpoint", alloc, len(data))
		}
	}
	// Counters no run could produce.
	for _, c := range []struct{ from, to, want string }{
		{`"version":`, `"version":9999`, "stats.version = 9999"},
		{`"steps_ns":`, `"steps_ns":-`, "negative duration"},
		{`"sum_td2":`, `"sum_td2":-`, "negative sum"},
	} {
		edited := strings.Replace(string(js), c.from, c.to, 1)
		if edited == string(js) {
			t.Fatalf("no %q in the header", c.from)
		}
		err := fuzzDQN(t, 9).Load(bytes.NewReader(joinCk(kind, []byte(edited), rest)))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("edit %s → %s: %v, want ErrCorrupt saying %q", c.from, c.to, err, c.want)
		}
	}
}
