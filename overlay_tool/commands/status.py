"""mlx-overlay status: the pin, the patches' states, upstream drift."""

from __future__ import annotations

import argparse

from overlay_tool.project import Project
from overlay_tool.status import collect, report


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("status", help="show the pin, each patch's state and upstream drift")
    parser.add_argument("--fetch", action="store_true", help="update the cache from upstream first")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    project = Project.discover(args.project)
    report(project, collect(project, fetch=args.fetch))
    return 0
