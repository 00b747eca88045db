package learner

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// allFloat32 reports the index of the first parameter that is not a
// float32 value held in a float64, or -1: after a float32 Adam step every
// parameter it updated is one (model.AdamConfig.Float32), after a float64
// step almost none is.
func allFloat32(p []float64) int {
	for i, v := range p {
		if float64(float32(v)) != v {
			return i
		}
	}
	return -1
}

// TestAdamFollowsNetPrecision: each learner's optimizers run in float32
// exactly when their networks do (the SAC temperature's stays float64),
// and a float32 learner's steps leave float32-rounded parameters.
func TestAdamFollowsNetPrecision(t *testing.T) {
	t.Run("dqn", func(t *testing.T) {
		for _, f32 := range []bool{false, true} {
			nc := benchCfg
			nc.Float32 = f32
			r := newRig(t, DQNConfig{Batch: 32, TargetEvery: 5}, nc, 4096)
			if r.l.adam.Config().Float32 != f32 {
				t.Fatalf("Float32 nets %t: Adam Float32 %t", f32, r.l.adam.Config().Float32)
			}
			for range 3 {
				if err := r.l.Step(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if i := allFloat32(r.l.Net().Params()); (i < 0) != f32 {
				t.Errorf("Float32 nets %t: first non-float32 parameter %d", f32, i)
			}
		}
	})
	t.Run("td3", func(t *testing.T) {
		for _, f32 := range []bool{false, true} {
			buf := contBuffer(t, 1024, 3, 1, 0)
			fillContinuous(t, buf, rand.New(rand.NewPCG(1, 1)), 1024, 2)
			actor, critic := td3Nets(t, 3, 1, []int{16, 16}, 0, 1)
			if f32 {
				actor, critic = float32Net(t, actor), float32Net(t, critic)
			}
			l, err := NewTD3(TD3Config{Batch: 32, MaxAction: 2}, actor, critic, buf, td3Method(t, "uniform", buf, nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range []*model.Adam{l.actorAdam, l.criticAdam[0], l.criticAdam[1]} {
				if a.Config().Float32 != f32 {
					t.Fatalf("Float32 nets %t: optimizer %d Float32 %t", f32, i, a.Config().Float32)
				}
			}
			td3Steps(t, l, 4) // two actor updates at PolicyDelay 2
			for i, n := range []*model.Net{l.Actor(), l.Critics()[0], l.Critics()[1]} {
				if j := allFloat32(n.Params()); (j < 0) != f32 {
					t.Errorf("Float32 nets %t: network %d: first non-float32 parameter %d", f32, i, j)
				}
			}
		}
	})
	t.Run("sac", func(t *testing.T) {
		for _, f32 := range []bool{false, true} {
			buf := contBuffer(t, 1024, 3, 1, 0)
			fillContinuous(t, buf, rand.New(rand.NewPCG(1, 1)), 1024, 2)
			policy, critic := sacNets(t, 3, 1, []int{16, 16}, 0, 1)
			if f32 {
				policy, critic = float32Net(t, policy), float32Net(t, critic)
			}
			l, err := NewSAC(SACConfig{Batch: 32, MaxAction: 2}, policy, critic, buf, td3Method(t, "uniform", buf, nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range []*model.Adam{l.policyAdam, l.criticAdam[0], l.criticAdam[1]} {
				if a.Config().Float32 != f32 {
					t.Fatalf("Float32 nets %t: optimizer %d Float32 %t", f32, i, a.Config().Float32)
				}
			}
			if l.alphaAdam.Config().Float32 {
				t.Error("the temperature's optimizer is float32")
			}
			sacSteps(t, l, 3)
			if j := allFloat32(l.Policy().Params()); (j < 0) != f32 {
				t.Errorf("Float32 nets %t: first non-float32 policy parameter %d", f32, j)
			}
		}
	})
	t.Run("vracer", func(t *testing.T) {
		for _, f32 := range []bool{false, true} {
			buf := referBuffer(t, 512, 3, 1)
			fillEpisodes(t, buf, rand.New(rand.NewPCG(7, 7)), 0, 12, 20)
			net, err := NewVRACERNet(3, 1, []int{16, 16}, rand.New(rand.NewPCG(6, 6)))
			if err != nil {
				t.Fatal(err)
			}
			if f32 {
				net = float32Net(t, net)
			}
			l, err := NewVRACER(VRACERConfig{Batch: 32}, net, buf, referMethod(t, buf, sampler.REFERConfig{TotalSteps: 100}), nil)
			if err != nil {
				t.Fatal(err)
			}
			if l.adam.Config().Float32 != f32 {
				t.Fatalf("Float32 nets %t: Adam Float32 %t", f32, l.adam.Config().Float32)
			}
			for range 3 {
				if err := l.Step(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if j := allFloat32(net.Params()); (j < 0) != f32 {
				t.Errorf("Float32 nets %t: first non-float32 parameter %d", f32, j)
			}
		}
	})
}

// TestAdamFloat32Refused: the learners' configs refuse Adam.Float32 set
// by hand (the networks' precision decides), naming the field.
func TestAdamFloat32Refused(t *testing.T) {
	a := model.AdamConfig{Float32: true}
	for name, err := range map[string]error{
		"dqn":    func() error { _, err := (DQNConfig{Adam: a}).Validate(); return err }(),
		"td3":    func() error { _, err := (TD3Config{Adam: a, MaxAction: 1}).Validate(); return err }(),
		"sac":    func() error { _, err := (SACConfig{Adam: a, MaxAction: 1}).Validate(); return err }(),
		"vracer": func() error { _, err := (VRACERConfig{Adam: a}).Validate(); return err }(),
	} {
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Adam.Float32") {
			t.Errorf("%s: %v, want ErrConfig naming Adam.Float32", name, err)
		}
	}
}

// TestFloat32Checkpoint: a float32 learner's checkpoint loads into a
// float32 learner (its optimizers float32 with the saved moments and step
// count, its networks the saved ones), and converts into a float64 one and
// the other way round: the saved parameters exactly, each optimizer's step
// count and moments (widened exactly, or rounded to float32) in the
// learner's precision; the converted learner keeps learning.
func TestFloat32Checkpoint(t *testing.T) {
	save := func(save func(*bytes.Buffer) error) []byte {
		var b bytes.Buffer
		if err := save(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	t.Run("dqn", func(t *testing.T) {
		cfg := DQNConfig{Batch: 16, TargetEvery: 7, Seed: 5}
		nc32 := ckNetCfg
		nc32.Float32 = true
		buf := newBuffer(t, 512, ckNetCfg.In)
		fillRandom(t, buf, rand.New(rand.NewPCG(1, 1)), 400, ckNetCfg.In, ckNetCfg.Out)
		a, _ := newCkLearner(t, cfg, nc32, 1, buf)
		steps(t, a, 10)
		ck := save(func(b *bytes.Buffer) error { return a.Save(b) })
		b, _ := newCkLearner(t, cfg, nc32, 2, buf)
		if err := b.Load(bytes.NewReader(ck)); err != nil {
			t.Fatal(err)
		}
		if !b.adam.Config().Float32 || !sameAdam(t, a.adam, b.adam) || !equal(a.Net().Params(), b.Net().Params()) ||
			!equal(a.Target().Params(), b.Target().Params()) {
			t.Fatal("the float32 learner's checkpoint did not round-trip")
		}
		c, _ := newCkLearner(t, cfg, ckNetCfg, 2, buf)
		if err := c.Load(bytes.NewReader(ck)); err != nil {
			t.Fatalf("float32 checkpoint into float64 learner: %v", err)
		}
		if c.adam.Config().Float32 || !sameAdam(t, adamAs(t, a.adam, false), c.adam) || c.Steps() != a.Steps() ||
			!equal(a.Net().Params(), c.Net().Params()) || !equal(a.Target().Params(), c.Target().Params()) {
			t.Fatal("float32 → float64: the parameters, step count or widened moments did not carry over")
		}
		before := slices.Clone(c.Net().Params())
		steps(t, c, 3)
		if equal(before, c.Net().Params()) || allFloat32(c.Net().Params()) < 0 || math.IsNaN(c.Stats().Loss) {
			t.Fatalf("the converted float64 learner did not keep learning in float64 (loss %v)", c.Stats().Loss)
		}
		ck64 := save(func(w *bytes.Buffer) error { return c.Save(w) })
		if err := b.Load(bytes.NewReader(ck64)); err != nil {
			t.Fatalf("float64 checkpoint into float32 learner: %v", err)
		}
		if !b.adam.Config().Float32 || !sameAdam(t, adamAs(t, c.adam, true), b.adam) || b.Steps() != c.Steps() ||
			!equal(c.Net().Params(), b.Net().Params()) || !equal(c.Target().Params(), b.Target().Params()) {
			t.Fatal("float64 → float32: the parameters, step count or rounded moments did not carry over")
		}
		before = slices.Clone(b.Net().Params())
		steps(t, b, 3)
		if equal(before, b.Net().Params()) || allFloat32(b.Net().Params()) >= 0 || math.IsNaN(b.Stats().Loss) {
			t.Fatalf("the converted float32 learner did not keep learning in float32 (loss %v)", b.Stats().Loss)
		}
	})
	t.Run("td3", func(t *testing.T) {
		cfg := TD3Config{Batch: 16, MaxAction: 1, Seed: 3}
		buf := contBuffer(t, 512, 3, 2, 0)
		fillContinuous(t, buf, rand.New(rand.NewPCG(1, 1)), 400, 1)
		mk := func(seed uint64, f32 bool) *TD3 {
			actor, critic := td3Nets(t, 3, 2, []int{8}, model.ReLU, seed)
			if f32 {
				actor, critic = float32Net(t, actor), float32Net(t, critic)
			}
			l, err := NewTD3(cfg, actor, critic, buf, td3Method(t, "uniform", buf, nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		a := mk(1, true)
		td3Steps(t, a, 6)
		ck := save(func(b *bytes.Buffer) error { return a.Save(b) })
		b := mk(2, true)
		if err := b.Load(bytes.NewReader(ck)); err != nil {
			t.Fatal(err)
		}
		if !b.actorAdam.Config().Float32 || !sameAdam(t, a.actorAdam, b.actorAdam) || !sameAdam(t, a.criticAdam[1], b.criticAdam[1]) ||
			!sameState(td3State(a), td3State(b)) {
			t.Fatal("the float32 learner's checkpoint did not round-trip")
		}
		c := mk(2, false)
		if err := c.Load(bytes.NewReader(ck)); err != nil {
			t.Fatalf("float32 checkpoint into float64 learner: %v", err)
		}
		if c.actorAdam.Config().Float32 || c.criticAdam[0].Config().Float32 ||
			!sameAdam(t, adamAs(t, a.actorAdam, false), c.actorAdam) || !sameAdam(t, adamAs(t, a.criticAdam[1], false), c.criticAdam[1]) ||
			!sameState(td3State(a), td3State(c)) {
			t.Fatal("float32 → float64: the networks or the widened optimizers did not carry over")
		}
		td3Steps(t, c, 4)
		if sameState(td3State(a), td3State(c)) || allFloat32(params(c.critic[0])) < 0 {
			t.Fatal("the converted float64 learner did not keep learning in float64")
		}
		ck64 := save(func(w *bytes.Buffer) error { return c.Save(w) })
		d := mk(3, true)
		if err := d.Load(bytes.NewReader(ck64)); err != nil {
			t.Fatalf("float64 checkpoint into float32 learner: %v", err)
		}
		if !d.actorAdam.Config().Float32 || !d.criticAdam[1].Config().Float32 ||
			!sameAdam(t, adamAs(t, c.actorAdam, true), d.actorAdam) || !sameAdam(t, adamAs(t, c.criticAdam[1], true), d.criticAdam[1]) ||
			!sameState(td3State(c), td3State(d)) {
			t.Fatal("float64 → float32: the networks or the rounded optimizers did not carry over")
		}
		td3Steps(t, d, 4)
		if sameState(td3State(c), td3State(d)) || allFloat32(params(d.critic[0])) >= 0 {
			t.Fatal("the converted float32 learner did not keep learning")
		}
	})
}

// adamAs is a copy of a (through Save and model.LoadAdam) switched to the
// given precision with model.Adam.SetFloat32: what a learner's Load makes
// of a saved optimizer of the other precision.
func adamAs(t *testing.T, a *model.Adam, f32 bool) *model.Adam {
	t.Helper()
	var b bytes.Buffer
	if err := a.Save(&b); err != nil {
		t.Fatal(err)
	}
	c, err := model.LoadAdam(&b)
	if err != nil {
		t.Fatal(err)
	}
	c.SetFloat32(f32)
	return c
}

// sameAdam reports whether two optimizers save the same bytes (config,
// step count, moments).
func sameAdam(t *testing.T, a, b *model.Adam) bool {
	t.Helper()
	var x, y bytes.Buffer
	if err := a.Save(&x); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(&y); err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// equal reports whether a and b hold the same values bit for bit.
func equal(a, b []float64) bool { return moved(a, b) == 0 && len(a) == len(b) }
