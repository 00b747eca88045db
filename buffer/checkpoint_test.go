package buffer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"

	"github.com/apexrl/apex/checkpoint"
	"github.com/apexrl/apex/internal/cktest"
)

// ---- helpers ----

// ckTransitions fills every column cfg enables with n random rows.
func ckTransitions(cfg Config, n int, rng *rand.Rand) *Transitions {
	fl := func(k int) []float32 {
		s := make([]float32, k)
		for i := range s {
			s[i] = rng.Float32()*2 - 1
		}
		return s
	}
	t := &Transitions{
		Obs:      fl(n * cfg.ObsDim),
		NextObs:  fl(n * cfg.ObsDim),
		Reward:   fl(n),
		Discount: fl(n),
		Flags:    make([]uint32, n),
	}
	for i := range t.Flags {
		t.Flags[i] = uint32(rng.IntN(4))
	}
	if cfg.Action == Discrete {
		t.Action = make([]int32, n)
		na := max(cfg.NumActions, 1)
		for i := range t.Action {
			t.Action[i] = int32(rng.IntN(na))
		}
	} else {
		t.ActionVec = fl(n * cfg.ActionDim)
	}
	if cfg.Episode {
		t.EpisodeID = make([]uint64, n)
		t.EpisodeStep = make([]int32, n)
		for i := range n {
			t.EpisodeID[i], t.EpisodeStep[i] = rng.Uint64(), rng.Int32()
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
		t.StateHash = make([]uint64, n)
		t.NextStateHash = make([]uint64, n)
		for i := range n {
			t.StateHash[i], t.NextStateHash[i] = rng.Uint64(), rng.Uint64()
		}
	}
	for _, f := range cfg.Floats {
		t.Floats = append(t.Floats, fl(n*f.Width))
	}
	return t
}

// ckPriorities draws priorities including zeros, tiny values and values
// above MaxPriority (clamped).
func ckPriorities(rng *rand.Rand, n int, maxP float64) []float64 {
	p := make([]float64, n)
	for i := range p {
		switch rng.IntN(10) {
		case 0:
			p[i] = 0
		case 1:
			p[i] = maxP * 3
		case 2:
			p[i] = 1e-12
		default:
			p[i] = rng.Float64() * maxP / 4
		}
	}
	return p
}

// ckExercise inserts about n items into b in random batches, sampling,
// writing priorities back (some stale) and gathering along the way, so
// every counter moves.
func ckExercise(t testing.TB, b *Buffer, n int, rng *rand.Rand) {
	t.Helper()
	cfg := b.Config()
	var pending []Ref
	for done := 0; done < n; {
		k := min(1+rng.IntN(37), n-done)
		tr := ckTransitions(cfg, k, rng)
		if rng.IntN(3) == 0 {
			tr.Priority = ckPriorities(rng, k, cfg.MaxPriority)
		}
		if err := b.Insert(tr); err != nil {
			t.Fatal(err)
		}
		done += k
		if sz := b.Size(); sz > 0 && rng.IntN(2) == 0 {
			bt := mustBatch(t, b, min(sz, 8))
			var err error
			if b.TotalPriority() > 0 && rng.IntN(3) > 0 {
				err = b.Sample(rng, bt)
			} else {
				err = b.SampleUniform(rng, bt)
			}
			if err != nil {
				t.Fatal(err)
			}
			pending = append(pending, bt.Refs...)
		}
		if len(pending) > 0 && rng.IntN(3) == 0 {
			if _, err := b.UpdatePriorities(pending, ckPriorities(rng, len(pending), cfg.MaxPriority)); err != nil {
				t.Fatal(err)
			}
			g := mustBatch(t, b, 1)
			b.GatherRef(g, 0, pending[0])
			pending = pending[:0]
		}
	}
}

func ckExercised(t testing.TB, cfg Config, n int, seed uint64) *Buffer {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ckExercise(t, b, n, rand.New(rand.NewPCG(seed, 7)))
	return b
}

func ckSave(t testing.TB, b *Buffer) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := b.Save(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func ckLoad(t testing.TB, data []byte) *Buffer {
	t.Helper()
	b, err := Load(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ckHideLen hides a reader's Len and Seek methods, so Load takes the path for
// streams of unknown length.
type ckHideLen struct{ r io.Reader }

func (h ckHideLen) Read(p []byte) (int, error) { return h.r.Read(p) }

// ckColumnBytes returns each column's in-memory bytes, by name.
func ckColumnBytes(t testing.TB, b *Buffer) map[string][]byte {
	t.Helper()
	cols, err := b.ckColumns(b.columns())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, c := range cols {
		var v []byte
		switch p := c.ptr.(type) {
		case *[]float32:
			v = wordBytes(*p)
		case *[]int32:
			v = wordBytes(*p)
		case *[]uint32:
			v = wordBytes(*p)
		case *[]uint64:
			v = wordBytes(*p)
		case *[]int64:
			v = wordBytes(*p)
		}
		m[c.name] = bytes.Clone(v)
	}
	return m
}

func ckLoadAll(s []atomic.Uint64) []uint64 {
	out := make([]uint64, len(s))
	for i := range s {
		out[i] = s[i].Load()
	}
	return out
}

// ckSameBuffer asserts that got is an exact copy of want: config, counters,
// every tree node (got's were rebuilt, want's maintained incrementally),
// every column, and identical checkpoints.
func ckSameBuffer(t *testing.T, want, got *Buffer) {
	t.Helper()
	if err := got.CheckInvariants(); err != nil {
		t.Fatalf("loaded buffer: %v", err)
	}
	if !reflect.DeepEqual(want.Config(), got.Config()) {
		t.Fatalf("config: got %+v, want %+v", got.Config(), want.Config())
	}
	if ws, gs := want.Stats(), got.Stats(); ws != gs {
		t.Fatalf("stats:\n got %+v\nwant %+v", gs, ws)
	}
	if want.Size() != got.Size() || want.MaxPriority() != got.MaxPriority() || want.TotalPriority() != got.TotalPriority() {
		t.Fatalf("size/max/total differ")
	}
	wm, wok := want.MinPriority()
	gm, gok := got.MinPriority()
	if wm != gm || wok != gok {
		t.Fatalf("MinPriority: got %v,%v want %v,%v", gm, gok, wm, wok)
	}
	if want.nlev != got.nlev || len(want.tree) != len(got.tree) {
		t.Fatalf("levels differ")
	}
	for k := range want.tree {
		if !reflect.DeepEqual(ckLoadAll(want.tree[k]), ckLoadAll(got.tree[k])) {
			t.Fatalf("sum tree level %d differs", k)
		}
		if want.mins != nil && !reflect.DeepEqual(ckLoadAll(want.mins[k]), ckLoadAll(got.mins[k])) {
			t.Fatalf("min tree level %d differs", k)
		}
	}
	if (want.mins == nil) != (got.mins == nil) {
		t.Fatalf("min tree presence differs")
	}
	for s := range want.stripes {
		w, g := &want.stripes[s], &got.stripes[s]
		if w.cursor.Load() != g.cursor.Load() || w.written.Load() != g.written.Load() ||
			w.inserts.Load() != g.inserts.Load() || w.root.Load() != g.root.Load() ||
			(want.mins != nil && w.minRoot.Load() != g.minRoot.Load()) {
			t.Fatalf("stripe %d header differs", s)
		}
	}
	if want.c.nextStripe.Load() != got.c.nextStripe.Load() || want.c.torn.Load() != got.c.torn.Load() {
		t.Fatalf("counters differ")
	}
	if !reflect.DeepEqual(ckColumnBytes(t, want), ckColumnBytes(t, got)) {
		t.Fatalf("columns differ")
	}
	if !bytes.Equal(ckSave(t, want), ckSave(t, got)) {
		t.Fatalf("checkpoints of the two buffers differ")
	}
}

func ckSameBatch(t *testing.T, a, b *Batch) {
	t.Helper()
	if !reflect.DeepEqual(a.Refs, b.Refs) || !reflect.DeepEqual(a.Prob, b.Prob) ||
		!reflect.DeepEqual(a.Transitions, b.Transitions) || a.Size != b.Size ||
		a.Total != b.Total || a.MinProb != b.MinProb {
		t.Fatalf("batches differ:\n%+v\n%+v", a.Refs, b.Refs)
	}
}

var ckAllColumns = Config{
	Capacity: 200, Stripes: 4, ObsDim: 3, Action: Discrete, NumActions: 5,
	Episode: true, GlobalStep: true, ActorID: true, StateHash: true,
	Floats:      []FloatColumn{{Name: "mu", Width: 2}, {Name: "sigma<&>", Width: 2}},
	MaxPriority: 10, InitialPriority: 0.5,
}

func ckConfigs() map[string]Config {
	cont := ckAllColumns
	cont.Capacity, cont.Stripes, cont.Action, cont.ActionDim, cont.NumActions = 203, 8, Continuous, 3, 0
	cont.Floats = []FloatColumn{{Name: "logp", Width: 1}}
	noMin := Config{Capacity: 100, ObsDim: 2, NoMinTree: true}
	deep := Config{Capacity: 5000, Stripes: 1, ObsDim: 1, Action: Continuous, ActionDim: 1}
	tiny := Config{Capacity: 1, ObsDim: 1}
	return map[string]Config{
		"discrete-all": ckAllColumns, "continuous-all": cont, "no-min-tree": noMin,
		"deep": deep, "tiny": tiny,
	}
}

// ---- round trips ----

func TestCheckpointRoundTrip(t *testing.T) {
	for name, cfg := range ckConfigs() {
		for _, fill := range []struct {
			name string
			frac float64
		}{{"empty", 0}, {"partial", 0.4}, {"full", 1}, {"wrapped", 3.5}} {
			t.Run(name+"/"+fill.name, func(t *testing.T) {
				n := int(fill.frac * float64(cfg.Capacity))
				a := ckExercised(t, cfg, n, 1)
				if fill.name == "wrapped" && a.Stats().StaleUpdates == 0 && cfg.Capacity > 50 {
					t.Fatalf("the exercise produced no stale updates")
				}
				// Refs sampled before Save must stay valid after Load.
				var refs []Ref
				if a.Size() > 0 {
					bt := mustBatch(t, a, min(a.Size(), 5))
					if err := a.SampleUniform(rand.New(rand.NewPCG(3, 3)), bt); err != nil {
						t.Fatal(err)
					}
					refs = bt.Refs
				}
				data := ckSave(t, a)
				b := ckLoad(t, data)
				ckSameBuffer(t, a, b)

				// Same seed, same samples.
				if a.Size() > 0 {
					k := min(a.Size(), 16)
					ba, bb := mustBatch(t, a, k), mustBatch(t, b, k)
					ea := a.Sample(rand.New(rand.NewPCG(9, 9)), ba)
					eb := b.Sample(rand.New(rand.NewPCG(9, 9)), bb)
					if (ea == nil) != (eb == nil) {
						t.Fatalf("Sample: %v vs %v", ea, eb)
					}
					if ea == nil {
						ckSameBatch(t, ba, bb)
					}
					if err := a.SampleUniform(rand.New(rand.NewPCG(4, 4)), ba); err != nil {
						t.Fatal(err)
					}
					if err := b.SampleUniform(rand.New(rand.NewPCG(4, 4)), bb); err != nil {
						t.Fatal(err)
					}
					ckSameBatch(t, ba, bb)
				}
				// Write-backs of pre-Save refs apply after Load.
				if len(refs) > 0 {
					prios := ckPriorities(rand.New(rand.NewPCG(5, 5)), len(refs), cfg.MaxPriority+1)
					ra, err := a.UpdatePriorities(refs, prios)
					if err != nil {
						t.Fatal(err)
					}
					rb, err := b.UpdatePriorities(refs, prios)
					if err != nil {
						t.Fatal(err)
					}
					if ra != rb || rb.Applied != len(refs) {
						t.Fatalf("write-back after Load: %+v vs %+v", rb, ra)
					}
				}
				// Both continue identically.
				ckExercise(t, a, cfg.Capacity/2+3, rand.New(rand.NewPCG(6, 6)))
				ckExercise(t, b, cfg.Capacity/2+3, rand.New(rand.NewPCG(6, 6)))
				ckSameBuffer(t, a, b)
			})
		}
	}
}

// TestCheckpointFile: Load from a file reads exactly the checkpoint and
// leaves the file positioned after it.
func TestCheckpointFile(t *testing.T) {
	a := ckExercised(t, ckAllColumns, 300, 2)
	f, err := os.Create(filepath.Join(t.TempDir(), "ck"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := a.Save(f); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("TAIL"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	ckSameBuffer(t, a, b)
	rest, err := io.ReadAll(f)
	if err != nil || string(rest) != "TAIL" {
		t.Fatalf("after Load the file holds %q, %v; want TAIL", rest, err)
	}
	// A truncated file (its length is only a hint) fails cleanly.
	data := ckSave(t, a)
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	sf, err := os.Open(short)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	_, err = Load(sf)
	ckMustCorrupt(t, err, "truncated file")
	// Unknown-length and one-byte-at-a-time streams load the same.
	for _, r := range []io.Reader{ckHideLen{bytes.NewReader(data)}, iotest.OneByteReader(bytes.NewReader(data)), iotest.DataErrReader(bytes.NewReader(data))} {
		b, err := Load(r)
		if err != nil {
			t.Fatal(err)
		}
		ckSameBuffer(t, a, b)
	}
}

// TestCheckpointLazyGrowth: a stream of unknown length larger than one
// allocation chunk loads through the growing path.
func TestCheckpointLazyGrowth(t *testing.T) {
	cfg := Config{Capacity: 1 << 15, ObsDim: 24, Stripes: 2}
	a := ckExercised(t, cfg, 300, 3) // the columns are 2 MiB whatever the fill
	if n := a.cfg.Capacity * a.cfg.ObsDim * 4; n <= 2*ckChunk {
		t.Fatalf("obs column is %d bytes; the test needs more than two chunks", n)
	}
	data := ckSave(t, a)
	b, err := Load(ckHideLen{bytes.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
	ckSameBuffer(t, a, b)
}

func TestInitIndexMatchesNew(t *testing.T) {
	for name, cfg := range ckConfigs() {
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b := &Buffer{cfg: n.cfg}
		b.initIndex()
		if n.q != b.q || !reflect.DeepEqual(n.lay, b.lay) || n.init != b.init || n.nlev != b.nlev ||
			n.width != b.width || len(n.stripes) != len(b.stripes) || n.c.maxUnits.Load() != b.c.maxUnits.Load() {
			t.Fatalf("%s: initIndex differs from New", name)
		}
		for k := range n.tree {
			if len(n.tree[k]) != len(b.tree[k]) {
				t.Fatalf("%s: tree level %d", name, k)
			}
			if n.mins != nil && !reflect.DeepEqual(ckLoadAll(n.mins[k]), ckLoadAll(b.mins[k])) {
				t.Fatalf("%s: min level %d", name, k)
			}
		}
		for s := range n.stripes {
			if n.stripes[s].minRoot.Load() != b.stripes[s].minRoot.Load() {
				t.Fatalf("%s: minRoot", name)
			}
		}
		data := n.columns()
		cols, err := n.ckColumns(data)
		if err != nil {
			t.Fatal(err)
		}
		enabled := 0
		for _, c := range cols {
			if got := reflect.ValueOf(c.ptr).Elem().Len(); got != c.n {
				t.Fatalf("%s: column %s has %d values, checkpoint expects %d", name, c.name, got, c.n)
			}
			enabled++
		}
		// Every column the buffer stores is in the checkpoint.
		v := reflect.ValueOf(data).Elem()
		present := 0
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() != reflect.Struct &&
				f.Type.Elem().Kind() != reflect.Slice && !v.Field(i).IsNil() {
				present++
			}
		}
		present += len(data.Floats)
		if present != enabled {
			t.Fatalf("%s: New allocates %d columns, the checkpoint stores %d", name, present, enabled)
		}
	}
}

// ---- corruption ----

// ckSmall is a checkpoint with every optional column, an odd
// capacity (so int32 sections are padded) and a wrapped ring.
func ckSmall(t testing.TB) (*Buffer, []byte) {
	cfg := ckAllColumns
	cfg.Capacity, cfg.Stripes = 23, 2
	cfg.Floats = []FloatColumn{{Name: "f", Width: 1}}
	b := ckExercised(t, cfg, 40, 4)
	return b, ckSave(t, b)
}

func ckMustCorrupt(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: Load accepted it", what)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: error %v does not wrap ErrCorrupt", what, err)
	}
}

func TestCheckpointTruncated(t *testing.T) {
	_, data := ckSmall(t)
	t.Logf("checkpoint: %d bytes", len(data))
	for i := range len(data) {
		_, err := Load(bytes.NewReader(data[:i]))
		ckMustCorrupt(t, err, fmt.Sprintf("prefix %d (bytes.Reader)", i))
		_, err = Load(ckHideLen{bytes.NewReader(data[:i])})
		ckMustCorrupt(t, err, fmt.Sprintf("prefix %d (unknown length)", i))
		if i%7 == 0 {
			_, err = Load(iotest.HalfReader(ckHideLen{bytes.NewReader(data[:i])}))
			ckMustCorrupt(t, err, fmt.Sprintf("prefix %d (half reader)", i))
		}
	}
}

func TestCheckpointByteFlips(t *testing.T) {
	_, data := ckSmall(t)
	d := bytes.Clone(data)
	for i := range d {
		for _, x := range []byte{0xff, 1 << (i % 8)} {
			d[i] ^= x
			_, err := Load(bytes.NewReader(d))
			ckMustCorrupt(t, err, fmt.Sprintf("byte %d ^ %#x", i, x))
			d[i] ^= x
		}
	}
}

// ckLayout locates the parts of a checkpoint.
type ckLayout struct {
	cfgStart, cfgEnd int // JSON bytes
	cfgPadEnd        int
	sections         map[uint32]ckSpan
	order            []uint32
}

type ckSpan struct{ hdr, data, dataEnd, end int }

// parseCk locates the parts of a checkpoint small enough for one chunk,
// in d's coordinates.
func parseCk(t testing.TB, d []byte) ckLayout {
	t.Helper()
	base := ckPayloadStart(d)
	clen := int(binary.LittleEndian.Uint32(d[base:]))
	l := ckLayout{cfgStart: base + 4, cfgEnd: base + 4 + clen, sections: map[uint32]ckSpan{}}
	l.cfgPadEnd = l.cfgEnd + pad8(clen)
	off := l.cfgPadEnd
	end := len(d) - ckTrailer
	if n := int(binary.LittleEndian.Uint32(d[base-4:])); base+n != end {
		t.Fatalf("parse: a payload of more than one chunk (%d bytes in the first, %d in all)", n, end-base)
	}
	for off < end {
		id := binary.LittleEndian.Uint32(d[off:])
		elem := int(binary.LittleEndian.Uint32(d[off+4:]))
		n := int(binary.LittleEndian.Uint64(d[off+8:]))
		sp := ckSpan{hdr: off, data: off + 16, dataEnd: off + 16 + n*elem}
		sp.end = sp.dataEnd + pad8(n*elem)
		l.sections[id] = sp
		l.order = append(l.order, id)
		off = sp.end
	}
	if off != end {
		t.Fatalf("parse: sections end at %d, the payload at %d", off, end)
	}
	return l
}

// ckPayloadStart is the offset of a checkpoint's payload in d: after the
// section head (magic, version, kind, checksum) and the first chunk's
// length.
func ckPayloadStart(d []byte) int {
	return len(checkpoint.Magic) + 4 + 1 + int(d[len(checkpoint.Magic)+4]) + 4 + 4
}

// ckTrailer is the number of bytes after a one-chunk payload: the chunk's
// checksum and the end marker.
const ckTrailer = 4 + 16

// ckFixCRC recomputes the checksums of d's section (edited in place), as
// an editor that re-frames a checkpoint would.
func ckFixCRC(d []byte) []byte { return cktest.Reseal(d) }

// ckWithConfigJSON replaces the config of checkpoint d.
func ckWithConfigJSON(t testing.TB, d []byte, js []byte) []byte {
	l := parseCk(t, d)
	var p []byte
	p = binary.LittleEndian.AppendUint32(p, uint32(len(js)))
	p = append(p, js...)
	p = append(p, make([]byte, pad8(len(js)))...)
	p = append(p, d[l.cfgPadEnd:len(d)-ckTrailer]...)
	return ckFrame(p)
}

func ckEditConfig(t testing.TB, d []byte, edit func(*ckConfig)) []byte {
	l := parseCk(t, d)
	var c ckConfig
	if err := json.Unmarshal(d[l.cfgStart:l.cfgEnd], &c); err != nil {
		t.Fatal(err)
	}
	edit(&c)
	js, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	return ckWithConfigJSON(t, d, js)
}

func TestCheckpointCorruptions(t *testing.T) {
	b, data := ckSmall(t)
	l := parseCk(t, data)
	put64 := func(d []byte, off int, v uint64) { binary.LittleEndian.PutUint64(d[off:], v) }
	leaf := func(slot int) int { return l.sections[ckIDLeaves].data + 8*slot }
	stripeWord := func(s, i int) int { return l.sections[ckIDStripes].data + 8*(3*s+i) }
	maxU := b.q.maxUnits

	cases := []struct {
		name string
		mut  func(d []byte) []byte
		want string
	}{
		{"magic", func(d []byte) []byte { d[0] = 'X'; return d }, "magic"},
		{"version", func(d []byte) []byte { d[8] = 3; return ckFixCRC(d) }, "version 3"},
		{"config too long", func(d []byte) []byte { binary.LittleEndian.PutUint32(d[l.cfgStart-4:], 1<<30); return ckFixCRC(d) }, "exceeds the limit"},
		{"checksum", func(d []byte) []byte { d[l.sections[ckIDObs].data] ^= 1; return d }, "checksum mismatch"},
		{"checksum trailer", func(d []byte) []byte { d[len(d)-1] ^= 1; return d }, "checksum mismatch"},
		{"config invalid", func(d []byte) []byte {
			return ckEditConfig(t, d, func(c *ckConfig) { c.ObsDim = 0 })
		}, "ObsDim must be in"},
		{"config stripes not power of two", func(d []byte) []byte {
			return ckEditConfig(t, d, func(c *ckConfig) { c.Stripes = 3 })
		}, "power of two"},
		{"config defaults not filled", func(d []byte) []byte {
			return ckEditConfig(t, d, func(c *ckConfig) { c.InitialPriority = 0 })
		}, "canonical"},
		{"config whitespace", func(d []byte) []byte {
			js := bytes.Clone(d[l.cfgStart:l.cfgEnd])
			return ckWithConfigJSON(t, d, append([]byte("{ "), js[1:]...))
		}, "canonical"},
		{"config unknown field", func(d []byte) []byte {
			js := bytes.Clone(d[l.cfgStart:l.cfgEnd])
			return ckWithConfigJSON(t, d, append([]byte(`{"bogus":1,`), js[1:]...))
		}, "unknown field"},
		{"config unknown action", func(d []byte) []byte {
			return ckEditConfig(t, d, func(c *ckConfig) { c.Action = "spline" })
		}, "unknown action"},
		{"config not JSON", func(d []byte) []byte { return ckWithConfigJSON(t, d, []byte("\x00\x01")) }, "config"},
		{"config capacity changed", func(d []byte) []byte {
			return ckEditConfig(t, d, func(c *ckConfig) { c.Capacity++ })
		}, "truncated|values"},
		{"config column added", func(d []byte) []byte {
			return ckEditConfig(t, d, func(c *ckConfig) { c.Floats = append(c.Floats, ckFloat{"g", 1}) })
		}, "truncated"},
		{"config absurd width", func(d []byte) []byte {
			return ckEditConfig(t, d, func(c *ckConfig) { c.Floats[0].Width = math.MaxInt / 2 })
		}, "Width must be in"},
		{"config absurd obs", func(d []byte) []byte {
			return ckEditConfig(t, d, func(c *ckConfig) { c.ObsDim = math.MaxInt })
		}, "ObsDim must be in"},
		{"config too large to load", func(d []byte) []byte {
			return ckEditConfig(t, d, func(c *ckConfig) { c.Capacity, c.ObsDim = MaxCapacity, MaxWidth })
		}, "size limit"},
		{"config padding", func(d []byte) []byte {
			for {
				l := parseCk(t, d)
				if l.cfgPadEnd > l.cfgEnd {
					d[l.cfgEnd] = 1
					return ckFixCRC(d)
				}
				d = ckEditConfig(t, d, func(c *ckConfig) { c.Floats[0].Name += "x" })
			}
		}, "nonzero padding after the config"},
		{"section padding", func(d []byte) []byte {
			sp := l.sections[ckIDAction]
			if sp.end == sp.dataEnd {
				t.Fatal("test needs a padded section")
			}
			d[sp.dataEnd] = 1
			return ckFixCRC(d)
		}, "nonzero padding after section action"},
		{"section id", func(d []byte) []byte {
			binary.LittleEndian.PutUint32(d[l.sections[ckIDReward].hdr:], 99)
			return ckFixCRC(d)
		}, "found section unknown section 99, want reward"},
		{"section elem", func(d []byte) []byte {
			binary.LittleEndian.PutUint32(d[l.sections[ckIDLeaves].hdr+4:], 4)
			return ckFixCRC(d)
		}, "4-byte values"},
		{"section count", func(d []byte) []byte {
			put64(d, l.sections[ckIDStripes].hdr+8, 5)
			return ckFixCRC(d)
		}, "5 values"},
		{"written > cursor", func(d []byte) []byte {
			put64(d, stripeWord(1, 1), binary.LittleEndian.Uint64(d[stripeWord(1, 0):])+1)
			return ckFixCRC(d)
		}, "written"},
		{"cursor > written", func(d []byte) []byte {
			put64(d, stripeWord(0, 0), binary.LittleEndian.Uint64(d[stripeWord(0, 1):])+1)
			return ckFixCRC(d)
		}, "in flight"},
		{"odd generation", func(d []byte) []byte {
			put64(d, leaf(3), 5<<prioBits|7)
			return ckFixCRC(d)
		}, "odd"},
		{"generation 0 with priority", func(d []byte) []byte {
			put64(d, leaf(4), 7)
			return ckFixCRC(d)
		}, "generation 0"},
		{"priority above max", func(d []byte) []byte {
			put64(d, leaf(5), 2<<prioBits|(maxU+1))
			return ckFixCRC(d)
		}, "above the maximum"},
		{"slot never written in a full stripe", func(d []byte) []byte {
			put64(d, leaf(6), 0)
			return ckFixCRC(d)
		}, "never written"},
		{"generation not the one the counters give", func(d []byte) []byte {
			w := binary.LittleEndian.Uint64(d[leaf(7):])
			put64(d, leaf(7), w+2<<prioBits) // one write too many: the Watcher would stall on it
			return ckFixCRC(d)
		}, "which gives generation"},
		{"action out of range", func(d []byte) []byte {
			binary.LittleEndian.PutUint32(d[l.sections[ckIDAction].data+4*2:], 5)
			return ckFixCRC(d)
		}, "action 5 outside"},
		{"running max above max", func(d []byte) []byte {
			put64(d, l.sections[ckIDCounters].data+8*7, maxU+1)
			return ckFixCRC(d)
		}, "running maximum"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := c.mut(bytes.Clone(data))
			for _, r := range []io.Reader{bytes.NewReader(d), ckHideLen{bytes.NewReader(d)}} {
				_, err := Load(r)
				ckMustCorrupt(t, err, c.name)
				if !ckContainsAny(err.Error(), c.want) {
					t.Fatalf("error %q does not mention %q", err, c.want)
				}
				t.Logf("%T: %v", r, err)
			}
		})
	}

	// An invalid config also wraps ErrConfig.
	d := ckEditConfig(t, bytes.Clone(data), func(c *ckConfig) { c.Capacity = 0 })
	if _, err := Load(bytes.NewReader(d)); !errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrConfig) {
		t.Fatalf("invalid config: %v", err)
	}

	// Slots filled out of ring order in a partial stripe.
	p := ckExercised(t, Config{Capacity: 64, Stripes: 1, ObsDim: 1}, 10, 5)
	pd := ckSave(t, p)
	pl := parseCk(t, pd)
	w := binary.LittleEndian.Uint64(pd[pl.sections[ckIDLeaves].data:])
	binary.LittleEndian.PutUint64(pd[pl.sections[ckIDLeaves].data+8*20:], w)
	_, err := Load(bytes.NewReader(ckFixCRC(pd)))
	ckMustCorrupt(t, err, "out-of-order fill")
	if !strings.Contains(err.Error(), "only its first 10") {
		t.Fatalf("out-of-order fill: %v", err)
	}
}

// ckFrame frames payload p as a buffer checkpoint section.
func ckFrame(p []byte) []byte {
	var b bytes.Buffer
	checkpoint.Save(&b, ckKind, ckVersion, func(w io.Writer) error { _, err := w.Write(p); return err })
	return b.Bytes()
}

func ckContainsAny(s, alts string) bool {
	for _, a := range strings.Split(alts, "|") {
		if strings.Contains(s, a) {
			return true
		}
	}
	return false
}

// TestCheckpointTrailingData: Load reads exactly the checkpoint.
func TestCheckpointTrailingData(t *testing.T) {
	a, data := ckSmall(t)
	r := bytes.NewReader(append(bytes.Clone(data), "more"...))
	b, err := Load(r)
	if err != nil {
		t.Fatal(err)
	}
	ckSameBuffer(t, a, b)
	if r.Len() != 4 {
		t.Fatalf("Load left %d bytes, want 4", r.Len())
	}
}

// TestCheckpointHostileSizes: a tiny stream declaring a huge buffer fails
// without allocating anything like the declared size.
func TestCheckpointHostileSizes(t *testing.T) {
	cfg, err := Config{Capacity: MaxCapacity, Stripes: 1, ObsDim: 1 << 6}.validated() // 540 GiB: under MaxBytes
	if err != nil {
		t.Fatal(err)
	}
	js, err := encodeConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var d []byte
	d = binary.LittleEndian.AppendUint32(d, uint32(len(js)))
	d = append(d, js...)
	d = append(d, make([]byte, pad8(len(js)))...)
	sec := func(id uint32, n int) {
		d = binary.LittleEndian.AppendUint32(d, id)
		d = binary.LittleEndian.AppendUint32(d, 8)
		d = binary.LittleEndian.AppendUint64(d, uint64(n))
	}
	sec(ckIDCounters, ckNumCounters)
	d = append(d, make([]byte, 8*ckNumCounters)...)
	sec(ckIDStripes, 3)
	d = append(d, make([]byte, 24)...)
	sec(ckIDLeaves, MaxCapacity)
	d = append(d, make([]byte, 3<<20)...) // 3 MiB of a declared 8 GiB
	d = ckFrame(d)
	for _, r := range []io.Reader{bytes.NewReader(d), ckHideLen{bytes.NewReader(d)}} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Load(r)
		runtime.ReadMemStats(&after)
		ckMustCorrupt(t, err, "huge declared size")
		if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
			t.Fatalf("Load allocated %d MiB for a %d KiB stream", got>>20, len(d)>>10)
		}
		t.Logf("%T: %v", r, err)
	}
}

// TestCheckpointPortableEncoding exercises the value-by-value encoding used
// on big-endian machines: it must write the same bytes as the bulk path.
func TestCheckpointPortableEncoding(t *testing.T) {
	if !nativeLittleEndian {
		t.Skip("the bulk path is the little-endian one")
	}
	a, data := ckSmall(t)
	big := ckExercised(t, Config{Capacity: 3000, ObsDim: 2, Stripes: 2}, 3100, 8)
	bigData := ckSave(t, big)
	nativeLittleEndian = false
	defer func() { nativeLittleEndian = true }()
	if !bytes.Equal(ckSave(t, a), data) || !bytes.Equal(ckSave(t, big), bigData) {
		t.Fatal("portable encoding differs from the bulk one")
	}
	u32 := []uint32{0x01020304, 0xa0b0c0d0}
	u64 := []int64{0x0102030405060708, -2}
	swapWords(u32)
	swapWords(u64)
	if u32[0] != 0x04030201 || u32[1] != 0xd0c0b0a0 || uint64(u64[0]) != 0x0807060504030201 || uint64(u64[1]) != bits.ReverseBytes64(uint64(^uint64(1))) {
		t.Fatalf("swapWords: %#x %#x", u32, u64)
	}
}

// ---- Save errors ----

type ckFailWriter struct{ n int }

var errCkDisk = errors.New("disk on fire")

func (f *ckFailWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, errCkDisk
	}
	f.n -= len(p)
	return len(p), nil
}

type ckFailReader struct {
	r io.Reader
	n int
}

func (f *ckFailReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errCkDisk
	}
	p = p[:min(len(p), f.n)]
	k, err := f.r.Read(p)
	f.n -= k
	return k, err
}

func TestCheckpointIOErrors(t *testing.T) {
	b, data := ckSmall(t)
	for _, n := range []int{0, 10, 100, len(data) - 1} {
		if err := b.Save(&ckFailWriter{n: n}); !errors.Is(err, errCkDisk) {
			t.Fatalf("Save to a writer failing after %d bytes: %v", n, err)
		}
		_, err := Load(&ckFailReader{r: bytes.NewReader(data), n: n})
		if !errors.Is(err, errCkDisk) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("Load from a reader failing after %d bytes: %v", n, err)
		}
	}
}

func TestSaveRefusesNonQuiescent(t *testing.T) {
	b, _ := ckSmall(t)
	li := b.lay.node(0, 1, 2)
	w := b.tree[0][li].Load()
	b.tree[0][li].Store(w + 1<<prioBits) // odd tag: a write in progress
	if err := b.Save(io.Discard); err == nil || !strings.Contains(err.Error(), "odd") {
		t.Fatalf("Save with a slot mid-write: %v", err)
	}
	b.tree[0][li].Store(w)
	b.stripes[0].cursor.Add(1)
	if err := b.Save(io.Discard); err == nil || !strings.Contains(err.Error(), "in flight") {
		t.Fatalf("Save with an insert in flight: %v", err)
	}
	b.stripes[0].cursor.Add(^uint64(0))
	if err := b.Save(io.Discard); err != nil {
		t.Fatal(err)
	}

	bad, err := New(Config{Capacity: 4, ObsDim: 1, Floats: []FloatColumn{{Name: "\xff", Width: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Save(io.Discard); !errors.Is(err, ErrConfig) {
		t.Fatalf("Save with a non-UTF-8 column name: %v", err)
	}
}

// ---- fuzzing ----

func ckSeeds(t testing.TB) [][]byte {
	cfgs := []Config{
		{Capacity: 7, ObsDim: 1},
		{Capacity: 20, Stripes: 2, ObsDim: 2, Action: Continuous, ActionDim: 2, NoMinTree: true},
		{Capacity: 33, Stripes: 4, ObsDim: 1, Episode: true, GlobalStep: true, ActorID: true, StateHash: true,
			Floats: []FloatColumn{{Name: "a", Width: 1}}, MaxPriority: 3},
		{Capacity: 40, Stripes: 1, ObsDim: 1, NumActions: 3},
	}
	var out [][]byte
	for i, c := range cfgs {
		for _, n := range []int{0, c.Capacity / 2, 2*c.Capacity + 1} {
			out = append(out, ckSave(t, ckExercised(t, c, n, uint64(i*10+n))))
		}
	}
	return out
}

func FuzzLoad(f *testing.F) {
	for _, d := range ckSeeds(f) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ckCheckLoad(t, data)
		// Also with the checksum made right, so mutations reach the
		// structural checks behind it.
		if len(data) >= 4 {
			ckCheckLoad(t, ckFixCRC(bytes.Clone(data)))
		}
	})
}

// ckCheckLoad asserts that Load either refuses data with ErrCorrupt or
// returns a buffer that passes CheckInvariants, re-saves to the same bytes
// and works.
func ckCheckLoad(t *testing.T, data []byte) {
	r := bytes.NewReader(data)
	b, err := Load(r)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error does not wrap ErrCorrupt: %v", err)
		}
		return
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatalf("loaded buffer: %v", err)
	}
	consumed := data[:len(data)-r.Len()]
	if again := ckSave(t, b); !bytes.Equal(again, consumed) {
		t.Fatalf("re-save differs: %d bytes vs %d", len(again), len(consumed))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	if sz := b.Size(); sz > 0 {
		bt := mustBatch(t, b, min(sz, 4))
		if err := b.SampleUniform(rng, bt); err != nil {
			t.Fatalf("SampleUniform: %v", err)
		}
		if err := b.Sample(rng, bt); err != nil && !errors.Is(err, ErrZeroMass) {
			t.Fatalf("Sample: %v", err)
		}
		if _, err := b.UpdatePriorities(bt.Refs, make([]float64, bt.Len())); err != nil {
			t.Fatal(err)
		}
	}
	cfg := b.Config()
	if err := b.Insert(ckTransitions(cfg, min(cfg.Capacity, 3), rng)); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatalf("after use: %v", err)
	}
}

// FuzzLayout checks the stripe and tree index arithmetic of layout.go for
// capacity in 1..2^20 and power-of-two stripes <= capacity.
func FuzzLayout(f *testing.F) {
	f.Add(uint32(1), uint8(0), uint32(0))
	f.Add(uint32(16), uint8(0), uint32(5))
	f.Add(uint32(17), uint8(4), uint32(16))
	f.Add(uint32(257), uint8(1), uint32(200))
	f.Add(uint32(4097), uint8(3), uint32(4096))
	f.Add(uint32(1<<20), uint8(4), uint32(12345))
	f.Add(uint32(1<<20-1), uint8(19), uint32(777))
	f.Add(uint32(65537), uint8(0), uint32(65536))
	f.Fuzz(func(t *testing.T, c uint32, sl uint8, probe uint32) {
		capacity := int(c%(1<<20)) + 1
		stripes := 1 << (int(sl) % bits.Len(uint(capacity))) // <= capacity
		ckCheckLayout(t, capacity, stripes, probe)
	})
}

func ckCheckLayout(t *testing.T, capacity, stripes int, probe uint32) {
	l := newLayout(capacity, stripes)
	m := l.m
	if len(m) == 0 {
		t.Fatal("no levels")
	}
	// Stripes partition [0, capacity) into contiguous runs, in order, whose
	// sizes differ by at most one.
	off, minCap, maxCap := 0, capacity, 0
	for s := range stripes {
		sc := l.stripeCap(s)
		if sc < 1 {
			t.Fatalf("cap %d stripes %d: stripe %d has %d slots", capacity, stripes, s, sc)
		}
		if got := l.stripeOffset(s); got != off {
			t.Fatalf("cap %d stripes %d: stripeOffset(%d) = %d, want %d", capacity, stripes, s, got, off)
		}
		for _, local := range []int{0, sc - 1, sc / 2} {
			if gs, gl := l.locate(off + local); gs != s || gl != local {
				t.Fatalf("cap %d stripes %d: locate(%d) = (%d, %d), want (%d, %d)", capacity, stripes, off+local, gs, gl, s, local)
			}
		}
		off += sc
		minCap, maxCap = min(minCap, sc), max(maxCap, sc)
	}
	if off != capacity || maxCap-minCap > 1 {
		t.Fatalf("cap %d stripes %d: stripes cover %d slots, sizes %d..%d", capacity, stripes, off, minCap, maxCap)
	}
	// Level sizes: multiples of 16; each level's groups of 16 cover the
	// level below; the top level has exactly the 16 children of the root;
	// the leaves hold the largest stripe.
	if m[0] < maxCap || m[0]-maxCap >= fanout {
		t.Fatalf("cap %d stripes %d: m[0] = %d for %d slots per stripe", capacity, stripes, m[0], maxCap)
	}
	for k, n := range m {
		if n <= 0 || n%fanout != 0 {
			t.Fatalf("cap %d stripes %d: m[%d] = %d is not a positive multiple of 16", capacity, stripes, k, n)
		}
		if k > 0 && (n*fanout < m[k-1] || (n-fanout)*fanout >= m[k-1]) {
			t.Fatalf("cap %d stripes %d: m[%d] = %d does not fit m[%d] = %d", capacity, stripes, k, n, k-1, m[k-1])
		}
	}
	if m[len(m)-1] != fanout {
		t.Fatalf("cap %d stripes %d: top level has %d nodes, want 16", capacity, stripes, m[len(m)-1])
	}
	if want := max(1, (bits.Len(uint(maxCap-1))+fanShift-1)/fanShift); len(m) != want {
		t.Fatalf("cap %d stripes %d: %d levels for %d leaves", capacity, stripes, len(m), maxCap)
	}
	// Every slot (all of them for small buffers, else a sample).
	checkSlot := func(slot int) {
		s, local := l.locate(slot)
		if s < 0 || s >= stripes || local < 0 || local >= l.stripeCap(s) || l.stripeOffset(s)+local != slot {
			t.Fatalf("cap %d stripes %d: locate(%d) = (%d, %d)", capacity, stripes, slot, s, local)
		}
		// The path from the leaf to the root stays inside each level's
		// per-stripe range, and the descent's group reads do too.
		for k := range m {
			j := local >> (fanShift * k)
			if j >= m[k] {
				t.Fatalf("cap %d stripes %d slot %d: level %d index %d >= %d", capacity, stripes, slot, k, j, m[k])
			}
			if g := j &^ fanMask; g+fanMask >= m[k] {
				t.Fatalf("cap %d stripes %d slot %d: level %d group %d..%d beyond %d", capacity, stripes, slot, k, g, g+fanMask, m[k])
			}
			if idx := l.node(k, s, j); idx < s*m[k] || idx >= (s+1)*m[k] || idx >= stripes*m[k] {
				t.Fatalf("cap %d stripes %d slot %d: node(%d, %d, %d) = %d outside the stripe", capacity, stripes, slot, k, s, j, idx)
			}
		}
		if local>>(fanShift*len(m)) != 0 {
			t.Fatalf("cap %d stripes %d slot %d: leaf not under the root", capacity, stripes, slot)
		}
	}
	if capacity <= 1<<12 {
		for slot := range capacity {
			checkSlot(slot)
		}
	} else {
		for _, slot := range []int{0, capacity - 1, int(probe) % capacity, int(probe*2654435761) % capacity} {
			checkSlot(slot)
		}
	}
}

func TestLayoutExhaustiveSmall(t *testing.T) {
	for c := 1; c <= 600; c++ {
		for s := 1; s <= c; s *= 2 {
			ckCheckLayout(t, c, s, uint32(c*s))
		}
	}
	for _, c := range []int{1<<16 - 1, 1 << 16, 1<<16 + 1, 1 << 20, 1<<20 - 3} {
		for s := 1; s <= 1<<10; s *= 2 {
			ckCheckLayout(t, c, s, 999)
		}
	}
}

// ---- benchmarks ----

// ckCartPole is a 2^20-slot CartPole-sized buffer: 4 observation floats,
// discrete actions.
func ckCartPole(b *testing.B) *Buffer {
	buf, err := New(Config{Capacity: 1 << 20, ObsDim: 4, NumActions: 2})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	tr := ckTransitions(buf.Config(), 4096, rng)
	for range (1 << 20) / 4096 {
		if err := buf.Insert(tr); err != nil {
			b.Fatal(err)
		}
	}
	return buf
}

func BenchmarkCheckpointCartPole(b *testing.B) {
	buf := ckCartPole(b)
	var out bytes.Buffer
	if err := buf.Save(&out); err != nil {
		b.Fatal(err)
	}
	data := out.Bytes()
	b.Logf("checkpoint: %d MiB", len(data)>>20)
	b.Run("Save", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := buf.Save(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SaveFile", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "ck")
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := buf.Save(f); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Load", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := Load(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("LoadUnknownLength", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := Load(ckHideLen{bytes.NewReader(data)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("LoadFile", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "ck")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Load(f); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
}

// TestCheckpointLegacyRefused: a checkpoint of the format the buffer wrote
// before the checkpoint package (magic APEXREPL) is refused with
// ErrCorrupt and an error naming the format, its version and what to do.
func TestCheckpointLegacyRefused(t *testing.T) {
	old := binary.LittleEndian.AppendUint32([]byte("APEXREPL"), 1)
	old = append(old, make([]byte, 100)...)
	_, err := Load(bytes.NewReader(old))
	var le *checkpoint.LegacyError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &le) || le.Magic != "APEXREPL" || le.Version != 1 ||
		!strings.Contains(err.Error(), "APEXREPL version 1 (a replay buffer checkpoint), written by apex before the unified checkpoint format") {
		t.Fatalf("Load of an APEXREPL file: %v", err)
	}
}
