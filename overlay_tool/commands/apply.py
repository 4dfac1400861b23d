"""mlx-overlay apply: upstream at the pin plus the queue, in the work checkout."""

from __future__ import annotations

import argparse
from pathlib import Path

from overlay_tool.apply import apply_queue
from overlay_tool.project import Project


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("apply", help="apply the patch queue to the pinned upstream commit")
    parser.add_argument("--checkout", type=Path, default=None,
                        help="the checkout to build (default: <project>/work/mlx)")
    parser.add_argument("--force", action="store_true",
                        help="set uncommitted or unexported work aside (under refs/overlay/saved/) and re-apply")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    apply_queue(Project.discover(args.project), args.checkout, force=args.force)
    return 0
