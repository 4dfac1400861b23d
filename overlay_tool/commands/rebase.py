"""mlx-overlay rebase: move the queue and the pin to another upstream commit."""

from __future__ import annotations

import argparse
from pathlib import Path

from overlay_tool.project import Project
from overlay_tool.rebase import Rebaser


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "rebase",
        help="replay the queue onto another upstream commit and move the pin there",
        description="Replays patches/ onto REF patch by patch (3-way), printing one row per patch: "
                    "clean, 3-way, empty (already upstream: dropped), conflict, deleted (file removed "
                    "upstream, commit named). patches/ and pin.toml change only once the whole queue "
                    "applies. Exit codes: 0 done, 2 bad input or no rebase in progress, 4 upstream "
                    "unreachable, 5 stopped on a conflict (resolve, then --continue), 6 check failed "
                    "after the rebase, 7 unsaved work in the checkout, 8 a rebase is already in progress.",
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--to", metavar="REF", help="upstream commit, tag or branch (branches are fetched first)")
    group.add_argument("--continue", dest="cont", action="store_true",
                       help="go on after resolving a conflict (or after an interruption)")
    group.add_argument("--skip", action="store_true", help="drop the patch stopped on a conflict and go on")
    group.add_argument("--abort", action="store_true",
                       help="put the checkout, patches/ and pin.toml back as they were")
    parser.add_argument("--checkout", type=Path, default=None,
                        help="the checkout to rebase in (default: <project>/work/mlx)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rebaser = Rebaser(Project.discover(args.project))
    if args.abort:
        rebaser.abort()
    elif args.cont or args.skip:
        rebaser.continue_(skip=args.skip)
    else:
        rebaser.start(args.to, args.checkout)
    return 0
