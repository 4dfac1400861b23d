"""The exactness probe's model and harness: a small quantized decoder, greedy
decoding against speculative verify passes.

This file is self-contained (numpy, plus mlx for the MLX substrates): the
probe runs it as a script under whatever Python has the wheel to test
(``python probe_model.py --device cpu``), so that Python needs neither this
package nor its dependencies. ``overlay_tool.probe`` imports it for the
emulator substrate and to launch the MLX ones.

The decoder (weights drawn from ``seed``, the same on every substrate):

    h = embedding[token]                                  (float32 rows)
    per layer:
        u = Q_in(rms(h))            s_t = decay * s_{t-1} + u_t   (causal state)
        h = h + Q_out(s)
        a = rms(h)                  h = h + Q_down(silu(Q_gate(a)) * Q_up(a))
    logits = Q_head(rms(h))                               (dtype bit patterns)

Every ``Q`` is an affine-quantized linear layer run as ONE product over the M
rows of a call (that is what is being probed); everything else is computed row
by row with the same code for every M, so only the quantized products can make
a row depend on M. Activations enter each product rounded to ``dtype``.

Probe: after a prompt fed one token at a time, greedy decoding produces
tokens g_0..g_{L-1} one position at a time (M = 1) and their logits; then for
k = 1..L-1 a verify pass feeds [last prompt token, g_0..g_{k-1}] at once
(M = k + 1) from the same state. Pass: for every k, the verify pass's argmax
tokens are g_0..g_k and its logits are bit-identical to the M = 1 logits.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Callable

try:
    import numpy as np
except ImportError:  # the CLI must load without it; the probe itself needs it
    np = None

LINEARS = ("in", "out", "gate", "up", "down")


@dataclass(frozen=True)
class ProbeConfig:
    seed: int = 0
    dim: int = 512  # K of the in/out/gate/up products: a multiple of 512 (qmv_fast at M = 1)
    hidden: int = 768  # K of the down product: not a multiple of 512 (qmv at M = 1)
    layers: int = 2
    vocab: int = 2048
    prompt: int = 3
    limit: int = 8  # verify passes at M = 2..limit (k = 1..limit-1 drafted tokens)
    dtype: str = "bfloat16"
    bits: int = 4
    group_size: int = 64
    decay: float = 0.5
    eps: float = 1e-5

    def shapes(self) -> dict[str, tuple[int, int]]:
        """(K, N) of every quantized product."""
        d, f = self.dim, self.hidden
        return {"in": (d, d), "out": (d, d), "gate": (d, f), "up": (d, f),
                "down": (f, d), "head": (d, self.vocab)}

    @classmethod
    def from_dict(cls, data: dict) -> "ProbeConfig":
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown probe config keys: {', '.join(sorted(unknown))}")
        return cls(**data)


def make_weights(cfg: ProbeConfig) -> dict:
    """Float32 weights drawn from cfg.seed (numpy's PCG64, so every substrate
    gets the same values). Linear weights are (N, K) as MLX stores them."""
    rng = np.random.default_rng(cfg.seed)
    w: dict = {"embed": rng.standard_normal((cfg.vocab, cfg.dim), dtype=np.float32)}
    shapes = cfg.shapes()
    for layer in range(cfg.layers):
        for name in LINEARS:
            k, n = shapes[name]
            w[f"{layer}.{name}"] = (rng.standard_normal((n, k), dtype=np.float32)
                                    * np.float32(1.5 / np.sqrt(k)))
        for norm in ("norm1", "norm2"):
            w[f"{layer}.{norm}"] = (1 + 0.1 * rng.standard_normal(cfg.dim)).astype(np.float32)
    k, n = shapes["head"]
    w["head"] = rng.standard_normal((n, k), dtype=np.float32) * np.float32(4.0 / np.sqrt(k))
    w["norm_f"] = (1 + 0.1 * rng.standard_normal(cfg.dim)).astype(np.float32)
    w["prompt"] = rng.integers(0, cfg.vocab, cfg.prompt).tolist()
    return w


# A forward function: (tokens, state) -> (logits as float64 (M, vocab) with
# the exact values of the dtype results, logit bit patterns (M, vocab), new state).
Forward = Callable[[list, object], tuple]


@dataclass
class Check:
    k: int
    M: int
    tokens_equal: bool
    logits_equal: bool
    positions_differing: int = 0
    first_position_differing: int | None = None
    logits_differing: int = 0
    max_abs_diff: float = 0.0

    @property
    def passed(self) -> bool:
        return self.tokens_equal and self.logits_equal


@dataclass
class ProbeResult:
    greedy_tokens: list
    checks: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def diverged(self) -> bool:
        return any(not c.logits_equal for c in self.checks)

    def to_dict(self) -> dict:
        return {
            "passed": self.passed,
            "greedy_tokens": self.greedy_tokens,
            "checks": [dict(asdict(c), passed=c.passed) for c in self.checks],
        }


def run_probe(cfg: ProbeConfig, forward: Forward, state0, copy_state: Callable,
              prompt: list) -> ProbeResult:
    """Greedy decode (M = 1) vs verify passes (M = k + 1); see the module doc."""
    state = state0
    for t in prompt[:-1]:
        _, _, state = forward([t], state)
    start = copy_state(state)
    greedy, ref_vals, ref_bits = [], [], []
    cur = prompt[-1]
    for _ in range(cfg.limit):
        vals, bits, state = forward([cur], state)
        ref_vals.append(vals[0])
        ref_bits.append(bits[0])
        cur = int(np.argmax(vals[0]))
        greedy.append(cur)
    result = ProbeResult(greedy_tokens=greedy)
    for k in range(1, cfg.limit):
        vals, bits, _ = forward([prompt[-1], *greedy[:k]], copy_state(start))
        toks = [int(np.argmax(vals[j])) for j in range(k + 1)]
        diff_pos = [j for j in range(k + 1) if not np.array_equal(bits[j], ref_bits[j])]
        n_diff = sum(int(np.count_nonzero(bits[j] != ref_bits[j])) for j in range(k + 1))
        max_abs = max((float(np.max(np.abs(vals[j] - ref_vals[j]))) for j in diff_pos), default=0.0)
        result.checks.append(Check(
            k=k, M=k + 1, tokens_equal=toks == greedy[: k + 1], logits_equal=not diff_pos,
            positions_differing=len(diff_pos),
            first_position_differing=diff_pos[0] if diff_pos else None,
            logits_differing=n_diff, max_abs_diff=max_abs,
        ))
    return result


# ---- numpy row operations (shared by the emulator substrate) ------------------


def np_rms_row(x: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    x = x.astype(np.float32)
    ms = np.float32(np.sum(x * x, dtype=np.float32) / np.float32(x.shape[0]))
    return x * (np.float32(1) / np.sqrt(ms + np.float32(eps))) * g


def np_silu_mul_row(g: np.ndarray, u: np.ndarray) -> np.ndarray:
    return g / (np.float32(1) + np.exp(-g)) * u


# ---- the MLX substrate ----------------------------------------------------------


class MlxDecoder:
    """The decoder in MLX ops on ``device`` ("cpu" or "gpu")."""

    def __init__(self, cfg: ProbeConfig, device: str, control: bool = False,
                 route_m2: str | None = None) -> None:
        import mlx.core as mx

        self.mx = mx
        self.cfg = cfg
        # MLX_QMV_ROUTE for the products of M >= 2 rows only (the patched
        # wheel's switch also forces M = 1 products, which must keep the
        # default dispatch: qmv_wide has no one-vector kernel)
        self.route_m2 = route_m2
        # negative control: products of M >= 2 rows dequantize, then multiply
        # (another summation order, as qmv_wide's); the probe must fail then
        self.control = control
        mx.set_default_device(mx.cpu if device == "cpu" else mx.gpu)
        self.dt = {"bfloat16": mx.bfloat16, "float16": mx.float16, "float32": mx.float32}[cfg.dtype]
        w = make_weights(cfg)
        self.prompt = w["prompt"]
        self.embed = mx.array(w["embed"])
        self.q = {}
        names = [f"{layer}.{n}" for layer in range(cfg.layers) for n in LINEARS] + ["head"]
        for name in names:
            wq, s, b = mx.quantize(mx.array(w[name]).astype(self.dt),
                                   group_size=cfg.group_size, bits=cfg.bits)
            self.q[name] = (wq, s, b)
        self.norms = {k: mx.array(v) for k, v in w.items() if "norm" in k}
        mx.eval(self.embed, self.q, self.norms)

    def qlinear(self, x, name):
        mx = self.mx
        wq, s, b = self.q[name]
        if self.control and x.shape[0] >= 2:
            w = mx.dequantize(wq, s, b, group_size=self.cfg.group_size, bits=self.cfg.bits)
            return (x.astype(self.dt) @ w.T).astype(mx.float32)
        y = mx.quantized_matmul(x.astype(self.dt), wq, s, b, transpose=True,
                                group_size=self.cfg.group_size, bits=self.cfg.bits)
        return y.astype(mx.float32)

    def rows(self, fn, *xs):
        mx = self.mx
        return mx.concatenate([fn(*(x[i:i + 1] for x in xs)) for i in range(xs[0].shape[0])], axis=0)

    def rms(self, x, g):
        mx = self.mx
        return self.rows(lambda r: r * mx.rsqrt(mx.mean(r * r, axis=-1, keepdims=True) + self.cfg.eps) * g, x)

    def state0(self):
        mx = self.mx
        return [mx.zeros((1, self.cfg.dim), dtype=mx.float32) for _ in range(self.cfg.layers)]

    def forward(self, tokens, state):
        if self.route_m2 is None:
            return self._forward(tokens, state)
        if len(tokens) >= 2:
            os.environ["MLX_QMV_ROUTE"] = self.route_m2
        try:
            return self._forward(tokens, state)  # evaluates before returning
        finally:
            os.environ.pop("MLX_QMV_ROUTE", None)

    def _forward(self, tokens, state):
        mx, cfg = self.mx, self.cfg
        h = self.embed[mx.array(tokens)]
        state = list(state)
        for layer in range(cfg.layers):
            u = self.qlinear(self.rms(h, self.norms[f"{layer}.norm1"]), f"{layer}.in")
            s_rows = []
            s = state[layer]
            for t in range(len(tokens)):
                s = cfg.decay * s + u[t:t + 1]
                s_rows.append(s)
            state[layer] = s
            h = h + self.qlinear(mx.concatenate(s_rows, axis=0), f"{layer}.out")
            a = self.rms(h, self.norms[f"{layer}.norm2"])
            gate = self.qlinear(a, f"{layer}.gate")
            up = self.qlinear(a, f"{layer}.up")
            z = self.rows(lambda g, v: g * mx.sigmoid(g) * v, gate, up)
            h = h + self.qlinear(z, f"{layer}.down")
        vals = self.qlinear(self.rms(h, self.norms["norm_f"]), "head")
        mx.eval(vals, state)
        v = np.array(vals).astype(np.float64)
        # the float32 image of a bf16/fp16 value is exact: its bits identify it
        return v, np.array(vals).view(np.uint32), state


def mlx_info(device: str) -> dict:
    import mlx.core as mx

    info = {"mlx_version": mx.__version__, "device": device}
    try:
        if device == "gpu" and mx.metal.is_available():
            di = mx.device_info() if hasattr(mx, "device_info") else mx.metal.device_info()
            info["architecture"] = str(di.get("architecture", ""))
            info["device_name"] = str(di.get("device_name", ""))
    except Exception as e:  # informational only
        info["device_info_error"] = str(e)
    for var in ("MLX_QMV_ROUTE", "MLX_QMV_WIDE"):
        if os.environ.get(var):
            info[var] = os.environ[var]
    return info


def gpu_backend() -> str | None:
    """'metal', 'cuda' or None: which GPU backend this mlx has."""
    import mlx.core as mx

    if mx.metal.is_available():
        return "metal"
    cuda = getattr(mx, "cuda", None)
    if cuda is not None and cuda.is_available():
        return "cuda"
    return None


def run_mlx(cfg: ProbeConfig, device: str, control: bool = False, route_m2: str | None = None) -> dict:
    """Run the probe with MLX on ``device`` ('cpu' or 'gpu'); a JSON-able dict."""
    dec = MlxDecoder(cfg, device, control=control, route_m2=route_m2)
    res = run_probe(cfg, dec.forward, dec.state0(), lambda st: list(st), dec.prompt)
    info = mlx_info(device)
    if route_m2:
        info["MLX_QMV_ROUTE for M >= 2"] = route_m2
    return {"info": info, "config": asdict(cfg), "control": control, **res.to_dict()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="The exactness probe on an MLX device; prints JSON.")
    p.add_argument("--device", choices=("cpu", "gpu"), required=True)
    p.add_argument("--config", default="{}", help="ProbeConfig fields as JSON")
    p.add_argument("--control", action="store_true",
                   help="negative control: products of M >= 2 rows dequantize then multiply")
    p.add_argument("--route-m2", default=None,
                   help="MLX_QMV_ROUTE value for products of M >= 2 rows (patched wheel), e.g. wide")
    p.add_argument("--require", choices=("metal", "cuda"), default=None,
                   help="with --device gpu: fail (exit 3) unless mlx has this GPU backend")
    a = p.parse_args(argv)
    try:
        import mlx.core  # noqa: F401
    except ImportError as e:
        print(json.dumps({"error": "mlx-missing", "message": f"mlx is not importable: {e}"}))
        return 3
    if a.device == "gpu":
        have = gpu_backend()
        if have is None or (a.require and have != a.require):
            print(json.dumps({"error": "no-gpu", "message":
                              f"this mlx has no {a.require or 'GPU'} backend here (found: {have or 'none'})"}))
            return 3
    cfg = ProbeConfig.from_dict(json.loads(a.config))
    print(json.dumps(run_mlx(cfg, a.device, a.control, a.route_m2)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
