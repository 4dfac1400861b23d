"""mlx-overlay check: the CI gate (lint, apply to the pin, re-export, compare)."""

from __future__ import annotations

import argparse
from pathlib import Path

from overlay_tool.check import check_queue
from overlay_tool.project import Project


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "check",
        help="fail unless patches/ applies to the pin and re-exports unchanged",
        description="Exit codes: 0 ok, 2 patches/ malformed, 4 upstream unreachable, "
                    "5 queue does not apply, 6 queue is stale.",
    )
    parser.add_argument("--fix-dir", type=Path, default=None, metavar="DIR",
                        help="when the queue is stale, write the re-exported queue to DIR (for CI to publish)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_queue(Project.discover(args.project), fix_dir=args.fix_dir)
    return 0
