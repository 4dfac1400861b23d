"""bench/cuda_mlx_pytest.py: MLX's tests run serially, started again after
each crash until every test has one outcome. The crash of the H200 image (a
C++ exception that kills the interpreter) is played by a test that sends
itself SIGSEGV; the control is plain pytest on the same file, which loses
every test after it."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "cuda_mlx_pytest.py"

TESTS = textwrap.dedent('''
    import os
    import signal
    import unittest


    class TestQuantized(unittest.TestCase):
        def test_a_passes(self):
            self.assertEqual(1, 1)

        def test_b_subtests(self):
            for i in range(4):
                with self.subTest(i=i):
                    self.assertNotEqual(i, 2)

        def test_c_crashes(self):
            os.kill(os.getpid(), signal.SIGSEGV)

        @unittest.skip("not here")
        def test_d_skipped(self):
            pass

        def test_e_crashes_too(self):
            os.abort()

        def test_f_fails(self):
            self.assertEqual(1, 2)

        def test_g_left_out(self):
            pass

        def test_h_passes_last(self):
            pass
''')


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    tests = tmp_path / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_quantized.py").write_text(TESTS)
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=tests, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"})


def rows(path: Path) -> dict[str, dict[str, str]]:
    with open(path) as f:
        return {r["nodeid"].split("::")[-1]: r for r in csv.DictReader(f)}


def test_every_test_gets_one_outcome_through_crashes(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    r = run(tmp_path, "--out", str(out), "--exclude", "test_quantized.py::TestQuantized::test_g_left_out", "--",
            "test_quantized.py")
    assert r.returncode == 1, r.stdout + r.stderr  # a failure and two crashes
    got = {name: (row["outcome"], row["subtests_passed"], row["subtests_failed"]) for name, row in rows(out).items()}
    assert got == {
        "test_a_passes": ("passed", "0", "0"),
        "test_b_subtests": ("failed", "3", "1"),
        "test_c_crashes": ("crashed", "0", "0"),
        "test_d_skipped": ("skipped", "0", "0"),
        "test_e_crashes_too": ("crashed", "0", "0"),
        "test_f_fails": ("failed", "0", "0"),
        "test_h_passes_last": ("passed", "0", "0"),
    }
    details = {name: row["detail"] for name, row in rows(out).items()}
    assert details["test_c_crashes"] == "rc -11" and details["test_e_crashes_too"] == "rc -6"
    assert "run 1: crashed in test_quantized.py::TestQuantized::test_c_crashes (rc -11)" in r.stdout
    assert r.stdout.splitlines()[-1] == "7 tests in 3 pytest run(s): 2 crashed, 2 failed, 2 passed, 1 skipped"
    # Control: one plain pytest process ends at the first crash.
    plain = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", "test_quantized.py"],
                           cwd=tmp_path / "tests", capture_output=True, text=True)
    assert plain.returncode == -11 and "test_h_passes_last" not in plain.stdout


def test_the_time_limit_leaves_the_rest_not_run(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_slow.py").write_text(textwrap.dedent('''
        import time
        import unittest


        class TestSlow(unittest.TestCase):
            def test_a_quick(self):
                pass

            def test_b_slow(self):
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertNotEqual(i, 1)
                time.sleep(60)

            def test_c_after(self):
                pass
    '''))
    r = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--limit", "5", "--", "test_slow.py"],
                       cwd=tests, capture_output=True, text=True)
    assert r.returncode == 1
    got = {name: (row["outcome"], row["subtests_passed"], row["subtests_failed"], row["detail"])
           for name, row in rows(out).items()}
    # The test in flight keeps what its subtests reported before the cut.
    assert got == {"test_a_quick": ("passed", "0", "0", ""),
                   "test_b_slow": ("not run", "2", "1", "time limit, in flight"),
                   "test_c_after": ("not run", "0", "0", "time limit")}
    assert rows(out)["test_b_slow"]["seconds"] != ""


def test_nothing_collected_is_an_error(tmp_path: Path) -> None:
    r = run(tmp_path, "--out", str(tmp_path / "r.csv"), "--", "test_quantized.py", "-k", "no_such_test")
    assert r.returncode != 0 and "0 tests" in r.stderr


def test_a_run_that_ends_early_is_reported(tmp_path: Path) -> None:
    """pytest stopping by itself between tests (played by a conftest that ends
    the session after the first) leaves the rest `not run`, named with the
    run's output."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text("import pytest\n\ndef pytest_runtest_logfinish(nodeid, location):\n"
                                       "    pytest.exit('stop here', 3)\n")
    (tests / "test_x.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    out = tmp_path / "r.csv"
    r = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--", "test_x.py"],
                       cwd=tests, capture_output=True, text=True)
    assert r.returncode == 1
    assert f"run 1: pytest ended (rc 3) without running 1 test(s); see {out.with_suffix('.run1.txt')}" in r.stdout
    got = {name: (row["outcome"], row["detail"]) for name, row in rows(out).items()}
    assert got == {"test_a": ("passed", ""), "test_b": ("not run", "pytest ended before it")}


@pytest.mark.integration
def test_mlx_s_own_tests_through_the_driver(tmp_path: Path, mlx_python: str, pinned_checkout: Path) -> None:
    """In MLX's tests folder (whose rootdir pytest would otherwise put at
    MLX's root, beside its pyproject.toml, so that `--deselect
    test_quantized.py::...` matched nothing on the H200), with the wheel's
    python: node ids, unittest subtests and the exclusion as on the
    device."""
    out = tmp_path / "r.csv"
    r = subprocess.run([mlx_python, str(SCRIPT), "--out", str(out),
                        "--exclude", "test_quantized.py::TestQuantized::test_qmv_wide", "--", "test_quantized.py",
                        "-k", "test_qmv_small_non_multiples or test_throw or test_qmv_wide"],
                       cwd=pinned_checkout / "python" / "tests", capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    got = {name: (row["outcome"], int(row["subtests_passed"])) for name, row in rows(out).items()}
    assert got == {"test_qmv_small_non_multiples": ("passed", 12), "test_throw": ("passed", 0)}
    assert not (pinned_checkout / "python" / "tests" / ".pytest_cache").exists()
    # Control: pytest's own rootdir there, and the same --deselect misses.
    plain = subprocess.run([mlx_python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                            "test_quantized.py", "--deselect", "test_quantized.py::TestQuantized::test_throw"],
                           cwd=pinned_checkout / "python" / "tests", capture_output=True, text=True)
    assert "python/tests/test_quantized.py::TestQuantized::test_throw" in plain.stdout.splitlines()


def test_exclude_leaves_out_that_test_alone(tmp_path: Path) -> None:
    """--exclude names one test exactly: test_qmm out, test_qmm_shapes in.
    pytest's --deselect takes every id it prefixes, as the control shows (the
    device commands of sessions 16-18 lost six of MLX's tests so), so the
    driver refuses it in one line, and an id it did not collect too."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_quantized.py").write_text(textwrap.dedent('''
        import unittest


        class TestQuantized(unittest.TestCase):
            def test_qmm(self):
                pass

            def test_qmm_shapes(self):
                pass

            def test_qmv(self):
                pass
    '''))
    qmm = "test_quantized.py::TestQuantized::test_qmm"

    def driver(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "r.csv"), *args],
                              cwd=tests, capture_output=True, text=True)

    r = driver("--exclude", qmm, "--", "test_quantized.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(rows(tmp_path / "r.csv")) == ["test_qmm_shapes", "test_qmv"]
    plain = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                            "--rootdir=.", "test_quantized.py", "--deselect", qmm],
                           cwd=tests, capture_output=True, text=True)
    assert [line for line in plain.stdout.splitlines() if "::" in line] == [
        "test_quantized.py::TestQuantized::test_qmv"]
    for args, says in ((["--", "test_quantized.py", "--deselect", qmm], "pytest's --deselect leaves out"),
                       (["--", "test_quantized.py", f"--deselect={qmm}"], "pytest's --deselect leaves out"),
                       (["--exclude", qmm + "_vjp", "--", "test_quantized.py"],
                        f"--exclude {qmm}_vjp: not one of the 3 tests collected")):
        r = driver(*args)
        assert r.returncode == 1 and r.stdout == "", r.stdout + r.stderr
        assert r.stderr.strip().splitlines() == [r.stderr.strip()]
        assert r.stderr.startswith(f"cuda_mlx_pytest.py: {says}"), r.stderr


def test_resume_keeps_an_earlier_call_s_outcomes_and_runs_the_rest(tmp_path: Path) -> None:
    """A call cut by its time limit, then a second call with --resume: the
    outcome of the first call's test is kept (that test now fails, so running
    it again would show), and the tests it did not reach run. Control: the
    second call without --resume runs every test."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_slow.py").write_text("import time\n\ndef test_quick():\n    pass\n\n"
                                        "def test_slow():\n    time.sleep(60)\n\ndef test_after():\n    pass\n")
    first = tmp_path / "first.csv"
    r = subprocess.run([sys.executable, str(SCRIPT), "--out", str(first), "--limit", "5", "--", "test_slow.py"],
                       cwd=tests, capture_output=True, text=True)
    assert rows(first)["test_quick"]["outcome"] == "passed" and rows(first)["test_slow"]["outcome"] == "not run"
    (tests / "test_slow.py").write_text("def test_quick():\n    assert False\n\n"
                                        "def test_slow():\n    pass\n\ndef test_after():\n    pass\n")
    second = tmp_path / "second.csv"
    r = subprocess.run([sys.executable, str(SCRIPT), "--out", str(second), "--resume", str(first), "--",
                        "test_slow.py"], cwd=tests, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"3 tests, 1 with an outcome from {first}" in r.stdout
    assert r.stdout.splitlines()[-1] == "3 tests in 1 pytest run(s): 3 passed"
    assert {name: row["outcome"] for name, row in rows(second).items()} == {
        "test_quick": "passed", "test_slow": "passed", "test_after": "passed"}
    assert rows(second)["test_quick"] == rows(first)["test_quick"]
    control = tmp_path / "control.csv"
    r = subprocess.run([sys.executable, str(SCRIPT), "--out", str(control), "--", "test_slow.py"],
                       cwd=tests, capture_output=True, text=True)
    assert r.returncode == 1 and rows(control)["test_quick"]["outcome"] == "failed"


def test_resume_from_a_file_that_is_not_a_result_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "prev.csv"
    bad.write_text("suite,mode\nqmm,affine\n")
    for prev, says in ((bad, "not a cuda_mlx_pytest.py result"), (tmp_path / "missing.csv", "cannot read")):
        r = run(tmp_path, "--out", str(tmp_path / "r.csv"), "--resume", str(prev), "--", "test_quantized.py")
        assert r.returncode == 1 and r.stdout == ""
        assert r.stderr.strip().splitlines() == [r.stderr.strip()] and r.stderr.startswith(f"{prev}: {says}")
