"""mlx-overlay bench: time qmv, qmv_wide and qmv_streamed (V = 1..5) on a Mac's
GPU with the patched wheel; wraps bench/metal_qmv.py (docs/bench.md)."""

from __future__ import annotations

import argparse
import subprocess
import sys

from overlay_tool.errors import ConfigError, MissingTool
from overlay_tool.project import Project

SCRIPT = "bench/metal_qmv.py"
EXIT_NO_METAL = 3  # as bench/metal_qmv.py
EXIT_NOT_PATCHED = 4


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="Metal benchmark of the quantized mat-vec routes (needs a Mac and the patched wheel)",
        description=("Runs bench/metal_qmv.py under --python; arguments after the options go to "
                     "the script (see `mlx-overlay bench -- --help` and docs/bench.md)."),
    )
    p.add_argument("--python", default=sys.executable,
                   help="Python with the patched mlx wheel installed (default: this one)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for bench/metal_qmv.py")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    project = Project.discover(args.project)
    script = project.root / SCRIPT
    if not script.is_file():
        raise ConfigError(f"{project.display(script)}: no such file")
    rest = list(args.args)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    try:
        code = subprocess.run([args.python, str(script), *rest]).returncode
    except FileNotFoundError:
        raise MissingTool(f"--python {args.python}: no such program")
    if code == EXIT_NO_METAL:
        raise MissingTool("no Metal GPU here: the benchmark runs on an Apple-silicon Mac; nothing was measured")
    if code == EXIT_NOT_PATCHED:
        raise MissingTool("the mlx wheel has no MLX_QMV_ROUTE switch; nothing was measured",
                          hint="install the patched wheel (mlx-overlay build) into --python")
    return code
