"""mlx-overlay test: wheel selection, stale-wheel refusal, result parsing (fakes)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from overlay_tool import testing as T
from overlay_tool.apply import queue_hash
from overlay_tool.build import sidecar_path
from overlay_tool.cli import main
from overlay_tool.errors import ConfigError, QueueStale
from overlay_tool.project import Project

DATA = Path(__file__).parent / "build_data"
ROOT = Path(__file__).resolve().parents[1]
PARITY = ROOT / "overlay_tool" / "parity"
LABEL = "overlay.0123456789ab"
Q = "a" * 64


def _wheel(folder: Path, label: str | None = LABEL, *, queue: str | None = Q, record: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    version = "0.32.1.dev20261130" + (f"+{label}" if label else "")
    wheel = folder / f"mlx-{version}-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"")
    if record:
        sidecar_path(wheel).write_text(json.dumps({"label": label, "queue_hash": queue, "backend": "cpu", "checkout": "/x/work/mlx"}))
    return wheel


def test_a_wheel_path_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such wheel file"):
        T.pick_wheel(tmp_path, tmp_path / "mlx-nope.whl")
    with pytest.raises(ConfigError, match="no mlx wheel in"):
        T.pick_wheel(tmp_path / "dist", None)


def test_current_wheel_is_accepted_with_its_build_record(tmp_path: Path) -> None:
    checked = T.check_wheel(_wheel(tmp_path), queue_hash=Q)
    assert checked.label == LABEL and checked.built_backend == "cpu" and checked.checkout == Path("/x/work/mlx")


def test_wheel_from_an_older_queue_is_refused_as_stale(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, queue="b" * 64)
    with pytest.raises(QueueStale) as err:
        T.check_wheel(wheel, queue_hash=Q)
    assert "stale" in err.value.message and "bbbbbbbbbbbb" in err.value.message and "aaaaaaaaaaaa" in err.value.message
    assert err.value.hint == "rebuild with: mlx-overlay build"


def test_unlabelled_and_upstream_wheels_are_refused(tmp_path: Path) -> None:
    with pytest.raises(QueueStale, match=r"\+9a795735a, not \+overlay"):
        T.check_wheel(_wheel(tmp_path / "a", "9a795735a"), queue_hash=Q)
    with pytest.raises(QueueStale, match="no local label"):
        T.check_wheel(_wheel(tmp_path / "b", None), queue_hash=Q)


def test_dirty_wheel_needs_allow_dirty(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, LABEL + ".dirty")
    with pytest.raises(QueueStale, match="uncommitted changes"):
        T.check_wheel(wheel, queue_hash=Q)
    assert T.check_wheel(wheel, queue_hash=Q, allow_dirty=True).label.endswith(".dirty")


def test_without_a_record_the_label_is_compared_with_the_work_checkout(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, record=False)
    assert T.check_wheel(wheel, queue_hash=Q, checkout_label=lambda: (LABEL, Q)).how == "work checkout label"
    with pytest.raises(QueueStale, match="is not the current queue's"):
        T.check_wheel(wheel, queue_hash=Q, checkout_label=lambda: ("overlay.ffffffffffff", Q))
    with pytest.raises(QueueStale, match="cannot be checked"):
        T.check_wheel(wheel, queue_hash=Q, checkout_label=lambda: (LABEL, "c" * 64))


def test_junit_counts_and_skip_reasons() -> None:
    res = T.parse_junit((DATA / "junit_mlx.xml").read_text(), T.SuiteResult(name="mlx-quantized", backend="cpu"))
    assert (res.passed, res.failed, res.skipped, res.errors) == (2, 1, 2, 0)
    assert res.skip_reasons == {"Not implemented for CPU": 2}
    assert res.failures[0]["test"].endswith("test_qmv_wide") and "not less than" in res.failures[0]["message"]
    assert not res.ok and res.counts() == "2 passed, 1 failed, 2 skipped"


def test_a_suite_that_ran_nothing_is_not_ok() -> None:
    assert not T.SuiteResult(name="x", backend="cpu").ok


def test_run_suite_reads_a_real_pytest_run(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text(
        "import pytest\n"
        "def test_ok(): pass\n"
        "def test_bad(): assert 1 == 2\n"
        "@pytest.mark.skip(reason='Not implemented for CPU')\n"
        "def test_skip(): pass\n"
    )
    res = T.run_suite("x", Path(sys.executable), ["-q", "-p", "no:cacheprovider", "test_x.py"], cwd=tmp_path,
                      backend="cpu", workdir=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert (res.passed, res.failed, res.skipped) == (1, 1, 1) and res.skip_reasons == {"Not implemented for CPU": 1}
    assert res.returncode == 1 and not res.ok


def test_cli_refuses_stale_and_missing_wheels(tmp_path: Path, capsys) -> None:
    assert main(["-C", str(ROOT), "test", "--wheel", str(tmp_path / "mlx-0.1-py3-none-any.whl")]) == 2
    assert "no such wheel file" in capsys.readouterr().err
    stale = _wheel(tmp_path / "dist", queue="0" * 64)
    assert main(["-C", str(ROOT), "test", "--wheel", str(stale)]) == 6
    err = capsys.readouterr().err
    assert "stale" in err and "mlx-overlay: hint: rebuild with: mlx-overlay build" in err


def test_cli_queue_hash_is_the_one_apply_uses() -> None:
    project = Project.discover(ROOT)
    assert len(queue_hash(project.series, project.pin.commit)) == 64


# -- the parity suite's own helpers (plain python, no mlx needed) -----------------


def _parity_lib():
    sys.path.insert(0, str(PARITY))
    try:
        import parity_lib
    finally:
        sys.path.remove(str(PARITY))
    return parity_lib


@pytest.mark.parametrize(
    "arch,K,N,limit",
    [
        ("applegpu_g17s", 512, 256, 33), ("applegpu_g17s", 4096, 4096, 25), ("applegpu_g17s", 8192, 4096, 13),
        ("applegpu_g15s", 512, 256, 13), ("applegpu_g15g", 4096, 1024, 15), ("applegpu_g15d", 512, 256, 32),
        ("applegpu_g14g", 512, 256, 14), ("applegpu_g13d", 4096, 4096, 18), ("applegpu_g13g", 8192, 8192, 6),
        ("applegpu_g12g", 512, 256, 18), ("applegpu_g12d", 8192, 512, 12),
    ],
)
def test_batch_limit_mirrors_mlx(arch: str, K: int, N: int, limit: int) -> None:
    assert _parity_lib().batch_limit(K, N, arch) == limit


def test_m_sweep_per_backend() -> None:
    lib = _parity_lib()
    assert lib.m_values("cpu", 512, 256) == list(range(2, 17))
    assert lib.m_values("metal", 512, 256, "applegpu_g17s") == list(range(2, 33))
    assert lib.uses_qmv_wide("applegpu_g15s") and not lib.uses_qmv_wide("applegpu_g14g") and lib.ROUTE_ENV == "MLX_QMV_ROUTE"
    assert lib.first_mismatch([1, 2, 3], [1, 2, 3]) is None and lib.first_mismatch([1, 2, 3], [1, 5, 3]) == (1,)


def test_parity_files_ship_with_the_package() -> None:
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["overlay_tool"]
    assert "parity/*.py" in data and "parity/pytest.ini" in data
    assert {p.name for p in PARITY.iterdir()} >= {"conftest.py", "parity_lib.py", "pytest.ini", "test_row_parity.py", "test_fp_row_parity.py", "test_metal_route.py",
                                                "test_cuda_row_test_body.py"}


def test_suites_run_without_the_route_switches_or_ci(tmp_path: Path) -> None:
    py = tmp_path / "venv" / "bin" / "python"
    env, dropped = T.suite_env(
        {"MLX_QMV_WIDE": "1", "MLX_QMV_ROUTE": "wide", "CI": "true", "PYTHONPATH": "x",
         "HOME": "/h", "PATH": "/usr/bin"}, py)
    assert dropped == ["MLX_QMV_ROUTE", "MLX_QMV_WIDE"]
    assert env == {"HOME": "/h", "PATH": f"{py.parent}{os.pathsep}/usr/bin"}
    # Unset or empty switches are not reported.
    assert T.suite_env({"MLX_QMV_WIDE": "", "PATH": "/b"}, py)[1] == []
