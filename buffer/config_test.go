package buffer

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestConfigValidation(t *testing.T) {
	ok := Config{Capacity: 100, ObsDim: 4}
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"zero capacity", func(c *Config) { c.Capacity = 0 }, "Capacity must be positive"},
		{"negative capacity", func(c *Config) { c.Capacity = -5 }, "Capacity must be positive"},
		{"huge capacity", func(c *Config) { c.Capacity = MaxCapacity + 1 }, "exceeds the maximum"},
		{"stripes not power of two", func(c *Config) { c.Stripes = 6 }, "power of two"},
		{"negative stripes", func(c *Config) { c.Stripes = -2 }, "power of two"},
		{"stripes above capacity", func(c *Config) { c.Capacity, c.Stripes = 4, 8 }, "must not exceed Capacity"},
		{"zero obs", func(c *Config) { c.ObsDim = 0 }, "ObsDim must be in"},
		{"continuous without dim", func(c *Config) { c.Action = Continuous }, "ActionDim > 0"},
		{"discrete with dim", func(c *Config) { c.ActionDim = 3 }, "ActionDim 0 or 1"},
		{"unknown action kind", func(c *Config) { c.Action = 7 }, "unknown Action kind"},
		{"negative num actions", func(c *Config) { c.NumActions = -1 }, "NumActions"},
		{"NaN max priority", func(c *Config) { c.MaxPriority = math.NaN() }, "MaxPriority"},
		{"negative max priority", func(c *Config) { c.MaxPriority = -1 }, "MaxPriority"},
		{"Inf max priority", func(c *Config) { c.MaxPriority = math.Inf(1) }, "MaxPriority"},
		{"tiny max priority", func(c *Config) { c.MaxPriority = 1e-300 }, "MaxPriority must be in"},
		{"huge max priority", func(c *Config) { c.MaxPriority = 1e300 }, "MaxPriority must be in"},
		{"initial above max", func(c *Config) { c.MaxPriority, c.InitialPriority = 2, 3 }, "InitialPriority"},
		{"float column without name", func(c *Config) { c.Floats = []FloatColumn{{Width: 2}} }, "no name"},
		{"float column zero width", func(c *Config) { c.Floats = []FloatColumn{{Name: "mu"}} }, "Width must be in"},
		{"duplicate float column", func(c *Config) { c.Floats = []FloatColumn{{"mu", 1}, {"mu", 2}} }, "duplicate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			_, err := New(c)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: got %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	b := mustNew(t, Config{Capacity: 1000, ObsDim: 3})
	c := b.Config()
	if c.Stripes != DefaultStripes || c.MaxPriority != DefaultMaxPriority || c.InitialPriority != DefaultInitialPriority || c.ActionDim != 1 {
		t.Fatalf("defaults not filled: %+v", c)
	}
	if got := mustNew(t, Config{Capacity: 5, ObsDim: 1}).Config().Stripes; got != 4 {
		t.Fatalf("Capacity 5: default stripes = %d, want 4 (largest power of two <= capacity)", got)
	}
	if b.MaxPriority() != 1 {
		t.Fatalf("initial max priority %v, want 1", b.MaxPriority())
	}
	if b.Resolution() <= 0 || b.Resolution() > 1e-6 {
		t.Fatalf("resolution %v out of the expected range", b.Resolution())
	}
}

func TestLayoutCoversEverySlot(t *testing.T) {
	for _, c := range []struct{ capacity, stripes int }{{1, 1}, {10, 8}, {17, 16}, {70000, 1}, {1 << 16, 16}, {1000003, 64}} {
		l := newLayout(c.capacity, c.stripes)
		seen := 0
		for s := range c.stripes {
			if l.stripeOffset(s) != seen {
				t.Fatalf("%+v: stripe %d offset %d, want %d", c, s, l.stripeOffset(s), seen)
			}
			for local := range l.stripeCap(s) {
				gs, gl := l.locate(seen + local)
				if gs != s || gl != local {
					t.Fatalf("%+v: locate(%d) = (%d,%d), want (%d,%d)", c, seen+local, gs, gl, s, local)
				}
			}
			seen += l.stripeCap(s)
		}
		if seen != c.capacity {
			t.Fatalf("%+v: stripes hold %d slots", c, seen)
		}
		if top := l.m[len(l.m)-1]; top != fanout {
			t.Fatalf("%+v: top level has %d nodes per stripe, want %d", c, top, fanout)
		}
	}
}
