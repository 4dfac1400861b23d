"""mlx-overlay check: the CI gate (lint, apply to the pin, re-export, compare)."""

from __future__ import annotations

import argparse

from overlay_tool.check import check_queue
from overlay_tool.project import Project


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "check",
        help="fail unless patches/ applies to the pin and re-exports unchanged",
        description="Exit codes: 0 ok, 2 patches/ malformed, 4 upstream unreachable, "
                    "5 queue does not apply, 6 queue is stale.",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_queue(Project.discover(args.project))
    return 0
