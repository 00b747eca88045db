package envs_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apexrl/apex/envs"
)

// newLQR builds LQR-v0 with p (and further options), failing the test on
// an error.
func newLQR(t *testing.T, p envs.LQRParams, opts ...envs.Option) *envs.LQR {
	t.Helper()
	env, err := envs.NewLQR(append([]envs.Option{envs.WithLQR(p)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// step steps env with the scalar action u, failing the test on an error.
func step(t *testing.T, env envs.Env, u float64) envs.StepResult {
	t.Helper()
	res, err := env.Step(envs.Action{Vec: []float64{u}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestLQRMake(t *testing.T) {
	env, err := envs.Make("LQR-v0")
	if err != nil {
		t.Fatal(err)
	}
	lqr, ok := env.(*envs.LQR)
	if !ok {
		t.Fatalf("Make(LQR-v0) is a %T", env)
	}
	if got, want := lqr.Params(), envs.DefaultLQRParams(); got != want {
		t.Errorf("Params() = %+v, want the defaults %+v", got, want)
	}
	box, ok := env.ActionSpace().(envs.Box)
	if !ok || !slices.Equal(box.Low, []float64{-2}) || !slices.Equal(box.High, []float64{2}) {
		t.Errorf("ActionSpace() = %v, want Box[-2, 2]", env.ActionSpace())
	}
	if obs := env.ObservationSpace(); !slices.Equal(obs.Low, []float64{-3}) || !slices.Equal(obs.High, []float64{3}) {
		t.Errorf("ObservationSpace() = %v, want Box[-3, 3]", obs)
	}
	if env.MaxEpisodeSteps() != 200 {
		t.Errorf("MaxEpisodeSteps() = %d, want 200", env.MaxEpisodeSteps())
	}

	// Options come through Make; the spaces follow the parameters.
	p := envs.DefaultLQRParams()
	p.A, p.UMax, p.XMax, p.X0 = 0.9, 5, 7, 1
	env, err = envs.Make("LQR-v0", envs.WithLQR(p), envs.WithMaxSteps(50))
	if err != nil {
		t.Fatal(err)
	}
	if got := env.(*envs.LQR).Params(); got != p {
		t.Errorf("Params() = %+v, want %+v", got, p)
	}
	if env.MaxEpisodeSteps() != 50 || env.ActionSpace().String() != "Box[-5, 5]" || env.ObservationSpace().String() != "Box[-7, 7]" {
		t.Errorf("with options: limit %d, spaces %v and %v", env.MaxEpisodeSteps(), env.ActionSpace(), env.ObservationSpace())
	}

	// WithLQR is LQR-v0's alone.
	if _, err := envs.Make("Pendulum-v1", envs.WithLQR(p)); !errors.Is(err, envs.ErrBadOption) || !strings.Contains(err.Error(), "does not accept WithLQR") {
		t.Errorf("Pendulum-v1 with WithLQR: err = %v", err)
	}
}

func TestLQRBadParams(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		set func(*envs.LQRParams)
		msg string
	}{
		{func(p *envs.LQRParams) { p.A = nan }, "dynamics"},
		{func(p *envs.LQRParams) { p.B = -inf }, "dynamics"},
		{func(p *envs.LQRParams) { p.Q = 0 }, "cost weights"},
		{func(p *envs.LQRParams) { p.R = -1 }, "cost weights"},
		{func(p *envs.LQRParams) { p.R = inf }, "cost weights"},
		{func(p *envs.LQRParams) { p.UMax = 0 }, "action bound"},
		{func(p *envs.LQRParams) { p.UMax = inf }, "action bound"},
		{func(p *envs.LQRParams) { p.XMax = -3 }, "state bound"},
		{func(p *envs.LQRParams) { p.XMax = inf }, "state bound"},
		{func(p *envs.LQRParams) { p.X0 = -1 }, "initial range"},
		{func(p *envs.LQRParams) { p.X0 = 3.5 }, "initial range"},
		{func(p *envs.LQRParams) { p.X0 = nan }, "initial range"},
		{func(p *envs.LQRParams) { p.NoiseStd = -0.1 }, "noise"},
		{func(p *envs.LQRParams) { p.NoiseStd = nan }, "noise"},
		{func(p *envs.LQRParams) { *p = envs.LQRParams{} }, "cost weights"},
	} {
		p := envs.DefaultLQRParams()
		tc.set(&p)
		env, err := envs.Make("LQR-v0", envs.WithLQR(p))
		if env != nil || !errors.Is(err, envs.ErrBadOption) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%+v: Make = %v, %v; want ErrBadOption mentioning %q", p, env, err, tc.msg)
		}
		if err := p.Validate(); !errors.Is(err, envs.ErrBadOption) {
			t.Errorf("%+v: Validate() = %v", p, err)
		}
	}
	if err := envs.DefaultLQRParams().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// TestLQRSteps checks the dynamics and the reward on hand-computed steps:
// with X0 = 0 the episode starts at exactly x = 0, and every value below is
// a short binary fraction, so the comparisons are exact.
func TestLQRSteps(t *testing.T) {
	env := newLQR(t, envs.LQRParams{A: 0.5, B: 2, Q: 3, R: 0.5, UMax: 1, XMax: 10})
	if obs := env.Reset(7); !slices.Equal(obs, []float64{0}) {
		t.Fatalf("Reset with X0 = 0: %v", obs)
	}
	for i, s := range []struct{ u, x, r float64 }{
		{0.5, 1, -0.125},              // x' = 0.5·0 + 2·0.5; r = -(3·0 + 0.5·0.25)
		{-1, -1.5, -3.5},              // x' = 0.5·1 - 2;     r = -(3·1 + 0.5·1)
		{0.25, -0.25, -6.78125},       // x' = -0.75 + 0.5;   r = -(3·2.25 + 0.5·0.0625)
		{0, -0.125, -0.1875},          // x' = -0.125;        r = -(3·0.0625)
		{0.75, 1.4375, -0.328125},     // x' = -0.0625 + 1.5; r = -(3/64 + 0.5·0.5625)
		{-0.5, -0.28125, -6.32421875}, // x' = 0.71875 - 1;   r = -(3·2.06640625 + 0.125)
	} {
		res := step(t, env, s.u)
		if !slices.Equal(res.Obs, []float64{s.x}) || res.Reward != s.r || res.Terminated || res.Truncated {
			t.Errorf("step %d (u = %v): %+v, want obs [%v] reward %v", i+1, s.u, res, s.x, s.r)
		}
	}
}

// TestLQRClipping: actions outside [-UMax, UMax] act and cost as the bound;
// the state stops at the walls ±XMax.
func TestLQRClipping(t *testing.T) {
	p := envs.DefaultLQRParams()
	p.X0 = 0
	a, b := newLQR(t, p), newLQR(t, p)
	a.Reset(1)
	b.Reset(1)
	for _, u := range []struct{ raw, clipped float64 }{{5, 2}, {-7, -2}, {2.0000001, 2}, {1.5, 1.5}, {-1e300, -2}} {
		ra, rb := step(t, a, u.raw), step(t, b, u.clipped)
		if !slices.Equal(ra.Obs, rb.Obs) || ra.Reward != rb.Reward {
			t.Errorf("u = %v gives %+v, u = %v gives %+v; want equal", u.raw, ra, u.clipped, rb)
		}
	}

	// From 0, pushing +2: 2, then the wall at 3, and it stays there.
	env := newLQR(t, p)
	env.Reset(2)
	for i, want := range []struct{ x, r float64 }{{2, -4}, {3, -8}, {3, -13}, {3, -13}} {
		res := step(t, env, 10)
		if !slices.Equal(res.Obs, []float64{want.x}) || res.Reward != want.r {
			t.Errorf("push step %d: %+v, want x %v reward %v", i+1, res, want.x, want.r)
		}
	}
	// And the negative wall.
	for i, want := range []struct{ x, r float64 }{{1, -13}, {-1, -5}, {-3, -5}, {-3, -13}} {
		res := step(t, env, -2)
		if !slices.Equal(res.Obs, []float64{want.x}) || res.Reward != want.r {
			t.Errorf("pull step %d: %+v, want x %v reward %v", i+1, res, want.x, want.r)
		}
	}
}

// TestLQRReset: x_0 is a function of the seed, uniform on [-X0, X0).
func TestLQRReset(t *testing.T) {
	env, _ := envs.NewLQR()
	other, _ := envs.NewLQR()
	a, b, c := env.Reset(1), env.Reset(2), other.Reset(1)
	if slices.Equal(a, b) {
		t.Errorf("seeds 1 and 2 give the same start %v", a)
	}
	if !slices.Equal(a, c) {
		t.Errorf("seed 1 gives %v and %v", a, c)
	}
	const n = 20000
	var sum, sq float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for seed := range uint64(n) {
		x := env.Reset(seed)[0]
		if !(x >= -2 && x < 2) {
			t.Fatalf("seed %d: x_0 = %v outside [-2, 2)", seed, x)
		}
		sum += x
		sq += x * x
		lo, hi = min(lo, x), max(hi, x)
	}
	// U[-2, 2): mean 0, E[x²] = 4/3; standard errors about 0.008 and 0.008.
	if mean, m2 := sum/n, sq/n; math.Abs(mean) > 0.05 || math.Abs(m2-4.0/3) > 0.05 || lo > -1.99 || hi < 1.99 {
		t.Errorf("x_0 over %d seeds: mean %.4f, E[x²] %.4f, range [%.4f, %.4f]; want U[-2, 2)", n, mean, m2, lo, hi)
	}
}

// TestLQRNoise: with NoiseStd the step adds N(0, σ²), reproducibly from the
// Reset seed; without it the dynamics are deterministic.
func TestLQRNoise(t *testing.T) {
	p := envs.DefaultLQRParams()
	p.X0, p.XMax, p.NoiseStd = 0, 100, 0.5
	env, ref := newLQR(t, p), newLQR(t, p)
	const n = 20000
	var sum, sq float64
	for seed := range uint64(n) {
		env.Reset(seed)
		w := step(t, env, 0).Obs[0] // A·0 + B·0 + σ·ξ
		sum += w
		sq += w * w
		if seed < 20 {
			ref.Reset(seed)
			if r := step(t, ref, 0).Obs[0]; r != w {
				t.Fatalf("seed %d: noise %v, then %v", seed, w, r)
			}
		}
	}
	// Standard errors: 0.0035 for the mean, 0.0025 for the variance.
	if mean, v := sum/n, sq/n; math.Abs(mean) > 0.02 || math.Abs(v-0.25) > 0.015 {
		t.Errorf("noise over %d seeds: mean %.4f, variance %.4f; want 0, 0.25", n, mean, v)
	}
}

// lqrValueIteration iterates the Riccati map P ← q + γa²P - (γabP)²/(r +
// γb²P) from P = 0 until it stops moving (a fixed point in float64, or a
// step of at most 2 ulps once the steps stop shrinking), the plain method
// LQRGain's closed form is checked against. The map contracts by about
// γ(a - bK)² per step near P.
func lqrValueIteration(a, b, q, r, gamma float64) (K, P float64, iters int) {
	prev := math.Inf(1)
	for iters < 10_000_000 {
		iters++
		next := q + gamma*a*a*P - (gamma*a*b*P)*(gamma*a*b*P)/(r+gamma*b*b*P)
		d := math.Abs(next - P)
		P = next
		if d == 0 || (d >= prev && d <= 4.5e-16*P) {
			break
		}
		prev = d
	}
	return gamma * a * b * P / (r + gamma*b*b*P), P, iters
}

// lqrCases are (a, b, q, r, γ) covering both branches of the closed form
// (r(1-γa²) - γqb² below and above 0), unstable, negative and zero a,
// negative b, and weights far from 1.
var lqrCases = [][5]float64{
	{1, 1, 1, 1, 0.99},
	{1, 1, 1, 1, 1},
	{1, 1, 1, 1, 0.9},
	{1, 1, 1, 10, 0.99},
	{1, 1, 1, 100, 1},
	{1.2, 0.5, 2, 0.3, 0.95},
	{-0.8, 1, 1, 5, 0.99},
	{0.3, 1, 0.01, 1, 0.99},
	{0.5, -2, 3, 0.5, 0.8},
	{0, 1, 1, 1, 0.99},
	{2, 0.1, 1e-3, 1e3, 1},
	{0.99, 1e-3, 1, 1, 0.999},
}

func TestLQRGain(t *testing.T) {
	for _, c := range lqrCases {
		a, b, q, r, gamma := c[0], c[1], c[2], c[3], c[4]
		name := fmt.Sprintf("a=%g,b=%g,q=%g,r=%g,gamma=%g", a, b, q, r, gamma)
		K, P, err := envs.LQRGain(a, b, q, r, gamma)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Closed form against value iteration.
		Ki, Pi, iters := lqrValueIteration(a, b, q, r, gamma)
		if iters == 10_000_000 {
			t.Errorf("%s: value iteration did not converge", name)
		}
		t.Logf("%s: K = %.15g, P = %.15g; value iteration (%d iterations) off by %.2g", name, K, P, iters, math.Abs(P-Pi)/Pi)
		if rel := math.Abs(P-Pi) / Pi; rel > 1e-13 {
			t.Errorf("%s: P = %.17g, value iteration %.17g (%d iterations): relative gap %.3g", name, P, Pi, iters, rel)
		}
		if d := math.Abs(K - Ki); d > 1e-13*max(1, math.Abs(K)) {
			t.Errorf("%s: K = %.17g, value iteration %.17g", name, K, Ki)
		}
		// The Riccati equation and the gain formula hold.
		rhs := q + gamma*a*a*P - (gamma*a*b*P)*(gamma*a*b*P)/(r+gamma*b*b*P)
		if rel := math.Abs(rhs-P) / P; rel > 1e-14 {
			t.Errorf("%s: Riccati residual %.3g relative", name, rel)
		}
		// Stability of the discounted closed loop.
		if cl := a - b*K; !(gamma*cl*cl < 1) {
			t.Errorf("%s: γ(a - bK)² = %v, want < 1", name, gamma*cl*cl)
		}
		// P is the minimum over u of the one-step Bellman equation: the
		// value of the greedy action beats nearby actions.
		bellman := func(u float64) float64 { x1 := a + b*u; return q + r*u*u + gamma*P*x1*x1 }
		for _, du := range []float64{-1e-3, 1e-3} {
			if bellman(-K+du) <= bellman(-K) {
				t.Errorf("%s: u = -K%+g is no worse than -K", name, du)
			}
		}
	}

	// The classic case: γ = 1, a = b = q = r = 1 gives P = φ and K = φ - 1.
	phi := (1 + math.Sqrt(5)) / 2
	if K, P, _ := envs.LQRGain(1, 1, 1, 1, 1); math.Abs(P-phi) > 1e-15 || math.Abs(K-(phi-1)) > 1e-15 {
		t.Errorf("γ = 1: K, P = %.17g, %.17g; want φ-1, φ", K, P)
	}
	// b = 0: no control, P = q/(1 - γa²).
	if K, P, err := envs.LQRGain(0.5, 0, 2, 1, 0.8); err != nil || K != 0 || math.Abs(P-2/(1-0.8*0.25)) > 1e-15 {
		t.Errorf("b = 0: %v, %v, %v", K, P, err)
	}
	// Scaling q and r together scales P and leaves K.
	K1, P1, _ := envs.LQRGain(1.1, 0.7, 2, 3, 0.97)
	K2, P2, _ := envs.LQRGain(1.1, 0.7, 2e6, 3e6, 0.97)
	if math.Abs(K1-K2) > 1e-14 || math.Abs(P2/P1-1e6) > 1e-6 {
		t.Errorf("scaling: K %v vs %v, P %v vs %v", K1, K2, P1, P2)
	}
}

func TestLQRGainErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range [][5]float64{
		{1, 1, 0, 1, 0.99},   // q = 0
		{1, 1, 1, 0, 0.99},   // r = 0
		{1, 1, -1, 1, 0.99},  // q < 0
		{1, 1, 1, 1, 0},      // γ = 0
		{1, 1, 1, 1, 1.01},   // γ > 1
		{nan, 1, 1, 1, 0.99}, // NaN
		{1, inf, 1, 1, 0.99}, // Inf
		{1, 1, 1, 1, nan},    // NaN γ
		{1, 0, 1, 1, 1},      // b = 0, γa² = 1
		{1.2, 0, 1, 1, 0.9},  // b = 0, γa² > 1
	} {
		if K, P, err := envs.LQRGain(c[0], c[1], c[2], c[3], c[4]); !errors.Is(err, envs.ErrBadOption) || K != 0 || P != 0 {
			t.Errorf("LQRGain%v = %v, %v, %v; want ErrBadOption", c, K, P, err)
		}
	}
}

// discountedReturn plays u = policy(x) from Reset(seed) to the end of the
// episode and returns x_0 and Σ_t γ^t·r_t.
func discountedReturn(t *testing.T, env envs.Env, seed uint64, gamma float64, policy func(t int, x float64) float64) (x0, g float64) {
	t.Helper()
	x := env.Reset(seed)[0]
	x0 = x
	disc := 1.0
	for k := 0; ; k++ {
		res := step(t, env, policy(k, x))
		g += disc * res.Reward
		disc *= gamma
		if res.Terminated {
			t.Fatalf("LQR terminated at step %d", k+1)
		}
		if res.Truncated {
			if k+1 != env.MaxEpisodeSteps() {
				t.Fatalf("truncated at step %d, limit %d", k+1, env.MaxEpisodeSteps())
			}
			return x0, g
		}
		x = res.Obs[0]
	}
}

// TestLQRClosedLoop simulates u = -K·x in the environment: the discounted
// return Σ_{t>=0} γ^t·r_t, where r_t pays for x_t and u_t, equals -P·x_0²
// over a horizon long enough for the tail to vanish, for the defaults'
// own 200-step episodes too; and no perturbation of the optimal actions
// does better.
func TestLQRClosedLoop(t *testing.T) {
	for _, c := range lqrCases {
		a, b, q, r, gamma := c[0], c[1], c[2], c[3], c[4]
		K, P, _ := envs.LQRGain(a, b, q, r, gamma)
		cl := gamma * (a - b*K) * (a - b*K)
		// Steps for the tail (γ(a-bK)²)^N to fall below 1e-17.
		n := int(math.Ceil(math.Log(1e-17)/math.Log(cl))) + 1
		if n > 2_000_000 {
			continue // too slow a closed loop to simulate
		}
		// Bounds wide enough not to bind.
		p := envs.LQRParams{A: a, B: b, Q: q, R: r, UMax: 1e6, XMax: 1e6, X0: 1}
		env := newLQR(t, p, envs.WithMaxSteps(n))
		for seed := range uint64(3) {
			x0, g := discountedReturn(t, env, seed, gamma, func(_ int, x float64) float64 { return -K * x })
			want := -P * x0 * x0
			if seed == 0 {
				t.Logf("a=%g b=%g q=%g r=%g γ=%g: %d steps, return off -P·x_0² by %.2g", a, b, q, r, gamma, n, math.Abs(g-want)/math.Abs(want))
			}
			if rel := math.Abs(g-want) / math.Abs(want); rel > 1e-11 {
				t.Errorf("a=%g b=%g q=%g r=%g γ=%g seed %d: return %.15g over %d steps, -P·x_0² = %.15g (relative gap %.3g)", a, b, q, r, gamma, seed, g, n, want, rel)
			}
		}
	}

	// The registered environment, its 200-step episodes and its bounds:
	// the truncated return of -K*·x is -P·x_0² (the tail is about 1e-167),
	// and the bounds never bind.
	const gamma = 0.99
	env, _ := envs.NewLQR()
	K, P, err := env.Params().Gain(gamma)
	if err != nil {
		t.Fatal(err)
	}
	optimal := func(_ int, x float64) float64 {
		u := -K * x
		if math.Abs(u) >= 2 {
			t.Fatalf("the optimal action %v at x = %v reaches the bound", u, x)
		}
		return u
	}
	rng := rand.New(rand.NewPCG(5, 5))
	for seed := range uint64(20) {
		x0, g := discountedReturn(t, env, seed, gamma, optimal)
		want := -P * x0 * x0
		if rel := math.Abs(g-want) / math.Abs(want); rel > 1e-12 {
			t.Errorf("LQR-v0 seed %d: return %.15g, -P·x_0² = %.15g", seed, g, want)
		}
		// Perturbing the optimal actions (the gain, or each action a
		// little) costs return.
		for _, k := range []float64{0.9 * K, 0.99 * K, 1.01 * K, 1.1 * K} {
			if _, gk := discountedReturn(t, env, seed, gamma, func(_ int, x float64) float64 { return -k * x }); !(gk < g) {
				t.Errorf("seed %d: gain %v returns %v, not below the optimum's %v", seed, k, gk, g)
			}
		}
		noise := make([]float64, 200)
		for i := range noise {
			noise[i] = 0.05 * rng.NormFloat64()
		}
		if _, gn := discountedReturn(t, env, seed, gamma, func(t int, x float64) float64 { return -K*x + noise[t] }); !(gn < g) {
			t.Errorf("seed %d: perturbed actions return %v, not below the optimum's %v", seed, gn, g)
		}
	}
}

// TestLQRDefaults pins the documented defaults: K* for γ = 0.99, and the
// optimal policy inside the action bound over the whole observation box
// for γ in [0.9, 1].
func TestLQRDefaults(t *testing.T) {
	p := envs.DefaultLQRParams()
	if p != (envs.LQRParams{A: 1, B: 1, Q: 1, R: 1, UMax: 2, XMax: 3, X0: 2}) {
		t.Fatalf("defaults %+v", p)
	}
	K, P, _ := p.Gain(0.99)
	if math.Abs(K-0.615251) > 5e-7 || math.Abs(P-1.615251) > 5e-7 {
		t.Errorf("γ = 0.99: K, P = %v, %v; documented 0.615251, 1.615251", K, P)
	}
	for _, gamma := range []float64{0.9, 0.95, 0.99, 0.995, 0.999, 1} {
		K, _, _ := p.Gain(gamma)
		if K*p.XMax >= p.UMax || math.Abs(p.A-p.B*K) >= 1 {
			t.Errorf("γ = %v: K* = %v: K*·XMax = %v, closed loop %v", gamma, K, K*p.XMax, p.A-p.B*K)
		}
	}
}

// ExampleLQRGain computes the optimal gain of the environment an agent
// trains on, for the agent's discount.
func ExampleLQRGain() {
	env, err := envs.Make("LQR-v0")
	if err != nil {
		panic(err)
	}
	K, P, err := env.(*envs.LQR).Params().Gain(0.99)
	if err != nil {
		panic(err)
	}
	fmt.Printf("optimal policy u = -%.6f·x, value -%.6f·x²\n", K, P)

	K, P, _ = envs.LQRGain(1, 1, 1, 1, 1) // undiscounted: the golden ratio
	fmt.Printf("γ = 1: K = %.6f, P = %.6f\n", K, P)
	// Output:
	// optimal policy u = -0.615251·x, value -1.615251·x²
	// γ = 1: K = 0.618034, P = 1.618034
}
