"""apply and check against the real pinned mlx (never skipped: see conftest)."""

import ast
import datetime
import os
import re
import shutil
import subprocess
from functools import partial
from pathlib import Path

import pytest

from conftest import sh_git
from overlay_tool.apply import apply_queue
from overlay_tool.check import check_queue
from overlay_tool.errors import ConfigError, QueueStale
from overlay_tool.git import Repo
from overlay_tool.label import overlay_label
from overlay_tool.project import Project

pytestmark = pytest.mark.integration


def quiet(_: str) -> None:
    pass


def test_pinned_checkout_is_the_pin(project: Project, pinned_checkout: Path) -> None:
    assert sh_git(pinned_checkout, "rev-parse", "HEAD") == project.pin.commit
    assert (pinned_checkout / "mlx" / "backend" / "metal" / "kernels" / "quantized.h").is_file()


def test_apply_makes_one_commit_per_patch(project: Project, patched_checkout: Path) -> None:
    pin = project.pin
    subjects = sh_git(patched_checkout, "log", "--reverse", "--format=%s", f"{pin.commit}..HEAD").splitlines()
    assert len(subjects) == len(project.series.entries) > 0
    assert sh_git(patched_checkout, "rev-parse", "--abbrev-ref", "HEAD") == f"overlay/{pin.short}"
    lines: list[str] = []
    apply_queue(project, patched_checkout, log=lines.append)
    assert len(lines) == 1 and "is up to date" in lines[0]


def test_patched_wheel_version_carries_the_overlay_label(patched_checkout: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    source = (patched_checkout / "setup.py").read_text()
    wanted = [n for n in ast.parse(source).body
              if isinstance(n, ast.FunctionDef) and n.name in ("get_version", "overlay_label")]
    namespace = {"os": os, "subprocess": subprocess, "datetime": datetime, "partial": partial}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "setup.py", "exec"), namespace)
    monkeypatch.chdir(patched_checkout)
    label = overlay_label(Repo(patched_checkout))
    assert re.fullmatch(r"overlay\.[0-9a-f]{12}", label)
    assert re.fullmatch(rf"\d+\.\d+\.\d+\.dev\d{{8}}\+{re.escape(label)}", namespace["get_version"]())
    monkeypatch.setenv("PYPI_RELEASE", "1")
    assert re.fullmatch(rf"\d+\.\d+\.\d+\+{re.escape(label)}", namespace["get_version"]())


def test_check_passes_on_the_real_pin(project: Project) -> None:
    check_queue(project, log=quiet)


@pytest.fixture
def project_copy(project: Project, tmp_path: Path) -> Project:
    root = tmp_path / "copy"
    root.mkdir()
    shutil.copy(project.pin_path, root / "pin.toml")
    shutil.copytree(project.patches_dir, root / "patches")
    return Project.discover(root)


def test_check_fails_on_a_hand_edited_patch(project_copy: Project) -> None:
    patch = project_copy.patches_dir / project_copy.series.names[0]
    text = patch.read_text()
    added = next(line for line in text.splitlines() if line.startswith("+") and not line.startswith("+++"))
    patch.write_text(text.replace(added + "\n", added + "  # edited\n", 1))
    with pytest.raises(QueueStale):
        check_queue(project_copy, log=quiet)


def test_check_fails_on_a_patch_dropped_from_series(project_copy: Project) -> None:
    name = project_copy.series.names[-1]
    project_copy.series_path.write_text(project_copy.series_path.read_text().replace(f"{name} ", f"# {name} "))
    with pytest.raises(ConfigError, match=f"{name}: not listed in series"):
        check_queue(project_copy, log=quiet)
