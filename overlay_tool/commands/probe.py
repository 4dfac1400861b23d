"""mlx-overlay probe: the end-to-end exactness probe (greedy M = 1 decoding vs
verify passes at M = k + 1) on the emulator, the CPU wheel, Metal and CUDA."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, fields
from pathlib import Path

from overlay_tool.errors import ConfigError, MissingTool, TestFailure
from overlay_tool.probe_model import ProbeConfig

SUBSTRATES = ("emulator", "cpu", "metal", "cuda", "cuda-harness")  # as overlay_tool.probe.SUBSTRATES
HEADER = "mlx/backend/metal/kernels/quantized.h"
STREAMED_MARKER = "qmv_streamed_impl"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "probe",
        help="end-to-end exactness probe: greedy decoding vs speculative verify, bit for bit",
        description=(
            "A small quantized decoder (weights drawn from --seed) decodes greedily one token at "
            "a time; verify passes feed k drafted tokens at once (M = k + 1, k = 1..limit-1). "
            "Pass: same tokens and bit-identical logits at every position. Each substrate also "
            "runs a negative control that must diverge."),
    )
    p.add_argument("--substrate", action="append", choices=(*SUBSTRATES, "all"),
                   help="where to run (repeatable; default: all). A substrate asked for by name "
                        "that cannot run here is an error; with 'all' it is reported as not run")
    p.add_argument("--python", default=sys.executable,
                   help="Python with the mlx wheel to probe, for cpu/metal/cuda (default: this one)")
    p.add_argument("--stock-header", type=Path,
                   help="stock quantized.h for the emulator (default: the pin, from the cache)")
    p.add_argument("--patched-header", type=Path,
                   help="patched quantized.h for the emulator (default: the work checkout after apply)")
    p.add_argument("--cuda-harness", type=Path,
                   help="libqmv_probe.so for the cuda-harness substrate (bench/cuda_qmv.py build; "
                        "default: $MLX_OVERLAY_CUDA_HARNESS)")
    p.add_argument("--json", type=Path, help="write the full report as JSON here")
    defaults = ProbeConfig()
    for f in fields(ProbeConfig):
        if f.name in ("eps",):
            continue
        p.add_argument(f"--{f.name.replace('_', '-')}", type=type(getattr(defaults, f.name)),
                       default=getattr(defaults, f.name), help=f"model/probe setting (default {getattr(defaults, f.name)})")
    p.set_defaults(func=run)


def _config(args: argparse.Namespace) -> ProbeConfig:
    values = {f.name: getattr(args, f.name) for f in fields(ProbeConfig) if hasattr(args, f.name)}
    cfg = ProbeConfig(**{**asdict(ProbeConfig()), **values})
    if cfg.limit < 2:
        raise ConfigError(f"--limit {cfg.limit}: the probe needs at least one verify pass (limit >= 2)")
    if cfg.dtype not in ("bfloat16", "float16", "float32"):
        raise ConfigError(f"--dtype {cfg.dtype}: one of bfloat16, float16, float32")
    for name, (k, _) in cfg.shapes().items():
        if k % cfg.group_size:
            raise ConfigError(f"the {name} product has K={k}, not a multiple of --group-size {cfg.group_size}")
    return cfg


def _headers(args: argparse.Namespace) -> tuple[Path, Path]:
    """The stock and patched quantized.h for the emulator substrate."""
    stock, patched = args.stock_header, args.patched_header
    if stock is None or patched is None:
        from overlay_tool.project import Project

        project = Project.discover(args.project)
        if patched is None:
            from overlay_tool.apply import apply_queue

            patched = apply_queue(project) / HEADER
        if stock is None:
            from overlay_tool.cache import ensure_commit

            pin = project.pin
            text = ensure_commit(project.cache_dir, pin).git("show", f"{pin.commit}:{HEADER}")
            stock = project.cache_dir.parent / "probe-headers" / pin.commit / HEADER
            stock.parent.mkdir(parents=True, exist_ok=True)
            if not stock.exists() or stock.read_text() != text + "\n":
                stock.write_text(text + "\n")
    for path in (stock, patched):
        if not path.is_file():
            raise ConfigError(f"{path}: no such header")
    if STREAMED_MARKER not in patched.read_text(errors="replace"):
        raise ConfigError(
            f"{patched}: has no {STREAMED_MARKER} (the queue does not carry the streamed kernel)",
            hint="pass --patched-header with a patched quantized.h")
    return stock, patched


def run(args: argparse.Namespace) -> int:
    try:
        import numpy  # noqa: F401
    except ImportError:
        raise MissingTool("the probe needs numpy (pip install 'mlx-overlay[emulator]')")
    from overlay_tool import probe

    cfg = _config(args)
    requested = args.substrate or ["all"]
    explicit = "all" not in requested
    subs = list(SUBSTRATES) if not explicit else list(dict.fromkeys(requested))
    stock = patched = None
    if "emulator" in subs:
        stock, patched = _headers(args)
    reports = probe.run(subs, cfg, python=args.python, stock_header=stock, patched_header=patched,
                        cuda_harness=args.cuda_harness, log=lambda m: print(m, file=sys.stderr))
    print(probe.format_report(reports))
    code, message = probe.exit_status(reports, explicit)
    if args.json:
        args.json.write_text(json.dumps({
            "config": asdict(cfg), "substrates": [r.to_dict() for r in reports],
            "exit_status": code}, indent=1) + "\n")
    if code == TestFailure.exit_code:
        raise TestFailure(message)
    if code:
        raise MissingTool(message, hint="--python names a Python that has the mlx wheel to probe")
    return 0
