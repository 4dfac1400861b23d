"""The end-to-end exactness probe on every substrate (``mlx-overlay probe``).

The decoder and the greedy-vs-verify harness are in ``probe_model.py``
(self-contained, so that it runs under any Python that has an mlx wheel).
Here: the emulator substrate (the decoder in numpy with every quantized
product run by the Metal emulator from a stock or a patched ``quantized.h``)
and the launchers of the MLX substrates (cpu, metal, cuda), each in a
subprocess of the Python that has the wheel.

Substrates and what each must show:

* ``emulator``: two arms. ``patched``: M = 1 products take the M = 1 kernel
  (``qmv_fast``/``qmv``), M >= 2 take ``qmv_streamed`` (the patched dispatch),
  from the patched header: must PASS. ``stock``: M >= 2 take ``qmv_wide`` (the
  stock dispatch on Apple GPU generation >= 15), from the pinned header: must
  DIVERGE (logit bits differ), the negative control.
* ``cpu``: the wheel's CPU backend. ``default`` must pass; ``control`` (the
  probe's own negative control: products of M >= 2 rows dequantize and then
  multiply) must diverge, proving the comparison can fail on this substrate.
* ``metal``: the GPU on a Mac. ``default`` must pass with the patched wheel;
  ``wide`` (MLX_QMV_ROUTE=wide, the patched wheel's switch back to
  ``qmv_wide``) must diverge on generation >= 15, as the stock wheel's
  default does there.
* ``cuda``: the GPU with an mlx CUDA wheel; stock sm90 takes a tensor-core
  matmul for M >= 2 and is expected to diverge, the patched CUDA kernel to
  pass. :func:`run_mlx_substrate` is what a CUDA harness calls.

Expected outcomes per arm are part of the report: an arm "meets expectation"
when it passes where it must pass and diverges where it must diverge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from overlay_tool.errors import ConfigError, EmulatorError, MissingTool
from overlay_tool.probe_model import (
    LINEARS,
    ProbeConfig,
    ProbeResult,
    make_weights,
    np_rms_row,
    np_silu_mul_row,
    run_probe,
)

SUBSTRATES = ("emulator", "cpu", "metal", "cuda", "cuda-harness")
HEADER = "mlx/backend/metal/kernels/quantized.h"
MODEL_SCRIPT = Path(__file__).with_name("probe_model.py")


@dataclass
class Arm:
    name: str
    expect: str  # "pass" or "diverge"
    description: str
    result: dict | None = None  # ProbeResult.to_dict() (+ info), None when not run
    error: str | None = None
    seconds: float | None = None

    @property
    def outcome(self) -> str:
        if self.error is not None or self.result is None:
            return "error"
        if self.result["passed"]:
            return "pass"
        if any(not c["logits_equal"] for c in self.result["checks"]):
            return "diverge"
        return "fail"  # same logits, other tokens: cannot happen unless argmax is broken

    @property
    def as_expected(self) -> bool:
        return self.outcome == self.expect

    def to_dict(self) -> dict:
        return {
            "arm": self.name, "expect": self.expect, "outcome": self.outcome,
            "as_expected": self.as_expected, "description": self.description,
            "seconds": self.seconds, "error": self.error, "result": self.result,
        }


@dataclass
class SubstrateReport:
    substrate: str
    status: str  # "pass", "fail" or "not run"
    reason: str = ""
    arms: list = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"substrate": self.substrate, "status": self.status, "reason": self.reason,
                "info": self.info, "arms": [a.to_dict() for a in self.arms]}


def _finish(report: SubstrateReport) -> SubstrateReport:
    bad = [a for a in report.arms if not a.as_expected]
    report.status = "fail" if bad else "pass"
    if bad:
        report.reason = "; ".join(
            f"{a.name}: expected {a.expect}, got {a.outcome}" + (f" ({a.error})" if a.error else "")
            for a in bad)
    return report


# ---- the emulator substrate ------------------------------------------------------


class NumpyDecoder:
    """The probe's decoder in numpy. Every quantized product is
    ``product(x, wq, scales, biases)`` on ``cfg.dtype`` storage arrays (x is
    (M, K)) and returns the (M, N) result's bit patterns; the substrate decides
    which kernel computes it."""

    def __init__(self, cfg: ProbeConfig, product) -> None:
        from overlay_tool.emulator.quant import quantize

        self.cfg, self.product = cfg, product
        w = make_weights(cfg)
        self.prompt = w["prompt"]
        self.embed = w["embed"]
        self.norms = {k: v for k, v in w.items() if "norm" in k}
        self.q = {}
        names = [f"{layer}.{n}" for layer in range(cfg.layers) for n in LINEARS] + ["head"]
        for name in names:
            self.q[name] = quantize(w[name], cfg.bits, cfg.group_size, cfg.dtype)

    def qlinear(self, x: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
        from overlay_tool.emulator.quant import decode, round_to

        cfg = self.cfg
        bits = self.product(round_to(x, cfg.dtype), *self.q[name])
        return decode(bits, cfg.dtype).astype(np.float32), bits

    def rows(self, fn, *xs) -> np.ndarray:
        return np.stack([fn(*(x[i] for x in xs)) for i in range(xs[0].shape[0])])

    def state0(self) -> list:
        return [np.zeros(self.cfg.dim, dtype=np.float32) for _ in range(self.cfg.layers)]

    def forward(self, tokens: list, state: list):
        cfg = self.cfg
        h = self.embed[np.asarray(tokens)].astype(np.float32)
        state = [s.copy() for s in state]
        for layer in range(cfg.layers):
            g1, g2 = self.norms[f"{layer}.norm1"], self.norms[f"{layer}.norm2"]
            u, _ = self.qlinear(self.rows(lambda r: np_rms_row(r, g1, cfg.eps), h), f"{layer}.in")
            s_rows = []
            s = state[layer]
            for t in range(len(tokens)):
                s = np.float32(cfg.decay) * s + u[t]
                s_rows.append(s)
            state[layer] = s
            h = h + self.qlinear(np.stack(s_rows), f"{layer}.out")[0]
            a = self.rows(lambda r: np_rms_row(r, g2, cfg.eps), h)
            gate, _ = self.qlinear(a, f"{layer}.gate")
            up, _ = self.qlinear(a, f"{layer}.up")
            h = h + self.qlinear(self.rows(np_silu_mul_row, gate, up), f"{layer}.down")[0]
        gf = self.norms["norm_f"]
        vals, bits = self.qlinear(self.rows(lambda r: np_rms_row(r, gf, cfg.eps), h), "head")
        return vals.astype(np.float64), bits, state

    def run(self) -> ProbeResult:
        return run_probe(self.cfg, self.forward, self.state0(), lambda st: [s.copy() for s in st],
                         self.prompt)


def dequantize_then_multiply(cfg: ProbeConfig, x, wq, scales, biases) -> np.ndarray:
    """The probe's negative control for a numpy-decoder substrate: the product
    of the dequantized weights in float32, rounded to ``cfg.dtype`` (a
    different summation order from any qmv kernel)."""
    from overlay_tool.emulator.quant import decode, dequantize, round_to, to_bits

    w = dequantize(wq, scales, biases, cfg.bits, cfg.group_size, cfg.dtype).astype(np.float32)
    out = decode(x, cfg.dtype).astype(np.float32) @ w.T
    return to_bits(round_to(out, cfg.dtype), cfg.dtype)


def emulator_product(cfg: ProbeConfig, emu, wide_kind: str):
    """Products on the Metal emulator: M = 1 takes the M = 1 kernel, M >= 2
    ``wide_kind``. Compiles every instantiation the probe launches first."""
    configs = []
    for k, n in set(cfg.shapes().values()):
        for m in range(1, cfg.limit + 1):
            configs.append(dict(kind="qmv_m1" if m == 1 else wide_kind, M=m, N=n, K=k,
                                bits=cfg.bits, group_size=cfg.group_size, dtype=cfg.dtype))
    emu.prepare_qmv(configs, jobs=1)

    def product(x, wq, scales, biases):
        kind = "qmv_m1" if x.shape[0] == 1 else wide_kind
        return emu.qmv(kind, w=wq, scales=scales, biases=biases, x=x, bits=cfg.bits,
                       group_size=cfg.group_size, dtype=cfg.dtype)[0]

    return product


def run_emulator_arm(cfg: ProbeConfig, header, wide_kind: str, *, cache_dir: Path | None = None) -> dict:
    from overlay_tool.emulator import Emulator

    emu = Emulator(header, cache_dir=cache_dir)
    res = NumpyDecoder(cfg, emulator_product(cfg, emu, wide_kind)).run()
    return {"config": asdict(cfg), "kernels": {"M=1": "qmv_m1", "M>=2": wide_kind}, **res.to_dict()}


def run_emulator(cfg: ProbeConfig, stock_header, patched_header, *,
                 cache_dir: Path | None = None) -> SubstrateReport:
    report = SubstrateReport("emulator", "pass", info={
        "stock_header": str(stock_header) if isinstance(stock_header, Path) else "<text>",
        "patched_header": str(patched_header) if isinstance(patched_header, Path) else "<text>"})
    arms = [
        (Arm("patched", "pass", "patched quantized.h; M >= 2 -> qmv_streamed (patched dispatch)"),
         patched_header, "qmv_streamed"),
        (Arm("stock", "diverge", "pinned quantized.h; M >= 2 -> qmv_wide (stock dispatch, gen >= 15)"),
         stock_header, "qmv_wide"),
    ]
    for arm, header, kind in arms:
        t0 = time.monotonic()
        try:
            arm.result = run_emulator_arm(cfg, header, kind, cache_dir=cache_dir)
        except EmulatorError as e:
            arm.error = e.message
        arm.seconds = round(time.monotonic() - t0, 2)
        report.arms.append(arm)
    return _finish(report)


# ---- the CUDA harness substrate (MLX's CUDA qmv kernels, no MLX build) -----------


def run_cuda_harness(cfg: ProbeConfig, library=None) -> SubstrateReport:
    """See probe_harness.py: ``patched`` must pass, ``control`` diverge."""
    from overlay_tool import probe_harness as ph

    problem = ph.config_problem(cfg)
    if problem:
        return SubstrateReport("cuda-harness", "not run", f"the harness has no kernel for {problem}")
    try:
        harness = ph.Harness(library)
    except ph.HarnessUnavailable as e:
        return SubstrateReport("cuda-harness", "not run", str(e))
    report = SubstrateReport("cuda-harness", "pass", info={"library": harness.path})

    def patched(x, wq, s, b):
        return harness.product(ph.PATCHED, cfg, x, wq, s, b)

    def control(x, wq, s, b):
        if x.shape[0] == 1:
            return patched(x, wq, s, b)
        return dequantize_then_multiply(cfg, x, wq, s, b)

    arms = [
        (Arm("patched", "pass", "every product on the patched qmv (streamed kernel, M = 1 too)"),
         patched),
        (Arm("control", "diverge",
             "probe's negative control: M >= 2 products dequantize then multiply"), control),
    ]
    for arm, product in arms:
        t0 = time.monotonic()
        try:
            arm.result = {"config": asdict(cfg), **NumpyDecoder(cfg, product).run().to_dict()}
        except RuntimeError as e:
            arm.error = str(e)
        arm.seconds = round(time.monotonic() - t0, 2)
        report.arms.append(arm)
    report.info["patched_products"] = harness.coverage()
    return _finish(report)


# ---- the MLX substrates (a subprocess of the Python that has the wheel) ---------


class SubstrateUnavailable(Exception):
    """The substrate cannot run here (reason in the message)."""


def run_mlx_substrate(python: str, device: str, cfg: ProbeConfig, *, control: bool = False,
                      route_m2: str | None = None, require: str | None = None,
                      env: dict | None = None, timeout: float = 1800) -> dict:
    """Run probe_model.py under ``python`` on ``device`` ('cpu' or 'gpu');
    returns its JSON. Raises SubstrateUnavailable when that Python has no mlx
    (or not the required GPU backend). This is the entry point for harnesses
    on other machines (e.g. the CUDA one: ``require='cuda'``)."""
    cmd = [python, str(MODEL_SCRIPT), "--device", device, "--config", json.dumps(asdict(cfg))]
    if control:
        cmd.append("--control")
    if route_m2:
        cmd += ["--route-m2", route_m2]
    if require:
        cmd += ["--require", require]
    full_env = dict(os.environ)
    for var in ("MLX_QMV_ROUTE", "MLX_QMV_WIDE"):
        full_env.pop(var, None)
    full_env.update(env or {})
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=timeout)
    except FileNotFoundError:
        raise SubstrateUnavailable(f"no Python at {python}")
    out = proc.stdout.strip().splitlines()
    data = None
    if out:
        try:
            data = json.loads(out[-1])
        except json.JSONDecodeError:
            data = None
    if proc.returncode == 3 and data and "error" in data:
        raise SubstrateUnavailable(data["message"])
    if proc.returncode != 0 or data is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(cmd[:2])} exited {proc.returncode}: {' | '.join(tail)}")
    return data


# (arm, expectation, control, MLX_QMV_ROUTE for M >= 2, description)
MLX_ARMS = {
    "cpu": [("default", "pass", False, None, "quantized_matmul on the CPU backend"),
            ("control", "diverge", True, None,
             "probe's negative control: M >= 2 products dequantize then multiply")],
    "metal": [("default", "pass", False, None, "the wheel's default dispatch (patched: qmv_streamed)"),
              ("wide", "diverge", False, "wide",
               "MLX_QMV_ROUTE=wide for M >= 2: qmv_wide (stock behaviour on gen >= 15)")],
    "cuda": [("default", "pass", False, None, "the wheel's default dispatch (patched: streamed qmv)"),
             ("control", "diverge", True, None,
              "probe's negative control: M >= 2 products dequantize then multiply")],
}


def is_overlay_wheel(version: str) -> bool:
    """Wheels built from the queue carry a PEP 440 local label (patch 0001)."""
    return "+" in (version or "")


def arch_gen(arch: str) -> int | None:
    import re

    m = re.search(r"g(\d+)", arch or "")
    return int(m.group(1)) if m else None


def adjust_for_stock_wheel(report: SubstrateReport) -> None:
    """A stock wheel (no overlay label) is probed too; what it must show is
    then the stock dispatch's: on Metal generation >= 15 qmv_wide serves
    M >= 2 (diverge), below it qmv per vector (pass), and MLX_QMV_ROUTE is
    ignored; on CUDA a matrix kernel serves M >= 2 (diverge)."""
    if report.substrate == "cpu" or is_overlay_wheel(report.info.get("mlx_version", "")):
        return
    report.info["wheel"] = "stock (no overlay label)"
    if report.substrate == "metal":
        gen = arch_gen(report.info.get("architecture", ""))
        expect = "diverge" if gen is None or gen >= 15 else "pass"
        for arm in report.arms:
            arm.expect = expect
            arm.description += " [stock wheel: the switch is ignored]" if arm.name == "wide" else " [stock wheel]"
    elif report.substrate == "cuda":
        for arm in report.arms:
            if arm.name == "default":
                arm.expect = "diverge"
                arm.description += " [stock wheel: a matrix kernel serves M >= 2]"


def run_mlx(substrate: str, cfg: ProbeConfig, python: str) -> SubstrateReport:
    device = "cpu" if substrate == "cpu" else "gpu"
    require = None if substrate == "cpu" else substrate
    report = SubstrateReport(substrate, "pass", info={"python": python})
    for name, expect, control, route_m2, desc in MLX_ARMS[substrate]:
        arm = Arm(name, expect, desc)
        t0 = time.monotonic()
        try:
            data = run_mlx_substrate(python, device, cfg, control=control, route_m2=route_m2,
                                     require=require)
        except SubstrateUnavailable as e:
            return SubstrateReport(substrate, "not run", str(e), info={"python": python})
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            arm.error = str(e)
        else:
            report.info.update(data.get("info", {}))
            arm.result = {k: v for k, v in data.items() if k != "info"}
        arm.seconds = round(time.monotonic() - t0, 2)
        report.arms.append(arm)
    adjust_for_stock_wheel(report)
    return _finish(report)


def cuda_not_run_reason(python: str) -> str:
    return ("no CUDA GPU on this machine; the CUDA harness runs this substrate on an H200 "
            f"(overlay_tool.probe.run_mlx_substrate(python, 'gpu', cfg, require='cuda') "
            f"with an mlx CUDA wheel); here {python} has no mlx CUDA backend")


# ---- all of it ----------------------------------------------------------------


def run(substrates: list[str], cfg: ProbeConfig, *, python: str = sys.executable,
        stock_header=None, patched_header=None, cache_dir: Path | None = None,
        cuda_harness=None, log=print) -> list[SubstrateReport]:
    reports = []
    for sub in substrates:
        log(f"probe: {sub} ...")
        if sub == "emulator":
            rep = run_emulator(cfg, stock_header, patched_header, cache_dir=cache_dir)
        elif sub == "cuda-harness":
            rep = run_cuda_harness(cfg, cuda_harness)
        elif sub in ("cpu", "metal", "cuda"):
            rep = run_mlx(sub, cfg, python)
            if sub == "cuda" and rep.status == "not run":
                rep.reason = cuda_not_run_reason(python) + f" ({rep.reason})"
        else:
            raise ConfigError(f"unknown substrate {sub!r} (one of {', '.join(SUBSTRATES)}, all)")
        reports.append(rep)
    return reports


def _ranges(ms: list[int]) -> str:
    """[1, 2, 3, 5] -> '1-3, 5'; [] -> 'none'."""
    parts: list[str] = []
    for m in ms:
        if parts and m == int(parts[-1].split("-")[-1]) + 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{m}"
        else:
            parts.append(str(m))
    return ", ".join(parts) or "none"


def format_report(reports: list[SubstrateReport]) -> str:
    lines = []
    for rep in reports:
        head = f"{rep.substrate}: {rep.status.upper()}"
        if rep.reason:
            head += f" - {rep.reason}"
        lines.append(head)
        for key in ("mlx_version", "architecture", "device_name"):
            if rep.info.get(key):
                lines.append(f"  {key}: {rep.info[key]}")
        for shape, ms in rep.info.get("patched_products", {}).items():
            lines.append(f"  patched {shape}: streamed kernel at M = {_ranges(ms['streamed'])}"
                         f"; stock fallback at M = {_ranges(ms['fallback'])}")
        for arm in rep.arms:
            mark = "ok" if arm.as_expected else "UNEXPECTED"
            lines.append(f"  [{mark}] {arm.name}: {arm.outcome} (expected {arm.expect}; "
                         f"{arm.description}; {arm.seconds} s)")
            if arm.error:
                lines.append(f"      error: {arm.error}")
            if arm.result:
                for c in arm.result["checks"]:
                    if c["passed"]:
                        detail = "tokens and logit bits identical"
                    else:
                        detail = (f"tokens {'equal' if c['tokens_equal'] else 'DIFFER'}, "
                                  f"{c['positions_differing']}/{c['M']} positions' logits differ "
                                  f"({c['logits_differing']} values, max |diff| {c['max_abs_diff']:.3g}, "
                                  f"first at position {c['first_position_differing']})")
                    lines.append(f"      k={c['k']} M={c['M']}: {detail}")
    return "\n".join(lines)


def exit_status(reports: list[SubstrateReport], explicit: bool) -> tuple[int, str]:
    """0 when every substrate that ran met expectations and at least one ran.
    An explicitly requested substrate that could not run is an error."""
    ran = [r for r in reports if r.status != "not run"]
    failed = [r.substrate for r in ran if r.status == "fail"]
    if failed:
        return 10, f"probe failed on {', '.join(failed)}"
    missing = [r for r in reports if r.status == "not run"]
    if explicit and missing:
        return MissingTool.exit_code, f"{missing[0].substrate} not run: {missing[0].reason}"
    if not ran:
        return MissingTool.exit_code, "no substrate could run"
    return 0, ""
