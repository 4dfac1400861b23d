"""The thin command line on top of the modules; one error funnel.

Each subcommand lives in ``overlay_tool/commands/<name>.py`` and exposes
``add_parser(subparsers)`` (which sets ``func`` on its parser) and a
``run(args) -> int``. Adding a command means adding its module name to
``COMMANDS``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from overlay_tool import __version__, git
from overlay_tool.errors import OverlayError

COMMANDS: list[str] = [
    "apply",
    "export",
    "check",
    "status",
    "rebase",
    "drift",
    "upstream-pr",
    "emulate",
    "build",
    "test",
    "probe",
    "bench",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mlx-overlay",
        description="Apply, export, check, rebuild and upstream the mlx patch queue.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "-C",
        "--project",
        type=Path,
        default=None,
        help="project root (default: the nearest folder above the current one holding pin.toml)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="echo each git command before running it")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"overlay_tool.commands.{name.replace('-', '_')}")
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    git.set_verbose(args.verbose)
    try:
        return int(args.func(args) or 0)
    except OverlayError as err:
        print(f"mlx-overlay: error: {err.message}", file=sys.stderr)
        if err.hint:
            print(f"mlx-overlay: hint: {err.hint}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("mlx-overlay: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
