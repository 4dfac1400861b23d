"""mlx-overlay drift: upstream commits touching patched files, and would the queue apply to REF."""

from __future__ import annotations

import argparse
from pathlib import Path

from overlay_tool.drift import check_drift
from overlay_tool.project import Project


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "drift",
        help="list upstream commits touching patched files and check the queue applies to REF",
        description="Exit codes: 0 the queue applies to REF (cleanly or with 3-way merges), "
                    "5 it does not (conflict, or a patched file deleted upstream), 2 bad input, "
                    "4 upstream unreachable.",
    )
    parser.add_argument("--against", metavar="REF", default=None,
                        help="upstream commit, tag or branch (default: the cache's origin/<branch>)")
    parser.add_argument("--fetch", action="store_true", help="update the cache from upstream first")
    parser.add_argument("--json", metavar="FILE", type=Path, default=None,
                        help="also write the result as JSON (for CI annotations), whatever the outcome")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_drift(Project.discover(args.project), args.against, fetch=args.fetch, json_path=args.json)
    return 0
