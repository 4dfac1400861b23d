"""Run the test suites against a built wheel: ``mlx-overlay test``.

A fresh virtual environment gets the wheel, numpy and pytest, nothing else
(the tool itself is not installed there). Two suites run in it:

1. ``parity``: the project's API-level suite (``overlay_tool/parity/``,
   shipped with the package): every row of an M-row ``mx.quantized_matmul``
   bitwise equal to the row alone, on whatever backend the wheel has.
2. ``mlx-quantized``: MLX's own ``python/tests/test_quantized.py`` from the
   patched checkout the wheel was built from.

Each suite's pytest writes JUnit XML; the counts, skip reasons and failures
are read from it into a JSON summary. The backend is asked of the installed
mlx itself (Metal, CUDA or CPU) and printed with every suite, so a CPU run is
never mistaken for a Metal one.

Before any of this the wheel is checked against the queue (:func:`check_wheel`):
a wheel built from another queue or pin is refused, not tested.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from overlay_tool.build import read_sidecar, venv_python, wheel_label, wheel_version
from overlay_tool.errors import BuildError, ConfigError, QueueStale

Echo = Callable[[str], None]

PARITY_DIR = Path(__file__).resolve().parent / "parity"
MLX_SUITE = Path("python") / "tests" / "test_quantized.py"

PROBE = r"""
import json, platform
import mlx.core as mx
out = {"mlx": mx.__version__, "default_device": str(mx.default_device()), "python": platform.python_version()}
metal = False
try:
    metal = bool(mx.metal.is_available())
except Exception:
    pass
cuda = False
try:
    cuda = bool(hasattr(mx, "cuda") and mx.cuda.is_available())
except Exception:
    pass
out["backend"] = "metal" if metal else "cuda" if cuda else "cpu"
try:
    info = mx.device_info() if hasattr(mx, "device_info") else {}
    out["device"] = str(info.get("architecture") or info.get("device_name") or platform.machine())
except Exception:
    out["device"] = platform.machine()
print(json.dumps(out))
"""


def _echo(line: str) -> None:
    print(line, flush=True)


# --------------------------------------------------------------------------
# which wheel, and is it the queue's


@dataclass(frozen=True)
class WheelCheck:
    wheel: Path
    label: str
    queue_hash: str | None
    checkout: Path | None
    built_backend: str | None
    how: str  # how the queue was matched


def pick_wheel(dist: Path, explicit: Path | None) -> Path:
    """``explicit`` if given (it must exist), else the newest ``dist/mlx-*.whl``."""
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"{explicit}: no such wheel file")
        if not explicit.name.endswith(".whl"):
            raise ConfigError(f"{explicit}: not a wheel (expected a .whl file)")
        return explicit.absolute()
    wheels = sorted(dist.glob("mlx-*.whl"), key=lambda p: p.stat().st_mtime) if dist.is_dir() else []
    if not wheels:
        raise ConfigError(f"no mlx wheel in {dist}", hint="build one with: mlx-overlay build")
    return wheels[-1].absolute()


def check_wheel(
    wheel: Path,
    *,
    queue_hash: str,
    checkout_label: Callable[[], tuple[str | None, str | None]] | None = None,
    allow_dirty: bool = False,
) -> WheelCheck:
    """Refuse a wheel that was not built from the current queue.

    ``queue_hash`` is the current queue's (``apply.queue_hash``). The wheel's
    own record (``<wheel>.overlay.json``, written by ``mlx-overlay build``)
    names the queue it was built from; without that record the wheel's
    version label is compared with the work checkout's, when that checkout
    holds the current queue. ``checkout_label()`` returns (label, queue hash)
    of the work checkout.
    """
    label = wheel_label(wheel)
    if not label or not label.startswith("overlay."):
        shown = f"+{label}" if label else "no local label"
        raise QueueStale(
            f"{wheel.name}: version {wheel_version(wheel)} has {shown}, not +overlay.<hash>: it was not built from the patch queue",
            hint="build the queue's wheel with: mlx-overlay build",
        )
    if label.endswith(".dirty") and not allow_dirty:
        raise QueueStale(
            f"{wheel.name}: built from a work checkout with uncommitted changes (+{label}), not from the queue",
            hint="commit and `mlx-overlay export` the change, rebuild; or test it anyway with --allow-dirty",
        )
    meta = read_sidecar(wheel)
    if meta is not None:
        if meta.get("label") != label:
            raise QueueStale(f"{wheel.name}: its build record says +{meta.get('label')}, the file name +{label}; rebuild it")
        built = meta.get("queue_hash")
        if built != queue_hash:
            raise QueueStale(
                f"{wheel.name} was built from queue {str(built)[:12]}, but the queue is now {queue_hash[:12]} "
                "(patches/ or pin.toml changed since): it is stale",
                hint="rebuild with: mlx-overlay build",
            )
        checkout = Path(meta["checkout"]) if meta.get("checkout") else None
        return WheelCheck(wheel, label, built, checkout, meta.get("backend"), "build record")
    if checkout_label is not None:
        work_label, work_queue = checkout_label()
        if work_queue == queue_hash and work_label == label:
            return WheelCheck(wheel, label, queue_hash, None, None, "work checkout label")
        if work_queue == queue_hash:
            raise QueueStale(
                f"{wheel.name}: label +{label} is not the current queue's (+{work_label}): it is stale",
                hint="rebuild with: mlx-overlay build",
            )
    raise QueueStale(
        f"{wheel.name}: no build record ({wheel.name}.overlay.json) and the work checkout does not hold the current queue, "
        "so its queue cannot be checked",
        hint="run mlx-overlay apply, or rebuild with mlx-overlay build",
    )


# --------------------------------------------------------------------------
# suites


@dataclass
class SuiteResult:
    name: str
    backend: str
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    skip_reasons: dict[str, int] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    returncode: int = 0
    command: list[str] = field(default_factory=list)
    log: str = ""

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.errors == 0 and self.returncode in (0,) and self.total > 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.skipped

    def counts(self) -> str:
        text = f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped"
        return text + (f", {self.errors} errors" if self.errors else "")


def _skip_reason(message: str) -> str:
    # pytest writes "path:line: reason" for skips; keep the reason.
    msg = message.strip()
    for prefix in ("Skipped: ",):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    return msg


def parse_junit(xml_text: str, result: SuiteResult) -> SuiteResult:
    """Fill counts, skip reasons and failures of ``result`` from JUnit XML."""
    root = ET.fromstring(xml_text)
    reasons: Counter[str] = Counter()
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}".lstrip(":")
        failure = case.find("failure")
        error = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            result.failed += 1
            result.failures.append({"test": name, "message": (failure.get("message") or "")[:500]})
        elif error is not None:
            result.errors += 1
            result.failures.append({"test": name, "message": ("error: " + (error.get("message") or ""))[:500]})
        elif skipped is not None:
            if skipped.get("type") == "pytest.xfail":
                result.passed += 1
                continue
            result.skipped += 1
            reasons[_skip_reason(skipped.get("message") or "")] += 1
        else:
            result.passed += 1
    result.skip_reasons = dict(reasons)
    return result


def run_suite(
    name: str,
    py: Path,
    args: Sequence[str],
    *,
    cwd: Path,
    backend: str,
    workdir: Path,
    env: Mapping[str, str],
) -> SuiteResult:
    junit = workdir / f"{name}.junit.xml"
    log = workdir / f"{name}.log"
    junit.unlink(missing_ok=True)
    cmd = [str(py), "-m", "pytest", *args, f"--junitxml={junit}", "-o", "junit_family=xunit1"]
    start = time.monotonic()
    with log.open("w") as fh:
        proc = subprocess.run(cmd, cwd=cwd, env=dict(env), stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    result = SuiteResult(name=name, backend=backend, seconds=round(time.monotonic() - start, 1), returncode=proc.returncode, command=cmd, log=str(log))
    if junit.exists():
        parse_junit(junit.read_text(), result)
    if proc.returncode not in (0, 1) or not junit.exists():
        # pytest could not run the suite (usage error, collection crash, no tests).
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        result.failures.append({"test": "(suite)", "message": f"pytest exit {proc.returncode}: " + " | ".join(tail)})
        result.errors += 0 if result.failed or result.errors else 1
    return result


@dataclass
class TestRequest:
    __test__ = False

    wheel: Path
    checkout: Path | None  # the patched checkout (for MLX's own suite)
    state: Path  # <root>/.overlay
    summary: Path
    expected_backend: str | None = None
    label: str | None = None
    queue_hash: str | None = None
    parity_args: Sequence[str] = ()
    mlx_args: Sequence[str] = ()
    extra_env: dict[str, str] = field(default_factory=dict)


def make_venv(venv: Path, wheel: Path, *, echo: Echo = _echo, log: Path) -> Path:
    """A fresh venv holding the wheel, numpy and pytest."""
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    echo(f"[test] fresh venv {venv}: {wheel.name}, numpy, pytest")
    for cmd, what in (
        ([sys.executable, "-m", "venv", str(venv)], "creating the test venv"),
        ([str(venv_python(venv)), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel), "numpy", "pytest"], "installing the wheel, numpy and pytest"),
    ):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        with log.open("a") as fh:
            fh.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n")
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-6:])
            raise BuildError(f"{what} failed (exit {proc.returncode}); log: {log}\n{tail}")
    return venv_python(venv)


def probe_backend(py: Path) -> dict[str, str]:
    proc = subprocess.run([str(py), "-c", PROBE], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        raise BuildError(f"the installed wheel does not import (import mlx.core failed):\n{tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])



#: The overlay's route switches (MLX_QMV_WIDE trades exactness for speed,
#: MLX_QMV_ROUTE forces a kernel): the suites test the default route, and the
#: route tests set them per call themselves.
ROUTE_SWITCHES = ("MLX_QMV_ROUTE", "MLX_QMV_WIDE")


def suite_env(environ: Mapping[str, str], py: Path) -> tuple[dict[str, str], list[str]]:
    """The suites' environment, and the route switches left out of it.

    CI is dropped too: MLX's test_quantized.py skips a test "too slow in CI"
    when it is set, and the suites should count the same in CI as by hand.
    """
    dropped = [k for k in ROUTE_SWITCHES if environ.get(k)]
    env = {k: v for k, v in environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "CI", *ROUTE_SWITCHES)}
    env["PATH"] = str(py.parent) + os.pathsep + env.get("PATH", "")
    return env, dropped


def run_tests(req: TestRequest, *, echo: Echo = _echo) -> dict:
    """Run both suites; write and return the JSON summary (never raises on test failures)."""
    workdir = req.state / "test"
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "venv.log"
    log.write_text("")
    start = time.monotonic()
    py = make_venv(workdir / "venv", req.wheel, echo=echo, log=log)
    info = probe_backend(py)
    backend = info["backend"]
    echo(f"[test] mlx {info['mlx']} runs on: {backend.upper()} ({info['device']}; default device {info['default_device']})")
    if backend == "cpu":
        echo("[test] note: no GPU backend here, so these suites test the CPU kernels only; the Metal kernel is NOT exercised")
    env, dropped = suite_env(os.environ, py)
    for var in dropped:
        echo(f"[test] note: {var}={os.environ[var]} is not passed to the suites: they test the queue's default route")
    env.update(req.extra_env)
    if req.expected_backend:
        env["MLX_OVERLAY_PARITY_EXPECT"] = req.expected_backend
    if req.checkout is not None:
        # the parity suite runs the body of MLX's CUDA row test on the CPU
        env["MLX_OVERLAY_MLX_TESTS"] = str(req.checkout / MLX_SUITE.parent)

    suites: list[SuiteResult] = []
    echo(f"[test] suite parity (API-level, {PARITY_DIR.name}/) on {backend} ...")
    parity = run_suite(
        "parity", py,
        ["-c", str(PARITY_DIR / "pytest.ini"), "--rootdir", str(PARITY_DIR), "-q", str(PARITY_DIR), *req.parity_args],
        cwd=workdir, backend=backend, workdir=workdir, env=env,
    )
    suites.append(parity)
    _report(parity, echo)

    mlx_suite: SuiteResult
    if req.checkout is None or not (req.checkout / MLX_SUITE).is_file():
        where = req.checkout / MLX_SUITE if req.checkout else MLX_SUITE
        mlx_suite = SuiteResult(name="mlx-quantized", backend=backend, errors=1,
                                failures=[{"test": "(suite)", "message": f"{where}: not found (the patched checkout is needed for MLX's own tests)"}])
    else:
        echo(f"[test] suite mlx-quantized ({MLX_SUITE} of {req.checkout}) on {backend} ...")
        mlx_suite = run_suite(
            "mlx-quantized", py,
            ["-q", "-p", "no:cacheprovider", MLX_SUITE.name, *req.mlx_args],
            cwd=req.checkout / MLX_SUITE.parent, backend=backend, workdir=workdir, env=env,
        )
    suites.append(mlx_suite)
    _report(mlx_suite, echo)

    summary = {
        "wheel": str(req.wheel),
        "label": req.label,
        "queue_hash": req.queue_hash,
        "built_for": req.expected_backend,
        "mlx": info["mlx"],
        "backend": backend,
        "device": info["device"],
        "python": info["python"],
        "checkout": str(req.checkout) if req.checkout else None,
        "ok": all(s.ok for s in suites),
        "seconds": round(time.monotonic() - start, 1),
        "suites": [asdict(s) | {"ok": s.ok} for s in suites],
    }
    req.summary.parent.mkdir(parents=True, exist_ok=True)
    req.summary.write_text(json.dumps(summary, indent=2) + "\n")
    total = Counter()
    for s in suites:
        total.update({"passed": s.passed, "failed": s.failed + s.errors, "skipped": s.skipped})
    echo(f"[test] summary: {req.summary}")
    echo(f"[test] total on {backend}: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
    return summary


def _report(s: SuiteResult, echo: Echo) -> None:
    status = "OK" if s.ok else "FAILED"
    echo(f"[test] {s.name} ({s.backend}): {s.counts()} in {s.seconds:.0f} s: {status}")
    for reason, n in sorted(s.skip_reasons.items(), key=lambda kv: -kv[1]):
        echo(f"[test]   skipped {n}: {reason}")
    for f in s.failures[:10]:
        echo(f"[test]   FAIL {f['test']}: {f['message'].splitlines()[0] if f['message'] else ''}")
    if len(s.failures) > 10:
        echo(f"[test]   ... {len(s.failures) - 10} more failures; see {s.log}")
    if not s.ok and s.log:
        echo(f"[test]   log: {s.log}")
