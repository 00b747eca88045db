package sampler_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/internal/badinput"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
	"github.com/apexrl/apex/sampler/samplertest"
)

func TestConfigsRefuseNonFiniteFloats(t *testing.T) {
	badinput.CheckNonFinite(t, sampler.DefaultPERConfig(100), buffer.ErrConfig, sampler.PERConfig.Validate)
	// RefreshFraction +Inf: re-sort only when forced (documented).
	badinput.CheckNonFinite(t, sampler.DefaultRankConfig(100), buffer.ErrConfig, sampler.RankConfig.Validate, "RefreshFraction")
	badinput.CheckNonFinite(t, sampler.DefaultLAPConfig(), buffer.ErrConfig, sampler.LAPConfig.Validate)
	badinput.CheckNonFinite(t, sampler.DefaultTERConfig(100), buffer.ErrConfig, sampler.TERConfig.Validate)
	// RhoClip +Inf: no clip, the default of most variants (documented).
	badinput.CheckNonFinite(t, sampler.DefaultREFERConfig(100), buffer.ErrConfig, sampler.REFERConfig.Validate, "RhoClip")
	badinput.CheckNonFinite(t, sampler.DefaultNERSConfig(100), buffer.ErrConfig, sampler.NERSConfig.Validate)
	badinput.CheckNonFinite(t, sampler.DefaultNERSNetConfig(4), buffer.ErrConfig, sampler.NERSNetConfig.Validate)
}

// TestBadInputReturnsErrors: every stage's constructor and methods refuse
// nil and mismatched input with an error instead of panicking.
func TestBadInputReturnsErrors(t *testing.T) {
	buf := samplertest.NewBuffer(t, 64)
	samplertest.Insert(t, buf, 0, 32, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	good := samplertest.NewBatch(t, buf, 4)
	per, _ := sampler.NewPER(buf, sampler.DefaultPERConfig(10))
	rank, _ := sampler.NewRank(buf, sampler.DefaultRankConfig(10))
	lap, _ := sampler.NewLAP(buf, sampler.DefaultLAPConfig())
	pal, _ := sampler.NewPAL(buf, sampler.DefaultLAPConfig())
	uni := sampler.NewUniform(buf)
	stages := map[string]sampler.Selector{"per": per, "rank": rank, "lap": lap, "pal": pal, "uniform": uni}
	for name, s := range stages {
		if s == nil || reflect.ValueOf(s).IsNil() {
			t.Fatalf("%s: not built", name)
		}
		w, _ := s.(sampler.Weighter)
		cases := []struct {
			name string
			f    func() error
			is   error
		}{
			{"Sample nil rng", func() error { return s.Sample(nil, good) }, buffer.ErrNil},
			{"Sample nil batch", func() error { return s.Sample(rng, nil) }, buffer.ErrNil},
			{"Update length mismatch", func() error { _, err := s.Update(nil, []float64{1}); return err }, buffer.ErrShape},
			{"Update NaN", func() error { _, err := s.Update(make([]buffer.Ref, 1), []float64{math.NaN()}); return err }, buffer.ErrPriority},
			{"Weights nil batch", func() error {
				if w == nil {
					return buffer.ErrNil
				}
				return w.Weights(nil, 0)
			}, buffer.ErrNil},
			{"Annotate nil transitions", func() error { return sampler.Annotate(s, nil, []float64{1}) }, buffer.ErrNil},
			{"Annotate nil selector", func() error { return sampler.Annotate(nil, samplertest.Items(0, 1, nil), []float64{1}) }, buffer.ErrNil},
			{"Annotate length mismatch", func() error { return sampler.Annotate(s, samplertest.Items(0, 2, nil), []float64{1}) }, buffer.ErrShape},
		}
		for _, c := range cases {
			err := badinput.NoPanic(t, name+": "+c.name, c.f)
			if !errors.Is(err, c.is) {
				t.Errorf("%s: %s: %v, want %v", name, c.name, err, c.is)
			}
		}
	}
	for name, f := range map[string]func() error{
		"NewPER(nil)":    func() error { _, err := sampler.NewPER(nil, sampler.DefaultPERConfig(1)); return err },
		"NewRank(nil)":   func() error { _, err := sampler.NewRank(nil, sampler.DefaultRankConfig(1)); return err },
		"NewLAP(nil)":    func() error { _, err := sampler.NewLAP(nil, sampler.DefaultLAPConfig()); return err },
		"NewPAL(nil)":    func() error { _, err := sampler.NewPAL(nil, sampler.DefaultLAPConfig()); return err },
		"NewTER(nil)":    func() error { _, err := sampler.NewTER(nil, sampler.DefaultTERConfig(1)); return err },
		"NewREFER(nil)":  func() error { _, err := sampler.NewREFER(nil, sampler.DefaultREFERConfig(1)); return err },
		"NewNERS(nil)":   func() error { _, err := sampler.NewNERS(nil, sampler.DefaultNERSConfig(1)); return err },
		"NewMethod(nil)": func() error { _, err := sampler.NewMethod("per", nil, sampler.MethodConfig{}); return err },
		"NewUniform(nil).Sample": func() error {
			return sampler.NewUniform(nil).Sample(rand.New(rand.NewPCG(1, 1)), samplertest.NewBatch(t, samplertest.NewBuffer(t, 4), 1))
		},
		"NewUniform(nil).Update": func() error { _, err := sampler.NewUniform(nil).Update(nil, nil); return err },
	} {
		if err := badinput.NoPanic(t, name, f); !errors.Is(err, buffer.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// TestBadInputGraphStages: TER, REFER and NERS refuse a nil rng or batch
// before touching their indexes.
func TestBadInputGraphStages(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tbuf := terBuffer(t, 64, 1)
	ter, err := sampler.NewTER(tbuf, sampler.DefaultTERConfig(10))
	if err != nil {
		t.Fatal(err)
	}
	rbuf := newREFERBuffer(t, 64, 1)
	refer := newREFER(t, rbuf, sampler.DefaultREFERConfig(10))
	nbuf := samplertest.NewBuffer(t, 64)
	ners := newNERS(t, nbuf, sampler.DefaultNERSConfig(10))
	for name, c := range map[string]struct {
		s   sampler.Selector
		buf *buffer.Buffer
	}{"ter": {ter, tbuf}, "refer": {refer, rbuf}, "ners": {ners, nbuf}} {
		bt := samplertest.NewBatch(t, c.buf, 2)
		if err := badinput.NoPanic(t, name+" nil rng", func() error { return c.s.Sample(nil, bt) }); !errors.Is(err, buffer.ErrNil) {
			t.Errorf("%s: Sample(nil, batch): %v, want ErrNil", name, err)
		}
		if err := badinput.NoPanic(t, name+" nil batch", func() error { return c.s.Sample(rng, nil) }); !errors.Is(err, buffer.ErrNil) {
			t.Errorf("%s: Sample(rng, nil): %v, want ErrNil", name, err)
		}
		if w, ok := c.s.(sampler.Weighter); ok {
			if err := badinput.NoPanic(t, name+" Weights(nil)", func() error { return w.Weights(nil, 0) }); !errors.Is(err, buffer.ErrNil) {
				t.Errorf("%s: Weights(nil): %v, want ErrNil", name, err)
			}
		}
		update := func() error { _, err := c.s.Update([]buffer.Ref{{}}, nil); return err }
		if f, ok := c.s.(sampler.FeatureUpdater); ok {
			update = func() error { _, err := f.UpdateFeatures([]buffer.Ref{{}}, []float64{1}, nil); return err }
		}
		if err := badinput.NoPanic(t, name+" Update", update); !errors.Is(err, buffer.ErrShape) {
			t.Errorf("%s: Update length mismatch: %v, want ErrShape", name, err)
		}
	}
}

// setInts returns copies of cfg with each int field (nested structs
// included) set to v, named by field.
func setInts[C any](cfg C, v int64) map[string]C {
	out := map[string]C{}
	var walk func(typ reflect.Type, idx []int, path string)
	walk = func(typ reflect.Type, idx []int, path string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			ix := append(append([]int(nil), idx...), i)
			name := path + f.Name
			switch f.Type.Kind() {
			case reflect.Int, reflect.Int64, reflect.Int32:
				c := cfg
				reflect.ValueOf(&c).Elem().FieldByIndex(ix).SetInt(v)
				out[name] = c
			case reflect.Struct:
				walk(f.Type, ix, name+".")
			}
		}
	}
	walk(reflect.TypeOf(cfg), nil, "")
	return out
}

// TestConstructorsRefuseHugeCounts: every int field of every stage's
// config set to the largest or smallest int gives an error or a working
// stage, never a panic or an allocation that exhausts memory.
func TestConstructorsRefuseHugeCounts(t *testing.T) {
	for _, v := range []int64{math.MaxInt64, math.MinInt64, -1} {
		buf := samplertest.NewBuffer(t, 64)
		tbuf := terBuffer(t, 64, 1)
		rbuf := newREFERBuffer(t, 64, 1)
		for name, c := range setInts(sampler.DefaultPERConfig(10), v) {
			_ = badinput.NoPanic(t, "PER "+name, func() error { _, err := sampler.NewPER(buf, c); return err })
		}
		for name, c := range setInts(sampler.DefaultRankConfig(10), v) {
			_ = badinput.NoPanic(t, "Rank "+name, func() error { _, err := sampler.NewRank(buf, c); return err })
		}
		for name, c := range setInts(sampler.DefaultTERConfig(10), v) {
			_ = badinput.NoPanic(t, "TER "+name, func() error { _, err := sampler.NewTER(tbuf, c); return err })
		}
		for name, c := range setInts(sampler.DefaultREFERConfig(10), v) {
			_ = badinput.NoPanic(t, "REFER "+name, func() error { _, err := sampler.NewREFER(rbuf, c); return err })
		}
		for name, c := range setInts(sampler.DefaultNERSConfig(10), v) {
			if strings.HasPrefix(name, "Net.") {
				continue // the scorer's widths are slices; NewNERSNet bounds them through model
			}
			err := badinput.NoPanic(t, "NERS "+name, func() error { _, err := sampler.NewNERS(buf, c); return err })
			if (name == "History" || name == "TrainSize") && err == nil {
				t.Errorf("NERS %s = %d: accepted", name, v)
			}
		}
	}
}

// TestNewMethodRefusesNonFinite: NaN in a method's loss or stage config is
// refused by NewMethod, naming the field.
func TestNewMethodRefusesNonFinite(t *testing.T) {
	buf := samplertest.NewBuffer(t, 64)
	nan := math.NaN()
	per := sampler.DefaultPERConfig(10)
	per.Alpha = nan
	rank := sampler.DefaultRankConfig(10)
	rank.Beta.End = math.Inf(1)
	lap := sampler.DefaultLAPConfig()
	lap.K = math.Inf(-1)
	for _, c := range []struct {
		name string
		cfg  sampler.MethodConfig
		text string
	}{
		{"per", sampler.MethodConfig{Loss: model.Loss{Delta: nan}}, "Delta"},
		{"per", sampler.MethodConfig{PER: &per}, "Alpha"},
		{"rank", sampler.MethodConfig{Rank: &rank}, "Beta"},
		{"lap", sampler.MethodConfig{LAP: &lap}, "K"},
	} {
		err := badinput.NoPanic(t, "NewMethod "+c.name, func() error { _, err := sampler.NewMethod(c.name, buf, c.cfg); return err })
		if err == nil || !regexp.MustCompile(`\b`+c.text+`\b`).MatchString(err.Error()) {
			t.Errorf("NewMethod(%s) with a non-finite %s: %v", c.name, c.text, err)
		}
	}
}

// TestNERSNilReaderWriter: NERS's and its scorer's Save and Load refuse a
// nil writer or reader with ErrNil instead of panicking.
func TestNERSNilReaderWriter(t *testing.T) {
	buf, err := buffer.New(buffer.Config{Capacity: 64, ObsDim: 3, Action: buffer.Continuous, ActionDim: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := newNERS(t, buf, sampler.DefaultNERSConfig(100))
	net, err := sampler.NewNERSNet(sampler.DefaultNERSNetConfig(4), rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func() error{
		"NERS.Save(nil)":    func() error { return s.Save(nil) },
		"NERS.Load(nil)":    func() error { return s.Load(nil) },
		"NERSNet.Save(nil)": func() error { return net.Save(nil) },
		"NERSNet.Load(nil)": func() error { return net.Load(nil) },
	} {
		if err := badinput.NoPanic(t, name, f); !errors.Is(err, buffer.ErrNil) {
			t.Errorf("%s: %v, want ErrNil", name, err)
		}
	}
}
