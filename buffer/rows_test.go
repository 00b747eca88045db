package buffer

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
)

// rowConfigs covers the record layouts: CartPole's (48 bytes, padded to
// one line), every optional column (over a line, 8-byte fields), a record
// of exactly one line, one just over it, and a wide one copied by memmove.
func rowConfigs() map[string]Config {
	return map[string]Config{
		"cartpole":  {Capacity: 64, ObsDim: 4},
		"tiny":      {Capacity: 40, ObsDim: 1, Stripes: 4},
		"all":       {Capacity: 50, Stripes: 2, ObsDim: 3, Action: Continuous, ActionDim: 2, Episode: true, GlobalStep: true, ActorID: true, StateHash: true, Floats: []FloatColumn{{Name: "mean", Width: 2}, {Name: "std", Width: 1}}},
		"one line":  {Capacity: 33, ObsDim: 6},                // 16 + 48 bytes
		"just over": {Capacity: 33, ObsDim: 7, Episode: true}, // 8 + 20 + 56 = 84 bytes
		"floats":    {Capacity: 30, ObsDim: 6, Action: Continuous, ActionDim: 1, Floats: []FloatColumn{{Name: "x", Width: 2}}},
		"wide":      {Capacity: 20, ObsDim: 40, Action: Continuous, ActionDim: 17, StateHash: true},
	}
}

// TestRowLayout: a record's fields do not overlap, lie within the record,
// cover exactly itemBytes, 8-byte fields are 8-byte aligned, and the
// stride follows the documented rule (power of two up to a line, else a
// multiple of 8).
func TestRowLayout(t *testing.T) {
	for name, cfg := range rowConfigs() {
		c, err := cfg.validated()
		if err != nil {
			t.Fatal(err)
		}
		l := newRowLayout(&c)
		type span struct{ off, n int }
		var spans []span
		add := func(what string, off, n, align int) {
			if off < 0 {
				t.Fatalf("%s: column %s is enabled but has no offset", name, what)
			}
			if off%align != 0 {
				t.Fatalf("%s: column %s at offset %d is not %d-byte aligned", name, what, off, align)
			}
			spans = append(spans, span{off, n})
		}
		absent := func(what string, off int) {
			if off != -1 {
				t.Fatalf("%s: column %s is not enabled but has offset %d", name, what, off)
			}
		}
		add("reward", l.reward, 4, 4)
		add("discount", l.discount, 4, 4)
		add("flags", l.flags, 4, 4)
		add("obs", l.obs, 4*c.ObsDim, 4)
		add("next obs", l.nextObs, 4*c.ObsDim, 4)
		if c.Action == Discrete {
			add("action", l.action, 4, 4)
			absent("action vec", l.actionVec)
		} else {
			add("action vec", l.actionVec, 4*c.ActionDim, 4)
			absent("action", l.action)
		}
		for _, f := range []struct {
			on        bool
			name      string
			off, n, a int
		}{
			{c.Episode, "episode id", l.episodeID, 8, 8}, {c.Episode, "episode step", l.episodeStep, 4, 4},
			{c.GlobalStep, "global step", l.globalStep, 8, 8}, {c.ActorID, "actor id", l.actorID, 4, 4},
			{c.StateHash, "state hash", l.stateHash, 8, 8}, {c.StateHash, "next state hash", l.nextStateHash, 8, 8},
		} {
			if f.on {
				add(f.name, f.off, f.n, f.a)
			} else {
				absent(f.name, f.off)
			}
		}
		if len(l.floats) != len(c.Floats) {
			t.Fatalf("%s: %d float offsets for %d columns", name, len(l.floats), len(c.Floats))
		}
		for i, f := range c.Floats {
			add("floats "+f.Name, l.floats[i], 4*f.Width, 4)
		}
		sort.Slice(spans, func(i, j int) bool { return spans[i].off < spans[j].off })
		end := 0
		for _, s := range spans {
			if s.off < end {
				t.Fatalf("%s: fields overlap at offset %d: %v", name, s.off, spans)
			}
			end = s.off + s.n
		}
		if end != l.size || uint64(l.size) != itemBytes(&c) {
			t.Fatalf("%s: fields end at %d, size %d, itemBytes %d", name, end, l.size, itemBytes(&c))
		}
		switch {
		case l.size <= cacheLine:
			if l.stride < l.size || l.stride&(l.stride-1) != 0 || l.stride > cacheLine || !l.align || l.lines != 1 {
				t.Fatalf("%s: %d-byte record: stride %d, aligned %v, %d lines; want a power of two within one line", name, l.size, l.stride, l.align, l.lines)
			}
		default:
			if l.stride < l.size || l.stride%8 != 0 || l.stride-l.size >= 8 || l.align {
				t.Fatalf("%s: %d-byte record: stride %d, aligned %v; want the size rounded up to 8", name, l.size, l.stride, l.align)
			}
			if want := min((l.stride+cacheLine-1)/cacheLine+1, maxPrefetchLines); l.lines != want {
				t.Fatalf("%s: %d prefetch lines, want %d", name, l.lines, want)
			}
		}
		if got := recordBytes(&c); got != uint64(l.stride) {
			t.Fatalf("%s: recordBytes %d, stride %d", name, got, l.stride)
		}
		t.Logf("%s: %d bytes of fields, stride %d", name, l.size, l.stride)
	}
}

// TestRecordBytes pins the bytes per stored item of the benchmarks' and
// the runtime's configurations.
func TestRecordBytes(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want uint64
	}{
		{Config{Capacity: 1, ObsDim: 4}, 64},                                      // CartPole: 48 bytes of fields
		{Config{Capacity: 1, ObsDim: 3, Action: Continuous, ActionDim: 1}, 64},    // Pendulum: 40
		{Config{Capacity: 1, ObsDim: 1}, 32},                                      // 24
		{Config{Capacity: 1, ObsDim: 2, Action: Continuous, ActionDim: 1}, 32},    // exactly 32
		{Config{Capacity: 1, ObsDim: 7, Episode: true}, 88},                       // 84
		{Config{Capacity: 1, ObsDim: 100, Action: Continuous, ActionDim: 3}, 824}, // 12+800+12
	} {
		cc, err := c.cfg.validated()
		if err != nil {
			t.Fatal(err)
		}
		if got := recordBytes(&cc); got != c.want {
			t.Errorf("%+v: %d bytes per item (fields %d), want %d", c.cfg, got, itemBytes(&cc), c.want)
		}
	}
}

// TestRowsNeighboursIntact: inserting into one slot never changes another
// slot's fields (records share cache lines and, below 64 bytes, lines hold
// several records), every column reads back exactly, and an insert with the
// optional columns nil overwrites the old values with zeros.
func TestRowsNeighboursIntact(t *testing.T) {
	for name, cfg := range rowConfigs() {
		t.Run(name, func(t *testing.T) {
			b, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := b.cfg
			rng := rand.New(rand.NewPCG(7, 11))
			want := newColumns(&c, c.Capacity) // what each global slot must hold
			// Every insert goes to the next stripe's cursor: find the slot
			// each item lands in from its unique reward.
			fill := func(n int, optional bool) {
				tr := newColumns(&c, n)
				fillRandom(rng, reflect.ValueOf(tr).Elem())
				for i := range tr.Action {
					tr.Action[i] = int32(rng.IntN(1 << 20))
				}
				if !optional {
					tr.Flags, tr.EpisodeID, tr.EpisodeStep, tr.GlobalStep = nil, nil, nil, nil
					tr.ActorID, tr.StateHash, tr.NextStateHash, tr.Floats = nil, nil, nil, nil
				}
				if err := b.Insert(tr); err != nil {
					t.Fatal(err)
				}
				got := b.columns()
				for g := range c.Capacity {
					for i := range n {
						if got.Reward[g] == tr.Reward[i] {
							copyItem(want, g, tr, i, &c)
						}
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("after inserting %d items (optional columns %v): stored columns differ from what was inserted\ngot  %+v\nwant %+v", n, optional, got, want)
				}
			}
			for range 3 * c.Capacity / 2 {
				fill(1, true)
			}
			fill(3, true)
			fill(c.Capacity/c.Stripes, false) // a whole stripe, optional columns nil
			fill(5, true)
		})
	}
}

// fillRandom sets every element of every slice of v (a Transitions) to a
// distinct random non-zero value; Priority is left nil.
func fillRandom(rng *rand.Rand, v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		if v.Type().Field(i).Name == "Priority" {
			continue
		}
		if f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Slice {
			for k := range f.Len() {
				fillSlice(rng, f.Index(k))
			}
			continue
		}
		fillSlice(rng, f)
	}
}

func fillSlice(rng *rand.Rand, s reflect.Value) {
	for j := range s.Len() {
		e := s.Index(j)
		switch e.Kind() {
		case reflect.Float32:
			e.SetFloat(float64(float32(rng.Float64()*1e6 + 1)))
		case reflect.Int32, reflect.Int64:
			e.SetInt(rng.Int64N(1<<31-1) + 1)
		case reflect.Uint32, reflect.Uint64:
			e.SetUint(rng.Uint64N(1<<32-1) + 1)
		default:
			panic(fmt.Sprint("fillSlice: ", e.Kind()))
		}
	}
}

// copyItem copies item i of src (nil optional columns as zeros) into item g
// of dst (every column allocated).
func copyItem(dst *Transitions, g int, src *Transitions, i int, c *Config) {
	cp := func(d, s reflect.Value, w int) {
		for k := range w {
			if s.Len() == 0 {
				d.Index(g*w + k).SetZero()
			} else {
				d.Index(g*w + k).Set(s.Index(i*w + k))
			}
		}
	}
	dv, sv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for k := range dv.NumField() {
		name := dv.Type().Field(k).Name
		d, s := dv.Field(k), sv.Field(k)
		switch name {
		case "Priority":
		case "Floats":
			for x, f := range c.Floats {
				var col reflect.Value
				if s.Len() > 0 {
					col = s.Index(x)
				} else {
					col = reflect.ValueOf([]float32(nil))
				}
				cp(d.Index(x), col, f.Width)
			}
		case "Obs", "NextObs":
			cp(d, s, c.ObsDim)
		case "ActionVec":
			if d.Len() > 0 {
				cp(d, s, c.ActionDim)
			}
		default:
			if d.Len() > 0 {
				cp(d, s, 1)
			}
		}
	}
}

// TestCheckpointStreamsRecords: Save gathers each column from the records
// and Load from a stream of known length scatters it into them, so neither
// holds a columnar copy of the items: each allocates less than the items'
// fields (Capacity × 48 bytes here) beyond what it must (Load: the buffer
// itself and the leaves section it reads).
func TestCheckpointStreamsRecords(t *testing.T) {
	cfg := Config{Capacity: 1 << 16, ObsDim: 4}
	a := ckExercised(t, cfg, 1<<16+300, 5)
	fields := uint64(cfg.Capacity) * itemBytes(&a.cfg)
	var saveErr error
	saveAlloc := ckAllocated(func() { saveErr = a.Save(io.Discard) })
	if saveErr != nil {
		t.Fatal(saveErr)
	}
	if saveAlloc > fields/4 {
		t.Errorf("Save allocated %d bytes: a columnar copy (%d bytes of fields)?", saveAlloc, fields)
	}
	data := ckSave(t, a)
	mem, err := a.cfg.MemoryBytes()
	if err != nil {
		t.Fatal(err)
	}
	var b *Buffer
	loadAlloc := ckAllocated(func() { b, err = Load(bytes.NewReader(data)) })
	if err != nil {
		t.Fatal(err)
	}
	ckSameBuffer(t, a, b)
	if must := mem + 8*uint64(cfg.Capacity); loadAlloc > must+fields/4 {
		t.Errorf("Load allocated %d bytes, %d beyond the buffer and its leaves section: a columnar copy (%d bytes of fields)?", loadAlloc, loadAlloc-must, fields)
	}
	t.Logf("fields %d B; Save allocated %d B (output %d B); Load %d B for a %d-byte buffer", fields, saveAlloc, len(data), loadAlloc, mem)
}
