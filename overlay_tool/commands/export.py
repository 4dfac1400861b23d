"""mlx-overlay export: the work checkout's commits back into patches/."""

from __future__ import annotations

import argparse
from pathlib import Path

from overlay_tool.export import export_queue
from overlay_tool.project import Project


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("export", help="write the work checkout's commits to patches/ and series")
    parser.add_argument("--checkout", type=Path, default=None,
                        help="the checkout to export from (default: <project>/work/mlx)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    export_queue(Project.discover(args.project), args.checkout)
    return 0
