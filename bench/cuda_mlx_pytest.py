#!/usr/bin/env python3
"""Run MLX's Python tests one process after another until every test has an
outcome, however many of those processes crash.

On the H200 image, a C++ exception that reached Python could kill the
interpreter (until session 21 the build's module carried a static libstdc++
that broke where numpy was imported first: bench/cuda_stdcxx.sh): in the run
of 2026-12-02 (session 17) test_mxfp4_quantize_dequantize's first `assertRaises(ValueError)` ended
a plain serial pytest with a segmentation fault at 42% of the file, after
earlier tests had raised and caught the same error. pytest-xdist replaces a
crashed worker, but in the same session its workers also failed while
reporting unittest subtests (AssertionError in xdist's
pytest_runtest_logreport: the report's test was not the one the worker was
running), five of them crashed, and the file had not ended after 330 s.

This driver runs pytest serially (the image's plugins off, as
bench/cuda_mlx_run_device.sh does), with a small plugin of its own (this
file, loaded with -p) that writes each test's start and each report to a log
as it happens. When the process dies, the test in flight is recorded as
crashed, with the exit status, and pytest starts again on the tests that have
no outcome yet. Every test ends in exactly one row of OUT:

    nodeid,outcome,subtests_passed,subtests_failed,seconds,detail

outcome: passed, failed, skipped, error (setup or teardown), crashed (the
process died in it; detail: the exit status) or not run (the time limit came
first). A test that crashes is not run again.

A device call lasts at most 10 minutes, and on a fresh machine the file
takes longer than that (the H200 run of 2026-12-02, session 18: every stock
matrix kernel compiled at run time on first use, test_fp_qvm alone 144 s, and
the call ended in the eighth of 32 tests). --resume PREV.csv carries the
outcomes of an earlier call on to OUT and runs only the tests PREV has as
`not run` (or does not name), so that calls in a row on a warm machine get
through the file.

--exclude NODEID leaves that one test out. pytest's own --deselect is refused:
it leaves out every test whose id starts with the one named, and the
commands of sessions 16-18 (`--deselect test_quantized.py::TestQuantized::test_qmm`)
so left out test_qmm_large_dims, test_qmm_non_transposed, test_qmm_vjp,
test_qmm_jvp, test_qmm_shapes and test_qmm_fp_type without a word.

Usage: python3 cuda_mlx_pytest.py --out OUT.csv [--limit SECONDS] [--resume PREV.csv]
           [--exclude NODEID ...] -- PYTEST_ARGS...
    (run in the tests folder; PYTEST_ARGS select the tests, e.g.
    --exclude test_quantized.py::TestQuantized::test_qmm -- test_quantized.py)
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

LOG_ENV = "CUDA_MLX_PYTEST_LOG"
COLUMNS = ["nodeid", "outcome", "subtests_passed", "subtests_failed", "seconds", "detail"]


# -- the plugin: runs inside pytest (-p cuda_mlx_pytest) -----------------------


def _log(record: dict[str, object]) -> None:
    with open(os.environ[LOG_ENV], "a") as f:
        f.write(json.dumps(record) + "\n")


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    _log({"start": nodeid, "t": time.time()})


def pytest_runtest_logreport(report: object) -> None:
    # A unittest subTest's report has a `context` (pytest 9's SubtestReport).
    _log({"nodeid": getattr(report, "nodeid"), "when": getattr(report, "when"),
          "outcome": getattr(report, "outcome"), "subtest": hasattr(report, "context"), "t": time.time()})


# -- the driver ---------------------------------------------------------------


@dataclass
class Outcome:
    """What the log says of one test."""

    outcome: str = ""
    subtests_passed: int = 0
    subtests_failed: int = 0
    start: float = 0.0
    end: float = 0.0
    finished: bool = False
    detail: str = ""
    reports: list[tuple[str, str]] = field(default_factory=list)

    def row(self, nodeid: str) -> list[str]:
        seconds = f"{self.end - self.start:.1f}" if self.end else ""
        return [nodeid, self.outcome, str(self.subtests_passed), str(self.subtests_failed), seconds, self.detail]


def read_log(path: Path) -> tuple[dict[str, Outcome], str | None]:
    """The outcomes the log records, and the test started last if it has not
    finished (teardown not reported)."""
    outcomes: dict[str, Outcome] = {}
    in_flight = None
    if not path.exists():
        return outcomes, None
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # the last line of a process killed while writing it
            continue
        if "start" in record:
            in_flight = record["start"]
            outcomes[in_flight] = Outcome(start=record["t"])
            continue
        o = outcomes.setdefault(record["nodeid"], Outcome(start=record["t"]))
        o.end = record["t"]
        if record["subtest"]:
            if record["outcome"] == "passed":
                o.subtests_passed += 1
            elif record["outcome"] == "failed":
                o.subtests_failed += 1
            continue
        o.reports.append((record["when"], record["outcome"]))
        if record["when"] == "teardown":
            o.finished = True
            o.outcome = _verdict(o)
            if in_flight == record["nodeid"]:
                in_flight = None
    return outcomes, in_flight


def _verdict(o: Outcome) -> str:
    phases = dict(o.reports)
    if phases.get("setup") == "failed" or phases.get("teardown") == "failed":
        return "error"
    if phases.get("setup") == "skipped" or phases.get("call") == "skipped":
        return "skipped"
    if phases.get("call") == "failed" or o.subtests_failed:
        return "failed"
    return "passed"


def earlier_outcomes(path: Path) -> dict[str, list[str]]:
    """The rows of an earlier call's OUT that have an outcome (all but `not
    run`), by node id."""
    try:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            if next(reader, None) != COLUMNS:
                raise SystemExit(f"{path}: not a cuda_mlx_pytest.py result (its first line is not "
                                 f"{','.join(COLUMNS)})")
            return {row[0]: row for row in reader if row[1] != "not run"}
    except OSError as e:
        raise SystemExit(f"{path}: cannot read the earlier outcomes: {e.strerror}") from None


def collect(pytest_args: list[str], env: dict[str, str]) -> list[str]:
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *pytest_args],
                         capture_output=True, text=True, env=env)
    ids = [line for line in run.stdout.splitlines() if "::" in line and " " not in line]
    if run.returncode not in (0, 5) or not ids:
        raise SystemExit(f"pytest --collect-only {' '.join(pytest_args)}: rc {run.returncode}, "
                         f"{len(ids)} tests\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    return ids


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--limit", type=float, default=540.0, help="seconds for all of it")
    ap.add_argument("--resume", type=Path, metavar="PREV.csv",
                    help="keep the outcomes of an earlier call and run only the tests it did not")
    ap.add_argument("--exclude", action="append", default=[], metavar="NODEID",
                    help="leave out this test (its whole node id, matched exactly)")
    ap.add_argument("pytest_args", nargs="+")
    args = ap.parse_args()
    for arg in args.pytest_args:
        if arg == "--deselect" or arg.startswith("--deselect="):
            raise SystemExit("cuda_mlx_pytest.py: pytest's --deselect leaves out every test whose id starts "
                             "with the one named (test_qmm takes test_qmm_shapes with it); "
                             "name the test with --exclude NODEID")
    deadline = time.monotonic() + args.limit
    earlier = earlier_outcomes(args.resume) if args.resume else {}
    base = ["-p", "no:cacheprovider", "--rootdir=.", "-p", "cuda_mlx_pytest"]
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent),
                                                        os.environ.get("PYTHONPATH")]))}
    todo = collect(["-p", "no:cacheprovider", "--rootdir=.", *args.pytest_args], env)
    for nodeid in args.exclude:
        if nodeid not in todo:
            raise SystemExit(f"cuda_mlx_pytest.py: --exclude {nodeid}: not one of the {len(todo)} tests "
                             f"collected (a whole node id, e.g. {todo[0]})")
    todo = [t for t in todo if t not in args.exclude]
    carried = {nodeid: row for nodeid, row in earlier.items() if nodeid in todo}
    todo = [t for t in todo if t not in carried]
    print(f"{len(todo) + len(carried)} tests" + (f", {len(carried)} with an outcome from {args.resume}"
                                                  if args.resume else ""), flush=True)
    done: dict[str, Outcome] = {}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    log = args.out.with_suffix(".log.jsonl")
    log.unlink(missing_ok=True)
    runs = 0
    cut: tuple[str, Outcome] | None = None
    while todo and time.monotonic() < deadline:
        runs += 1
        env[LOG_ENV] = str(log)
        with open(args.out.with_suffix(f".run{runs}.txt"), "w") as output:
            try:
                rc = subprocess.run([sys.executable, "-m", "pytest", "-q", *base, *todo], env=env,
                                    stdout=output, stderr=subprocess.STDOUT,
                                    timeout=deadline - time.monotonic()).returncode
            except subprocess.TimeoutExpired:
                rc = None
        outcomes, in_flight = read_log(log)
        for nodeid, o in outcomes.items():
            if o.finished:
                done[nodeid] = o
        if in_flight is not None and rc is not None:
            o = outcomes[in_flight]
            o.outcome, o.detail, o.end = "crashed", f"rc {rc}", o.end or o.start
            done[in_flight] = o
            print(f"run {runs}: crashed in {in_flight} (rc {rc})", flush=True)
        elif in_flight is not None:
            # Cut by the time limit: `not run` (a --resume runs it again), with
            # what its subtests had reported by then.
            cut = (in_flight, outcomes[in_flight])
        todo = [t for t in todo if t not in done]
        if rc is not None and in_flight is None:
            # pytest ended on its own: whatever is left it did not run
            if todo:
                print(f"run {runs}: pytest ended (rc {rc}) without running {len(todo)} test(s); "
                      f"see {args.out.with_suffix(f'.run{runs}.txt')}", flush=True)
            break
    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerows(carried.values())
        for nodeid, o in done.items():
            w.writerow(o.row(nodeid))
        why = "time limit" if time.monotonic() >= deadline else "pytest ended before it"
        for nodeid in todo:
            if cut is not None and cut[0] == nodeid:
                o = cut[1]
                w.writerow([nodeid, "not run", o.subtests_passed, o.subtests_failed,
                            f"{(o.end or o.start) - o.start:.1f}", f"{why}, in flight"])
            else:
                w.writerow([nodeid, "not run", 0, 0, "", why])
    counts: dict[str, int] = {}
    for outcome in [row[1] for row in carried.values()] + [o.outcome for o in done.values()]:
        counts[outcome] = counts.get(outcome, 0) + 1
    if todo:
        counts["not run"] = len(todo)
    print(f"{sum(counts.values())} tests in {runs} pytest run(s): "
          + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), flush=True)
    return 0 if set(counts) <= {"passed", "skipped"} else 1


if __name__ == "__main__":
    raise SystemExit(main())
