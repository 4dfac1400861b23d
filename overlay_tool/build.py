"""Build the patched mlx wheel from a checkout: ``mlx-overlay build``.

The build runs MLX's own ``setup.py`` through ``pip wheel --no-build-isolation``
inside a build environment this tool manages (``<state>/build-venv``:
setuptools >= 80, cmake and ninja from PyPI, nanobind at the version MLX's
CMakeLists fetches). Everything MLX configures through is passed the way its
``setup.py`` takes it: CMake options in the ``CMAKE_ARGS`` environment
variable (split on spaces, so no path may hold one), the parallel level in
``CMAKE_BUILD_PARALLEL_LEVEL``. Two more environment variables make the build
resumable without touching the checkout:

* ``DIST_EXTRA_CONFIG`` names a setuptools config file whose ``[build]
  build_base`` puts setuptools' (and so CMake's) build tree in
  ``<state>/build/<key>-<backend>/``, one per checkout and backend. An
  interrupted build re-runs CMake on its cache and ninja carries on from the
  objects it already has.
* ``CMAKE_GENERATOR=Ninja`` (ninja from the build venv): ``[N/M]`` progress.

``--offline`` replaces every configure-time download of MLX on Linux: BLAS and
LAPACK from Debian's ``libopenblas-dev``/``liblapacke-dev`` (found by CMake as
online), fmt from ``libfmt-dev`` (``-DUSE_SYSTEM_FMT=ON``), nlohmann/json from
``nlohmann-json3-dev`` (a folder holding ``single_include/nlohmann/json.hpp``
for ``-DFETCHCONTENT_SOURCE_DIR_JSON``), nanobind from its PyPI sdist
(``-DFETCHCONTENT_SOURCE_DIR_NANOBIND``), ``-DFETCHCONTENT_FULLY_DISCONNECTED=ON``;
gguflib has no offline source, so offline builds have ``-DMLX_BUILD_GGUF=OFF``
(no GGUF load/save in that wheel; the build says so).

Output is parsed into progress lines (configure, compile N/M, link, wheel);
the full log goes to ``<state>/logs/``, its path printed first. A failure
raises :class:`BuildError` with the log path after printing the last error
lines.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from overlay_tool.errors import BuildError, ConfigError, MissingTool

BACKENDS = ("auto", "metal", "cpu", "cuda")

#: The queue's label patch (0001) makes setup.py end the version in
#: ``+overlay.<first 12 hex of HEAD's tree>`` (``.dirty`` when tracked files
#: changed); this variable replaces the hash there. The build does not set it:
#: the label comes from the checkout, and ``BuildRequest.label`` (computed
#: the same way by overlay_tool.label) only checks the wheel got it.
LABEL_ENV = "MLX_OVERLAY_LABEL"
LABEL_PREFIX = "overlay."

#: Build requirements of the tool-managed venv, besides nanobind.
BUILD_REQUIREMENTS = ("setuptools>=80", "cmake>=3.25", "ninja", "typing_extensions", "wheel")

Echo = Callable[[str], None]


def _echo(line: str) -> None:
    print(line, flush=True)


# --------------------------------------------------------------------------
# backend and build options


def resolve_backend(requested: str, system: str | None = None) -> str:
    """``auto`` is Metal on macOS and CPU elsewhere; others pass through."""
    if requested not in BACKENDS:
        raise ConfigError(f"unknown backend {requested!r} (choose from {', '.join(BACKENDS)})")
    system = system or platform.system()
    if requested == "auto":
        return "metal" if system == "Darwin" else "cpu"
    if requested == "metal" and system != "Darwin":
        raise ConfigError("the metal backend builds only on macOS (use --backend cpu or cuda here)")
    return requested


def default_jobs() -> int:
    return max(1, os.cpu_count() or 1)


def nanobind_version(checkout: Path) -> str:
    """The nanobind tag MLX's CMakeLists fetches (``GIT_TAG v2.13.0`` -> ``2.13.0``)."""
    cmakelists = checkout / "CMakeLists.txt"
    try:
        text = cmakelists.read_text()
    except OSError as err:
        raise ConfigError(f"{cmakelists}: cannot read ({err.strerror}); is this an mlx checkout?") from err
    m = re.search(r"FetchContent_Declare\(\s*nanobind\b(.*?)\)", text, re.S)
    tag = m and re.search(r"GIT_TAG\s+v?([0-9][0-9A-Za-z.\-]*)", m.group(1))
    if not tag:
        raise ConfigError(f"{cmakelists}: no nanobind GIT_TAG found in FetchContent_Declare(nanobind ...)")
    return tag.group(1)


def build_key(checkout: Path, backend: str, root: Path | None = None) -> str:
    """Name of the persistent build folder for this checkout and backend.

    The checkout path is taken relative to the project root when it lies
    inside it, so that two clones of the project use the same name.
    """
    checkout = checkout.resolve()
    ident = str(checkout)
    if root is not None:
        try:
            ident = str(checkout.relative_to(root.resolve()))
        except ValueError:
            pass
    digest = hashlib.sha256(ident.encode()).hexdigest()[:10]
    return f"{checkout.name}-{digest}-{backend}"


@dataclass(frozen=True)
class OfflineSources:
    """Local stand-ins for MLX's configure-time downloads."""

    json_dir: Path
    nanobind_dir: Path


def cmake_args(backend: str, offline: OfflineSources | None, extra: str = "") -> list[str]:
    """The ``-D`` options for ``CMAKE_ARGS`` (MLX's setup.py splits that on spaces)."""
    args: list[str] = []
    if backend == "cpu":
        args += ["-DMLX_BUILD_METAL=OFF", "-DMLX_BUILD_CUDA=OFF"]
    elif backend == "metal":
        args += ["-DMLX_BUILD_METAL=ON"]
    elif backend == "cuda":
        # setup.py looks for this exact string to add MLX's CUDA options.
        args += ["-DMLX_BUILD_CUDA=ON", "-DMLX_BUILD_METAL=OFF"]
    else:  # pragma: no cover - resolve_backend guards this
        raise ConfigError(f"unknown backend {backend!r}")
    if offline is not None:
        for path in (offline.json_dir, offline.nanobind_dir):
            if " " in str(path):
                raise ConfigError(
                    f"{path}: MLX's setup.py splits CMAKE_ARGS on spaces; move the project to a path without spaces"
                )
        args += [
            "-DFETCHCONTENT_FULLY_DISCONNECTED=ON",
            "-DUSE_SYSTEM_FMT=ON",
            "-DMLX_BUILD_GGUF=OFF",
            f"-DFETCHCONTENT_SOURCE_DIR_JSON={offline.json_dir}",
            f"-DFETCHCONTENT_SOURCE_DIR_NANOBIND={offline.nanobind_dir}",
        ]
    args += [a for a in extra.split(" ") if a]
    return args


# --------------------------------------------------------------------------
# system packages


@dataclass(frozen=True)
class SystemRequirement:
    """A system package, found by any one of its probe files."""

    package: str
    what: str
    probes: tuple[str, ...]


LINUX_CPU_REQUIREMENTS = (
    SystemRequirement("libopenblas-dev", "BLAS (cblas.h)", ("/usr/include/x86_64-linux-gnu/cblas.h", "/usr/include/aarch64-linux-gnu/cblas.h", "/usr/include/cblas.h", "/usr/include/openblas/cblas.h")),
    SystemRequirement("liblapacke-dev", "LAPACKE (lapacke.h)", ("/usr/include/lapacke.h", "/usr/include/x86_64-linux-gnu/lapacke.h", "/usr/include/aarch64-linux-gnu/lapacke.h", "/usr/include/openblas/lapacke.h")),
)
LINUX_OFFLINE_REQUIREMENTS = (
    SystemRequirement("libfmt-dev", "fmt (-DUSE_SYSTEM_FMT=ON)", ("/usr/include/fmt/format.h",)),
    SystemRequirement("nlohmann-json3-dev", "nlohmann/json (json.hpp)", ("/usr/include/nlohmann/json.hpp",)),
)


def find_json_header(exists: Callable[[Path], bool] = Path.exists) -> Path | None:
    for cand in ("/usr/include/nlohmann/json.hpp", "/usr/local/include/nlohmann/json.hpp"):
        if exists(Path(cand)):
            return Path(cand)
    return None


def check_system(
    backend: str,
    offline: bool,
    *,
    system: str | None = None,
    exists: Callable[[Path], bool] = Path.exists,
    which: Callable[[str], str | None] = shutil.which,
) -> list[str]:
    """Raise :class:`MissingTool` naming every absent program or package.

    Returns notes to print (e.g. ccache absent). ``exists``/``which`` are
    injectable so tests can fake a machine.
    """
    system = system or platform.system()
    missing: list[str] = []
    notes: list[str] = []
    if system == "Linux":
        if not (which("c++") or which("g++") or which("clang++")):
            missing.append("g++ (a C++ compiler)")
        reqs = list(LINUX_CPU_REQUIREMENTS) if backend in ("cpu", "cuda") else []
        if offline:
            reqs += LINUX_OFFLINE_REQUIREMENTS
        for req in reqs:
            if not any(exists(Path(p)) for p in req.probes):
                missing.append(f"{req.package} ({req.what})")
        if backend == "cuda" and not which("nvcc"):
            missing.append("nvcc (the CUDA toolkit, e.g. Debian's nvidia-cuda-toolkit or NVIDIA's cuda-toolkit)")
        if missing:
            debs = " ".join(m.split(" ")[0] for m in missing if not m.startswith("nvcc"))
            hint = f"apt-get install {debs}" if debs else None
            raise MissingTool("missing system package(s) for the build: " + ", ".join(missing), hint=hint)
    elif system == "Darwin":
        if not which("xcrun"):
            raise MissingTool("xcrun (Xcode or its command line tools) is needed to build MLX on macOS", hint="xcode-select --install")
        if offline:
            raise ConfigError("--offline is not supported on macOS: MLX downloads metal-cpp at configure time and it has no offline source")
    if not which("ccache"):
        notes.append("ccache not found: building without a compiler cache (apt-get install ccache / brew install ccache)")
    return notes


# --------------------------------------------------------------------------
# progress


@dataclass
class Progress:
    phase: str  # configure | compile | link | wheel | done
    done: int | None = None
    total: int | None = None
    text: str = ""

    def line(self) -> str:
        if self.phase == "compile" and self.total:
            pct = 100 * (self.done or 0) // self.total
            return f"[build] compile {self.done}/{self.total} ({pct}%)"
        if self.phase == "compile" and self.done is not None:
            return f"[build] compile {self.done}%"
        if self.text:
            return f"[build] {self.phase}: {self.text}"
        return f"[build] {self.phase}"


_NINJA = re.compile(r"^\s*\[(\d+)/(\d+)\]\s+(.*)$")
_MAKE = re.compile(r"^\s*\[\s*(\d+)%\]\s+(.*)$")
_ERROR = re.compile(
    r"(\berror\b|^\s*FAILED:|CMake Error|ninja: build stopped|make(\[\d+\])?: \*\*\*|"
    r"fatal error|undefined reference|ERROR: Failed building wheel|subprocess-exited-with-error|"
    r"No space left|Killed signal|internal compiler error|Traceback \(most recent call last\))",
    re.I,
)
_ERROR_NOISE = re.compile(r"-Werror|error_code|errors\.cpp|error\.cpp\.o|\berror\.h\b|Werror=")


class ProgressParser:
    """Turns raw build output lines into :class:`Progress` events.

    ``feed`` returns an event when one is worth printing: every phase change,
    and compile steps every ``every`` percent or ``seconds`` seconds,
    whichever comes first (and the last one).
    """

    def __init__(self, every: int = 10, seconds: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.phase: str | None = None
        self.every = every
        self.seconds = seconds
        self.clock = clock
        self._last_time = clock()
        self._last_pct = -1
        self.done = 0
        self.total = 0
        self.compiled = 0
        self.cache_note: str | None = None

    def _switch(self, phase: str, text: str = "") -> Progress | None:
        if phase == self.phase:
            return None
        self.phase = phase
        return Progress(phase, text=text)

    def feed(self, raw: str) -> Progress | None:
        line = raw.rstrip()
        s = line.strip()
        if not s:
            return None
        if s.startswith("running build_ext") or s.startswith("-- The C compiler identification") or s.startswith("-- The CXX compiler identification"):
            return self._switch("configure", "cmake")
        if s.startswith("-- Configuring done") or s.startswith("-- Generating done"):
            return None
        m = _NINJA.match(line)
        if m:
            done, total, what = int(m.group(1)), int(m.group(2)), m.group(3)
            self.done, self.total = done, total
            if what.startswith("Linking") or what.startswith("Creating library"):
                # every link step is reported: they are few, and long
                self.phase = "link"
                return Progress("link", text=what.split()[-1].rsplit("/", 1)[-1])
            if what.startswith(("Building", "Generating")):
                self.compiled += 1
                self.phase = "compile"
                pct = 100 * done // total if total else 0
                now = self.clock()
                if (pct // self.every != self._last_pct // self.every or done == total or self._last_pct < 0
                        or now - self._last_time >= self.seconds):
                    self._last_pct = pct
                    self._last_time = now
                    return Progress("compile", done, total)
            return None
        m = _MAKE.match(line)
        if m:
            pct, what = int(m.group(1)), m.group(2)
            if what.startswith("Linking"):
                return self._switch("link", what.split()[-1].rsplit("/", 1)[-1])
            if what.startswith("Building"):
                self.compiled += 1
                self.phase = "compile"
                if pct // self.every != self._last_pct // self.every or self._last_pct < 0:
                    self._last_pct = pct
                    return Progress("compile", pct, None)
            return None
        if s.startswith("ninja: no work to do"):
            return self._switch("link", "nothing to rebuild")
        if s.startswith(("-- Install configuration", "-- Installing:", "-- Up-to-date:")):
            return self._switch("install")
        if self.phase in ("compile", "link", "install") and (
            s.startswith(("running install", "installing to ", "creating '", "adding '"))
            or ("Building wheel for" in s and "finished" in s)
        ):
            # (pip's metadata step also says "creating '...dist-info'", before configure)
            return self._switch("wheel")
        if s.startswith("Stored in directory") or s.startswith("Created wheel for"):
            self.phase = "done"
            return None
        return None


def error_lines(lines: Iterable[str], limit: int = 25) -> list[str]:
    """The last ``limit`` lines that look like errors, with one line of context after each."""
    lines = list(lines)
    picked: list[int] = []
    for i, line in enumerate(lines):
        if _ERROR.search(line) and not _ERROR_NOISE.search(line):
            picked.extend(j for j in (i, i + 1) if j < len(lines))
    seen: list[int] = []
    for i in picked:
        if i not in seen:
            seen.append(i)
    out = [lines[i].rstrip() for i in seen][-limit:]
    if not out:
        out = [l.rstrip() for l in lines[-limit:]]
    return out


# --------------------------------------------------------------------------
# the managed build environment and offline sources


def _run_quiet(cmd: Sequence[str], *, what: str, log: Path | None = None, env: Mapping[str, str] | None = None) -> str:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, env=dict(env) if env else None)
    if log is not None:
        with log.open("a") as fh:
            fh.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n")
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise BuildError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")
    return proc.stdout


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_build_venv(state: Path, nb_version: str, *, echo: Echo = _echo, log: Path | None = None) -> Path:
    """Create or update ``<state>/build-venv``; return its python."""
    venv = state / "build-venv"
    reqs = [*BUILD_REQUIREMENTS, f"nanobind=={nb_version}"]
    stamp = venv / "overlay-requirements.txt"
    want = "\n".join(reqs) + f"\npython={sys.version_info[0]}.{sys.version_info[1]}\n"
    py = venv_python(venv)
    if py.exists() and stamp.exists() and stamp.read_text() == want:
        return py
    echo(f"[build] preparing the build environment {venv} ({', '.join(reqs)})")
    if not py.exists():
        _run_quiet([sys.executable, "-m", "venv", str(venv)], what="creating the build venv", log=log)
    _run_quiet([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *reqs], what="installing build requirements", log=log)
    stamp.write_text(want)
    return py


def ensure_offline_sources(state: Path, nb_version: str, py: Path, *, echo: Echo = _echo, log: Path | None = None, json_header: Path | None = None) -> OfflineSources:
    """Prepare the json folder and the nanobind source tree under ``<state>/deps``."""
    deps = state / "deps"
    json_dir = deps / "json"
    header = json_header or find_json_header()
    if header is None:
        raise MissingTool("nlohmann-json3-dev (nlohmann/json.hpp) is needed for --offline", hint="apt-get install nlohmann-json3-dev")
    target = json_dir / "single_include" / "nlohmann" / "json.hpp"
    if not target.exists() or target.read_bytes() != header.read_bytes():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(header, target)
    nb_dir = deps / f"nanobind-{nb_version}"
    if not (nb_dir / "CMakeLists.txt").exists():
        echo(f"[build] fetching the nanobind {nb_version} sdist from PyPI for the offline configure")
        dl = deps / "downloads"
        dl.mkdir(parents=True, exist_ok=True)
        _run_quiet(
            [str(py), "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps", "--no-binary", ":all:", f"nanobind=={nb_version}", "-d", str(dl)],
            what="downloading the nanobind sdist",
            log=log,
        )
        sdists = sorted(dl.glob(f"nanobind-{nb_version}.tar.gz"))
        if not sdists:
            raise BuildError(f"no nanobind-{nb_version}.tar.gz in {dl} after pip download")
        tmp = deps / f".nanobind-{nb_version}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        with tarfile.open(sdists[0]) as tar:
            tar.extractall(tmp, filter="data")
        inner = [p for p in tmp.iterdir() if p.is_dir()]
        if len(inner) != 1 or not (inner[0] / "CMakeLists.txt").exists():
            raise BuildError(f"{sdists[0]}: unexpected layout (no top-level CMakeLists.txt)")
        shutil.rmtree(nb_dir, ignore_errors=True)
        inner[0].rename(nb_dir)
        shutil.rmtree(tmp, ignore_errors=True)
    return OfflineSources(json_dir=json_dir, nanobind_dir=nb_dir)


# --------------------------------------------------------------------------
# the build itself


@dataclass
class BuildRequest:
    checkout: Path
    state: Path  # <root>/.overlay
    dist: Path
    backend: str = "auto"
    jobs: int | None = None
    offline: bool = False
    label: str | None = None  # "overlay.<hash>"
    queue_hash: str | None = None
    root: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)


@dataclass
class BuildResult:
    wheel: Path
    log: Path
    seconds: float
    backend: str
    build_dir: Path
    compiled: int
    label: str | None
    offline: bool

    def sidecar(self) -> Path:
        return sidecar_path(self.wheel)


def sidecar_path(wheel: Path) -> Path:
    return wheel.with_name(wheel.name + ".overlay.json")


def wheel_version(wheel: Path) -> str:
    """The version field of a wheel file name (``mlx-<version>-<tags>.whl``)."""
    parts = wheel.name[: -len(".whl")].split("-") if wheel.name.endswith(".whl") else []
    if len(parts) < 5:
        raise ConfigError(f"{wheel}: not a wheel file name (name-version-python-abi-platform.whl)")
    return parts[1]


def wheel_label(wheel: Path) -> str | None:
    """The local version label of a wheel (after ``+``), or None."""
    version = wheel_version(wheel)
    return version.split("+", 1)[1] if "+" in version else None


def ccache_args(ccache: str | None, base_dir: Path) -> list[str]:
    """Compiler launchers that run ccache with ``base_dir`` (the project root).

    MLX's CMakeLists uses ccache by itself, but its setup.py sets
    ``CCACHE_BASEDIR`` to the build folder, so sources in the checkout keep
    absolute paths and another clone of the project never hits the cache.
    With the launcher set here (and ``MLX_USE_CCACHE=OFF``), every path under
    the project root is hashed relative to it: a fresh clone in CI reuses the
    objects of earlier builds of the same sources.
    """
    if not ccache:
        return []
    if " " in str(base_dir) or " " in ccache:
        return []  # CMAKE_ARGS is split on spaces; keep MLX's own ccache use
    launcher = f"env;CCACHE_BASEDIR={base_dir};{ccache}"
    return [
        "-DMLX_USE_CCACHE=OFF",
        f"-DCMAKE_C_COMPILER_LAUNCHER={launcher}",
        f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}",
        f"-DCMAKE_CUDA_COMPILER_LAUNCHER={launcher}",
    ]


def build_env(req: BuildRequest, backend: str, py: Path, build_dir: Path, offline: OfflineSources | None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    base_dir = Path(os.path.commonpath([str(req.checkout.resolve()), str(build_dir.resolve())]))
    args = cmake_args(backend, offline)
    args += ccache_args(shutil.which("ccache", path=env.get("PATH")), base_dir)
    args += [a for a in env.get("CMAKE_ARGS", "").split(" ") if a]  # the user's own, last: they win
    env["CMAKE_ARGS"] = " ".join(args)
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(req.jobs or default_jobs())
    env["CMAKE_GENERATOR"] = "Ninja"
    env["DIST_EXTRA_CONFIG"] = str(build_dir / "overlay-setup.cfg")
    env["PATH"] = str(py.parent) + os.pathsep + env.get("PATH", "")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.pop("PYTHONPATH", None)
    env.update(req.extra_env)
    return env


def pip_wheel_command(py: Path, checkout: Path, dist: Path) -> list[str]:
    return [str(py), "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v", "-w", str(dist), str(checkout)]


def _stream(cmd: Sequence[str], *, env: Mapping[str, str], cwd: Path, log: Path, parser: ProgressParser, echo: Echo, tail: deque[str]) -> int:
    with log.open("a", buffering=1) as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        for key in ("CMAKE_ARGS", "CMAKE_BUILD_PARALLEL_LEVEL", "CMAKE_GENERATOR", "DIST_EXTRA_CONFIG", LABEL_ENV):
            if key in env:
                fh.write(f"# {key}={env[key]}\n")
        # The build runs in its own session so that one killpg stops pip,
        # setup.py, cmake, ninja and the compilers together. Ctrl-C reaches
        # only this process, so SIGTERM/SIGHUP are turned into the same
        # KeyboardInterrupt here, and the except clause below cleans up.
        proc = subprocess.Popen(
            list(cmd), cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, errors="replace", bufsize=1, start_new_session=True,
        )
        previous = _raise_on_termination()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                fh.write(line)
                tail.append(line)
                ev = parser.feed(line)
                if ev is not None:
                    echo(ev.line())
            return proc.wait()
        except BaseException:
            # Ctrl-C or any error: stop the whole build tree, keep its objects.
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            fh.write("\n# interrupted\n")
            raise
        finally:
            _restore_handlers(previous)


def _raise_on_termination() -> dict[int, object]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt while the build runs (main thread only)."""
    import threading

    previous: dict[int, object] = {}
    if threading.current_thread() is not threading.main_thread():
        return previous

    def handler(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            previous[sig] = signal.signal(sig, handler)
    return previous


def _restore_handlers(previous: dict[int, object]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def build_wheel(req: BuildRequest, *, echo: Echo = _echo) -> BuildResult:
    """Build the wheel of ``req.checkout`` into ``req.dist``; see the module doc."""
    checkout = req.checkout.resolve()
    if not (checkout / "setup.py").exists():
        raise ConfigError(f"{checkout}: no setup.py; not an mlx checkout (run mlx-overlay apply first)")
    backend = resolve_backend(req.backend)
    for note in check_system(backend, req.offline):
        echo(f"[build] note: {note}")
    state = req.state.resolve()
    logs = state / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log = logs / f"build-{backend}-{stamp}.log"
    log.write_text(f"# mlx-overlay build of {checkout} ({backend}{', offline' if req.offline else ''})\n")
    latest = logs / f"build-{backend}-latest.log"
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(log.name)
    except OSError:
        pass
    echo(f"[build] full log: {log}")

    start = time.monotonic()
    nb = nanobind_version(checkout)
    py = ensure_build_venv(state, nb, echo=echo, log=log)
    offline = ensure_offline_sources(state, nb, py, echo=echo, log=log) if req.offline else None
    if req.offline:
        echo("[build] offline: system BLAS/LAPACK, fmt and nlohmann-json, nanobind sdist; GGUF support is OFF (gguflib has no offline source)")
    build_dir = state / "build" / build_key(checkout, backend, req.root)
    build_dir.mkdir(parents=True, exist_ok=True)
    resumed = (build_dir / "setuptools").exists()
    (build_dir / "overlay-setup.cfg").write_text(f"[build]\nbuild_base = {build_dir / 'setuptools'}\n")
    dist = req.dist.resolve()
    dist.mkdir(parents=True, exist_ok=True)
    env = build_env(req, backend, py, build_dir, offline)
    echo(f"[build] backend {backend}, {env['CMAKE_BUILD_PARALLEL_LEVEL']} jobs, build dir {build_dir}" + (" (reusing it)" if resumed else ""))
    if req.label:
        echo(f"[build] version label +{req.label} (from the checkout's tree)")

    before = {p: p.stat().st_mtime for p in dist.glob("*.whl")}
    parser = ProgressParser()
    tail: deque[str] = deque(maxlen=4000)
    t0 = time.time()
    rc = _stream(pip_wheel_command(py, checkout, dist), env=env, cwd=checkout, log=log, parser=parser, echo=echo, tail=tail)
    seconds = time.monotonic() - start
    if rc < 0:
        raise BuildError(
            f"the build was stopped by signal {-rc} after {seconds:.0f} s; {build_dir} is kept, "
            f"so the next run resumes; full log: {log}"
        )
    if rc != 0:
        for line in error_lines(tail):
            echo(f"[build] | {line}")
        hint = None
        joined = "".join(tail)
        if not req.offline and re.search(r"Could not resolve host|Failed to connect|download failed|Failed to download|unable to access 'https://", joined, re.I):
            hint = "a configure-time download failed: try `mlx-overlay build --offline`"
        raise BuildError(f"the wheel build failed (pip exit {rc}) after {seconds:.0f} s; full log: {log}", hint=hint)

    wheels = [p for p in dist.glob("mlx-*.whl") if p not in before or p.stat().st_mtime > before[p] or p.stat().st_mtime >= t0 - 1]
    if not wheels:
        raise BuildError(f"the build succeeded but no new mlx wheel appeared in {dist}; full log: {log}")
    wheel = max(wheels, key=lambda p: p.stat().st_mtime)
    label = wheel_label(wheel)
    if req.label and label != req.label:
        echo(f"[build] warning: the wheel's version label is +{label}, not +{req.label}: the checkout's setup.py does not read {LABEL_ENV} (is the label patch in the queue?)")
    result = BuildResult(wheel=wheel, log=log, seconds=seconds, backend=backend, build_dir=build_dir, compiled=parser.compiled, label=label, offline=req.offline)
    meta = {
        "wheel": wheel.name,
        "version": wheel_version(wheel),
        "label": label,
        "queue_hash": req.queue_hash,
        "backend": backend,
        "offline": req.offline,
        "gguf": not req.offline,
        "checkout": str(checkout),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(seconds, 1),
        "compiled_objects": parser.compiled,
        "log": str(log),
    }
    sidecar_path(wheel).write_text(json.dumps(meta, indent=2) + "\n")
    echo(f"[build] wheel: {wheel} ({seconds:.0f} s, {parser.compiled} objects compiled)")
    return result


def read_sidecar(wheel: Path) -> dict | None:
    path = sidecar_path(wheel)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None

