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
                    "5 an upstream patch depends on an overlay patch or conflicts with REF, "
                    "12 clang-format/black cannot be installed, 13 formatting problems (files still written).",
    )
    parser.add_argument("--onto", metavar="REF", default=None,
                        help="upstream commit, tag or branch (default: origin/<branch>, fetched)")
    parser.add_argument("--out", metavar="DIR", type=Path, default=None,
                        help="where the series and PR.md go (default: <project>/dist/upstream-pr)")
    parser.add_argument("--parity", metavar="JSON", type=Path, default=None,
                        help="parity summary to quote (default: <project>/dist/test-summary.json)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    upstream_pr(Project.discover(args.project), args.onto, args.out, parity=args.parity)
    return 0
