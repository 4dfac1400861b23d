"""mlx-overlay build: logic tested with fakes (a real build takes minutes).

The fake ``pip`` (tests/build_data/fake_pip.sh) prints a recorded ninja
transcript and drops a wheel, fails like a compile error, or hangs; it
records the environment it was given, which is how MLX's setup.py receives
its options (CMAKE_ARGS, CMAKE_BUILD_PARALLEL_LEVEL, DIST_EXTRA_CONFIG).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from overlay_tool import build as B
from overlay_tool.errors import BuildError, ConfigError, MissingTool

DATA = Path(__file__).parent / "build_data"
FAKE_PIP = DATA / "fake_pip.sh"
TRANSCRIPT = DATA / "ninja_transcript.txt"
CMAKELISTS = """
project(mlx)
if(MLX_BUILD_PYTHON_BINDINGS)
  FetchContent_Declare(
    nanobind
    GIT_REPOSITORY https://github.com/wjakob/nanobind.git
    GIT_TAG v2.13.0
    GIT_SHALLOW TRUE
    EXCLUDE_FROM_ALL)
endif()
"""


# -- options -----------------------------------------------------------------


def test_auto_backend_is_metal_on_macos_and_cpu_elsewhere() -> None:
    assert B.resolve_backend("auto", "Darwin") == "metal"
    assert B.resolve_backend("auto", "Linux") == "cpu"
    assert B.resolve_backend("cuda", "Linux") == "cuda"
    with pytest.raises(ConfigError, match="only on macOS"):
        B.resolve_backend("metal", "Linux")
    with pytest.raises(ConfigError, match="unknown backend"):
        B.resolve_backend("vulkan", "Linux")


def test_nanobind_version_comes_from_mlx_cmakelists(tmp_path: Path) -> None:
    (tmp_path / "CMakeLists.txt").write_text(CMAKELISTS)
    assert B.nanobind_version(tmp_path) == "2.13.0"
    (tmp_path / "CMakeLists.txt").write_text("project(mlx)\n")
    with pytest.raises(ConfigError, match="nanobind GIT_TAG"):
        B.nanobind_version(tmp_path)


def test_offline_cmake_args_replace_every_download(tmp_path: Path) -> None:
    src = B.OfflineSources(json_dir=tmp_path / "json", nanobind_dir=tmp_path / "nb")
    args = B.cmake_args("cpu", src, extra="-DFOO=1  -DBAR=2")
    assert "-DMLX_BUILD_METAL=OFF" in args
    for flag in ("-DFETCHCONTENT_FULLY_DISCONNECTED=ON", "-DUSE_SYSTEM_FMT=ON", "-DMLX_BUILD_GGUF=OFF",
                 f"-DFETCHCONTENT_SOURCE_DIR_JSON={tmp_path / 'json'}",
                 f"-DFETCHCONTENT_SOURCE_DIR_NANOBIND={tmp_path / 'nb'}"):
        assert flag in args
    assert args[-2:] == ["-DFOO=1", "-DBAR=2"]  # the user's CMAKE_ARGS come last and win
    online = B.cmake_args("cpu", None)
    assert not any("FETCHCONTENT" in a or "GGUF" in a or "FMT" in a for a in online)  # upstream's defaults
    assert "-DMLX_BUILD_CUDA=ON" in B.cmake_args("cuda", None)  # the string setup.py looks for


def test_offline_paths_with_spaces_are_refused(tmp_path: Path) -> None:
    src = B.OfflineSources(json_dir=tmp_path / "a b", nanobind_dir=tmp_path / "nb")
    with pytest.raises(ConfigError, match="splits CMAKE_ARGS on spaces"):
        B.cmake_args("cpu", src)


def test_ccache_launcher_hashes_paths_relative_to_the_project(tmp_path: Path) -> None:
    args = B.ccache_args("/usr/bin/ccache", tmp_path)
    assert "-DMLX_USE_CCACHE=OFF" in args
    assert f"-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_BASEDIR={tmp_path};/usr/bin/ccache" in args
    assert B.ccache_args(None, tmp_path) == []


def test_build_key_is_the_same_for_two_clones_of_the_project(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        (root / "work" / "mlx").mkdir(parents=True)
    ka = B.build_key(a / "work" / "mlx", "cpu", a)
    assert ka == B.build_key(b / "work" / "mlx", "cpu", b)
    assert ka != B.build_key(a / "work" / "mlx", "cuda", a)
    assert ka.endswith("-cpu")


# -- system packages -----------------------------------------------------------


def _machine(present: set[str], programs: set[str] = frozenset({"g++", "ccache"})):
    return dict(system="Linux", exists=lambda p: str(p) in present, which=lambda name: f"/usr/bin/{name}" if name in programs else None)


ALL_HEADERS = {"/usr/include/x86_64-linux-gnu/cblas.h", "/usr/include/lapacke.h", "/usr/include/fmt/format.h", "/usr/include/nlohmann/json.hpp"}


def test_missing_system_package_is_named_with_the_install_command() -> None:
    with pytest.raises(MissingTool) as err:
        B.check_system("cpu", False, **_machine(ALL_HEADERS - {"/usr/include/lapacke.h"}))
    assert "liblapacke-dev" in err.value.message and "libopenblas-dev" not in err.value.message
    assert err.value.hint == "apt-get install liblapacke-dev"
    assert err.value.exit_code == 12


def test_offline_needs_fmt_and_json_too() -> None:
    machine = _machine({"/usr/include/x86_64-linux-gnu/cblas.h", "/usr/include/lapacke.h"})
    B.check_system("cpu", False, **machine)  # online: fmt and json are fetched
    with pytest.raises(MissingTool) as err:
        B.check_system("cpu", True, **machine)
    assert "libfmt-dev" in err.value.message and "nlohmann-json3-dev" in err.value.message
    assert err.value.hint == "apt-get install libfmt-dev nlohmann-json3-dev"


def test_missing_compiler_and_nvcc_are_named() -> None:
    with pytest.raises(MissingTool, match=r"g\+\+ \(a C\+\+ compiler\)"):
        B.check_system("cpu", False, **_machine(ALL_HEADERS, programs=set()))
    with pytest.raises(MissingTool, match="nvcc"):
        B.check_system("cuda", False, **_machine(ALL_HEADERS))


def test_everything_present_passes_and_absent_ccache_is_a_note() -> None:
    assert B.check_system("cpu", True, **_machine(ALL_HEADERS)) == []
    notes = B.check_system("cpu", True, **_machine(ALL_HEADERS, programs={"g++"}))
    assert notes and "ccache" in notes[0]


def test_offline_on_macos_says_why_not() -> None:
    with pytest.raises(ConfigError, match="metal-cpp"):
        B.check_system("metal", True, system="Darwin", exists=lambda p: True, which=lambda n: "/usr/bin/" + n)


# -- progress and errors -------------------------------------------------------


def test_progress_from_a_ninja_transcript() -> None:
    parser = B.ProgressParser(every=25)
    lines = [ev.line() for raw in TRANSCRIPT.read_text().splitlines() if (ev := parser.feed(raw))]
    assert lines[0] == "[build] configure: cmake"
    compiles = [l for l in lines if "compile" in l]
    assert compiles[0] == "[build] compile 1/10 (10%)"
    assert "[build] link: libmlx.so" in lines
    assert "[build] link: core.cpython-311-x86_64-linux-gnu.so" in lines  # every link step
    assert lines.index("[build] link: libmlx.so") > lines.index(compiles[0])
    assert lines[-2:] == ["[build] install", "[build] wheel"]
    assert parser.compiled == 7  # 7 "Building" steps (the transcript's link/install steps are not objects)


def test_progress_from_make_percentages() -> None:
    parser = B.ProgressParser(every=10)
    evs = [parser.feed(f"  [{p:3d}%] Building CXX object x{p}.o") for p in (1, 5, 12, 19, 25)]
    assert [e.line() for e in evs if e] == ["[build] compile 1%", "[build] compile 12%", "[build] compile 25%"]
    assert parser.feed("  [ 99%] Linking CXX shared library libmlx.so").line() == "[build] link: libmlx.so"


def test_error_lines_pick_the_compiler_error() -> None:
    lines = [
        "  [1/3] Building CXX object CMakeFiles/mlx.dir/mlx/errors.cpp.o",
        "  FAILED: CMakeFiles/mlx.dir/mlx/ops.cpp.o",
        "  /w/mlx/ops.cpp:42:7: error: 'foo' was not declared in this scope",
        "     42 |       foo(x);",
        "  ninja: build stopped: subcommand failed.",
    ]
    out = B.error_lines(lines)
    assert out[0].strip().startswith("FAILED:")
    assert any("error: 'foo'" in l for l in out)
    assert not any("errors.cpp" in l for l in out)


# -- the build driver, with a fake pip ---------------------------------------------


@pytest.fixture
def fake_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    checkout = tmp_path / "proj" / "work" / "mlx"
    checkout.mkdir(parents=True)
    (checkout / "setup.py").write_text("# fake\n")
    (checkout / "CMakeLists.txt").write_text(CMAKELISTS)
    monkeypatch.setattr(B, "ensure_build_venv", lambda state, nb, **kw: FAKE_PIP)
    monkeypatch.setattr(B, "check_system", lambda backend, offline, **kw: [])
    monkeypatch.setattr(B, "resolve_backend", lambda requested, system=None: "cpu" if requested == "auto" else requested)
    monkeypatch.setattr(
        B, "ensure_offline_sources",
        lambda state, nb, py, **kw: B.OfflineSources(json_dir=state / "deps" / "json", nanobind_dir=state / "deps" / f"nanobind-{nb}"),
    )
    env_out = tmp_path / "env.txt"
    monkeypatch.setenv("FAKE_PIP_TRANSCRIPT", str(TRANSCRIPT))
    monkeypatch.setenv("FAKE_PIP_ENV_OUT", str(env_out))
    root = tmp_path / "proj"

    def request(**kw) -> B.BuildRequest:
        return B.BuildRequest(checkout=checkout, state=root / ".overlay", dist=root / "dist", root=root, **kw)

    def recorded_env() -> dict[str, str]:
        return dict(line.split("=", 1) for line in env_out.read_text().splitlines() if "=" in line)

    return request, recorded_env


def test_build_prints_progress_keeps_the_log_and_records_the_wheel(fake_build) -> None:
    request, recorded_env = fake_build
    out: list[str] = []
    res = B.build_wheel(request(jobs=2, offline=True, label="overlay.0123456789ab", queue_hash="f" * 64), echo=out.append)
    assert out[0] == f"[build] full log: {res.log}"
    assert "[build] compile 1/10 (10%)" in out and "[build] wheel" in out
    assert any("GGUF support is OFF" in l for l in out)  # offline says what it leaves out
    assert res.wheel.name.startswith("mlx-0.32.1.dev20261130+overlay.0123456789ab-")
    assert res.label == "overlay.0123456789ab"
    log = res.log.read_text()
    assert "[6/10] Building CXX object CMakeFiles/mlx.dir/mlx/backend/cpu/quantized.cpp.o" in log  # the full output
    meta = json.loads(res.sidecar().read_text())
    assert meta["queue_hash"] == "f" * 64 and meta["backend"] == "cpu" and meta["gguf"] is False
    env = recorded_env()
    assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == "2"
    assert env["CMAKE_GENERATOR"] == "Ninja"
    assert "-DFETCHCONTENT_FULLY_DISCONNECTED=ON" in env["CMAKE_ARGS"].split(" ")
    cfg = Path(env["DIST_EXTRA_CONFIG"]).read_text()
    assert f"build_base = {res.build_dir / 'setuptools'}" in cfg
    assert res.build_dir.parent == request().state.resolve() / "build"


def test_second_build_reuses_the_build_dir(fake_build) -> None:
    request, _ = fake_build
    first = B.build_wheel(request(), echo=lambda l: None)
    (first.build_dir / "setuptools").mkdir()  # what setuptools leaves behind
    out: list[str] = []
    second = B.build_wheel(request(), echo=out.append)
    assert second.build_dir == first.build_dir
    assert any("(reusing it)" in l for l in out)


def test_failed_build_names_the_log_and_shows_the_error(fake_build, monkeypatch) -> None:
    request, _ = fake_build
    monkeypatch.setenv("FAKE_PIP_MODE", "fail")
    out: list[str] = []
    with pytest.raises(BuildError) as err:
        B.build_wheel(request(), echo=out.append)
    log = out[0].split("full log: ", 1)[1]
    assert log in err.value.message and Path(log).is_file()
    shown = "\n".join(out)
    assert "error: 'qmv_streamed' was not declared" in shown
    assert "FAILED: CMakeFiles/mlx.dir/mlx/backend/metal/quantized.cpp.o" in shown
    assert err.value.exit_code == 9


def _assert_gone(pid: int, cause: str) -> None:
    """The fake build process ends within 5 s."""
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"the build process survived {cause}")


def test_interrupted_build_stops_the_compilers_and_keeps_the_build_dir(fake_build, monkeypatch, tmp_path) -> None:
    request, _ = fake_build
    monkeypatch.setenv("FAKE_PIP_MODE", "hang")
    pid_file = tmp_path / "pid"
    monkeypatch.setenv("FAKE_PIP_PID_OUT", str(pid_file))

    def echo(line: str) -> None:
        if "compile" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        B.build_wheel(request(), echo=echo)
    _assert_gone(int(pid_file.read_text()), "the interrupt")
    logs = sorted((request().state / "logs").glob("build-cpu-2*.log"))
    assert logs[-1].read_text().rstrip().endswith("# interrupted")
    key = B.build_key(request().checkout, "cpu", request().root)
    assert (request().state / "build" / key / "overlay-setup.cfg").exists()  # the next run resumes here


def test_not_a_checkout_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not an mlx checkout"):
        B.build_wheel(B.BuildRequest(checkout=tmp_path, state=tmp_path / "s", dist=tmp_path / "d"))


# -- through the command line -----------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def test_cli_build_refuses_a_folder_that_is_not_a_checkout(tmp_path: Path, capsys) -> None:
    from overlay_tool.cli import main

    assert main(["-C", str(ROOT), "build", "--checkout", str(tmp_path)]) == 2
    assert "not an mlx checkout" in capsys.readouterr().err


def test_cli_build_names_a_missing_system_package(tmp_path: Path, capsys, monkeypatch) -> None:
    from overlay_tool.cli import main

    (tmp_path / "setup.py").write_text("")
    (tmp_path / "CMakeLists.txt").write_text(CMAKELISTS)
    monkeypatch.setattr(B, "LINUX_CPU_REQUIREMENTS", (B.SystemRequirement("libopenblas-dev", "BLAS (cblas.h)", ("/nonexistent/cblas.h",)),))
    monkeypatch.setattr(B.platform, "system", lambda: "Linux")
    code = main(["-C", str(ROOT), "build", "--backend", "cpu", "--checkout", str(tmp_path), "--dist", str(tmp_path / "d")])
    err = capsys.readouterr().err
    assert code == 12
    assert "mlx-overlay: error: missing system package(s) for the build: libopenblas-dev (BLAS (cblas.h))" in err
    assert "mlx-overlay: hint: apt-get install libopenblas-dev" in err


def test_sigterm_stops_the_build_like_ctrl_c(fake_build, monkeypatch, tmp_path) -> None:
    import signal

    request, _ = fake_build
    monkeypatch.setenv("FAKE_PIP_MODE", "hang")
    pid_file = tmp_path / "pid"
    monkeypatch.setenv("FAKE_PIP_PID_OUT", str(pid_file))

    def echo(line: str) -> None:
        if "compile" in line:
            os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        B.build_wheel(request(), echo=echo)
    assert signal.getsignal(signal.SIGTERM) == before  # handler restored
    _assert_gone(int(pid_file.read_text()), "SIGTERM")


def test_slow_compiles_still_report_every_minute() -> None:
    now = [0.0]
    parser = B.ProgressParser(every=50, seconds=60, clock=lambda: now[0])
    assert parser.feed("[1/100] Building CXX object a.o").line() == "[build] compile 1/100 (1%)"
    now[0] = 30
    assert parser.feed("[2/100] Building CXX object b.o") is None
    now[0] = 61
    assert parser.feed("[3/100] Building CXX object c.o").line() == "[build] compile 3/100 (3%)"


def test_build_env_passes_everything_through_setup_py_variables(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "proj"
    checkout = root / "work" / "mlx"
    build_dir = root / ".overlay" / "build" / "k"
    for p in (checkout, build_dir):
        p.mkdir(parents=True)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ccache").write_text("#!/bin/sh\n")
    (bindir / "ccache").chmod(0o755)
    req = B.BuildRequest(checkout=checkout, state=root / ".overlay", dist=root / "dist", jobs=3, root=root)
    env = B.build_env(req, "cpu", tmp_path / "venv" / "bin" / "python", build_dir, None,
                      base={"PATH": str(bindir), "CMAKE_ARGS": "-DMINE=1", "PYTHONPATH": "/x"})
    args = env["CMAKE_ARGS"].split(" ")
    assert args[:2] == ["-DMLX_BUILD_METAL=OFF", "-DMLX_BUILD_CUDA=OFF"] and args[-1] == "-DMINE=1"
    assert f"-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_BASEDIR={root.resolve()};{bindir / 'ccache'}" in args
    assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == "3" and env["CMAKE_GENERATOR"] == "Ninja"
    assert env["PATH"].startswith(str(tmp_path / "venv" / "bin"))
    assert "PYTHONPATH" not in env
