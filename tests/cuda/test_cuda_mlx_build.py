"""The end-to-end CUDA build of the patched MLX (issue 7): the kit that
carries its sources to a machine that reaches nothing, the device build
script and the report of its run. The build itself needs the H200 (recorded
in docs/data/cuda_mlx_h200_2026-11-30/); here the pieces it stands on."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

# FetchContent sources a Linux CUDA build with Python bindings does not reach,
# and why.
NOT_REACHED = {
    "metal_cpp": "Metal only",
    "dlfcn-win32": "Windows only",
    "openblas": "Windows only (Linux finds BLAS and LAPACK)",
    "gguflib": "-DMLX_BUILD_GGUF=OFF",
    "doctest": "-DMLX_BUILD_TESTS=OFF",
    "jaccl": "an example of the macOS-only JACCL library",
}


def _declared(checkout: Path) -> set[str]:
    names: set[str] = set()
    for cmake in checkout.rglob("CMakeLists.txt"):
        for m in re.finditer(r"^\s*FetchContent_Declare\(\s*\n?\s*([\w-]+)", cmake.read_text(), re.M):
            names.add(m.group(1))
    return names


@pytest.mark.integration
def test_device_build_supplies_every_source_mlx_fetches(pinned_checkout: Path) -> None:
    """Offline, FetchContent fails on any source not given locally: the build
    script must name each one MLX declares and a CUDA build reaches."""
    script = (ROOT / "bench" / "cuda_mlx_build_device.sh").read_text()
    declared = _declared(pinned_checkout)
    assert {"cccl", "nvtx3", "cudnn", "cutlass", "json", "fmt", "nanobind"} <= declared
    for name in sorted(declared - set(NOT_REACHED)):
        assert f"-DFETCHCONTENT_SOURCE_DIR_{name.upper()}=" in script, name
    assert "-DFETCHCONTENT_FULLY_DISCONNECTED=ON" in script
    assert "-DMLX_BUILD_GGUF=OFF" in script and "-DMLX_BUILD_TESTS=OFF" in script
    # The kit fetches the versions MLX pins.
    kit = (ROOT / "bench" / "cuda_mlx_kit.sh").read_text()
    cuda_cmake = (pinned_checkout / "mlx" / "backend" / "cuda" / "CMakeLists.txt").read_text()
    for var, name in (("CCCL_REF", "cccl"), ("CUDNN_REF", "cudnn"), ("CUTLASS_REF", "cutlass")):
        pinned = re.search(rf"FetchContent_Declare\(\s*{name}\s.*?(v\d+\.\d+\.\d+)", cuda_cmake, re.S)
        assert pinned and f"{var}:-{pinned.group(1)}" in kit, name


def _repo(path: Path, files: dict[str, str], tag: str) -> Path:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull,
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "c"], ["tag", tag]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return path


@pytest.mark.skipif(not Path("/usr/include/x86_64-linux-gnu/cblas.h").exists(),
                    reason="the kit takes Debian's OpenBLAS headers (libopenblas-dev), not installed here")
def test_kit_takes_the_committed_tree_and_the_named_versions(tmp_path: Path) -> None:
    src = {
        "CCCL_GIT": _repo(tmp_path / "cccl", {"libcudacxx/include/cuda/x.h": "", "libcudacxx/include/nv/t": "",
                                             "cub/cub/cub.cuh": "", "thrust/thrust/t.h": "", "docs/big": "x"}, "v3.1.3"),
        "NVTX_GIT": _repo(tmp_path / "nvtx", {"c/CMakeLists.txt": "", "python/p": ""}, "v3.1.1"),
        "CUDNN_GIT": _repo(tmp_path / "cudnn", {"CMakeLists.txt": "", "cudnn_frontend-config.cmake.in": "",
                                               "include/c.h": "", "cmake/c": "", "LICENSE.txt": "",
                                               "samples/s": ""}, "v1.16.0"),
        "CUTLASS_GIT": _repo(tmp_path / "cutlass", {"include/cute/a.h": "", "media/m": ""}, "v4.4.2"),
        "FMT_GIT": _repo(tmp_path / "fmt", {"CMakeLists.txt": "", "include/fmt/f.h": "", "src/f.cc": "",
                                           "support/s": "", "LICENSE": "", "README.md": "", "ChangeLog.md": "",
                                           "test/t": ""}, "12.1.0"),
        "JSON_GIT": _repo(tmp_path / "json", {"single_include/nlohmann/json.hpp": "", "CMakeLists.txt": "",
                                             "cmake/c": ""}, "v3.11.3"),
        "NANOBIND_GIT": _repo(tmp_path / "nanobind", {"CMakeLists.txt": ""}, "v2.13.0"),
    }
    checkout = _repo(tmp_path / "mlx", {"CMakeLists.txt": "project(mlx)\n", "docs/d": ""}, "t")
    blas = shutil.which("true")  # any file stands for the library here
    env = {**os.environ, **{k: str(v) for k, v in src.items()}, "BLAS_LIB": str(blas)}
    out = tmp_path / "out"
    run = subprocess.run(["bash", str(ROOT / "bench" / "cuda_mlx_kit.sh"), str(checkout), str(out)],
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    subprocess.run(["tar", "-xJf", str(out / "kit.tar.xz"), "-C", str(tmp_path)], check=True)
    kit = tmp_path / "kit"
    # cccl in its release zip's layout; only the paths the build needs.
    assert sorted(p.name for p in (kit / "deps" / "cccl" / "include").iterdir()) == ["cub", "cuda", "nv", "thrust"]
    assert not (kit / "deps" / "cutlass" / "media").exists() and (kit / "deps" / "cutlass" / "include" / "cute").is_dir()
    assert not (kit / "deps" / "cudnn" / "samples").exists()
    # fmt's CMakeLists lists its README.md and ChangeLog.md as module sources:
    # without them, configure fails (device run of 2026-12-01).
    assert (kit / "deps" / "fmt" / "README.md").is_file() and (kit / "deps" / "fmt" / "ChangeLog.md").is_file()
    assert not (kit / "deps" / "fmt" / "test").exists()
    assert (kit / "mlx" / "CMakeLists.txt").is_file() and not (kit / "mlx" / "docs").exists()
    assert (kit / "blas" / "include" / "cblas.h").is_file() and (kit / "blas" / "lib" / "libopenblas.so").is_symlink()
    manifest = (kit / "MANIFEST").read_text()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True).stdout.strip()
    assert manifest.startswith(f"mlx {head} ")
    assert re.search(r"^cutlass https://github.com/NVIDIA/cutlass.git v4.4.2 [0-9a-f]{40}$", manifest, re.M)
    assert str(tmp_path) not in manifest  # no path of the machine that made it
    # Made again (other times on every file), the kit is the same bytes: a
    # module packed from the first still unpacks with the second.
    time.sleep(1.1)
    run = subprocess.run(["bash", str(ROOT / "bench" / "cuda_mlx_kit.sh"), str(checkout), str(tmp_path / "again")],
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "again" / "kit.tar.xz").read_bytes() == (out / "kit.tar.xz").read_bytes()
    assert not list((tmp_path / "again").glob("*.part"))

    # A ref the source lacks stops the kit with one line naming the source, where
    # it looked and the variable to set (this machine's NVTX mirror lacks v3.1.1).
    for var, value in (("NVTX_REF", "v9.9.9"), ("NVTX_GIT", "")):
        missing = {**env, var: value}
        if var == "NVTX_GIT":  # fetched from the URL: a file:// repository without the tag
            missing["NVTX_REF"] = "v9.9.9"
            missing["GIT_CONFIG_GLOBAL"] = str(tmp_path / "gitconfig")
            missing["GIT_CONFIG_SYSTEM"] = os.devnull
            (tmp_path / "gitconfig").write_text(
                f'[url "{src["NVTX_GIT"]}"]\n\tinsteadOf = https://github.com/NVIDIA/NVTX.git\n')
        run = subprocess.run(["bash", str(ROOT / "bench" / "cuda_mlx_kit.sh"), str(checkout), str(tmp_path / "o2")],
                             env=missing, capture_output=True, text=True)
        where = src["NVTX_GIT"] if var == "NVTX_REF" else "https://github.com/NVIDIA/NVTX.git"
        assert run.returncode == 2, run.stderr
        assert run.stderr.strip().splitlines()[-1] == f"nvtx: v9.9.9 not found in {where} (NVTX_REF names another ref)"
        assert not (tmp_path / "o2" / "kit.tar.xz").exists()

    # Uncommitted work is not taken silently: the kit refuses, naming the checkout.
    (checkout / "CMakeLists.txt").write_text("changed\n")
    run = subprocess.run(["bash", str(ROOT / "bench" / "cuda_mlx_kit.sh"), str(checkout), str(out)],
                         env=env, capture_output=True, text=True)
    assert run.returncode == 2 and f"{checkout}: uncommitted changes" in run.stderr


def test_mlx_report_puts_patched_beside_stock_with_the_runs_noise(tmp_path: Path) -> None:
    import cuda_qmv_report

    head = "shape,dtype,bits,M,us,rows_identical_to_M1,frac_elems_differ\n"
    rows = {"mlx_wheel.csv": [(1, 40.0, 1), (8, 30.0, 0)],
            "mlx_patched.csv": [(1, 20.0, 1), (8, 60.0, 8)],
            "mlx_patched_wide.csv": [(1, 25.0, 1), (8, 31.0, 0)]}
    for name, rs in rows.items():
        (tmp_path / name).write_text(head + "".join(f"4096x4096,bf16,4,{m},{us},{same},0.0\n" for m, us, same in rs))
    table = cuda_qmv_report.mlx_table(tmp_path)
    assert "| M=1 stock / patched / wide (x) | M=8 stock / patched / wide (x) | patched / wide, M <= 7 |" in table
    assert ("| 4096x4096 | bf16 | 4 | 40.0 / 20.0 / 25.0 (2.00x) | 30.0 (0/8) / 60.0 / 31.0 (0/8) (0.50x) "
            "| 0.80-0.80 |") in table


def test_stock_and_patched_builds_run_the_same_way(tmp_path: Path) -> None:
    """The A/B script puts both trees through the same build and test steps,
    and refuses an unknown phase."""
    script = (ROOT / "bench" / "cuda_mlx_ab_device.sh").read_text()
    assert 'bash bench/cuda_mlx_build_device.sh "$kit" "/tmp/cmx-$side"' in script
    assert 'SKIP_BENCH=1 bash bench/cuda_mlx_run_device.sh "/tmp/cmx-$1"' in script
    assert 'python3 bench/cuda_mlx_tolerance.py --out "$OUT/$1-tolerance.csv"' in script
    assert 'CUDA_VISIBLE_DEVICES=$((gpu % gpus)) "$step" "$side"' in script
    assert "for side in stock patched" in script
    run = subprocess.run(["bash", str(ROOT / "bench" / "cuda_mlx_ab_device.sh"), "bench", "s", "p", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 2 and "unknown phase bench" in run.stderr


def test_tolerance_script_runs_mlx_s_loops_on_the_cpu(tmp_path: Path, mlx_python: str) -> None:
    """bench/cuda_mlx_tolerance.py runs test_qmm's and test_qmv_wide's loops
    and writes one row per subtest with its error and its rows compared to the
    M = 1 products. Here on the CPU with the patched wheel (the `mlx_python`
    fixture): the code path, not CUDA's figures."""
    out = tmp_path / "t.csv"
    run = subprocess.run([mlx_python, str(ROOT / "bench" / "cuda_mlx_tolerance.py"), "--out", str(out), "--limit", "3"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "qmm: 3 subtests, 0 over tolerance" in run.stdout and "qmv_wide: 3 subtests, 0 over tolerance" in run.stdout
    lines = out.read_text().splitlines()
    assert lines[0].startswith("suite,mode,group_size,bits,M,N,K,B,transposed,dtype,max_err,tol,ok,")
    rows = [dict(zip(lines[0].split(","), r.split(","))) for r in lines[1:]]
    assert [r["suite"] for r in rows] == ["qmm"] * 3 + ["qmv_wide"] * 3
    # test_qmm's order: group 128, 2 bits, M = 8, N = 128, K = 128, transposed then not.
    assert [(r["group_size"], r["bits"], r["M"], r["transposed"]) for r in rows[:2]] == \
        [("128", "2", "8", "True"), ("128", "2", "8", "False")]
    for r in rows:
        assert r["ok"] == "True" and 0 < float(r["max_err"]) < float(r["tol"])
        same, total = (int(v) for v in r["rows_identical_to_M1"].split("/"))
        assert total == int(r["M"]) * int(r["B"]) and 0 <= same <= total


def test_tolerance_script_keeps_the_subtests_the_queue_routes(tmp_path: Path, mlx_python: str) -> None:
    """--max-m 16: test_qmm's M = 8 subtests only (72 of 288), the products
    of at most 16 vectors the queue routes; M = 32, 33 and 64 take stock's
    matrix kernels."""
    out = tmp_path / "t.csv"
    run = subprocess.run([mlx_python, str(ROOT / "bench" / "cuda_mlx_tolerance.py"), "--out", str(out),
                          "--suite", "qmm", "--max-m", "16"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "qmm: 72 subtests, 0 over tolerance or failed to run" in run.stdout
    rows = out.read_text().splitlines()[1:]
    assert len(rows) == 72 and {r.split(",")[4] for r in rows} == {"8"}


def test_tolerance_script_resumes_where_an_earlier_run_stopped(tmp_path: Path, mlx_python: str) -> None:
    """--resume: an earlier run's rows are kept as they are (one of them
    edited to 'over tolerance', which a new measurement would not give) and
    only the subtests after them are measured; the whole is what one run of
    the same length writes (each subtest's operands come from the same keys).
    A file of another loop (--max-m) is refused in one line."""
    script = str(ROOT / "bench" / "cuda_mlx_tolerance.py")

    def tolerance(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([mlx_python, script, "--out", str(out), "--suite", "qmv_wide", *args],
                              capture_output=True, text=True)

    first, second, whole = tmp_path / "first.csv", tmp_path / "second.csv", tmp_path / "whole.csv"
    assert tolerance(first, "--limit", "3").returncode == 0
    lines = first.read_text().splitlines()
    fields = lines[2].split(",")
    fields[lines[0].split(",").index("ok")] = "False"
    lines[2] = ",".join(fields)
    first.write_text("\n".join(lines) + "\n")
    run = tolerance(second, "--limit", "5", "--resume", str(first))
    assert run.returncode == 0, run.stderr[-2000:]
    assert "qmv_wide: 3 subtests kept from" in run.stdout and "1 of them over tolerance" in run.stdout
    assert "qmv_wide: 2 subtests, 0 over tolerance" in run.stdout
    assert tolerance(whole, "--limit", "5").returncode == 0
    resumed, fresh = second.read_text().splitlines(), whole.read_text().splitlines()
    assert resumed[:4] == lines[:4] and resumed[4:] == fresh[4:] and len(resumed) == 6
    assert resumed[2] != fresh[2]  # the edited row was kept, not measured again

    # test_qmm's first 8 subtests are M = 8; the next ones M = 32, which --max-m 16 leaves out.
    wide = tmp_path / "wide.csv"
    assert subprocess.run([mlx_python, script, "--out", str(wide), "--suite", "qmm", "--limit", "10"],
                          capture_output=True, text=True).returncode == 0
    run = subprocess.run([mlx_python, script, "--out", str(tmp_path / "r.csv"), "--suite", "qmm", "--max-m", "16",
                          "--resume", str(wide)], capture_output=True, text=True)
    assert run.returncode == 1 and run.stderr.count("\n") == 1
    assert run.stderr.startswith(f"{wide}: its qmm rows are not this loop's") and "another --max-m?" in run.stderr
    (tmp_path / "bad.csv").write_text("nodeid,outcome\n")
    run = tolerance(tmp_path / "r.csv", "--resume", str(tmp_path / "bad.csv"))
    assert run.returncode == 1 and "bad.csv: not a cuda_mlx_tolerance.py result" in run.stderr


def run_tolerance_with(replacement: str, tmp_path: Path, mlx_python: str,
                       env: dict[str, str] | None = None) -> tuple[str, list[dict[str, str]]]:
    """bench/cuda_mlx_tolerance.py --suite qmm --limit 2 with
    mx.quantized_matmul replaced by the function `replacement` defines (as
    `replaced`, given the original as `plain`), in `env` added to this
    environment: its output and CSV rows."""
    out = tmp_path / "t.csv"
    script = (f"import runpy, sys\nimport mlx.core as mx\nplain = mx.quantized_matmul\n{replacement}\n"
              "mx.quantized_matmul = replaced\nsys.argv = ['cuda_mlx_tolerance.py'] + sys.argv[2:]\n"
              f"runpy.run_path({str(ROOT / 'bench' / 'cuda_mlx_tolerance.py')!r}, run_name='__main__')\n")
    run = subprocess.run([mlx_python, "-c", script, "-", "--out", str(out), "--suite", "qmm", "--limit", "2"],
                         capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert run.returncode == 0, run.stderr[-2000:]
    lines = out.read_text().splitlines()
    rows = [dict(zip(lines[0].split(","), r.split(","))) for r in lines[1:]]
    assert len(rows) == 2 and all(len(r) == len(lines[0].split(",")) for r in rows)
    return run.stdout, rows


def test_tolerance_script_reports_a_nudged_product(tmp_path: Path, mlx_python: str) -> None:
    """The negative control of the script's two comparisons: products of more
    than one vector nudged (by 1e-2, past the tolerance, and changing every
    row's bits) are reported as over tolerance with no row identical to M = 1."""
    stdout, rows = run_tolerance_with(
        "def replaced(x, *args, **kwargs):\n"
        "    y = plain(x, *args, **kwargs)\n"
        "    return y + 1e-2 if x.shape[-2] > 1 else y", tmp_path, mlx_python)
    assert "qmm: 2 subtests, 2 over tolerance" in stdout
    assert [(r["ok"], r["rows_identical_to_M1"]) for r in rows] == [("False", "0/8")] * 2
    assert all(float(r["max_err_M1"]) < float(r["tol"]) for r in rows)  # the rows alone are not nudged


@pytest.mark.integration
def test_tolerance_script_turns_tf32_off_as_mlx_s_tests_do(tmp_path: Path, mlx_python: str,
                                                          pinned_checkout: Path) -> None:
    """MLX's test harness (python/tests/mlx_tests.py) sets MLX_ENABLE_TF32=0,
    so that the float32 references run in float32 on cuBLAS, and turns the
    CUDA caches' thrashing check off; the script sets both the same way,
    whatever the caller's environment says. Without it the
    H200 run of 2026-12-02 failed 1041 of test_qmv_wide's 1188 subtests on
    the reference's rounding alone."""
    harness = (pinned_checkout / "python/tests/mlx_tests.py").read_text()
    names = ("MLX_ENABLE_TF32", "MLX_ENABLE_CACHE_THRASHING_CHECK")
    assert all(f'os.environ["{name}"] = "0"' in harness for name in names)
    stdout, rows = run_tolerance_with(
        "import os\n"
        "def replaced(x, *args, **kwargs):\n"
        f"    assert [os.environ[n] for n in {names}] == ['0', '0'], os.environ\n"
        "    return plain(x, *args, **kwargs)", tmp_path, mlx_python, env=dict.fromkeys(names, "1"))
    assert "qmm: 2 subtests, 0 over tolerance" in stdout and len(rows) == 2


def test_tolerance_script_records_a_subtest_that_raises(tmp_path: Path, mlx_python: str) -> None:
    """A kernel that cannot be built there (the stock wheels' JIT of qmm_sm90
    without crt/ headers, 2026-12-01): each subtest is an error row with the
    message's first line, and the loop goes on."""
    stdout, rows = run_tolerance_with(
        "def replaced(x, *args, **kwargs):\n"
        "    raise RuntimeError('Failed to compile kernel: crt/mma.h, missing\\nmore')", tmp_path, mlx_python)
    assert "qmm: 2 subtests, 2 over tolerance or failed to run" in stdout
    assert [(r["ok"], r["error"]) for r in rows] == [("error", "Failed to compile kernel: crt/mma.h; missing")] * 2


def test_tolerance_report_tells_which_side_fails(tmp_path: Path) -> None:
    """cuda_qmv_report.py --tolerance: the subtests over tolerance (or that
    raised) on some side, or whose rows computed alone miss it, and per suite
    how many fail on which sides ("-" where a side did not get there)."""
    import cuda_qmv_report

    head = ("suite,mode,group_size,bits,M,N,K,B,transposed,dtype,max_err,tol,ok,"
            "rows_identical_to_M1,max_err_M1,error\n")

    def row(m: int, err: float, err_1: float = 1e-4) -> str:
        return f"qmm,affine,64,4,{m},128,128,1,True,float16,{err},0.0015,{err < 0.0015},{m}/{m},{err_1},\n"

    error = "qmm,affine,64,4,64,128,128,1,True,float16,,0.0015,error,,,Failed to compile kernel\n"
    (tmp_path / "stock-tolerance.csv").write_text(head + row(8, 1e-4) + row(32, 0.002) + row(33, 1e-4)
                                                  + row(48, 1e-4, 0.002) + error)
    (tmp_path / "patched-tolerance.csv").write_text(head + row(8, 0.003) + row(32, 0.002))
    table = cuda_qmv_report.tolerance_table(tmp_path)
    assert ("| qmm | affine | 64 | 4 | 8 | 128 | 128 | 1 | True | float16 | 0.0015 | 0.003 FAIL (8/8); "
            "M=1 rows 0.0001 | 0.0001 (8/8); M=1 rows 0.0001 |") in table
    assert "| 32 | 128 | 128 | 1 | True | float16 | 0.0015 | 0.002 FAIL (32/32); M=1 rows 0.0001 |" in table
    assert "| 33 |" not in table  # within tolerance everywhere
    assert "| 48 | 128 | 128 | 1 | True | float16 | 0.0015 | - | 0.0001 (48/48); M=1 rows 0.002 FAIL |" in table
    assert "| 64 | 128 | 128 | 1 | True | float16 | 0.0015 | - | ERROR: Failed to compile kernel |" in table
    assert ("- qmm: 5 subtests (ran: patched 2, stock 5); over tolerance or error: 1 on patched only; "
            "1 on every side; 1 on stock only; M = 1 rows over tolerance: patched 0, stock 1") in table
    # What each side says of the products of at most 16 vectors (the queue's route): here M = 8.
    assert ("  - patched, products of at most 16 vectors: 1, 0 within tolerance, 1 with every row identical "
            "to M = 1; largest error 0.003") in table
    assert ("  - stock, products of at most 16 vectors: 1, 1 within tolerance, 1 with every row identical "
            "to M = 1; largest error 0.0001") in table


def test_tolerance_report_counts_rows_that_differ_from_m1(tmp_path: Path) -> None:
    """The routed products' summary counts a product with one row unlike M = 1
    (2/3), leaves out products of more than 16 vectors (M * B = 18) and
    subtests that raised, and says so when none ran."""
    import cuda_qmv_report

    head = ("suite,mode,group_size,bits,M,N,K,B,transposed,dtype,max_err,tol,ok,"
            "rows_identical_to_M1,max_err_M1,error\n")
    (tmp_path / "patched-tolerance.csv").write_text(
        head + "qmv_wide,affine,64,4,3,256,128,1,True,float32,1e-05,0.001,True,2/3,1e-05,\n"
        "qmv_wide,affine,64,4,4,256,128,3,True,float32,2e-05,0.001,True,12/12,2e-05,\n"
        "qmv_wide,affine,64,4,6,256,128,3,True,float32,96.3,0.001,False,0/18,2e-05,\n"
        "qmv_wide,affine,64,4,2,256,128,1,True,float32,,0.001,error,,,no kernel\n"
        "qmm,affine,64,4,32,128,128,1,True,float16,1e-4,0.0015,True,0/32,1e-4,\n")
    table = cuda_qmv_report.tolerance_table(tmp_path)
    assert ("  - patched, products of at most 16 vectors: 2, 2 within tolerance, 1 with every row identical "
            "to M = 1; largest error 2e-05") in table
    assert "  - patched, products of at most 16 vectors: none ran" in table


def test_run_script_s_exception_probe_runs_and_names_the_runtimes(tmp_path: Path, mlx_python: str) -> None:
    """The exception probe that bench/cuda_mlx_run_device.sh writes (its
    pytest file, taken from the script) passes with the patched wheel on the
    CPU, and its first test writes the C++ runtimes the pytest process maps
    and the modules the plugins brought in: what tells the H200 image's crash
    apart on the next device run."""
    script = (ROOT / "bench" / "cuda_mlx_run_device.sh").read_text()
    body = script.split("cat >\"$probe_dir/test_probe.py\" <<'PY'\n", 1)[1].split("\nPY\n", 1)[0]
    (tmp_path / "test_probe.py").write_text(body + "\n")
    maps = tmp_path / "maps.txt"
    run = subprocess.run([mlx_python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_probe.py"],
                         cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PROBE_MAPS": str(maps)})
    assert run.returncode == 0 and "6 passed" in run.stdout, run.stdout + run.stderr
    first, second = maps.read_text().splitlines()
    assert first.startswith("maps: ") and "libstdc++" in first
    assert second.startswith("modules: ") and {"mlx", "pytest"} <= set(second.split()[1:])
    assert "os" not in second.split()  # the standard library is left out
    assert 'for plugin in $plugins; do' in script and '-p "no:$plugin"' in script


def test_segv_backtrace_prints_the_native_stack_after_faulthandler(tmp_path: Path) -> None:
    """bench/segv_backtrace.c (SEGV_TRACE=1 of the run script) names the
    native frames of a process that dies of a fault, after faulthandler's
    Python frames, and the process still dies of the signal. Control: the
    same crash without it prints no native frame."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc) to build bench/segv_backtrace.c")
    lib = tmp_path / "segv_backtrace.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", "-o", str(lib),
                    str(ROOT / "bench" / "segv_backtrace.c")], check=True)
    crash = [sys.executable, "-X", "faulthandler", "-c", "import ctypes; ctypes.string_at(0)"]
    traced = subprocess.run(crash, capture_output=True, text=True, env={**os.environ, "LD_PRELOAD": str(lib)})
    plain = subprocess.run(crash, capture_output=True, text=True)
    for run in (traced, plain):
        assert run.returncode == -signal.SIGSEGV, run.stderr
        assert 'File "<string>", line 1' in run.stderr  # faulthandler's frame
    lines = traced.stderr.splitlines()
    start = lines.index("segv_backtrace: signal 11 (Segmentation fault)")
    assert lines[start + 1].startswith("segv_backtrace: raised again (by faulthandler)")
    frames = lines[start + 2:lines.index("segv_backtrace: end")]
    assert any("ctypes" in f for f in frames) and any("libc.so" in f for f in frames), frames
    assert "segv_backtrace" not in plain.stderr
    # Under pytest, which points fd 2 at a capture file while a test runs (lost
    # when the process dies): the stack still reaches the stderr pytest started
    # with, as on the device (session 20's first run there printed nothing).
    (tmp_path / "test_crash.py").write_text("import ctypes\n\n\ndef test_crash():\n    ctypes.string_at(0)\n")
    under_pytest = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_crash.py"],
                                  cwd=tmp_path, capture_output=True, text=True,
                                  env={**os.environ, "LD_PRELOAD": str(lib), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert under_pytest.returncode == -signal.SIGSEGV
    assert "segv_backtrace: signal 11 (Segmentation fault)" in under_pytest.stderr, under_pytest.stderr
    assert "segv_backtrace: end" in under_pytest.stderr
    # Without faulthandler the handler sees the fault itself and names where it was.
    direct = subprocess.run(crash[:1] + crash[3:], capture_output=True, text=True,
                            env={**os.environ, "LD_PRELOAD": str(lib)})
    assert direct.returncode == -signal.SIGSEGV
    assert "segv_backtrace: fault address (nil)" in direct.stderr
    assert re.search(r"segv_backtrace: pc 0x[0-9a-f]+ = /\S+\+0x[0-9a-f]+", direct.stderr), direct.stderr


@pytest.mark.integration
def test_run_script_on_the_cpu_carries_a_call_on(tmp_path: Path, mlx_python: str, patched_checkout: Path) -> None:
    """bench/cuda_mlx_run_device.sh end to end on the CPU wheel (what a device
    call runs, short of the benches), twice: the second call with RESUME set
    to the first's OUT keeps its tolerance rows and test outcomes and goes on.
    The device's layout is played by a WORK whose kit has the wheel's package,
    a copy of the queue's python/tests and an empty nvidia package."""
    kit = tmp_path / "W" / "kit"
    (kit / "mlx" / "python").mkdir(parents=True)
    (kit / "MANIFEST").write_text("mlx (the queue, on the CPU)\n")
    package = subprocess.run([mlx_python, "-c", "import mlx; print(list(mlx.__path__)[0])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (kit / "mlx" / "python" / "mlx").symlink_to(package)
    shutil.copytree(patched_checkout / "python" / "tests", kit / "mlx" / "python" / "tests")
    (tmp_path / "site" / "nvidia" / "cu" / "lib").mkdir(parents=True)
    env = {**os.environ, "PATH": f"{Path(mlx_python).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(tmp_path / "site"), "TOLERANCE": "1", "TOLERANCE_SUITE": "qmv_wide",
           "TOLERANCE_LIMIT": "6", "TEST_LIMIT": "300", "SKIP_BENCH": "1",
           # The fp row test (10 s on the CPU); the qmv one takes 100 s on 2 cores, near the
           # device's limit of 120 s, which a slower CI machine ran past (stop 53).
           "ROWS": "fp_qmv_rows_match", "ROWS_LIMIT": "300"}

    def call(out: str, tests: str, **more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "bench/cuda_mlx_run_device.sh", str(tmp_path / "W"), str(tmp_path / out),
                               str(tmp_path / "no-stock.tar.xz")], cwd=ROOT, capture_output=True, text=True,
                              env={**env, "TESTS": tests, **more})

    # MLX's kernel cache (the CPU backend writes none: a file stands for a kernel)
    # goes back with KEEP_PTX and comes in with FROM_PTX on a machine without it.
    cache = tmp_path / "W" / "ptx-cache"
    cache.mkdir()
    (cache / "qmm_sm90_kernel.ptx").write_text("// ptx\n")
    first = call("o1", "test_quantized.py -k test_throw", KEEP_PTX=os.path.relpath(tmp_path / "o1" / "p", ROOT))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "kernel cache: 1 files kept in" in first.stdout and [p.name for p in (tmp_path / "o1" / "p").iterdir()] == [
        "ptx-cache.tar.xz.00"]
    shutil.rmtree(cache)
    assert "built from: mlx (the queue, on the CPU)" in first.stdout
    assert "exception probe under pytest (plain) rc 0" in first.stdout
    assert "test_quantized.py rc 0: 1 tests in 1 pytest run(s): 1 passed" in first.stdout
    assert re.search(r"rows tests, MLX_QMV_WIDE=1, rc 0: 1 passed", first.stdout), first.stdout
    rows1 = (tmp_path / "o1" / "patched-tolerance.csv").read_text().splitlines()
    assert rows1[0].startswith("suite,mode,group_size,bits,M,N,K,B,")

    # TESTS is split on spaces, as the script's comment says (the first call's "-k test_throw": two
    # arguments); NAMES names tests of the file, in order, shorter than node ids.
    second = call("o2", "", NAMES="test_throw test_qmv_small_non_multiples",
                  RESUME=os.path.relpath(tmp_path / "o1", ROOT),  # relative to the call's folder, as on the device
                  FROM_PTX=str(tmp_path / "o1" / "p"), SEGV_TRACE="1")
    assert second.returncode == 0, second.stdout + second.stderr
    assert (tmp_path / "W" / "segv_backtrace.so").is_file()  # built and preloaded; nothing crashed
    assert f"kernel cache: 1 files from {tmp_path / 'o1' / 'p'}" in second.stdout
    assert (cache / "qmm_sm90_kernel.ptx").read_text() == "// ptx\n"
    tests2 = (tmp_path / "o2" / "test_quantized.txt").read_text()
    assert f"2 tests, 1 with an outcome from {tmp_path / 'o1' / 'test_quantized.csv'}" in tests2
    assert "test_quantized.py rc 0: 2 tests in 1 pytest run(s): 2 passed" in second.stdout
    rows2 = (tmp_path / "o2" / "patched-tolerance.csv").read_text().splitlines()
    assert rows2[:len(rows1)] == rows1 and len(rows2) >= len(rows1)
    if len(rows1) > 1:
        assert f"qmv_wide: {len(rows1) - 1} subtests kept from" in (tmp_path / "o2" / "tolerance.txt").read_text()
    for bad, says in ((("RESUME", tmp_path / "nowhere"), "no such folder"),
                      (("RESUME", tmp_path / "W"), "neither test_quantized.csv nor patched-tolerance.csv there"),
                      (("FROM_PTX", tmp_path / "o2"), "no ptx-cache.tar.xz.* there")):
        third = call("o3", "test_quantized.py::TestQuantized::test_throw", **{bad[0]: str(bad[1])})
        assert third.returncode == 2 and third.stdout == "", third.stdout + third.stderr
        assert third.stderr.strip().splitlines() == [third.stderr.strip()] and says in third.stderr


def test_stdcxx_gives_the_module_the_shared_runtime(tmp_path: Path) -> None:
    """bench/cuda_stdcxx.sh: a compiler that finds only libstdc++.a beside it
    (as the H200 image's /opt/gcc/bin/g++ does, which made the module export
    libstdc++'s unique symbols and crash where numpy came first) gets -L a
    folder whose libstdc++.so names the system's libstdc++.so.6, and links
    against it with that flag; `check` names a library that carries its own.
    Control: the machine's g++, which links the shared runtime, gets no flag."""
    gxx = shutil.which("g++")
    if gxx is None or shutil.which("readelf") is None:
        pytest.skip("no g++ or readelf here to link the probe library")
    static_a = subprocess.run([gxx, "-print-file-name=libstdc++.a"], capture_output=True, text=True).stdout.strip()
    if not Path(static_a).is_file():
        pytest.skip(f"{gxx} has no libstdc++.a to play a compiler that links it statically")
    own = tmp_path / "gcc-lib"
    own.mkdir()
    (own / "libstdc++.a").symlink_to(static_a)
    fake = tmp_path / "g++"
    fake.write_text(f'#!/bin/sh\nexec {gxx} -B{own}/ "$@"\n')
    fake.chmod(0o755)
    script = str(ROOT / "bench" / "cuda_stdcxx.sh")
    src = tmp_path / "f.cpp"
    src.write_text('#include <sstream>\nextern "C" int f(long v) { std::ostringstream o; o << v; return 0; }\n')

    def needed(lib: Path) -> list[str]:
        dyn = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True).stdout
        return re.findall(r"Shared library: \[([^\]]+)\]", dyn)

    subprocess.run([str(fake), "-shared", "-fPIC", "-o", str(tmp_path / "static.so"), str(src)], check=True)
    assert "libstdc++.so.6" not in needed(tmp_path / "static.so")  # the fault, played
    check = subprocess.run(["bash", script, "check", str(tmp_path / "static.so")], capture_output=True, text=True)
    assert check.returncode == 1 and check.stderr.count("\n") == 1, check.stderr
    assert f"{tmp_path / 'static.so'}: carries its own libstdc++" in check.stderr and "import mlx before numpy" in check.stderr

    flags = subprocess.run(["bash", script, "link-flags", str(fake), str(tmp_path / "stdcxx")],
                           capture_output=True, text=True)
    assert flags.returncode == 0 and flags.stdout.strip() == f"-L{tmp_path / 'stdcxx'}", flags.stderr
    assert Path(os.path.realpath(tmp_path / "stdcxx" / "libstdc++.so")).name.startswith("libstdc++.so.6")
    subprocess.run([str(fake), "-shared", "-fPIC", "-o", str(tmp_path / "fixed.so"), str(src), flags.stdout.strip()],
                   check=True)
    assert "libstdc++.so.6" in needed(tmp_path / "fixed.so")
    assert subprocess.run(["bash", script, "check", str(tmp_path / "fixed.so")]).returncode == 0

    control = subprocess.run(["bash", script, "link-flags", gxx, str(tmp_path / "unused")],
                             capture_output=True, text=True)
    assert control.returncode == 0 and control.stdout == "" and not (tmp_path / "unused").exists()
    # The build passes the flag to the module's link and checks what it built
    # (and what it unpacked from a pack made before).
    build = (ROOT / "bench" / "cuda_mlx_build_device.sh").read_text()
    assert 'cuda_stdcxx.sh" link-flags "${CXX:-c++}"' in build
    assert '-DCMAKE_SHARED_LINKER_FLAGS="$STDCXX_L" -DCMAKE_MODULE_LINKER_FLAGS="$STDCXX_L"' in build
    assert 'cuda_stdcxx.sh" check' in build.split("link_headers() {")[1].split("\n}\n")[0]
