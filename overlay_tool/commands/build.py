"""mlx-overlay build: the patched wheel, from the work checkout, into dist/."""

from __future__ import annotations

import argparse
from pathlib import Path

from overlay_tool.apply import queue_hash
from overlay_tool.build import BACKENDS, BuildRequest, build_wheel
from overlay_tool.git import Repo
from overlay_tool.label import overlay_label
from overlay_tool.project import Project


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "build",
        help="build the patched mlx wheel into dist/",
        description="Apply the queue if the work checkout is not current, then build the wheel "
        "(pip wheel --no-build-isolation in a managed build venv) into <project>/dist/.",
    )
    parser.add_argument("--backend", choices=BACKENDS, default="auto",
                        help="auto: metal on macOS, cpu elsewhere; cuda passes MLX's CUDA options (default: auto)")
    parser.add_argument("--jobs", "-j", type=int, default=None, help="parallel compile jobs (default: all cores)")
    parser.add_argument("--offline", action="store_true",
                        help="no configure-time downloads: Debian's BLAS/LAPACK, fmt and nlohmann-json, "
                        "nanobind's sdist from PyPI; GGUF support is left out (gguflib has no offline source)")
    parser.add_argument("--checkout", type=Path, default=None,
                        help="build this checkout as it is, without applying the queue (default: apply the queue to <project>/work/mlx)")
    parser.add_argument("--dist", type=Path, default=None, help="where the wheel goes (default: <project>/dist)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    project = Project.discover(args.project)
    if args.checkout is None:
        from overlay_tool.apply import apply_queue

        checkout = apply_queue(project)
    else:
        checkout = args.checkout.absolute()
    label = overlay_label(Repo(checkout)) if (checkout / ".git").exists() else None
    req = BuildRequest(
        checkout=checkout,
        state=project.root / ".overlay",
        dist=args.dist or project.root / "dist",
        backend=args.backend,
        jobs=args.jobs,
        offline=args.offline,
        label=label,
        queue_hash=queue_hash(project.series, project.pin.commit) if args.checkout is None else None,
        root=project.root,
    )
    build_wheel(req)
    return 0
