#!/usr/bin/env python3
"""numpy reference for model's BenchmarkTrainStep / BenchmarkTrainStep32.

One DQN learner update of the 4-64-64-2 ReLU network in float32, exactly
the step the Go benchmarks time:

  forward   h1 = relu(x W1 + b1), h2 = relu(h1 W2 + b2), q = h2 W3 + b3
  loss      weighted Huber (delta 1) on the taken actions,
            L = (1/B) sum_i w_i rho(q[i, a_i] - target_i); dL/dq is zero
            except at the taken actions: w_i rho'(delta_i) / B
  backward  dW = x^T dz, db = column sums of dz, dz below = (dz W^T) * [h > 0]
            (no gradient with respect to the input)
  Adam      global gradient norm, clipped to 40, bias-corrected Adam
            (lr 1e-4, beta 0.9/0.999, eps 1e-8 outside the square root)

Parameters and gradients live in one flat float32 vector each (the layers
are views into them, as in model.Net), every buffer is preallocated and the
products write into them with out=, so numpy's per-call overhead is as small
as numpy allows. Run it with one OpenBLAS thread:

  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \
      /usr/bin/python3 bench/numpy_trainstep.py

(/usr/bin/python3: Debian's interpreter, which sees python3-numpy; a pyenv
python3 earlier on PATH does not.)

It prints the BLAS numpy uses and the median time per step at B = 64 and 256.
"""
import sys
import time

import numpy as np

SIZES = [4, 64, 64, 2]
LR, B1, B2, EPS, CLIP = 1e-4, 0.9, 0.999, 1e-8, 40.0


def blas_info():
    try:
        from threadpoolctl import threadpool_info
        return "; ".join("%s %s (%s threads)" % (i.get("internal_api"), i.get("version"), i.get("num_threads"))
                         for i in threadpool_info())
    except ImportError:
        pass
    try:
        cfg = np.show_config(mode="dicts")  # numpy >= 1.25
        return str(cfg["Build Dependencies"]["blas"])
    except TypeError:
        import io, contextlib
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            np.show_config()
        return " ".join(l.strip() for l in buf.getvalue().splitlines() if "libraries" in l)


def loaded_blas():
    """The BLAS shared objects actually mapped into this process."""
    try:
        with open("/proc/self/maps") as f:
            libs = {l.split()[-1] for l in f if "blas" in l.lower() or "lapack" in l.lower()}
        return ", ".join(sorted(l.rsplit("/", 1)[-1] for l in libs))
    except OSError:
        return "?"


class Step:
    def __init__(self, bsz, rng):
        shapes = [(SIZES[i], SIZES[i + 1]) for i in range(len(SIZES) - 1)]
        n = sum(i * o + o for i, o in shapes)
        self.params = np.zeros(n, np.float32)
        self.grads = np.zeros(n, np.float32)
        self.m = np.zeros(n, np.float32)
        self.v = np.zeros(n, np.float32)
        self.t = 0
        self.W, self.b, self.gW, self.gb = [], [], [], []
        off = 0
        for i, o in shapes:
            lim = np.sqrt(6.0 / (i + o))  # Glorot uniform, as model.NewNet
            self.params[off:off + i * o] = rng.uniform(-lim, lim, i * o)
            self.W.append(self.params[off:off + i * o].reshape(i, o))
            self.gW.append(self.grads[off:off + i * o].reshape(i, o))
            off += i * o
            self.b.append(self.params[off:off + o])
            self.gb.append(self.grads[off:off + o])
            off += o
        self.x = rng.uniform(-1, 1, (bsz, SIZES[0])).astype(np.float32)
        self.actions = rng.integers(0, SIZES[-1], bsz)
        self.target = rng.uniform(-1, 1, bsz).astype(np.float32)
        self.weight = rng.uniform(-1, 1, bsz).astype(np.float32)
        self.rows = np.arange(bsz)
        self.h = [np.zeros((bsz, o), np.float32) for _, o in shapes]
        self.dz = [np.zeros((bsz, o), np.float32) for _, o in shapes]
        self.mask = [np.zeros((bsz, o), bool) for _, o in shapes]
        self.tmp = np.zeros(n, np.float32)
        self.tmp2 = np.zeros(n, np.float32)
        self.bsz = bsz

    def __call__(self):
        # forward
        inp = self.x
        last = len(self.W) - 1
        for l in range(len(self.W)):
            h = self.h[l]
            np.matmul(inp, self.W[l], out=h)
            h += self.b[l]
            if l < last:
                np.maximum(h, 0, out=h)
            inp = h
        q = self.h[last]
        # weighted Huber on the taken actions
        d = q[self.rows, self.actions] - self.target
        ad = np.abs(d)
        rho = np.where(ad <= 1, 0.5 * d * d, ad - 0.5)
        loss = float(np.dot(self.weight, rho)) / self.bsz
        dq = self.dz[last]
        dq.fill(0)
        dq[self.rows, self.actions] = self.weight * np.clip(d, -1, 1) / self.bsz
        # backward
        dz = dq
        for l in range(last, -1, -1):
            below = self.x if l == 0 else self.h[l - 1]
            np.matmul(below.T, dz, out=self.gW[l])
            np.sum(dz, axis=0, out=self.gb[l])
            if l > 0:
                nxt = self.dz[l - 1]
                np.matmul(dz, self.W[l].T, out=nxt)
                np.greater(below, 0, out=self.mask[l - 1])
                nxt *= self.mask[l - 1]
                dz = nxt
        # Adam with global-norm clipping
        g = self.grads
        norm = float(np.sqrt(np.dot(g, g)))
        if not np.isfinite(norm):
            raise FloatingPointError("non-finite gradient")
        if norm > CLIP:
            g *= CLIP / norm
        self.t += 1
        step = LR / (1 - B1 ** self.t)
        ibc2 = 1 / np.sqrt(1 - B2 ** self.t)
        m, v, tmp, tmp2 = self.m, self.v, self.tmp, self.tmp2
        m *= B1
        np.multiply(g, 1 - B1, out=tmp)
        m += tmp
        v *= B2
        np.multiply(g, g, out=tmp)
        tmp *= 1 - B2
        v += tmp
        np.sqrt(v, out=tmp)
        tmp *= ibc2
        tmp += EPS
        np.multiply(m, step, out=tmp2)
        tmp2 /= tmp
        self.params -= tmp2
        return loss


def main():
    print("numpy", np.__version__, "| BLAS:", blas_info(), "| loaded:", loaded_blas())
    rng = np.random.default_rng(1)
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    for bsz in (64, 256):
        step = Step(bsz, rng)
        for _ in range(200):
            step()
        n = 2000 if bsz == 64 else 1000
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(n):
                step()
            times.append((time.perf_counter() - t0) / n)
        times.sort()
        print("numpy TrainStep B=%d: median %.1f us/step (min %.1f, max %.1f, %d runs of %d steps)"
              % (bsz, 1e6 * times[len(times) // 2], 1e6 * times[0], 1e6 * times[-1], reps, n))


if __name__ == "__main__":
    main()
