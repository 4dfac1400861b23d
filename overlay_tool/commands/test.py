"""mlx-overlay test: the parity suite and MLX's quantized tests against the wheel."""

from __future__ import annotations

import argparse
from pathlib import Path

from overlay_tool.apply import State, queue_hash
from overlay_tool.errors import TestFailure
from overlay_tool.git import Repo
from overlay_tool.label import overlay_label
from overlay_tool.project import Project
from overlay_tool.testing import TestRequest, check_wheel, pick_wheel, run_tests


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "test",
        help="run the parity suite and MLX's test_quantized.py against the built wheel",
        description="In a fresh venv with the wheel, numpy and pytest: (1) the project's API-level "
        "parity suite, (2) MLX's python/tests/test_quantized.py from the patched checkout. "
        "Writes a JSON summary; exits non-zero on any failure.",
    )
    parser.add_argument("--wheel", type=Path, default=None, help="the wheel to test (default: the newest in <project>/dist)")
    parser.add_argument("--json", type=Path, default=None, help="summary file (default: <project>/dist/test-summary.json)")
    parser.add_argument("--checkout", type=Path, default=None,
                        help="patched checkout holding MLX's tests (default: the one the wheel was built from)")
    parser.add_argument("--allow-dirty", action="store_true", help="test a wheel built from uncommitted changes (+...dirty)")
    parser.set_defaults(func=run)


def _work_label(project: Project):
    def label() -> tuple[str | None, str | None]:
        path = project.work_dir
        if not (path / ".git").exists():
            return None, None
        repo = Repo(path)
        state = State.read(repo)
        return overlay_label(repo), (state.queue if state else None)

    return label


def run(args: argparse.Namespace) -> int:
    project = Project.discover(args.project)
    dist = project.root / "dist"
    wheel = pick_wheel(dist, args.wheel)
    current = queue_hash(project.series, project.pin.commit)
    checked = check_wheel(wheel, queue_hash=current, checkout_label=_work_label(project), allow_dirty=args.allow_dirty)
    checkout = args.checkout or checked.checkout or project.work_dir
    print(f"[test] wheel {wheel.name}: queue {current[:12]} ({checked.how}), built for {checked.built_backend or 'unknown backend'}")
    summary = run_tests(TestRequest(
        wheel=wheel,
        checkout=checkout.absolute(),
        state=project.root / ".overlay",
        summary=(args.json or dist / "test-summary.json").absolute(),
        expected_backend=checked.built_backend,
        label=checked.label,
        queue_hash=current,
    ))
    if not summary["ok"]:
        bad = [f"{s['name']} ({s['backend']})" for s in summary["suites"] if not s["ok"]]
        raise TestFailure(f"failing suite(s): {', '.join(bad)}; summary: {args.json or dist / 'test-summary.json'}")
    return 0
