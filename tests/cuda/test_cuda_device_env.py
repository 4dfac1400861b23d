"""bench/cuda_device_env.sh's helpers for the scripts that run MLX built from
a kit on the device: one place says which libraries that build needs."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV_SH = ROOT / "bench" / "cuda_device_env.sh"


def _run(snippet: str, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    """snippet after sourcing the helpers, with a python3 that sees pythonpath
    and no site-packages (where this machine may have nvidia packages)."""
    bin_dir = pythonpath / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", f'. "{ENV_SH}"; {snippet}'], capture_output=True, text=True, env=env)


def test_kit_libraries_lists_the_kit_blas_then_each_nvidia_package(tmp_path: Path) -> None:
    nvidia = tmp_path / "site" / "nvidia"
    for package in ("cudnn", "cublas", "nccl"):
        (nvidia / package / "lib").mkdir(parents=True)
    (nvidia / "__init__.py").write_text("")
    run = _run("kit_libraries /w/kit", tmp_path / "site")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == ("/w/kit/blas/lib:" + "".join(f"{nvidia}/{p}/lib:" for p in ("cublas", "cudnn", "nccl")))
    assert _run("nvidia_site", tmp_path / "site").stdout.strip() == str(nvidia)


def test_kit_libraries_fails_without_the_nvidia_packages(tmp_path: Path) -> None:
    run = _run('kit_libraries /w/kit || echo "failed $?"', tmp_path)
    assert "failed 1" in run.stdout and "nvidia" in run.stderr


def test_device_scripts_take_the_kit_libraries_from_the_helper() -> None:
    scripts = [p for p in (ROOT / "bench").rglob("*.sh") if "blas/lib" in p.read_text()]
    # The build script names the kit's BLAS to CMake; the kit script makes it.
    users = {p.relative_to(ROOT).as_posix() for p in (ROOT / "bench").rglob("*.sh")
             if "kit_libraries " in p.read_text() and p != ENV_SH}
    assert {p.relative_to(ROOT).as_posix() for p in scripts} == {
        "bench/cuda_device_env.sh", "bench/cuda_mlx_build_device.sh", "bench/cuda_mlx_kit.sh"}
    assert users == {
        "bench/cuda_mlx_ab_device.sh", "bench/cuda_mlx_route_device.sh", "bench/cuda_mlx_run_device.sh",
        "bench/cuda_mlx_stdcxx_device.sh", "bench/cuda_mlx_throw_device.sh",
        "bench/experiments/qmm_sm80_race/mlx_device.sh"}
    for name in users:
        text = (ROOT / name).read_text()
        assert "cuda_device_env.sh\"" in text.split("kit_libraries ")[0], name


def test_nvidia_libraries_lists_each_package_s_lib_folder(tmp_path: Path) -> None:
    nvidia = tmp_path / "site" / "nvidia"
    for package in ("cuda_runtime", "cudnn"):
        (nvidia / package / "lib").mkdir(parents=True)
    (nvidia / "__init__.py").write_text("")
    run = _run("nvidia_libraries", tmp_path / "site")
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"{nvidia}/cuda_runtime/lib:{nvidia}/cudnn/lib:"
    assert "failed 1" in _run('nvidia_libraries || echo "failed $?"', tmp_path).stdout


def test_device_scripts_unpack_the_stock_wheels_and_find_nvidia_s_libraries_through_the_helpers() -> None:
    """One place says where the stock wheels go and which folders hold the
    nvidia libraries; the build script alone asks Python for the packages
    itself (NVIDIA_SITE overrides it there)."""
    scripts = {p.relative_to(ROOT).as_posix(): p.read_text() for p in (ROOT / "bench").rglob("*.sh") if p != ENV_SH}
    assert not [n for n, t in scripts.items() if re.search(r"tar -xJf [^\n]*-C /tmp/site", t)]
    assert not [n for n, t in scripts.items() if '"$NV"/*/lib' in t or "$nv\"/*/lib" in t]
    assert [n for n, t in scripts.items() if "import nvidia" in t] == ["bench/cuda_mlx_build_device.sh"]
    users = {n for n, t in scripts.items() if "stock_wheel_site " in t}
    assert users == {"bench/cuda_mlx_route_device.sh", "bench/cuda_mlx_run_device.sh", "bench/cuda_probe_device.sh",
                     "bench/cuda_qmm_sm80_device.sh", "bench/cuda_qmv_device.sh"}
    for name in users:
        assert "cuda_device_env.sh\"" in scripts[name].split("stock_wheel_site ")[0], name


def test_pack_out_keeps_a_device_call_s_files_within_what_comes_back(tmp_path: Path) -> None:
    """More than 8 files: the small ones go into out.tar.gz, paths kept, a
    large one stays; 8 or fewer: nothing changes."""
    out = tmp_path / "out"
    for i in range(5):
        for sub in ("r4own", "r4"):
            (out / sub).mkdir(parents=True, exist_ok=True)
            (out / sub / f"f{i}.csv").write_text(f"{sub} {i}\n")
    (out / "m").mkdir()
    (out / "m" / "module.tar.xz.00").write_bytes(b"\0" * (5 << 20))
    run = _run(f'pack_out "{out}"', tmp_path / "site")
    assert run.returncode == 0, run.stderr
    assert "11 files" in run.stdout
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "m/module.tar.xz.00", "out.tar.gz"]
    listed = subprocess.run(["tar", "-tzf", str(out / "out.tar.gz")], capture_output=True, text=True, check=True)
    assert sorted(listed.stdout.split()) == sorted(f"./{s}/f{i}.csv" for s in ("r4own", "r4") for i in range(5))

    few = tmp_path / "few"
    few.mkdir()
    for i in range(8):
        (few / f"f{i}").write_text("x")
    assert _run(f'pack_out "{few}"', tmp_path / "site").stdout == ""
    assert len(list(few.iterdir())) == 8


def test_pipe_metrics_are_listed_once_and_used_by_every_profiling_script(tmp_path: Path) -> None:
    """The pipes the profiles read: one list, in the helpers, that each
    profiling script takes (none spells a pipe metric itself)."""
    run = _run("ncu_pipe_metrics", tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().split(",") == [
        f"sm__inst_executed_pipe_{p}.avg.pct_of_peak_sustained_active"
        for p in ("fmaheavy", "fmalite", "alu", "lsu", "uniform")]
    scripts = {p.relative_to(ROOT).as_posix(): p.read_text() for p in (ROOT / "bench").rglob("*.sh") if p != ENV_SH}
    assert not [n for n, t in scripts.items() if "sm__inst_executed_pipe" in t or "for p in fmaheavy" in t]
    users = {n for n, t in scripts.items() if "$(ncu_pipe_metrics)" in t}
    assert users == {"bench/cuda_qmv_8bit_m1_device.sh", "bench/cuda_qmv_open_cells_device.sh",
                     "bench/cuda_promote_cost_device.sh", "bench/experiments/cuda_float_x/ncu_device.sh"}
    for name in users:
        assert "cuda_device_env.sh\"" in scripts[name].split("ncu_pipe_metrics")[0], name


def test_time_in_turn_times_each_build_into_its_own_folder(tmp_path: Path) -> None:
    """Each build's qmv_bench gets the same --time arguments, in turn, with
    its rows in PREFIXi; one that fails makes the helper fail, not stop."""
    builds = []
    for i, rc in enumerate((0, 3)):
        b = tmp_path / f"build{i}"
        b.mkdir()
        (b / "qmv_bench").write_text(
            "#!/bin/sh\n"
            f'echo "build{i} $*"\n'
            'echo "shape,us" >> "$2/cuda_qmv_time.csv"\n'
            f"exit {rc}\n")
        (b / "qmv_bench").chmod(0o755)
        builds.append(str(b))
    prefix = tmp_path / "out" / "b"
    run = _run(f'time_in_turn "{prefix}" 0,8,4096,14336 "4,2,8,6,8 sm80,8" {" ".join(builds)}; echo "rc $?"',
               tmp_path / "site")
    assert run.stdout.strip() == "rc 1", run.stderr
    for i in range(2):
        log = (tmp_path / "out" / f"b{i}" / "log.txt").read_text()
        assert log == f"build{i} --out {prefix}{i} --time 0,8,4096,14336 4,2,8,6,8 sm80,8\n"
        assert (tmp_path / "out" / f"b{i}" / "cuda_qmv_time.csv").read_text() == "shape,us\n"


def test_configs_at_lists_each_configuration_and_qmm_sm80_at_each_m(tmp_path: Path) -> None:
    run = _run('configs_at "4,2,8,6 0,0,0,0" "4 8"', tmp_path)
    assert run.stdout == "4,2,8,6,4 0,0,0,0,4 sm80,4 4,2,8,6,8 0,0,0,0,8 sm80,8\n"


def _bench(folder: Path, script: str) -> Path:
    """A build folder whose qmv_bench is the shell script `script`."""
    folder.mkdir(parents=True)
    (folder / "qmv_bench").write_text("#!/bin/sh\n" + script)
    (folder / "qmv_bench").chmod(0o755)
    return folder


def test_time_shapes_in_turn_times_every_shape_in_both_types(tmp_path: Path) -> None:
    b = _bench(tmp_path / "build", 'echo "$4"\n')
    run = _run(f'time_shapes_in_turn "{tmp_path}/o/b" 8 "4096,14336 14336,4096" "sm80,8" "{b}"; echo "rc $?"',
               tmp_path / "site")
    assert run.stdout == "rc 0\n", run.stderr
    assert (tmp_path / "o" / "b0" / "log.txt").read_text().split() == [
        "0,8,4096,14336", "1,8,4096,14336", "0,8,14336,4096", "1,8,14336,4096"]


def _fake_build(folder: Path, bench_rc: int = 0) -> Path:
    """A build folder whose qmv_bench and qmv_matrix echo their arguments as
    verdict lines; qmv_bench exits bench_rc on the ragged sweep."""
    folder.mkdir(parents=True)
    (folder / "qmv_bench").write_text(
        "#!/bin/sh\n"
        'echo "PARITY OK: $*"\n'
        f'case "$*" in *--ragged*) exit {bench_rc};; esac\n')
    (folder / "qmv_matrix").write_text('#!/bin/sh\necho "MATRIX PARITY OK: $*"\n')
    for name in ("qmv_bench", "qmv_matrix"):
        (folder / name).chmod(0o755)
    return folder


def test_harness_parity_runs_the_quick_widths_the_ragged_sweep_and_the_matrix(tmp_path: Path) -> None:
    build = _fake_build(tmp_path / "b")
    out = tmp_path / "o"
    run = _run(f'harness_parity "{out}" "{build}" "4 8"; echo "rc $?"', tmp_path / "site")
    assert run.stdout.splitlines()[-1] == "rc 0", run.stderr
    for bits in (4, 8):
        assert (out / f"quick{bits}" / "stdout.txt").read_text() == (
            f"PARITY OK: --quick --bits {bits} --out {out}/quick{bits}\n")
    assert (out / "ragged" / "stdout.txt").read_text() == f"PARITY OK: --quick --ragged --out {out}/ragged\n"
    assert (out / "matrix" / "stdout.txt").read_text() == f"MATRIX PARITY OK: --out {out}/matrix --no-time\n"
    assert "MATRIX PARITY OK" in run.stdout and "--ragged" in run.stdout


def test_harness_parity_fails_when_a_run_fails_and_still_runs_the_rest(tmp_path: Path) -> None:
    build = _fake_build(tmp_path / "b", bench_rc=1)
    out = tmp_path / "o"
    run = _run(f'harness_parity "{out}" "{build}" 8; echo "rc $?"', tmp_path / "site")
    assert run.stdout.splitlines()[-1] == "rc 1", run.stderr
    assert (out / "matrix" / "stdout.txt").exists()


def test_bench_with_env_runs_the_build_s_bench_with_the_setting(tmp_path: Path) -> None:
    build = _bench(tmp_path / "b", 'echo "mode=$QMV_PERSIST args=$*"\n')
    run = _run(f'bench_with_env "{tmp_path}/w" "{build}" QMV_PERSIST=2 && "{tmp_path}/w/qmv_bench" --time x y',
               tmp_path / "site")
    assert run.stdout == "mode=2 args=--time x y\n", run.stderr


def test_time_8bit_rings_times_the_rings_and_qmm_sm80_twice_per_type(tmp_path: Path) -> None:
    b = _bench(tmp_path / "build", 'echo "$4 $5 ${24} $#"\n')
    run = _run(f'time_8bit_rings "{tmp_path}/o/c" "{b}"; echo "rc $?"', tmp_path / "site")
    assert run.stdout == "rc 0\n", run.stderr
    lines = (tmp_path / "o" / "c0" / "log.txt").read_text().splitlines()
    assert lines == ["0,8,4096,14336 4,2,8,3,4 sm80,16 24", "1,8,4096,14336 4,2,8,3,4 sm80,16 24"] * 2
