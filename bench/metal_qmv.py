#!/usr/bin/env python3
"""Time the quantized mat-vec routes of a patched MLX wheel on a Mac's GPU.

For real projection shapes (Llama-3-8B, Gemma-4-12B), 4-bit group 64, bf16 and
fp16, M = 1 .. (the mat-vec batch limit - 1), it times in one process:

  qmv          one threadgroup column per vector (every vector re-reads W)
  wide         qmv_wide (weights decoded once, reused; rows differ from M = 1)
  streamed     qmv_streamed with the dispatch's tile (rows equal to M = 1)
  streamed:V   qmv_streamed with V = 1..5 vectors per tile

(``--quant mxfp4|nvfp4|mxfp8`` times the fp modes' kernels instead, with
their own bits and group size) and prints the recovered fraction (t_qmv - t_streamed) / (t_qmv - t_wide),
effective GB/s against the chip's memory bandwidth, and whether each route's
rows are bitwise equal to the same rows computed alone (M = 1). Writes
everything as JSON (docs/bench.md). ``--default-route`` times only the wheel's
own dispatch (stock or upstream-PR wheels, no switch needed) and ``--compare``
prints main-vs-PR tables from two such runs.

The route is forced with the patched wheel's MLX_QMV_ROUTE switch, which
dispatch_qmv reads with getenv on every call (env::get_var), so one process
switches routes by setting os.environ between evaluations. A wheel without the
switch is detected (forcing qmv_wide must change the bits) and refused.

Needs only the Python standard library and mlx. On a machine without Metal it
says so and exits 3; it never prints numbers it did not measure.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

SCHEMA = "mlx-overlay-bench-qmv/1"
EXIT_NO_METAL = 3
EXIT_NOT_PATCHED = 4

# (model, projections, K, N). Llama-3-8B: hidden 4096, intermediate 14336,
# 32 heads / 8 KV heads of 128. Gemma-4-12B (text): hidden 3840, intermediate
# 15360, 16 heads; sliding layers 8 KV heads of 256, global layers 1 KV head
# of 512 (K = V); sources in docs/bench.md.
SHAPES = [
    ("llama3-8b", "q_proj,o_proj", 4096, 4096),
    ("llama3-8b", "k_proj,v_proj", 4096, 1024),
    ("llama3-8b", "gate_proj,up_proj", 4096, 14336),
    ("llama3-8b", "down_proj", 14336, 4096),
    ("gemma4-12b", "q_proj (sliding)", 3840, 4096),
    ("gemma4-12b", "k_proj,v_proj (sliding)", 3840, 2048),
    ("gemma4-12b", "o_proj (sliding)", 4096, 3840),
    ("gemma4-12b", "q_proj (global)", 3840, 8192),
    ("gemma4-12b", "k_proj (global)", 3840, 512),
    ("gemma4-12b", "o_proj (global)", 8192, 3840),
    ("gemma4-12b", "gate_proj,up_proj", 3840, 15360),
    ("gemma4-12b", "down_proj", 15360, 3840),
]
ROUTES = ("qmv", "wide", "streamed", "streamed:1", "streamed:2", "streamed:3",
          "streamed:4", "streamed:5")
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}

# Unified-memory bandwidth in GB/s, Apple's published figures. Binned parts:
# (GPU cores -> GB/s) where one name covers two memory configurations.
BANDWIDTH_GBS = {
    "M1": 68.25, "M1 Pro": 200, "M1 Max": 400, "M1 Ultra": 800,
    "M2": 100, "M2 Pro": 200, "M2 Max": 400, "M2 Ultra": 800,
    "M3": 100, "M3 Pro": 150, "M3 Max": 400, "M3 Ultra": 819,
    "M4": 120, "M4 Pro": 273, "M4 Max": 546,
    "M5": 153, "M5 Max": 614,
}
BINNED_GBS = {"M3 Max": {30: 300, 40: 400}, "M4 Max": {32: 410, 40: 546}}


# ---- the machine ---------------------------------------------------------------


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


@dataclass
class Platform:
    """What the machine says about itself; tests replace the commands."""

    def system(self) -> str:
        return platform.system()

    def brand(self) -> str:
        return _run(["sysctl", "-n", "machdep.cpu.brand_string"])

    def gpu_cores(self) -> int | None:
        out = _run(["system_profiler", "SPDisplaysDataType", "-json"])
        try:
            for gpu in json.loads(out).get("SPDisplaysDataType", []):
                cores = gpu.get("sppci_cores")
                if cores:
                    return int(cores)
        except (ValueError, AttributeError):
            pass
        return None

    def macos(self) -> str:
        return platform.mac_ver()[0]


def chip_name(brand: str) -> str | None:
    m = re.search(r"\b(M\d+)(?: (Pro|Max|Ultra))?\b", brand or "")
    if not m:
        return None
    return m.group(1) + (f" {m.group(2)}" if m.group(2) else "")


def chip_bandwidth(chip: str | None, gpu_cores: int | None) -> tuple[float | None, str]:
    """(GB/s, source) from the table; (None, why) when unknown."""
    if chip is None:
        return None, "chip not recognised"
    if chip in BINNED_GBS:
        if gpu_cores in BINNED_GBS[chip]:
            return float(BINNED_GBS[chip][gpu_cores]), f"table ({chip}, {gpu_cores} GPU cores)"
        if gpu_cores is None:
            return float(BANDWIDTH_GBS[chip]), f"table ({chip}, GPU core count unknown: full part assumed)"
    if chip in BANDWIDTH_GBS:
        return float(BANDWIDTH_GBS[chip]), f"table ({chip})"
    return None, f"no bandwidth figure for {chip} (pass --bandwidth)"


def qmv_batch_limit(arch: str, K: int, N: int) -> int:
    """Mirror of get_qmv_batch_limit(D = K, O = N) in mlx/backend/metal/quantized.cpp
    at the pin: products of M >= this many vectors leave the mat-vec path."""
    m = re.search(r"g(\d+)([a-z])?$", arch or "")
    gen = int(m.group(1)) if m else 0
    size = (m.group(2) or "") if m else ""
    small, mid = K <= 2048 and N <= 2048, K <= 4096 and N <= 4096
    if gen >= 17 and size != "d":
        return 33 if small else 25 if mid else 13
    if gen >= 15 and size != "d":
        return 13 if small else 15 if mid else 13
    if gen >= 13:
        if size == "d":
            return 32 if small else 18 if mid else 12
        return 14 if small else 10 if mid else 6
    if size == "d":
        return 32 if small else 18 if mid else 12
    return 18 if small else 12 if mid else 10


#: MLX's fp quantization modes: (bits, group size); scales are one byte, no biases.
FP_MODES = {"mxfp4": (4, 32), "nvfp4": (4, 16), "mxfp8": (8, 32)}


def weight_bytes(K: int, N: int, bits: int, group_size: int, dtype: str, mode: str = "affine") -> int:
    if mode != "affine":
        return N * K * bits // 8 + N * (K // group_size)
    return N * K * bits // 8 + 2 * N * (K // group_size) * DTYPE_BYTES[dtype]


def product_bytes(K: int, N: int, M: int, bits: int, group_size: int, dtype: str,
                  mode: str = "affine") -> int:
    """The least traffic of one product: W, scales (and biases) once, x and y."""
    return weight_bytes(K, N, bits, group_size, dtype, mode) + M * (K + N) * DTYPE_BYTES[dtype]


def routes_for(M: int) -> list[str]:
    """Routes that exist at M: qmv_wide has no 1-vector kernel; V > M adds
    nothing over V = M."""
    out = ["qmv"]
    if M >= 2:
        out.append("wide")
    out.append("streamed")
    out += [f"streamed:{v}" for v in range(1, 6) if v <= M]
    return out


# ---- the timer -------------------------------------------------------------------


class MlxTimer:
    """Times mx.quantized_matmul on the GPU, forcing the route via MLX_QMV_ROUTE.

    For each shape it makes enough copies of a random quantized W that one
    pass over them reads ``rotate_bytes`` (so no product finds W in the
    system-level cache), then times ``iters`` independent products over the
    copies in one evaluation, ``repeats`` times, and keeps the median."""

    def __init__(self, *, iters: int, repeats: int, warmup: int, rotate_bytes: int,
                 bits: int, group_size: int, seed: int = 0, mode: str = "affine") -> None:
        import mlx.core as mx

        self.mx = mx
        self.iters, self.repeats, self.warmup = iters, repeats, warmup
        self.rotate_bytes, self.bits, self.group_size = rotate_bytes, bits, group_size
        self.mode = mode
        mx.random.seed(seed)
        self.copies: list = []
        self._next = 0
        self.x = None

    def info(self) -> dict:
        mx = self.mx
        di = mx.device_info() if hasattr(mx, "device_info") else mx.metal.device_info()
        return {"mlx_version": mx.__version__, "architecture": str(di.get("architecture", "")),
                "device_name": str(di.get("device_name", "")),
                "memory_size": int(di.get("memory_size", 0) or 0)}

    def route_switch_works(self) -> tuple[bool, str]:
        """Does MLX_QMV_ROUTE reach the dispatch? With the patched wheel,
        forcing ``wide`` at M = 4 changes the last bits of a random product
        relative to forcing ``qmv``; a wheel without the switch (stock, or
        the CPU backend) gives the same bits both times. (Nothing is made to
        throw: an invalid route would, but an exception in the middle of an
        evaluation is not a state to benchmark from.)"""
        mx = self.mx
        key = mx.random.key(1234)
        k1, k2 = mx.random.split(key)
        w = mx.random.normal((256, 4096), key=k1).astype(mx.float16)
        wq, s, b = mx.quantize(w, group_size=64, bits=4)
        x = mx.random.normal((4, 4096), key=k2).astype(mx.float16)
        ys = {}
        for route in ("qmv", "wide"):
            os.environ["MLX_QMV_ROUTE"] = route
            try:
                y = mx.quantized_matmul(x, wq, s, b, transpose=True, group_size=64, bits=4)
                ys[route] = self._bits(y)
                mx.eval(ys[route])
            finally:
                os.environ.pop("MLX_QMV_ROUTE", None)
        if bool(mx.array_equal(ys["qmv"], ys["wide"]).item()):
            return False, ("MLX_QMV_ROUTE=wide and MLX_QMV_ROUTE=qmv gave the same bits: "
                           "this wheel has no route switch")
        return True, ""

    def prepare(self, K: int, N: int, dtype: str, max_m: int) -> None:
        mx = self.mx
        dt = getattr(mx, dtype)
        self.copies = []
        self._next = 0
        if hasattr(mx, "clear_cache"):  # give the last shape's copies back
            mx.clear_cache()
        w = (mx.random.normal((N, K)) * (1 / math.sqrt(K))).astype(dt)
        q = mx.quantize(w, group_size=self.group_size, bits=self.bits, mode=self.mode)
        mx.eval(*q)
        n = max(2, math.ceil(self.rotate_bytes / weight_bytes(K, N, self.bits, self.group_size, dtype,
                                                              self.mode)))
        for _ in range(n):
            c = tuple(a + 0 for a in q)
            mx.eval(*c)
            self.copies.append(c)
        del w, q
        self.x = mx.random.normal((max_m, K)).astype(dt)
        mx.eval(self.x)

    def _products(self, M: int, count: int) -> list:
        """``count`` independent products, each on the next copy of W: the
        rotation carries on across calls, so a copy comes back only after a
        pass over all of them (``rotate_bytes`` later)."""
        mx = self.mx
        x = self.x[:M]
        out = []
        for _ in range(count):
            w = self.copies[self._next % len(self.copies)]
            self._next += 1
            out.append(mx.quantized_matmul(x, *w, transpose=True, group_size=self.group_size,
                                           bits=self.bits, mode=self.mode))
        return out

    def time(self, route: str, M: int) -> float:
        """Seconds per product (median of the repeats); route "default" leaves
        the dispatch alone."""
        mx = self.mx
        if route != "default":
            os.environ["MLX_QMV_ROUTE"] = route
        try:
            for _ in range(self.warmup):
                mx.eval(self._products(M, self.iters))
            samples = []
            for _ in range(self.repeats):
                outs = self._products(M, self.iters)  # graph built before the clock starts
                t0 = time.perf_counter()
                mx.eval(outs)
                samples.append((time.perf_counter() - t0) / self.iters)
                del outs
            return statistics.median(samples)
        finally:
            os.environ.pop("MLX_QMV_ROUTE", None)

    def _bits(self, y):
        mx = self.mx
        return mx.view(y, mx.uint16) if hasattr(mx, "view") else y

    def rows_equal_m1(self, route: str, M: int) -> bool:
        """Are the M rows of the product under ``route`` bitwise equal to the
        same rows computed alone (M = 1, the default dispatch)?"""
        mx = self.mx
        w = self.copies[0]
        kw = dict(transpose=True, group_size=self.group_size, bits=self.bits, mode=self.mode)
        os.environ.pop("MLX_QMV_ROUTE", None)
        ref = [mx.quantized_matmul(self.x[i:i + 1], *w, **kw) for i in range(M)]
        mx.eval(ref)
        if route != "default":
            os.environ["MLX_QMV_ROUTE"] = route
        try:
            y = mx.quantized_matmul(self.x[:M], *w, **kw)
            mx.eval(y)
        finally:
            os.environ.pop("MLX_QMV_ROUTE", None)
        return bool(mx.array_equal(self._bits(y), self._bits(mx.concatenate(ref, axis=0))).item())


# ---- the run -----------------------------------------------------------------------


def recovered(t_qmv: float, t_wide: float | None, t: float | None, min_gap: float) -> float | None:
    """(t_qmv - t) / (t_qmv - t_wide); None when qmv_wide's gain is under
    ``min_gap`` of t_qmv (the fraction is noise there) or a time is missing."""
    if t_wide is None or t is None:
        return None
    gap = t_qmv - t_wide
    if gap <= min_gap * t_qmv:
        return None
    return (t_qmv - t) / gap


def run_bench(opts, timer, machine: dict, log=print) -> dict:
    arch = machine.get("architecture", "")
    bw = machine.get("bandwidth_gbs")
    results = []
    for model, proj, K, N in opts.shapes:
        limit = qmv_batch_limit(arch, K, N)
        max_m = min(limit - 1, opts.max_m) if opts.max_m else limit - 1
        for dtype in opts.dtypes:
            timer.prepare(K, N, dtype, max_m)
            log(f"\n{model} {proj}: K={K} N={N} {dtype}, {opts.quant} {opts.bits}-bit group {opts.group_size}, "
                f"M = 1..{max_m} (mat-vec limit {limit})")
            if opts.default_route:
                log(f"{'M':>3} {'us':>8} {'GB/s':>6} {'%bw':>5} {'rows=M1':>7}")
            else:
                log(f"{'M':>3} {'qmv us':>8} {'wide us':>8} {'strm us':>8} {'best V':>6} {'best us':>8} "
                    f"{'recov':>6} {'recovB':>6} {'GB/s q/w/s':>16} {'%bw s':>6} {'s=M1':>5} {'w=M1':>5}")
            for M in range(1, max_m + 1):
                routes = ["default"] if opts.default_route else routes_for(M)
                times = {r: timer.time(r, M) for r in routes}
                gbytes = product_bytes(K, N, M, opts.bits, opts.group_size, dtype, opts.quant) / 1e9
                gbs = {r: gbytes / t for r, t in times.items()}
                eq = {}
                if opts.check_bits and M >= 2:
                    eq = {r: timer.rows_equal_m1(r, M) for r in times}
                row = {
                    "model": model, "projection": proj, "K": K, "N": N, "dtype": dtype, "M": M,
                    "limit": limit, "bytes": int(gbytes * 1e9),
                    "times_us": {r: round(t * 1e6, 3) for r, t in times.items()},
                    "gbs": {r: round(g, 1) for r, g in gbs.items()},
                    "fraction_of_bandwidth": ({r: round(g / bw, 4) for r, g in gbs.items()} if bw else None),
                    "rows_equal_m1": eq or None,
                }
                results.append(row)

                def yn(r):
                    return "-" if r not in eq else ("yes" if eq[r] else "NO")

                if opts.default_route:
                    pct = f"{100 * gbs['default'] / bw:4.0f}%" if bw else f"{'-':>5}"
                    log(f"{M:>3} {times['default'] * 1e6:8.1f} {gbs['default']:6.0f} {pct} {yn('default'):>7}")
                    continue
                rec = {r: recovered(times["qmv"], times.get("wide"), t, opts.min_gap)
                       for r, t in times.items() if r.startswith("streamed")}
                vs = {r: t for r, t in times.items() if r.startswith("streamed:")}
                best = min(vs, key=vs.get)
                row["recovered"] = {r: (None if v is None else round(v, 4)) for r, v in rec.items()}
                row["best_streamed"] = best

                def us(r):
                    return f"{times[r] * 1e6:8.1f}" if r in times else f"{'-':>8}"

                def frac(v):
                    return f"{v:6.2f}" if v is not None else f"{'-':>6}"

                g = "/".join(f"{gbs[r]:.0f}" if r in gbs else "-" for r in ("qmv", "wide", "streamed"))
                pct = f"{100 * gbs['streamed'] / bw:5.0f}%" if bw else f"{'-':>6}"
                log(f"{M:>3} {us('qmv')} {us('wide')} {us('streamed')} {best.split(':')[1]:>6} {us(best)} "
                    f"{frac(rec.get('streamed'))} {frac(rec.get(best))} {g:>16} {pct:>6} "
                    f"{yn('streamed'):>5} {yn('wide'):>5}")
    return {"results": results}


def summarize(results: list) -> dict:
    """Median recovered fractions over every (shape, dtype) at M >= 2 where
    the fraction is defined, and whether the rows matched M = 1 per route."""
    def med(vals):
        vals = [v for v in vals if v is not None]
        return round(statistics.median(vals), 4) if vals else None

    def all_equal(prefix):
        seen = [v for r in results for k, v in (r["rows_equal_m1"] or {}).items() if k.startswith(prefix)]
        return all(seen) if seen else None

    out = {f"rows_equal_m1[{p}]": all_equal(p) for p in ("default", "qmv", "wide", "streamed")
           if any(k.startswith(p) for r in results for k in r["times_us"])}
    rows = [r for r in results if r["M"] >= 2 and "recovered" in r]
    if rows:
        out["median_recovered_streamed"] = med(r["recovered"].get("streamed") for r in rows)
        out["median_recovered_best_v"] = med(r["recovered"].get(r["best_streamed"]) for r in rows)
        out["median_recovered_by_v"] = {f"streamed:{v}": med(r["recovered"].get(f"streamed:{v}") for r in rows)
                                        for v in range(1, 6)}
    return out


def compare(path_a: str, path_b: str, log=print) -> int:
    """Print B's time over A's per (shape, dtype, M) for two --default-route runs
    (e.g. main's wheel vs the PR's): the main-vs-PR table upstream asks for."""
    runs = []
    for path in (path_a, path_b):
        with open(path) as f:
            runs.append(json.load(f))
    key = lambda r: (r["model"], r["projection"], r["K"], r["N"], r["dtype"], r["M"])  # noqa: E731
    a = {key(r): r for r in runs[0]["results"]}
    log(f"A = {path_a} (mlx {runs[0]['machine'].get('mlx_version')}), "
        f"B = {path_b} (mlx {runs[1]['machine'].get('mlx_version')})")
    log(f"{'shape':<34} {'dtype':<8} {'M':>3} {'A us':>8} {'B us':>8} {'B/A':>6} {'rows=M1 A/B':>11}")
    for r in runs[1]["results"]:
        ra = a.get(key(r))
        if ra is None:
            continue
        ta = ra["times_us"].get("default")
        tb = r["times_us"].get("default")
        if ta is None or tb is None:
            continue
        ea = (ra.get("rows_equal_m1") or {}).get("default")
        eb = (r.get("rows_equal_m1") or {}).get("default")
        shape = f"{r['model']} {r['projection']} {r['K']}x{r['N']}"
        log(f"{shape:<34} {r['dtype']:<8} {r['M']:>3} {ta:8.1f} {tb:8.1f} {tb / ta:6.2f} "
            f"{str(ea)[0] if ea is not None else '-':>5}/{str(eb)[0] if eb is not None else '-'}")
    return 0


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", action="append", choices=sorted({s[0] for s in SHAPES}),
                   help="models whose shapes to time (default: all)")
    p.add_argument("--shape", action="append", metavar="KxN", help="extra K x N shape (repeatable)")
    p.add_argument("--dtype", action="append", choices=("bfloat16", "float16"),
                   help="activation/scale dtype (default: both)")
    p.add_argument("--quant", choices=("affine", *FP_MODES), default="affine",
                   help="quantization mode (default affine); an fp mode sets its own bits and group size")
    p.add_argument("--bits", type=int, default=4)
    p.add_argument("--group-size", type=int, default=64)
    p.add_argument("--max-m", type=int, default=0, help="largest M (default: the mat-vec limit - 1)")
    p.add_argument("--iters", type=int, default=40, help="products per timed evaluation")
    p.add_argument("--repeats", type=int, default=5, help="timed evaluations per point (median kept)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--rotate-mb", type=int, default=512,
                   help="weights are copied until one pass reads this many MB (default 512)")
    p.add_argument("--min-gap", type=float, default=0.05,
                   help="recovered fraction reported only where qmv_wide saves at least this "
                        "fraction of qmv's time (default 0.05)")
    p.add_argument("--no-check-bits", dest="check_bits", action="store_false",
                   help="skip comparing each route's rows, bit for bit, with the rows computed alone")
    p.add_argument("--default-route", action="store_true",
                   help="time only the wheel's own dispatch (no MLX_QMV_ROUTE): for stock or "
                        "upstream-PR wheels, to compare main with the PR (see --compare)")
    p.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                   help="print B's times over A's (two --default-route runs) and exit")
    p.add_argument("--bandwidth", type=float, help="memory bandwidth in GB/s (default: from the chip table)")
    p.add_argument("--json", default="bench-metal-qmv.json", help="output file (default %(default)s)")
    opts = p.parse_args(argv)
    shapes = [s for s in SHAPES if not opts.model or s[0] in opts.model]
    for text in opts.shape or []:
        m = re.fullmatch(r"(\d+)x(\d+)", text)
        if not m:
            p.error(f"--shape {text}: expected KxN, e.g. 4096x14336")
        shapes.append(("custom", text, int(m.group(1)), int(m.group(2))))
    if opts.shape and not opts.model:
        shapes = [s for s in shapes if s[0] == "custom"]
    opts.shapes = shapes
    opts.dtypes = opts.dtype or ["bfloat16", "float16"]
    if opts.quant != "affine":
        opts.bits, opts.group_size = FP_MODES[opts.quant]
    return opts


def main(argv=None, *, timer_factory=None, plat: Platform | None = None, log=print) -> int:
    """``timer_factory(opts)`` and ``plat`` are injection points for the tests."""
    opts = parse_args(argv)
    if opts.compare:
        return compare(*opts.compare, log=log)
    plat = plat or Platform()
    if timer_factory is None:
        if plat.system() != "Darwin":
            log(f"metal_qmv: no Metal on this machine ({plat.system()}): this benchmark needs an "
                "Apple-silicon Mac with the patched mlx wheel. Nothing was measured.", file=sys.stderr)
            return EXIT_NO_METAL
        try:
            import mlx.core as mx
        except ImportError as e:
            log(f"metal_qmv: mlx is not importable ({e}). Nothing was measured.", file=sys.stderr)
            return EXIT_NO_METAL
        if not mx.metal.is_available():
            log("metal_qmv: mlx reports no Metal device. Nothing was measured.", file=sys.stderr)
            return EXIT_NO_METAL
        mx.set_default_device(mx.gpu)

        def timer_factory(o):
            return MlxTimer(iters=o.iters, repeats=o.repeats, warmup=o.warmup,
                            rotate_bytes=o.rotate_mb * 1024 * 1024, bits=o.bits,
                            group_size=o.group_size, mode=o.quant)

    timer = timer_factory(opts)
    ok, why = (True, "") if opts.default_route else timer.route_switch_works()
    if not ok:
        log(f"metal_qmv: {why}. Install the patched wheel (mlx-overlay build). Nothing was measured.",
            file=sys.stderr)
        return EXIT_NOT_PATCHED
    info = timer.info()
    brand = plat.brand()
    chip = chip_name(brand) or chip_name(info.get("device_name", ""))
    cores = plat.gpu_cores()
    if opts.bandwidth:
        bw, source = opts.bandwidth, "--bandwidth"
    else:
        bw, source = chip_bandwidth(chip, cores)
    machine = {"cpu_brand": brand, "chip": chip, "gpu_cores": cores, "macos": plat.macos(),
               "bandwidth_gbs": bw, "bandwidth_source": source, **info}
    log(f"metal_qmv: {chip or brand or 'unknown chip'} ({info.get('architecture')}), "
        f"mlx {info.get('mlx_version')}, bandwidth {bw if bw else '?'} GB/s [{source}]")
    started = _dt.datetime.now(_dt.timezone.utc)
    body = run_bench(opts, timer, machine, log=log)
    out = {
        "schema": SCHEMA,
        "date": started.isoformat(timespec="seconds"),
        "seconds": round((_dt.datetime.now(_dt.timezone.utc) - started).total_seconds(), 1),
        "command": ["bench/metal_qmv.py", *(argv if argv is not None else sys.argv[1:])],
        "machine": machine,
        "settings": {"quant": opts.quant, "bits": opts.bits, "group_size": opts.group_size, "iters": opts.iters,
                     "repeats": opts.repeats, "warmup": opts.warmup, "rotate_mb": opts.rotate_mb,
                     "min_gap": opts.min_gap, "dtypes": opts.dtypes,
                     "mode": "default-route" if opts.default_route else "routes",
                     "timing": "median over repeats of (wall time of one mx.eval of `iters` "
                               "independent products) / iters"},
        **body,
    }
    out["summary"] = summarize(out["results"])
    s = out["summary"]
    log("")
    for k, v in s.items():
        log(f"{k}: {v}")
    with open(opts.json, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    log(f"wrote {opts.json}")
    exact = "rows_equal_m1[streamed]" if not opts.default_route else None
    if exact and s.get(exact) is False:
        log("metal_qmv: some qmv_streamed rows differ from the rows computed alone: "
            "the exactness claim fails on this machine", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
