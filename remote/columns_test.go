package remote

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
	"github.com/apexrl/apex/buffer"
	"google.golang.org/protobuf/proto"
)

// layouts are the table layouts the codec tests run over: each action kind
// with every optional column, and each with none.
func layouts() map[string]buffer.Config {
	full := func(kind buffer.ActionKind) buffer.Config {
		c := buffer.Config{Capacity: 64, Stripes: 4, ObsDim: 3, Action: kind, Episode: true, GlobalStep: true,
			ActorID: true, StateHash: true, Floats: []buffer.FloatColumn{{Name: "mu", Width: 2}, {Name: "sigma", Width: 1}}}
		if kind == buffer.Discrete {
			c.NumActions = 4
		} else {
			c.ActionDim = 2
		}
		return c
	}
	return map[string]buffer.Config{
		"discrete-full":   full(buffer.Discrete),
		"continuous-full": full(buffer.Continuous),
		"discrete-bare":   {Capacity: 64, Stripes: 4, ObsDim: 4, Action: buffer.Discrete, NumActions: 2},
		"continuous-bare": {Capacity: 64, Stripes: 4, ObsDim: 2, Action: buffer.Continuous, ActionDim: 1},
	}
}

// randomTransitions makes n transitions of cfg with every column cfg
// stores (priorities included) filled from rng.
func randomTransitions(rng *rand.Rand, cfg buffer.Config, n int) *buffer.Transitions {
	f32 := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = rng.Float32()*2 - 1
		}
		return v
	}
	u64 := func() []uint64 {
		v := make([]uint64, n)
		for i := range v {
			v[i] = rng.Uint64()
		}
		return v
	}
	t := &buffer.Transitions{Obs: f32(n * cfg.ObsDim), NextObs: f32(n * cfg.ObsDim), Reward: f32(n), Discount: f32(n),
		Flags: make([]uint32, n), Priority: make([]float64, n)}
	for i := range n {
		t.Flags[i] = uint32(rng.IntN(4))
		t.Priority[i] = rng.Float64() + 0.1
	}
	if cfg.Action == buffer.Discrete {
		t.Action = make([]int32, n)
		for i := range t.Action {
			t.Action[i] = int32(rng.IntN(max(cfg.NumActions, 1)))
		}
	} else {
		t.ActionVec = f32(n * cfg.ActionDim)
	}
	if cfg.Episode {
		t.EpisodeID = u64()
		t.EpisodeStep = make([]int32, n)
		for i := range t.EpisodeStep {
			t.EpisodeStep[i] = int32(rng.IntN(1000))
		}
	}
	if cfg.GlobalStep {
		t.GlobalStep = make([]int64, n)
		for i := range t.GlobalStep {
			t.GlobalStep[i] = rng.Int64()
		}
	}
	if cfg.ActorID {
		t.ActorID = make([]int32, n)
		for i := range t.ActorID {
			t.ActorID[i] = rng.Int32()
		}
	}
	if cfg.StateHash {
		t.StateHash, t.NextStateHash = u64(), u64()
	}
	for _, f := range cfg.Floats {
		t.Floats = append(t.Floats, f32(n*f.Width))
	}
	return t
}

// wire encodes t and sends it through protobuf's marshalling.
func wire(t *testing.T, cfg buffer.Config, tr *buffer.Transitions) *replayv1.Columns {
	t.Helper()
	var c replayv1.Columns
	if err := EncodeTransitions(&c, cfg, tr); err != nil {
		t.Fatalf("EncodeTransitions: %v", err)
	}
	b, err := proto.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	var out replayv1.Columns
	if err := proto.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestColumnsRoundTrip(t *testing.T) {
	for name, cfg := range layouts() {
		t.Run(name, func(t *testing.T) {
			const seed = 7
			rng := rand.New(rand.NewPCG(seed, 1))
			for _, n := range []int{0, 1, 5, 33} {
				want := randomTransitions(rng, cfg, n)
				var got buffer.Transitions
				if err := DecodeTransitions(&got, cfg, wire(t, cfg, want)); err != nil {
					t.Fatalf("seed %d, %d rows: DecodeTransitions: %v", seed, n, err)
				}
				if !sameColumns(&got, want) {
					t.Fatalf("seed %d, %d rows: round trip differs:\n got %+v\nwant %+v", seed, n, got, *want)
				}
			}
		})
	}
}

// TestColumnsOptionalAbsent: a batch without its optional columns travels
// with them empty and decodes with them empty.
func TestColumnsOptionalAbsent(t *testing.T) {
	cfg := layouts()["discrete-full"]
	rng := rand.New(rand.NewPCG(3, 3))
	tr := randomTransitions(rng, cfg, 4)
	tr.Flags, tr.EpisodeID, tr.EpisodeStep, tr.GlobalStep, tr.ActorID = nil, nil, nil, nil, nil
	tr.StateHash, tr.NextStateHash, tr.Priority, tr.Floats = nil, nil, nil, nil
	c := wire(t, cfg, tr)
	if len(c.Floats) != len(cfg.Floats) {
		t.Fatalf("encoded %d floats entries, want %d (one per table column)", len(c.Floats), len(cfg.Floats))
	}
	var got buffer.Transitions
	if err := DecodeTransitions(&got, cfg, c); err != nil {
		t.Fatal(err)
	}
	if len(got.Flags)+len(got.EpisodeID)+len(got.Priority)+len(got.StateHash)+len(got.Floats[0]) != 0 {
		t.Fatalf("absent columns decoded non-empty: %+v", got)
	}
	if !reflect.DeepEqual(got.Obs, tr.Obs) || !reflect.DeepEqual(got.Action, tr.Action) {
		t.Fatal("required columns differ")
	}
	// The decoded batch is a valid insert.
	b, err := buffer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Insert(&got); err != nil {
		t.Fatalf("Insert of the decoded batch: %v", err)
	}
}

// TestEncodeBatch: rows gathered from a buffer encode to the columns that
// were inserted (flags included, priority left out), and a prefix of the
// batch encodes just those rows.
func TestEncodeBatch(t *testing.T) {
	for name, cfg := range layouts() {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, 2))
			const n = 10
			tr := randomTransitions(rng, cfg, n)
			b, err := buffer.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Insert(tr); err != nil {
				t.Fatal(err)
			}
			bt, err := b.NewBatch(n)
			if err != nil {
				t.Fatal(err)
			}
			w := b.NewWatcher()
			row := 0
			w.Poll(func(m buffer.Meta) {
				if !b.GatherRef(bt, row, m.Ref) {
					t.Fatalf("GatherRef(%v) failed", m.Ref)
				}
				row++
			})
			// Stripes reorder rows: compare by episode id / obs as a set
			// keyed on obs[0].
			for _, rows := range []int{n, 3} {
				var c replayv1.Columns
				if err := EncodeBatch(&c, cfg, bt, rows); err != nil {
					t.Fatal(err)
				}
				if len(c.Priority) != 0 || c.Rows != uint32(rows) {
					t.Fatalf("rows %d priority %d bytes: want rows %d, no priority", c.Rows, len(c.Priority), rows)
				}
				var got buffer.Transitions
				if err := DecodeTransitions(&got, cfg, &c); err != nil {
					t.Fatal(err)
				}
				for i := range rows {
					j := findRow(tr, got.Obs[i*cfg.ObsDim])
					if j < 0 || got.Flags[i] != tr.Flags[j] || got.Reward[i] != tr.Reward[j] {
						t.Fatalf("row %d does not match an inserted row (found %d)", i, j)
					}
				}
			}
			var c replayv1.Columns
			if err := EncodeBatch(&c, cfg, bt, n+1); !errors.Is(err, ErrColumns) {
				t.Fatalf("EncodeBatch of %d rows from %d: %v, want ErrColumns", n+1, n, err)
			}
		})
	}
}

func findRow(t *buffer.Transitions, obs0 float32) int {
	d := len(t.Obs) / t.Len()
	for j := range t.Len() {
		if t.Obs[j*d] == obs0 {
			return j
		}
	}
	return -1
}

// sameColumns compares two Transitions treating nil and empty columns as
// equal.
func sameColumns(a, b *buffer.Transitions) bool {
	eq := func(x, y any) bool {
		vx, vy := reflect.ValueOf(x), reflect.ValueOf(y)
		if vx.Len() == 0 && vy.Len() == 0 {
			return true
		}
		return reflect.DeepEqual(x, y)
	}
	if len(a.Floats) != len(b.Floats) {
		return false
	}
	for i := range a.Floats {
		if !eq(a.Floats[i], b.Floats[i]) {
			return false
		}
	}
	return eq(a.Obs, b.Obs) && eq(a.NextObs, b.NextObs) && eq(a.Action, b.Action) && eq(a.ActionVec, b.ActionVec) &&
		eq(a.Reward, b.Reward) && eq(a.Discount, b.Discount) && eq(a.Flags, b.Flags) && eq(a.EpisodeID, b.EpisodeID) &&
		eq(a.EpisodeStep, b.EpisodeStep) && eq(a.GlobalStep, b.GlobalStep) && eq(a.ActorID, b.ActorID) &&
		eq(a.StateHash, b.StateHash) && eq(a.NextStateHash, b.NextStateHash) && eq(a.Priority, b.Priority)
}

func TestDecodeMalformed(t *testing.T) {
	disc, cont := layouts()["discrete-full"], layouts()["continuous-bare"]
	rng := rand.New(rand.NewPCG(5, 5))
	valid := func(cfg buffer.Config) *replayv1.Columns { return wire(t, cfg, randomTransitions(rng, cfg, 3)) }
	cases := []struct {
		name   string
		cfg    buffer.Config
		mutate func(c *replayv1.Columns)
		want   []string // substrings of the error
	}{
		{"obs short", disc, func(c *replayv1.Columns) { c.Obs = c.Obs[:len(c.Obs)-1] }, []string{"obs", "35 bytes", "want 36"}},
		{"next_obs missing", disc, func(c *replayv1.Columns) { c.NextObs = nil }, []string{"next_obs", "required", "want 36"}},
		{"action missing", disc, func(c *replayv1.Columns) { c.Action = nil }, []string{"action", "required", "want 12"}},
		{"action_vec in a discrete table", disc, func(c *replayv1.Columns) { c.ActionVec = make([]byte, 12) }, []string{"action_vec", "not stored", "12 bytes"}},
		{"action in a continuous table", cont, func(c *replayv1.Columns) { c.Action = make([]byte, 12) }, []string{"column action ", "not stored"}},
		{"action_vec missing", cont, func(c *replayv1.Columns) { c.ActionVec = nil }, []string{"action_vec", "required"}},
		{"reward long", disc, func(c *replayv1.Columns) { c.Reward = append(c.Reward, 0, 0, 0, 0) }, []string{"reward", "16 bytes", "want 12"}},
		{"discount missing", disc, func(c *replayv1.Columns) { c.Discount = nil }, []string{"discount", "required"}},
		{"flags odd", disc, func(c *replayv1.Columns) { c.Flags = c.Flags[:5] }, []string{"flags", "5 bytes", "want 12"}},
		{"episode_id short", disc, func(c *replayv1.Columns) { c.EpisodeId = c.EpisodeId[:8] }, []string{"episode_id", "want 24"}},
		{"episode_step long", disc, func(c *replayv1.Columns) { c.EpisodeStep = make([]byte, 16) }, []string{"episode_step", "want 12"}},
		{"global_step short", disc, func(c *replayv1.Columns) { c.GlobalStep = c.GlobalStep[:23] }, []string{"global_step", "want 24"}},
		{"actor_id short", disc, func(c *replayv1.Columns) { c.ActorId = c.ActorId[:4] }, []string{"actor_id", "want 12"}},
		{"state_hash short", disc, func(c *replayv1.Columns) { c.StateHash = c.StateHash[:1] }, []string{"state_hash", "want 24"}},
		{"next_state_hash short", disc, func(c *replayv1.Columns) { c.NextStateHash = c.NextStateHash[:16] }, []string{"next_state_hash", "want 24"}},
		{"priority short", disc, func(c *replayv1.Columns) { c.Priority = c.Priority[:8] }, []string{"priority", "want 24"}},
		{"episode_id in a table without", cont, func(c *replayv1.Columns) { c.EpisodeId = make([]byte, 24) }, []string{"episode_id", "not stored"}},
		{"global_step in a table without", cont, func(c *replayv1.Columns) { c.GlobalStep = make([]byte, 24) }, []string{"global_step", "not stored"}},
		{"actor_id in a table without", cont, func(c *replayv1.Columns) { c.ActorId = make([]byte, 12) }, []string{"actor_id", "not stored"}},
		{"state_hash in a table without", cont, func(c *replayv1.Columns) { c.StateHash = make([]byte, 24) }, []string{"state_hash", "not stored"}},
		{"floats missing", disc, func(c *replayv1.Columns) { c.Floats = nil }, []string{"0 floats", "has 2"}},
		{"floats extra", disc, func(c *replayv1.Columns) { c.Floats = append(c.Floats, nil) }, []string{"3 floats", "has 2"}},
		{"floats in a table without", cont, func(c *replayv1.Columns) { c.Floats = [][]byte{make([]byte, 12)} }, []string{"1 floats", "has 0"}},
		{"floats wrong width", disc, func(c *replayv1.Columns) { c.Floats[0] = c.Floats[0][:12] }, []string{"floats[mu]", "12 bytes", "want 24"}},
		{"rows above the columns", disc, func(c *replayv1.Columns) { c.Rows = 4 }, []string{"obs", "36 bytes", "want 48"}},
		{"rows huge", disc, func(c *replayv1.Columns) { c.Rows = 1<<32 - 1 }, []string{"obs", "want"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid(tc.cfg)
			tc.mutate(c)
			var dst buffer.Transitions
			err := DecodeTransitions(&dst, tc.cfg, c)
			if !errors.Is(err, ErrColumns) {
				t.Fatalf("DecodeTransitions: %v, want ErrColumns", err)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
		})
	}
	if err := DecodeTransitions(nil, disc, valid(disc)); !errors.Is(err, ErrColumns) {
		t.Errorf("nil dst: %v", err)
	}
}

func TestEncodeMalformed(t *testing.T) {
	cfg := layouts()["discrete-full"]
	rng := rand.New(rand.NewPCG(9, 9))
	cases := []struct {
		name   string
		mutate func(tr *buffer.Transitions)
		want   string
	}{
		{"obs short", func(tr *buffer.Transitions) { tr.Obs = tr.Obs[:1] }, "column obs has 1 values, want 9"},
		{"action_vec in a discrete table", func(tr *buffer.Transitions) { tr.ActionVec = []float32{1} }, "action_vec is not stored"},
		{"action missing", func(tr *buffer.Transitions) { tr.Action = nil }, "column action has 0 values, want 3"},
		{"floats count", func(tr *buffer.Transitions) { tr.Floats = tr.Floats[:1] }, "1 float columns given, the table has 2"},
		{"priority short", func(tr *buffer.Transitions) { tr.Priority = tr.Priority[:2] }, "column priority has 2 values, want 3"},
	}
	for _, tc := range cases {
		tr := randomTransitions(rng, cfg, 3)
		tc.mutate(tr)
		var c replayv1.Columns
		err := EncodeTransitions(&c, cfg, tr)
		if !errors.Is(err, ErrColumns) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrColumns naming %q", tc.name, err, tc.want)
		}
	}
}

// TestColumnsPortable: the value-by-value path (big-endian machines)
// writes and reads the same bytes as the bulk one.
func TestColumnsPortable(t *testing.T) {
	cfg := layouts()["continuous-full"]
	tr := randomTransitions(rand.New(rand.NewPCG(4, 4)), cfg, 6)
	var bulk, slow replayv1.Columns
	if err := EncodeTransitions(&bulk, cfg, tr); err != nil {
		t.Fatal(err)
	}
	nativeLE = false
	defer func() { nativeLE = true }()
	if err := EncodeTransitions(&slow, cfg, tr); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&bulk, &slow) {
		t.Fatal("portable encoding differs from the bulk one")
	}
	var got buffer.Transitions
	if err := DecodeTransitions(&got, cfg, &slow); err != nil {
		t.Fatal(err)
	}
	if !sameColumns(&got, tr) {
		t.Fatal("portable decoding differs")
	}
}

// TestColumnsNoAlloc: encoding into and decoding out of reused storage
// allocates nothing.
func TestColumnsNoAlloc(t *testing.T) {
	cfg := layouts()["discrete-full"]
	tr := randomTransitions(rand.New(rand.NewPCG(1, 1)), cfg, 64)
	var c replayv1.Columns
	var dst buffer.Transitions
	if err := EncodeTransitions(&c, cfg, tr); err != nil {
		t.Fatal(err)
	}
	if err := DecodeTransitions(&dst, cfg, &c); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(50, func() {
		if err := EncodeTransitions(&c, cfg, tr); err != nil {
			t.Fatal(err)
		}
		if err := DecodeTransitions(&dst, cfg, &c); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per encode+decode, want 0", allocs)
	}
}

func TestKeys(t *testing.T) {
	for _, r := range []buffer.Ref{{}, {Slot: 1, Gen: 2}, {Slot: 1<<32 - 1, Gen: 1<<24 - 2}, {Slot: 7, Gen: 1<<32 - 1}} {
		k := Key(r)
		if RefOf(k) != r {
			t.Errorf("RefOf(Key(%v)) = %v", r, RefOf(k))
		}
		if uint32(k) != r.Slot || uint32(k>>32) != r.Gen {
			t.Errorf("Key(%v) = %#x: want slot in bits 0-31, gen in 32-63", r, k)
		}
	}
	refs := []buffer.Ref{{Slot: 3, Gen: 4}, {Slot: 5, Gen: 6}}
	if got := AppendRefs(nil, AppendKeys(nil, refs)); !reflect.DeepEqual(got, refs) {
		t.Errorf("AppendRefs(AppendKeys(%v)) = %v", refs, got)
	}
}

// FuzzDecodeTransitions: any bytes, parsed as Columns, decode or fail with
// ErrColumns, never panic; a successful decode re-encodes to columns of
// the same lengths.
func FuzzDecodeTransitions(f *testing.F) {
	rng := rand.New(rand.NewPCG(2, 2))
	ls := layouts()
	names := []string{"continuous-bare", "continuous-full", "discrete-bare", "discrete-full"}
	for _, name := range names {
		cfg := ls[name]
		var c replayv1.Columns
		if err := EncodeTransitions(&c, cfg, randomTransitions(rng, cfg, 2)); err != nil {
			f.Fatal(err)
		}
		b, _ := proto.Marshal(&c)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c replayv1.Columns
		if proto.Unmarshal(data, &c) != nil {
			return
		}
		for _, name := range names {
			cfg := ls[name]
			var dst buffer.Transitions
			err := DecodeTransitions(&dst, cfg, &c)
			if err != nil {
				if !errors.Is(err, ErrColumns) {
					t.Fatalf("%s: error %v does not wrap ErrColumns", name, err)
				}
				continue
			}
			if dst.Len() != int(c.Rows) && c.Rows != 0 {
				t.Fatalf("%s: decoded %d rows of %d", name, dst.Len(), c.Rows)
			}
			var back replayv1.Columns
			if err := EncodeTransitions(&back, cfg, &dst); err != nil {
				t.Fatalf("%s: re-encoding a decoded batch: %v", name, err)
			}
			if len(back.Obs) != len(c.Obs) || len(back.Priority) != len(c.Priority) || len(back.Floats) != len(c.Floats) {
				t.Fatalf("%s: re-encoded lengths differ", name)
			}
		}
	})
}
