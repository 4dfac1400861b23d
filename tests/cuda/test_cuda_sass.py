"""bench/cuda_sass.py: loops and their instructions from `cuobjdump -sass`.

The parsing is tested on SASS text written here (the shapes ptxas gives the
streamed kernel's ring loop); where nvcc exists, a kernel compiled here is
read with the pinned cuobjdump from PyPI (fetched into the cache once).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import cuda_sass  # bench/cuda_sass.py (conftest puts bench/ on sys.path)

# A kernel as cuobjdump prints it: a ring loop (0x0040-0x00c0) whose copy
# stage ptxas put before it (0x0100 is reached by `@P0 BRA` and jumps back
# with an unconditional BRA), a loop exit, the trap after EXIT.
SASS = """
	code for sm_90a
		Function : _Z4ringPfPKfi
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                        /* 0x00000a00ff017b82 */
        /*0010*/                   S2R R0, SR_TID.X ;                            /* 0x0000000000007919 */
        /*0020*/                   BRA 0x40 ;                                    /* 0x0000000000047947 */
        /*0030*/                   NOP ;                                         /* 0x0000000000007918 */
        /*0040*/                   DEPBAR.LE SB0, 0x6 ;                          /* 0x000081800000791a */
        /*0050*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;                 /* 0x0000000000007b1d */
        /*0060*/               @P0 BRA 0x100 ;                                   /* 0x0000000000240947 */
        /*0070*/                   LDS.64 R6, [R17] ;                            /* 0x0000000011067984 */
        /*0080*/                   HFMA2.BF16_V2 R8, R6, R2, R3 ;                /* 0x0000000206087231 */
        /*0090*/                   FFMA R10, R8, R9, R10 ;                       /* 0x000000090a0a7223 */
        /*00a0*/               @P1 BRA 0x130 ;                                   /* 0x0000000000201947 */
        /*00b0*/                   FFMA R11, R8, R9, R11 ;                       /* 0x000000090b0b7223 */
        /*00c0*/              @!P2 BRA 0x40 ;                                    /* 0xffffffff00e0a947 */
        /*00d0*/                   EXIT ;                                        /* 0x000000000000794d */
        /*00e0*/                   NOP ;                                         /* 0x0000000000007918 */
        /*00f0*/                   NOP ;                                         /* 0x0000000000007918 */
        /*0100*/                   IADD3 R35, P1, R35, 0x100, RZ ;               /* 0x0000010023237810 */
        /*0110*/              @!P3 LDGSTS.E.BYPASS.LTC128B.128 [R2], desc[UR6][R6.64] ; /* 0x0000000006028fae */
        /*0120*/                   BRA 0x70 ;                                    /* 0xffffff4000007947 */
        /*0130*/                   STG.E [R4.64], R10 ;                          /* 0x0000000a04007986 */
        /*0140*/                   EXIT ;                                        /* 0x000000000000794d */
        /*0150*/                   BRA 0x150;                                    /* 0xfffffffc00fc7947 */
		..........
"""


def test_loops_count_an_iteration_with_its_out_of_line_copy_stage() -> None:
    (kernel,) = cuda_sass.parse_sass(SASS)
    assert kernel.mangled == "_Z4ringPfPKfi"
    assert len(kernel.instrs) == 22
    # The unconditional BRA 0x40 at 0x20 goes forward; 0x150 branches to
    # itself (the trap after EXIT); 0x120 jumps back into the loop from
    # outside it: none of them is a loop.
    (loop,) = cuda_sass.loops(kernel)
    assert (loop.start, loop.end) == (0x40, 0xC0)
    assert [i.addr for i in loop.out_of_line] == [0x100, 0x110, 0x120]
    assert len(loop.per_iteration) == 9 + 3
    ops = loop.opcodes()
    assert ops["FFMA"] == 2 and ops["HFMA2.BF16_V2"] == 1
    assert ops["LDGSTS.E.BYPASS.LTC128B.128"] == 1  # predicated, counted once
    assert ops["BRA"] == 4
    assert "STG.E" not in ops  # the exit block does not come back


def test_reusing_counts_the_instructions_that_read_a_cached_operand() -> None:
    kernel = cuda_sass.Kernel("k", "k", [
        cuda_sass.Instr(0x0, "FFMA R4, R9, R10.reuse, R4"),
        cuda_sass.Instr(0x10, "FFMA R5, R11, R10, R5"),
        cuda_sass.Instr(0x20, "HMMA.1688.F32 R12, R14, R16.reuse, RZ"),
        cuda_sass.Instr(0x30, "@!P0 BRA 0x0"),
    ])
    (loop,) = cuda_sass.loops(kernel)
    assert loop.reusing("FFMA") == (1, 2)
    assert loop.reusing("FADD") == (0, 0)
    text = cuda_sass.report([kernel], "k", all_loops=False)
    assert "FFMA reading an operand from the reuse cache: 1 of 2" in text


def test_report_names_the_kernel_and_refuses_a_pattern_that_matches_none() -> None:
    kernels = cuda_sass.parse_sass(SASS)
    text = cuda_sass.report(kernels, "ring", all_loops=False)
    assert "22 instructions" in text
    assert "loop 0x0040-0x00c0: 12 per iteration (9 in line, 3 out of line)" in text
    with pytest.raises(cuda_sass.SassError, match="no kernel matches 'qmv'"):
        cuda_sass.report(kernels, "qmv", all_loops=False)


def test_a_missing_object_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    assert cuda_sass.main(["loops", str(tmp_path / "absent.o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"cuda_sass.py: error: {tmp_path / 'absent.o'}: not found"


def _sass_or_skip(obj: Path) -> list[cuda_sass.Kernel]:
    """The kernels of obj; without cuobjdump (not on PATH, PyPI out of
    reach) a loud skip, in CI (which has both) a failure."""
    try:
        return cuda_sass.sass_of(obj)
    except cuda_sass.SassError as e:
        if os.environ.get("CI"):
            pytest.fail(f"CI has nvcc and PyPI, so cuobjdump must be fetched: {e}")
        pytest.skip(str(e))


@pytest.mark.integration
def test_loops_reads_a_kernel_nvcc_compiled(tmp_path: Path) -> None:
    """nvcc (sm_90a) on a kernel with one loop of float multiply-adds; the
    pinned cuobjdump reads it (CI, which has nvcc and PyPI, must get it)."""
    nvcc = shutil.which(os.environ.get("NVCC", "nvcc"))
    if not nvcc:
        pytest.skip("nvcc not found: only the parsing is tested without it")
    src = tmp_path / "loop.cu"
    src.write_text(
        "__global__ void dot(float* out, const float* a, const float* b, int n) {\n"
        "  float s = 0;\n"
        "  for (int i = threadIdx.x; i < n; i += 32) s = fmaf(a[i], b[i], s);\n"
        "  out[threadIdx.x] = s;\n"
        "}\n")
    obj = tmp_path / "loop.o"
    subprocess.run([nvcc, "-O3", "-gencode=arch=compute_90a,code=sm_90a", "-c", str(src), "-o",
                    str(obj)], check=True)
    (kernel,) = [k for k in _sass_or_skip(obj) if k.name.startswith("dot(")]
    found = cuda_sass.loops(kernel)
    assert found and all(lp.opcodes()["FFMA"] >= 1 for lp in found), [lp.opcodes() for lp in found]


def _patched_kernels(patched_checkout: Path, tmp_path: Path) -> tuple[Path, str, Path, Path]:
    """The queue's kernels header (as the harness extracts it) and nvcc, the
    wheel's headers and fmt to compile it with; missing inputs skip loudly
    (fail in CI)."""
    from .test_cuda_harness import _missing, _nvcc_inputs

    inputs = _nvcc_inputs()
    if isinstance(inputs, str):
        _missing(inputs)
    nvcc, headers, fmt = inputs
    import cuda_qmv

    kernels = tmp_path / "patched_kernels.cuh"
    kernels.write_text(cuda_qmv.patched_kernels(patched_checkout))
    return kernels, nvcc, headers, fmt


@pytest.mark.integration
def test_compile_counts_the_8_bit_tile_loop_of_the_patched_dispatch(
    pinned_checkout: Path, patched_checkout: Path, tmp_path: Path
) -> None:
    """`compile` builds one instantiation of the queue's kernels: the
    dispatch's bfloat16 8-bit M = 1 kernel, whose tile loop (4 rows x 8
    elements per lane) makes each element with one FADD and applies it with
    one FFMA (docs/benchmarks.md, "Instructions per element at M = 1"). An
    instantiation the header does not have is a one-line nvcc error."""
    kernels, nvcc, headers, fmt = _patched_kernels(patched_checkout, tmp_path)
    instance = ("qmv_streamed_kernel<2, 4, 1, 8, 8, 64, true, false, cutlass::bfloat16_t, uint8_t,"
                " cutlass::bfloat16_t>")
    obj = tmp_path / "one.o"
    cuda_sass.compile_instance(kernels, instance, obj, pinned_checkout, headers, fmt, nvcc)
    (kernel,) = _sass_or_skip(obj)
    assert kernel.name.startswith("void mlx::core::cu::qmv_streamed_kernel<2, 4, 1, 8, 8, 64, true")
    # The full-size blocks' loops first, then the half-size blocks' (2 rows);
    # each split in two, the tiles that refill the ring from the row block,
    # then its last stages - 1 tiles, which refill it from the next one.
    full, full_last, half, half_last = cuda_sass.loops(kernel)
    for loop, elems in ((full, 32), (full_last, 32), (half, 16), (half_last, 16)):
        ops = loop.opcodes()
        assert (ops["FFMA"], ops["FADD"], ops["PRMT"]) == (elems, elems, elems), ops
        assert ops["HFMA2.BF16_V2"] + ops["HFMA2.MMA.BF16_V2"] == elems, ops
    assert len(full.per_iteration) <= 204, len(full.per_iteration)  # session 23's count

    with pytest.raises(cuda_sass.SassError, match=r"one\.cu: nvcc failed: .*error"):
        cuda_sass.compile_instance(kernels, instance.replace("kernel<", "kernel_absent<"), tmp_path / "bad" / "one.o",
                                   pinned_checkout, headers, fmt, nvcc)


@pytest.mark.integration
def test_float16_8_bit_multiply_adds_read_w_from_the_reuse_cache(
    pinned_checkout: Path, patched_checkout: Path, tmp_path: Path
) -> None:
    """The queue orders float multiply-adds so that consecutive ones share
    w's element (session 40): in the float16 8-bit blocks of 8 vectors most
    of the tile's 128 FFMAs read it from the reuse cache; bfloat16 blocks of
    8 vectors keep fma_accumulate's order, where none does."""
    kernels, nvcc, headers, fmt = _patched_kernels(patched_checkout, tmp_path)
    reused = {}
    for t in ("half_t", "bfloat16_t"):
        instance = f"qmv_streamed_kernel<4, 2, 8, 6, 8, 64, true, false, cutlass::{t}, uint8_t, cutlass::{t}>"
        obj = tmp_path / f"{t}.o"
        cuda_sass.compile_instance(kernels, instance, obj, pinned_checkout, headers, fmt, nvcc)
        (kernel,) = _sass_or_skip(obj)
        reused[t] = [lp.reusing("FFMA") for lp in cuda_sass.loops(kernel) if lp.opcodes()["FFMA"] >= 128]
    assert reused["half_t"] and all(n == 128 and r >= 100 for r, n in reused["half_t"]), reused
    assert reused["bfloat16_t"] and all(r == 0 for r, _ in reused["bfloat16_t"]), reused


def test_8bit_m1_device_script_profiles_each_problem_in_one_csv_then_times_them(tmp_path: Path) -> None:
    """bench/cuda_qmv_8bit_m1_device.sh with stand-ins for ncu, nvidia-smi
    and qmv_bench: one ncu run over the four problems (a child process
    each, so one CSV), then `--time` of each, stock beside."""
    root = Path(__file__).resolve().parents[2]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.txt"
    (bin_dir / "ncu").write_text(
        "#!/bin/bash\n"
        f'[ "$1" = --version ] && {{ echo "Version 0"; exit 0; }}\n'
        f'echo "ncu $*" >> {log}\n'
        'while [ "$1" != bash ]; do shift; done; shift; bash "$@"\n'
        'echo \'"ID","Kernel Name"\'\n')
    (bin_dir / "nvidia-smi").write_text("#!/bin/bash\necho 'NVIDIA H200, 580'\n")
    bench = tmp_path / "qmv_bench"
    bench.write_text(
        "#!/bin/bash\n"
        f'echo "qmv_bench $*" >> {log}\n'
        'if [ "$1" = --out ]; then echo "shape,us" >> "$2/cuda_qmv_time.csv"; fi\n')
    for f in (*bin_dir.iterdir(), bench):
        f.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    run = subprocess.run(["bash", str(root / "bench" / "cuda_qmv_8bit_m1_device.sh"), str(bench), str(out)],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    calls = log.read_text().splitlines()
    ncu = [c for c in calls if c.startswith("ncu ")]
    assert len(ncu) == 1 and "--target-processes all" in ncu[0] and "--clock-control none" in ncu[0]
    assert "stalled_barrier_per_issue_active" in ncu[0] and "pipe_fmaheavy" in ncu[0]
    specs = ["0,8,4096,14336", "1,8,4096,14336", "0,8,14336,4096", "1,8,14336,4096"]
    assert [c for c in calls if c.startswith("qmv_bench --profile")] == [
        f"qmv_bench --profile {s} 2,4,1,8,1" for s in specs]
    assert [c for c in calls if "--time" in c] == [
        f"qmv_bench --out {out} --time {s} 2,4,1,8,1" for s in specs]
    assert (out / "ncu.csv").read_text().startswith('"ID"')
    assert "NVIDIA H200" in (out / "env.txt").read_text()


def test_m1_configs_device_script_times_each_configuration_and_tables_the_medians(tmp_path: Path) -> None:
    """bench/cuda_qmv_m1_configs_device.sh with a stand-in qmv_bench that
    appends one row per configuration it is given (as `--time` does): two
    passes over eight problems, then one table row per configuration with
    the median of its two times per shape."""
    root = Path(__file__).resolve().parents[2]
    bench = tmp_path / "qmv_bench"
    bench.write_text(
        "#!/bin/bash\n"
        'out=$2; spec=$4; shift 4\n'
        'IFS=, read -r dt bits k n <<< "$spec"\n'
        'f=$out/cuda_qmv_time.csv\n'
        '[ -s "$f" ] || echo "shape,dtype,bits,impl,W,R,V,D,M,us,bytes,GBps" > "$f"\n'
        'd=$([ "$dt" = 0 ] && echo bf16 || echo fp16)\n'
        'n_runs=$(grep -c "^${k}x${n},$d,8,stock" "$f")\n'
        'echo "${k}x${n},$d,8,stock_qmv,0,0,0,0,1,$((30 + n_runs)),0,0" >> "$f"\n'
        'for c in "$@"; do IFS=, read -r W R V D M T <<< "$c"\n'
        '  impl=$([ -n "$T" ] && echo streamed_no_tail || echo streamed)\n'
        '  echo "${k}x${n},$d,8,$impl,$W,$R,$V,$D,$M,$((W + n_runs)),0,0" >> "$f"; done\n')
    bench.chmod(0o755)
    out = tmp_path / "out"
    run = subprocess.run(["bash", str(root / "bench" / "cuda_qmv_m1_configs_device.sh"), str(bench), str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    table = run.stdout.splitlines()
    assert table[0].startswith("configuration | 11008x4096 bf16 | 14336x4096 bf16 | 14336x4096 fp16")
    assert len(table) == 1 + 12 + 1  # header, 12 configurations, stock
    # The stand-in times W + pass - 1: W = 2 gives 2 and 3, median 2.5.
    assert "2,4,1,8 | " + " | ".join(["2.50"] * 8) in table
    assert "2,4,1,8 no tail | " + " | ".join(["2.50"] * 8) in table
    assert "stock | " + " | ".join(["30.50"] * 8) in table


def test_8bit_m1_device_script_fails_when_a_timing_run_fails(tmp_path: Path) -> None:
    """The script's exit status says a `--time` run failed (stand-ins as
    above; this qmv_bench fails every `--time`)."""
    root = Path(__file__).resolve().parents[2]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ncu").write_text("#!/bin/bash\necho '\"ID\"'\n")
    (bin_dir / "nvidia-smi").write_text("#!/bin/bash\necho H200\n")
    bench = tmp_path / "qmv_bench"
    bench.write_text('#!/bin/bash\nif [ "$3" = --time ]; then echo shape >> "$2/cuda_qmv_time.csv"; exit 3; fi\n')
    for f in (*bin_dir.iterdir(), bench):
        f.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    run = subprocess.run(["bash", str(root / "bench" / "cuda_qmv_8bit_m1_device.sh"), str(bench), str(out)],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 1, (run.stdout, run.stderr)


def test_8bit_m1_device_script_takes_the_configurations_from_configs(tmp_path: Path) -> None:
    """CONFIGS names the configurations the script profiles and times (the
    TMA rings of session 24 beside the register ring)."""
    root = Path(__file__).resolve().parents[2]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.txt"
    (bin_dir / "ncu").write_text('#!/bin/bash\n[ "$1" = --version ] && exit 0\n'
                                 'while [ "$#" -gt 0 ] && [ "$1" != bash ]; do shift; done; shift; bash "$@"\n')
    (bin_dir / "nvidia-smi").write_text("#!/bin/bash\necho H200\n")
    bench = tmp_path / "qmv_bench"
    bench.write_text(f'#!/bin/bash\necho "qmv_bench $*" >> {log}\n')
    for f in (*bin_dir.iterdir(), bench):
        f.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CONFIGS": "2,4,1,8,1 2,4,1,1403,1"}
    run = subprocess.run(["bash", str(root / "bench" / "cuda_qmv_8bit_m1_device.sh"), str(bench), str(out)],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    calls = log.read_text().splitlines()
    assert len(calls) == 8
    assert all(c.endswith(" 2,4,1,8,1 2,4,1,1403,1") for c in calls)


def _tma_stand_ins(tmp_path: Path, matrix_rc: int = 0) -> Path:
    """qmv_bench and qmv_matrix stand-ins for bench/cuda_qmv_tma_device.sh:
    the parity runs print their summaries; `--time` appends a stock row and
    one row per configuration, timed W + D / 1000 + the pass - 1."""
    folder = tmp_path / "build"
    folder.mkdir()
    (folder / "qmv_bench").write_text(
        "#!/bin/bash\n"
        'if [ "$1" = --quick ]; then echo "PARITY OK: 1 launches"; exit 0; fi\n'
        'out=$2; spec=$4; shift 4\n'
        'IFS=, read -r dt bits k n <<< "$spec"\n'
        'f=$out/cuda_qmv_time.csv\n'
        '[ -s "$f" ] || echo "shape,dtype,bits,impl,W,R,V,D,M,us,bytes,GBps" > "$f"\n'
        'd=$([ "$dt" = 0 ] && echo bf16 || echo fp16)\n'
        'runs=$(grep -c "^${k}x${n},$d,8,stock" "$f")\n'
        'echo "${k}x${n},$d,8,stock_qmv,0,0,0,0,1,$((30 + runs)),0,0" >> "$f"\n'
        'for c in "$@"; do IFS=, read -r W R V D M <<< "$c"\n'
        '  impl=$([ "$W" = 0 ] && echo streamed_auto || echo streamed)\n'
        '  echo "${k}x${n},$d,8,$impl,$W,$R,$V,$D,$M,$((W + D / 1000 + runs)),0,0" >> "$f"; done\n')
    (folder / "qmv_matrix").write_text(f'#!/bin/bash\necho "MATRIX PARITY OK: 2 launches"\nexit {matrix_rc}\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/bash\necho H200\n")
    for f in (*folder.iterdir(), *bin_dir.iterdir()):
        f.chmod(0o755)
    return folder


def test_tma_device_script_checks_parity_then_tables_the_medians(tmp_path: Path) -> None:
    """bench/cuda_qmv_tma_device.sh: both parity runs, then two passes of
    `--time` over seven products with the configurations of CONFIGS, and a
    table of each configuration's median per product."""
    root = Path(__file__).resolve().parents[2]
    folder = _tma_stand_ins(tmp_path)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
           "CONFIGS": "2,4,1,8,1 0,0,0,0,1 2,4,1,1403,1"}
    run = subprocess.run(["bash", str(root / "bench" / "cuda_qmv_tma_device.sh"), str(folder), str(out)],
                         capture_output=True, text=True, env=env, cwd=root)
    assert run.returncode == 0, run.stderr
    assert "PARITY OK: 1 launches" in run.stdout and "MATRIX PARITY OK: 2 launches" in run.stdout
    table = (out / "table.txt").read_text().splitlines()
    assert table[0] == ("configuration | 14336x4096 bf16 | 14336x4096 fp16 | 4096x14336 bf16 | "
                        "4096x14336 fp16 | 4096x4096 bf16 | 4096x4096 fp16 | 4096x6144 bf16")
    # Times W + D / 1000 + pass - 1, medians of the two passes.
    assert "2,4,1,8 | " + " | ".join(["2.50"] * 7) in table
    assert "2,4,1,1403 | " + " | ".join(["3.50"] * 7) in table
    assert "dispatch | " + " | ".join(["0.50"] * 7) in table
    assert "stock | " + " | ".join(["30.50"] * 7) in table


def test_tma_device_script_fails_when_a_parity_run_fails(tmp_path: Path) -> None:
    """The exit status says the configuration matrix failed (its stand-in
    exits 1), though the timing ran."""
    root = Path(__file__).resolve().parents[2]
    folder = _tma_stand_ins(tmp_path, matrix_rc=1)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "CONFIGS": "2,4,1,8,1"}
    run = subprocess.run(["bash", str(root / "bench" / "cuda_qmv_tma_device.sh"), str(folder), str(out)],
                         capture_output=True, text=True, env=env, cwd=root)
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert (out / "table.txt").read_text().startswith("configuration | ")
