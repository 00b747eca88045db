#!/usr/bin/python3
"""Golden-trajectory generator for package envs.

An independent numpy transcription of each environment's published
dynamics (Gymnasium 1.0 classic_control, TER's NChain, PER's Blind
Cliffwalk, apex's symbolic key-door grid and LQR-v0), written from the
equations and not from the Go code. It also transcribes the only Go
randomness the environments use: math/rand/v2's PCG (128-bit LCG, DXSM
output), its Float64 and IntN, seeded as envs seeds it (hi = seed,
lo = splitmix64(seed)).

Run from the repository root (Debian's python3 with python3-numpy):

    /usr/bin/python3 envs/testdata/gen_golden.py [OUTDIR]

It rewrites envs/testdata/golden/*.json (or writes them to OUTDIR; the Go
test TestGoldenUpToDate does that to check the committed files are current). Each file holds cases: a seed, the
action sequence, the observation after Reset and, per step, the
observation, reward and the terminated/truncated flags. The Go tests
(golden_test.go) replay the actions and compare to 1e-9.

Float semantics follow Gymnasium under numpy 1.x: float64 arithmetic
throughout, Acrobot's initial state cast to float32, MountainCarContinuous's
state stored as float32 after each step.
"""

import json
import math
import os
import sys

import numpy as np

M64 = (1 << 64) - 1
M128 = (1 << 128) - 1
PCG_MUL = (2549297995355413924 << 64) | 4865540595714422341
PCG_INC = (6364136223846793005 << 64) | 1442695040888963407


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class PCG:
    """math/rand/v2 PCG with Rand.Float64 and Rand.IntN on top."""

    def __init__(self, seed):
        self.state = (seed << 64) | splitmix64(seed)

    def uint64(self):
        self.state = (self.state * PCG_MUL + PCG_INC) & M128
        hi, lo = self.state >> 64, self.state & M64
        hi ^= hi >> 32
        hi = (hi * 0xDA942042E4DD58B5) & M64
        hi ^= hi >> 48
        return (hi * (lo | 1)) & M64

    def float64(self):
        return (self.uint64() & ((1 << 53) - 1)) / float(1 << 53)

    def uniform(self, low, high):
        return low + (high - low) * self.float64()

    def intn(self, n):
        if n & (n - 1) == 0:
            return self.uint64() & (n - 1)
        prod = self.uint64() * n
        hi, lo = prod >> 64, prod & M64
        if lo < n:
            thresh = ((1 << 64) - n) % n
            while lo < thresh:
                prod = self.uint64() * n
                hi, lo = prod >> 64, prod & M64
        return hi


# ---------------------------------------------------------------- CartPole-v1


class CartPole:
    name = "CartPole-v1"
    limit = 500
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    total_mass = masspole + masscart
    polemass_length = masspole * length
    theta_threshold = 12 * 2 * math.pi / 360
    x_threshold = 2.4

    def reset(self, rng):
        self.s = [rng.uniform(-0.05, 0.05) for _ in range(4)]
        return list(self.s)

    def step(self, a):
        x, x_dot, theta, theta_dot = self.s
        force = self.force_mag if a == 1 else -self.force_mag
        c, s = math.cos(theta), math.sin(theta)
        temp = (force + self.polemass_length * theta_dot**2 * s) / self.total_mass
        thetaacc = (self.gravity * s - c * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * c**2 / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * c / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.s = [x, x_dot, theta, theta_dot]
        term = (x < -self.x_threshold or x > self.x_threshold
                or theta < -self.theta_threshold or theta > self.theta_threshold)
        return list(self.s), 1.0, term


# ----------------------------------------------------------------- Acrobot-v1


class Acrobot:
    name = "Acrobot-v1"
    limit = 500
    dt = 0.2
    torques = [-1.0, 0.0, 1.0]

    def reset(self, rng):
        u = np.array([rng.uniform(-0.1, 0.1) for _ in range(4)])
        self.s = u.astype(np.float32).astype(np.float64)
        return self.obs()

    def obs(self):
        s = self.s
        return [math.cos(s[0]), math.sin(s[0]), math.cos(s[1]), math.sin(s[1]), float(s[2]), float(s[3])]

    @staticmethod
    def dsdt(y):
        m1 = m2 = l1 = 1.0
        lc1 = lc2 = 0.5
        i1 = i2 = 1.0
        g = 9.8
        th1, th2, dth1, dth2, a = y
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * math.cos(th2)) + i1 + i2
        d2 = m2 * (lc2**2 + l1 * lc2 * math.cos(th2)) + i2
        phi2 = m2 * lc2 * g * math.cos(th1 + th2 - math.pi / 2.0)
        phi1 = (-m2 * l1 * lc2 * dth2**2 * math.sin(th2)
                - 2 * m2 * l1 * lc2 * dth2 * dth1 * math.sin(th2)
                + (m1 * lc1 + m2 * l1) * g * math.cos(th1 - math.pi / 2) + phi2)
        # "book" variant (Sutton & Barto), Gymnasium's default.
        ddth2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dth1**2 * math.sin(th2) - phi2) / (
            m2 * lc2**2 + i2 - d2**2 / d1)
        ddth1 = -(d2 * ddth2 + phi1) / d1
        return np.array([dth1, dth2, ddth1, ddth2, 0.0])

    def step(self, a):
        y0 = np.append(self.s, self.torques[a])
        h = self.dt
        k1 = self.dsdt(y0)
        k2 = self.dsdt(y0 + h / 2.0 * k1)
        k3 = self.dsdt(y0 + h / 2.0 * k2)
        k4 = self.dsdt(y0 + h * k3)
        ns = (y0 + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4))[:4]
        for i in (0, 1):
            while ns[i] > math.pi:
                ns[i] -= 2 * math.pi
            while ns[i] < -math.pi:
                ns[i] += 2 * math.pi
        ns[2] = min(max(ns[2], -4 * math.pi), 4 * math.pi)
        ns[3] = min(max(ns[3], -9 * math.pi), 9 * math.pi)
        self.s = ns
        term = bool(-math.cos(ns[0]) - math.cos(ns[1] + ns[0]) > 1.0)
        return self.obs(), (0.0 if term else -1.0), term


# ------------------------------------------------------------- MountainCar-v0


class MountainCar:
    name = "MountainCar-v0"
    limit = 200

    def reset(self, rng):
        self.pos, self.vel = rng.uniform(-0.6, -0.4), 0.0
        return [self.pos, self.vel]

    def step(self, a):
        v = self.vel + ((a - 1) * 0.001 + math.cos(3 * self.pos) * (-0.0025))
        v = min(max(v, -0.07), 0.07)
        p = self.pos + v
        p = min(max(p, -1.2), 0.6)
        if p == -1.2 and v < 0:
            v = 0.0
        self.pos, self.vel = p, v
        return [p, v], -1.0, bool(p >= 0.5 and v >= 0)


# --------------------------------------------------- MountainCarContinuous-v0


class MountainCarContinuous:
    name = "MountainCarContinuous-v0"
    limit = 999

    def reset(self, rng):
        self.pos, self.vel = rng.uniform(-0.6, -0.4), 0.0
        return [self.pos, self.vel]

    def step(self, a):
        force = min(max(a, -1.0), 1.0)
        v = self.vel + (force * 0.0015 - 0.0025 * math.cos(3 * self.pos))
        v = min(max(v, -0.07), 0.07)
        p = self.pos + v
        p = min(max(p, -1.2), 0.6)
        if p == -1.2 and v < 0:
            v = 0.0
        term = bool(p >= 0.45 and v >= 0)
        r = (100.0 if term else 0.0) - a**2 * 0.1
        # Gymnasium stores the state as float32 after every step.
        self.pos, self.vel = float(np.float32(p)), float(np.float32(v))
        return [self.pos, self.vel], r, term


# ---------------------------------------------------------------- Pendulum-v1


def angle_normalize(x):
    return ((x + np.pi) % (2 * np.pi)) - np.pi


class Pendulum:
    name = "Pendulum-v1"
    limit = 200

    def reset(self, rng):
        self.th = rng.uniform(-math.pi, math.pi)
        self.thdot = rng.uniform(-1.0, 1.0)
        return self.obs()

    def obs(self):
        return [math.cos(self.th), math.sin(self.th), self.thdot]

    def step(self, a):
        g, m, l, dt = 10.0, 1.0, 1.0, 0.05
        u = float(np.clip(a, -2.0, 2.0))
        cost = float(angle_normalize(np.float64(self.th))) ** 2 + 0.1 * self.thdot**2 + 0.001 * u**2
        nthdot = self.thdot + (3 * g / (2 * l) * math.sin(self.th) + 3.0 / (m * l**2) * u) * dt
        nthdot = min(max(nthdot, -8.0), 8.0)
        self.th = self.th + nthdot * dt
        self.thdot = nthdot
        return self.obs(), -cost, False


class SparsePendulum(Pendulum):
    """NERS's Pendulum*: reward 1 once the angle after the step has stayed
    within +-pi/3 of upright for at least 20 consecutive steps, else 0."""
    name = "SparsePendulum-v1"

    def reset(self, rng):
        self.run = 0
        return super().reset(rng)

    def step(self, a):
        obs, _, term = super().step(a)
        self.run = self.run + 1 if abs(float(angle_normalize(np.float64(self.th)))) <= math.pi / 3 else 0
        return obs, (1.0 if self.run >= 20 else 0.0), term


# ---------------------------------------------------------------- NChain (TER)


def one_hot(i, n):
    v = [0.0] * n
    v[i] = 1.0
    return v


class NChain:
    """TER appendix D.1: s_1..s_N, forward (0) / backward (1), +1 on s_{N-1}->s_N."""

    name = "NChain"

    def __init__(self, n=20):
        self.n = n
        self.limit = 2 * n * n

    def reset(self, rng):
        self.i = 0
        return one_hot(0, self.n)

    def step(self, a):
        if a == 0:
            self.i += 1
        elif self.i > 0:
            self.i -= 1
        term = self.i == self.n - 1
        return one_hot(self.i, self.n), (1.0 if term else 0.0), term


# ---------------------------------------------------- Blind Cliffwalk (PER B.1)


class Cliffwalk:
    """s_0..s_{n-1}; the right action at s_i is i mod 2; terminal index n."""

    name = "BlindCliffwalk"
    limit = 0

    def __init__(self, n=10):
        self.n = n

    def reset(self, rng):
        self.i = 0
        return one_hot(0, self.n + 1)

    def step(self, a):
        r = 0.0
        if a != self.i % 2:
            self.i = self.n
        elif self.i == self.n - 1:
            self.i, r = self.n, 1.0
        else:
            self.i += 1
        return one_hot(self.i, self.n + 1), r, self.i == self.n


# ------------------------------------------------------------------ KeyDoor

DIRS = [(1, 0), (0, 1), (-1, 0), (0, -1)]  # east, south, west, north (y down)
LOCKED, CLOSED, OPEN = 0, 1, 2


class KeyDoor:
    """DoorKey-like grid: outer walls, a vertical wall at x = split with a
    locked door at (split, door_y), a key left of the wall, the goal at
    (size-2, size-2). Actions: 0 left, 1 right, 2 forward, 3 pickup, 4 toggle.
    tabular: the observation is a one-hot code of (x, y, dir, carrying, door)
    over the inner cells, 24 (size-2)^2 values."""

    def __init__(self, size=6, random_layout=False, tabular=False):
        self.size = size
        self.random = random_layout
        self.tabular = tabular
        self.limit = 10 * size * size
        self.goal_reward = float(self.limit)
        self.name = "KeyDoor-Random" if random_layout else ("KeyDoor-Tabular" if tabular else "KeyDoor")

    def reset(self, rng):
        S = self.size
        if self.random:
            self.split = 2 + rng.intn(S - 4)
            w = self.split - 1
            cells = w * (S - 2)
            agent = rng.intn(cells)
            self.dir = rng.intn(4)
            self.door_y = 1 + rng.intn(S - 3)
            key = rng.intn(cells - 1)
            if key >= agent:
                key += 1
            self.x, self.y = 1 + agent % w, 1 + agent // w
            self.key = (1 + key % w, 1 + key // w)
        else:
            self.split, self.door_y = S // 2, S // 2 - 1
            self.x, self.y, self.dir = 1, 1, 0
            self.key = (1, S - 2)
        self.carrying, self.door = False, LOCKED
        return self.obs()

    def cell(self, x, y):
        S = self.size
        if x in (0, S - 1) or y in (0, S - 1):
            return "wall"
        if x == self.split:
            return "door" if y == self.door_y else "wall"
        if not self.carrying and (x, y) == self.key:
            return "key"
        if (x, y) == (S - 2, S - 2):
            return "goal"
        return "empty"

    def obs(self):
        S = self.size
        if self.tabular:
            state = (((self.x - 1) + (self.y - 1) * (S - 2)) * 4 + self.dir) * 6 + (3 if self.carrying else 0) + self.door
            return one_hot(state, 24 * (S - 2) ** 2)
        o = one_hot(self.x, S) + one_hot(self.y, S) + one_hot(self.dir, 4)
        o += [1.0 if self.carrying else 0.0] + one_hot(self.door, 3)
        if self.random:
            o += one_hot(self.split, S) + one_hot(self.door_y, S) + one_hot(self.key[0], S) + one_hot(self.key[1], S)
        return o

    def step(self, a):
        dx, dy = DIRS[self.dir]
        fx, fy = self.x + dx, self.y + dy
        front = self.cell(fx, fy)
        term = False
        if a == 0:
            self.dir = (self.dir + 3) % 4
        elif a == 1:
            self.dir = (self.dir + 1) % 4
        elif a == 2:
            if front in ("empty", "goal") or (front == "door" and self.door == OPEN):
                self.x, self.y = fx, fy
                term = front == "goal"
        elif a == 3:
            if front == "key":
                self.carrying = True
        elif a == 4:
            if front == "door":
                if self.door == LOCKED:
                    if self.carrying:
                        self.door = OPEN
                else:
                    self.door = CLOSED if self.door == OPEN else OPEN
        return self.obs(), (self.goal_reward if term else -1.0), term


# ------------------------------------------------------------------ LQR-v0


class LQR:
    """x' = clip(a x + b u, +-x_max), u = clip(action, +-u_max),
    r = -(q x^2 + r u^2) on x and the clipped u; x_0 ~ U[-x0, x0)."""

    name = "LQR-v0"
    limit = 200
    a, b, q, r, u_max, x_max, x0 = 1.0, 1.0, 1.0, 1.0, 2.0, 3.0, 2.0

    def reset(self, rng):
        self.x = rng.uniform(-self.x0, self.x0)
        return [self.x]

    def step(self, act):
        u = min(max(act, -self.u_max), self.u_max)
        x = self.x
        cost = self.q * x * x + self.r * u * u
        self.x = min(max(self.a * x + self.b * u, -self.x_max), self.x_max)
        return [self.x], -cost, False


# ------------------------------------------------------------------ driver


class ActionLCG:
    """A small LCG (Knuth MMIX constants) that picks the random actions."""

    def __init__(self, seed):
        self.x = seed

    def next(self):
        self.x = (self.x * 6364136223846793005 + 1442695040888963407) & M64
        return self.x >> 11

    def intn(self, n):
        return self.next() % n

    def unit(self):
        return self.next() / float(1 << 53)


def rollout(env, seed, policy, max_len=None):
    """Runs one episode; policy(obs, t) gives the action."""
    rng = PCG(seed)
    obs = env.reset(rng)
    case = {"seed": seed, "reset": obs, "actions": [], "steps": []}
    t = 0
    while True:
        a = policy(obs, t)
        obs, r, term = env.step(a)
        t += 1
        trunc = (not term) and env.limit > 0 and t >= env.limit
        case["actions"].append(a)
        case["steps"].append({"obs": obs, "reward": r, "terminated": term, "truncated": trunc})
        if term or trunc or (max_len is not None and t >= max_len):
            return case


def random_discrete(n, seed):
    lcg = ActionLCG(seed)
    return lambda obs, t: lcg.intn(n)


def random_box(low, high, seed):
    lcg = ActionLCG(seed)
    return lambda obs, t: low + (high - low) * lcg.unit()


def cases():
    out = {}

    cp = CartPole()
    out[cp.name] = [
        rollout(cp, 1, random_discrete(2, 11)),          # falls early: terminated
        rollout(cp, 2, random_discrete(2, 12)),
        # A linear balancing controller that survives the 500-step limit: truncated.
        # Replayed open loop, the upright pole amplifies libm's last-bit
        # differences (Go's sin/cos against glibc's) past 1e-9 within about
        # 250 steps, so the Go test restarts each step from the recorded
        # state ("resync"): it checks every one-step transition and the flags.
        dict(rollout(cp, 3, lambda o, t: 1 if (o[2] + 0.4 * o[3] + 0.05 * o[0] + 0.1 * o[1]) > 0 else 0),
             resync=True),
    ]

    ac = Acrobot()
    out[ac.name] = [
        rollout(ac, 4, random_discrete(3, 13)),          # random torques: truncated at 500
        # Energy pumping (torque with the sign of the second joint's velocity) reaches the line.
        rollout(ac, 5, lambda o, t: 2 if o[5] > 0 else 0),
    ]

    mc = MountainCar()
    out[mc.name] = [
        rollout(mc, 6, random_discrete(3, 14)),          # truncated at 200
        rollout(mc, 7, lambda o, t: 2 if o[1] >= 0 else 0),  # swings up: terminated
    ]

    mcc = MountainCarContinuous()
    out[mcc.name] = [
        # Out-of-range actions (|a| up to 1.5) exercise the force clip and the raw-action penalty.
        rollout(mcc, 8, random_box(-1.5, 1.5, 15)),
        rollout(mcc, 9, lambda o, t: 1.25 if o[1] >= 0 else -0.75),
    ]

    pe = Pendulum()
    out[pe.name] = [
        rollout(pe, 10, random_box(-2.5, 2.5, 16)),      # torques beyond ±2 are clipped
        rollout(pe, 11, lambda o, t: -2.0 if o[2] > 0 else 2.0),
    ]

    sp = SparsePendulum()
    # The first seed from 26 whose reset angle is within 0.3 of upright: a
    # PD controller holds it there and collects reward 1 from step 20 on.
    seed = 26
    while abs(float(angle_normalize(np.float64(PCG(seed).uniform(-math.pi, math.pi))))) >= 0.3:
        seed += 1
    pd = lambda o, t: float(np.clip(-10.0 * math.atan2(o[1], o[0]) - 2.0 * o[2], -2.0, 2.0))
    out[sp.name] = [
        rollout(sp, seed, pd),
        rollout(sp, 27, random_box(-2.5, 2.5, 62)),
    ]

    nc = NChain()
    out[nc.name] = [
        rollout(nc, 12, lambda o, t, lcg=ActionLCG(17): 0 if lcg.unit() < 0.3 else 1),  # truncated at 800
        rollout(nc, 13, lambda o, t: 1 if t in (3, 4, 10) else 0),  # reaches s_N: terminated
    ]
    nc5 = NChain(5)
    out["NChain-5"] = ("NChain", {"size": 5}, [rollout(nc5, 14, random_discrete(2, 18))])

    cw = Cliffwalk()
    right = lambda o, t: o.index(1.0) % 2
    out[cw.name] = [
        rollout(cw, 15, right),                          # all right: reward 1
        rollout(cw, 16, lambda o, t: right(o, t) if t < 4 else 1 - right(o, t)),  # falls at step 5
        rollout(cw, 17, random_discrete(2, 19)),
    ]

    kd = KeyDoor()
    # A 15-step solution of the fixed 6x6 layout, then a random policy (truncated at 360).
    solve = [1, 2, 2, 3, 0, 2, 0, 2, 1, 4, 2, 2, 1, 2, 2]
    out[kd.name] = [
        rollout(kd, 18, lambda o, t: solve[t]),
        rollout(kd, 19, random_discrete(5, 20)),
    ]
    kt = KeyDoor(tabular=True)
    # Short cases: each observation is 384 values.
    out[kt.name] = [
        rollout(kt, 24, lambda o, t: solve[t]),
        rollout(kt, 25, random_discrete(5, 61), max_len=30),
    ]
    kr = KeyDoor(8, random_layout=True)
    out["KeyDoor-Random-8"] = ("KeyDoor-Random", {"size": 8},
                               [rollout(kr, 38, random_discrete(5, 59)),          # reaches the goal at step 150
                                rollout(kr, 20, random_discrete(5, 41), max_len=100)])

    lq = LQR()
    # The optimal gain for gamma = 0.99: K = gamma*P/(1 + gamma*P), P the positive
    # root of 0.99 P^2 + (0.01 - 0.99) P - 1 = 0 (a = b = q = r = 1).
    c1 = 0.01 - 0.99
    p_star = (-c1 + math.sqrt(c1 * c1 + 4 * 0.99)) / (2 * 0.99)
    k_star = 0.99 * p_star / (1 + 0.99 * p_star)
    out[lq.name] = [
        rollout(lq, 21, random_box(-2.5, 2.5, 60)),     # clipped actions, the walls at +-3
        rollout(lq, 22, lambda o, t: -k_star * o[0]),    # the optimal linear policy
        rollout(lq, 23, lambda o, t: 2.5 if o[0] >= 0 else -2.5, max_len=10),  # pinned at a wall: reward -13
    ]
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    gdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "golden")
    os.makedirs(gdir, exist_ok=True)
    for name, cs in cases().items():
        env, opts = name, {}
        if isinstance(cs, tuple):
            env, opts, cs = cs
        path = os.path.join(gdir, name + ".json")
        with open(path, "w") as f:
            json.dump({"env": env, "options": opts, "generator": "gen_golden.py", "cases": cs}, f, separators=(",", ":"))
            f.write("\n")
        last = [c["steps"][-1] for c in cs]
        print(name, [(len(c["steps"]), s["terminated"], s["truncated"]) for c, s in zip(cs, last)], file=sys.stderr)


if __name__ == "__main__":
    main()
