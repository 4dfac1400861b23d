"""mlx-overlay upstream-pr: the upstream patches as a branch, a format-patch series and a PR draft."""

from __future__ import annotations

import argparse
from pathlib import Path

from overlay_tool.project import Project
from overlay_tool.upstream_pr import upstream_pr


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "upstream-pr",
        help="branch on upstream REF with only the upstream patches, format-checked, exported with PR.md",
        description="Never pushes. Exit codes: 0 ready, 2 bad input, 4 upstream unreachable, "
                    "5 a patch of the PR depends on one left out (overlay, or not in --only) or conflicts with REF, "
                    "12 clang-format/black cannot be installed, 13 formatting problems (files still written).",
    )
    parser.add_argument("--onto", metavar="REF", default=None,
                        help="upstream commit, tag or branch (default: origin/<branch>, fetched)")
    parser.add_argument("--out", metavar="DIR", type=Path, default=None,
                        help="where the series and PR.md go (default: <project>/dist/upstream-pr)")
    parser.add_argument("--parity", metavar="JSON", type=Path, default=None,
                        help="parity summary to quote (default: <project>/dist/test-summary.json)")
    parser.add_argument("--only", metavar="PATCH", action="append", default=None,
                        help="only this upstream patch (file name, number such as 0009, or glob); repeat for more. "
                             "The others must not be needed by these")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    upstream_pr(Project.discover(args.project), args.onto, args.out, parity=args.parity, only=args.only)
    return 0
