#!/usr/bin/env python3
"""Build (and optionally run) the CUDA qmv parity/timing harness.

Compiles the kernel part of MLX's mlx/backend/cuda/quantized/qmm/qmv.cu twice
with nvcc for sm_90a, against the CUTLASS/CuTe/CCCL headers that the
mlx-cuda-13 wheel ships: once as it is at the pin (stock) and once with the
project's patch applied (patched; with the kernel part of the header it
includes, qmv_streamed.cuh, in place of the #include line). Each build renames the mlx namespace
(-Dmlx=mlx_stock / mlx_patched) so the two sets of kernels stay apart, and
exports plain launch functions (cuda/qmv_entry.cu). cuda/qmv_bench.cu checks
parity (every row of every M = 1..16 streamed launch bitwise equal to the
stock kernel at M = 1) and times stock and streamed kernels.
cuda/qmv_matrix.cu (on cuda/qmv_matrix_entry.cu) checks the same over the
whole configuration matrix (bfloat16/float16/float32, affine 2/3/4/5/6/8 bits
at groups 32/64/128, mxfp4/mxfp8/nvfp4, ragged K and N, B = 1 and 3) with a
negative control, and times the widths and modes qmv_bench does not.

Typical use:

  python3 bench/cuda_qmv.py build --mlx ../mlx-at-pin --headers WHEEL/mlx/include \
      --fmt FMT/include --build-dir build/cuda_qmv
  python3 bench/cuda_qmv.py run --build-dir build/cuda_qmv --out results/

`--mlx` is a checkout of upstream mlx at the pin (unpatched); the patched
qmv.cu and qmv_streamed.cuh are made from it with `patch` and
patches/*-Stream-several-vectors-per-warp-in-CUDA-qmv.patch, unless
`--patched` names a checkout that already has the queue applied.
`--headers` is the `mlx/include` folder of an unpacked mlx-cuda-13 wheel
(`pip download mlx-cuda-13==0.32.1 --no-deps`, then unzip), or pass
`--wheel FILE.whl` to unpack it into the build folder. `--fmt` is an fmt >= 11
include folder (MLX builds with fmt 12.1.0; the host headers of the TU need it).
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CUDA_DIR = ROOT / "cuda"
QMV_REL = "mlx/backend/cuda/quantized/qmm/qmv.cu"
# The patch moves the streamed kernels, and the dequantization qmv_kernel
# shares with them, into a header that qmv.cu includes; one source per
# element type instantiates them, so that they build in parallel.
STREAMED_REL = "mlx/backend/cuda/quantized/qmm/qmv_streamed.cuh"
STREAMED_SOURCES = tuple(f"mlx/backend/cuda/quantized/qmm/qmv_streamed_{t}.cu"
                         for t in ("bfloat16", "float16", "float32"))
PATCH_GLOB = "*-Stream-several-vectors-per-warp-in-CUDA-qmv.patch"

# The flags MLX's CMake uses for its CUDA sources (mlx/backend/cuda/CMakeLists.txt).
SUPPRESS = "186,2908,2361,27,997,1394,20011,20208,177,550".split(",")
ARCH = ["-gencode=arch=compute_90a,code=sm_90a"]
NVFLAGS = [
    "-std=c++20",
    "-O3",
    "--extended-lambda",
    "--expt-relaxed-constexpr",
    "-Xcompiler=-fno-strict-aliasing",
    "-Xcudafe=" + ",".join(f"--diag_suppress={d}" for d in SUPPRESS),
    "-DMLX_USE_CUDA",
    "-DFMT_HEADER_ONLY=1",
    "-Xcompiler=-fPIC",  # the entry objects also go into libqmv_probe.so
]


class HarnessError(RuntimeError):
    pass


def kernel_part(source: str, name: str) -> str:
    """A source's includes and kernels: everything up to `} // namespace cu`,
    closed (the host side after it is MLX's and is not needed)."""
    marker = "} // namespace cu\n"
    i = source.find(marker)
    if i < 0:
        raise HarnessError(f"{name}: no '{marker.strip()}' line")
    return source[: i + len(marker)] + "\n} // namespace mlx::core\n"


def extract_kernels(qmv_cu: str, included: dict[str, str] | None = None) -> str:
    """The kernel part of qmv.cu, with the kernel part of each header in
    `included` (path in the checkout: text) in place of its #include line:
    the patched qmv.cu includes the streamed kernels' header."""
    kernels = kernel_part(qmv_cu, QMV_REL)
    for rel, text in (included or {}).items():
        line = f'#include "{rel}"\n'
        if line not in kernels:
            raise HarnessError(f"{QMV_REL}: does not include {rel}")
        kernels = kernels.replace(line, kernel_part(text, rel))
    return kernels


def patched_kernels(checkout: Path) -> str:
    """extract_kernels of a patched checkout's qmv.cu and the header it
    includes (when the checkout has it)."""
    header = checkout / STREAMED_REL
    included = {STREAMED_REL: header.read_text()} if header.is_file() else {}
    return extract_kernels((checkout / QMV_REL).read_text(), included)


def file_section(patch_text: str, path: str) -> str | None:
    """The part of a (git format-patch) patch that changes `path`, or None."""
    sections = re.split(r"(?m)^(?=diff --git )", patch_text)
    for sec in sections:
        if sec.startswith(f"diff --git a/{path} b/{path}"):
            return sec
    return None


def parse_ptxas(log: str) -> list[dict]:
    """Kernel name (mangled), registers, stack and spill bytes from `ptxas -v`."""
    rows = []
    current = None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\S+)' for '(sm_\w+)'", line)
        if m:
            current = {"kernel": m.group(1), "arch": m.group(2)}
            continue
        m = re.search(
            r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
            line,
        )
        if m and current is not None:
            current.update(
                stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3))
            )
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and current is not None:
            current["regs"] = int(m.group(1))
            rows.append(current)
            current = None
    return rows


def demangle(names: list[str]) -> list[str]:
    tool = shutil.which("c++filt") or shutil.which("cu++filt")
    if not tool:
        return names
    out = subprocess.run(
        [tool], input="\n".join(names), capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return out if len(out) == len(names) else names


def describe(kernel: str) -> str:
    """Short form: qmv_streamed_kernel<rows, V, D, E, group, bias, residue, T, Q>."""
    s = re.sub(r"mlx_\w+::core::cu::", "", kernel)
    s = s.replace("cutlass::", "")
    s = re.sub(r"integer_subbyte<(\d), false>", r"u\1", s)
    s = s.replace("unsigned char", "u8").replace("bfloat16_t", "bf16").replace("half_t", "fp16")
    s = re.sub(r"^void ", "", s)
    s = re.sub(r"\(.*$", "", s)
    return s


def ptxas_table(log: str) -> str:
    rows = parse_ptxas(log)
    names = demangle([r["kernel"] for r in rows])
    lines = ["kernel | regs | stack | spill st/ld (bytes)", "---|---|---|---"]
    for r, n in sorted(zip(rows, names), key=lambda t: describe(t[1])):
        lines.append(
            f"{describe(n)} | {r['regs']} | {r.get('stack', 0)} | "
            f"{r.get('spill_st', 0)}/{r.get('spill_ld', 0)}"
        )
    return "\n".join(lines) + "\n"


# The tables a build writes (cmd_build), each in sections ("## patched" ...).
PTXAS_TABLES = ("ptxas.md", "ptxas_matrix.md")


def read_ptxas_table(text: str) -> dict[tuple[str, str], str]:
    """(section, kernel) -> "regs | stack | spills" of one ptxas table."""
    rows: dict[tuple[str, str], str] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        elif " | " in line and not line.startswith(("kernel |", "---")):
            kernel, rest = line.split(" | ", 1)
            rows[(section, kernel)] = rest
    return rows


def ptxas_changes(old: str, new: str) -> tuple[int, list[str]]:
    """How many kernels two builds' tables share, and a line per kernel whose
    registers, stack or spills differ or that only one build has. An edit to
    one kernel can move ptxas's allocation of others (session 44: 5-12% on
    kernels the edit did not touch), so a fold lists what moved."""
    a, b = read_ptxas_table(old), read_ptxas_table(new)
    lines = []
    for key in sorted(a.keys() | b.keys()):
        was, now = a.get(key, "(absent)"), b.get(key, "(absent)")
        if was != now:
            lines.append(f"{key[0]}: {key[1]}: {was} -> {now}")
    return len(a.keys() & b.keys()), lines


def cmd_ptxas_diff(args: argparse.Namespace) -> int:
    old, new = Path(args.old), Path(args.new)
    found = False
    for name in PTXAS_TABLES:
        if not (old / name).is_file() or not (new / name).is_file():
            continue
        found = True
        shared, lines = ptxas_changes((old / name).read_text(), (new / name).read_text())
        print(f"{name}: {len(lines)} changed of {shared} kernels in both (regs | stack | spill st/ld)")
        for line in lines:
            print(f"  {line}")
    if not found:
        raise HarnessError(f"no {' or '.join(PTXAS_TABLES)} in both {old} and {new}")
    return 0


def run(cmd: list[str], log: Path | None = None) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True)
    text = p.stdout + p.stderr
    if log is not None:
        log.write_text(" ".join(cmd) + "\n" + text)
    if p.returncode != 0:
        raise HarnessError(f"command failed ({p.returncode}): {' '.join(cmd[:3])} ...\n{text[-4000:]}")
    return text


def make_patched_tree(stock: Path, patch_file: Path, dest: Path) -> None:
    """qmv.cu and the streamed kernels' header under dest, as patch_file
    makes them from the stock checkout."""
    text = patch_file.read_text()
    sections = [file_section(text, rel) for rel in (QMV_REL, STREAMED_REL)]
    if sections[0] is None:
        raise HarnessError(f"{patch_file.name}: does not change {QMV_REL}")
    patch = shutil.which("patch")
    if not patch:
        raise HarnessError("the 'patch' program is needed to make the patched qmv.cu")
    if dest.exists():
        shutil.rmtree(dest)
    (dest / QMV_REL).parent.mkdir(parents=True)
    shutil.copy(stock / QMV_REL, dest / QMV_REL)
    tmp_patch = dest / "qmv.patch"
    tmp_patch.write_text("".join(s for s in sections if s))
    run([patch, "-s", "-p1", "-d", str(dest), "-i", str(tmp_patch)])


def find_nvcc(name: str) -> str:
    nvcc = shutil.which(name)
    if not nvcc:
        raise HarnessError(f"{name}: nvcc not found")
    return nvcc


def cmd_build(args: argparse.Namespace) -> int:
    nvcc = find_nvcc(args.nvcc)
    bdir = Path(args.build_dir).resolve()
    bdir.mkdir(parents=True, exist_ok=True)
    mlx = Path(args.mlx).resolve()
    headers = Path(args.headers).resolve() if args.headers else None
    if args.wheel:
        with zipfile.ZipFile(args.wheel) as z:
            members = [n for n in z.namelist() if n.startswith("mlx/include/")]
            z.extractall(bdir / "wheel", members)
        headers = bdir / "wheel" / "mlx" / "include"
    if headers is None or not (headers / "cutlass").is_dir():
        raise HarnessError("--headers (a wheel's mlx/include with cutlass/, cute/, cccl/) is needed")
    stock_qmv = mlx / QMV_REL
    if not stock_qmv.is_file():
        raise HarnessError(f"{stock_qmv}: not found (is --mlx a checkout of mlx?)")
    (bdir / "stock_kernels.cuh").write_text(extract_kernels(stock_qmv.read_text()))
    if args.patched:
        patched = Path(args.patched).resolve()
    else:
        patches = sorted((ROOT / "patches").glob(PATCH_GLOB))
        if not patches:
            raise HarnessError(f"patches/{PATCH_GLOB}: not found")
        patched = bdir / "patched"
        make_patched_tree(mlx, patches[0], patched)
    (bdir / "patched_kernels.cuh").write_text(patched_kernels(patched))

    incs = []
    if args.fmt:
        incs.append(f"-I{Path(args.fmt).resolve()}")
    incs += [f"-I{headers / 'cccl'}", f"-I{mlx}", "-isystem", str(headers), f"-I{bdir}", f"-I{CUDA_DIR}"]
    base = [nvcc] + NVFLAGS + ARCH + incs + (["-DQMV_LEAN"] if args.lean else [])
    # --sweep: qmv_matrix also times explicit fp-mode configurations (--sweep).
    sweep = ["-DQMV_MATRIX_SWEEP"] if args.sweep else []
    jobs = {
        "stock": base
        + ["-Xptxas", "-v", "-Dmlx=mlx_stock", "-DQMV_PREFIX=stock_",
           '-DQMV_KERNELS="stock_kernels.cuh"', "-c", str(CUDA_DIR / "qmv_entry.cu"),
           "-o", str(bdir / "stock_entry.o")],
        "patched": base
        + ["-Xptxas", "-v", "-Dmlx=mlx_patched", "-DQMV_PREFIX=patched_",
           '-DQMV_KERNELS="patched_kernels.cuh"', "-DQMV_HAVE_STREAMED", "-c",
           str(CUDA_DIR / "qmv_entry.cu"), "-o", str(bdir / "patched_entry.o")],
        # The configuration matrix (every dtype, width, group and fp mode):
        # stock launcher and negative control, patched dispatch.
        "stock_matrix": base
        + ["-Xptxas", "-v", "-Dmlx=mlx_stockm", '-DQMV_KERNELS="stock_kernels.cuh"',
           "-c", str(CUDA_DIR / "qmv_matrix_entry.cu"), "-o", str(bdir / "stock_matrix.o")],
        "patched_matrix": base
        + ["-Xptxas", "-v", "-Dmlx=mlx_patchedm", '-DQMV_KERNELS="patched_kernels.cuh"',
           "-DQMV_HAVE_STREAMED", *sweep, "-c", str(CUDA_DIR / "qmv_matrix_entry.cu"),
           "-o", str(bdir / "patched_matrix.o")],
        # The pin's qmm_sm80_kernel, the M >= 8 baseline, timed beside qmv.
        "qmm_sm80": base
        + ["-Xptxas", "-v", "-Dmlx=mlx_stockq", "-c", str(CUDA_DIR / "qmm_sm80_entry.cu"),
           "-o", str(bdir / "qmm_sm80_entry.o")],
        "matrix": [nvcc, "-std=c++17", "-O2"] + ARCH + sweep
        + [f"-I{CUDA_DIR}", "-c", str(CUDA_DIR / "qmv_matrix.cu"), "-o", str(bdir / "qmv_matrix.o")],
        "main": [nvcc, "-std=c++17", "-O2"] + ARCH
        + [f"-I{CUDA_DIR}", "-c", str(CUDA_DIR / "qmv_bench.cu"), "-o", str(bdir / "qmv_bench.o")],
        "probe": [nvcc, "-std=c++17", "-O2", "-Xcompiler=-fPIC"] + ARCH
        + [f"-I{CUDA_DIR}", "-c", str(CUDA_DIR / "qmv_probe.cu"), "-o", str(bdir / "qmv_probe.o")],
    }
    with ThreadPoolExecutor(max_workers=args.jobs) as ex:
        futs = {k: ex.submit(run, cmd, bdir / f"{k}.log") for k, cmd in jobs.items()}
        logs = {k: f.result() for k, f in futs.items()}
    # qmv_bench takes its negative control (stock_qmv_other_order) from the
    # matrix's stock object.
    run([nvcc] + ARCH + [str(bdir / "qmv_bench.o"), str(bdir / "stock_entry.o"),
         str(bdir / "patched_entry.o"), str(bdir / "stock_matrix.o"),
         str(bdir / "qmm_sm80_entry.o"), "-o", str(bdir / "qmv_bench"),
         "-Xcompiler", "-static-libstdc++", "-Xcompiler", "-static-libgcc"],
        bdir / "link.log")
    run([nvcc] + ARCH + [str(bdir / "qmv_matrix.o"), str(bdir / "stock_matrix.o"),
         str(bdir / "patched_matrix.o"), "-o", str(bdir / "qmv_matrix"),
         "-Xcompiler", "-static-libstdc++", "-Xcompiler", "-static-libgcc"],
        bdir / "link_matrix.log")
    # The probe's harness substrate (overlay_tool/probe_harness.py) loads this
    # into a Python that has imported numpy. Its static libstdc++ stays hidden:
    # exported, its unique symbols (the locale facets' ids) would bind to
    # numpy's libstdc++.so.6 and break its own locale (bench/cuda_stdcxx.sh).
    run([nvcc] + ARCH + ["-shared", str(bdir / "qmv_probe.o"), str(bdir / "stock_entry.o"),
         str(bdir / "patched_entry.o"), "-o", str(bdir / "libqmv_probe.so"),
         "-Xcompiler", "-static-libstdc++", "-Xcompiler", "-static-libgcc",
         "-Xlinker", "--exclude-libs,ALL"],
        bdir / "link_probe.log")
    table = ("## stock\n" + ptxas_table(logs["stock"]) + "\n## patched\n" + ptxas_table(logs["patched"])
             + "\n## stock qmm_sm80\n" + ptxas_table(logs["qmm_sm80"]))
    matrix = ("## stock (configuration matrix)\n" + ptxas_table(logs["stock_matrix"])
              + "\n## patched (configuration matrix)\n" + ptxas_table(logs["patched_matrix"]))
    (bdir / "ptxas_matrix.md").write_text(matrix)
    (bdir / "ptxas.md").write_text(table)
    print(table)
    print(f"built {bdir / 'qmv_bench'} and {bdir / 'qmv_matrix'}")
    return 0


def wheel_gencodes(setup_py: str) -> list[str]:
    """nvcc -gencode flags for the CUDA architectures MLX's wheels are built
    for (setup.py's cuda_archs: "80-real" is sm_80 code, "120-virtual" PTX)."""
    flags = []
    for arch, kind in dict.fromkeys(re.findall(r'"(\d+a?)-(real|virtual)"', setup_py)):
        code = f"sm_{arch}" if kind == "real" else f"compute_{arch}"
        flags.append(f"-gencode=arch=compute_{arch},code={code}")
    return flags


def whole_qmv_command(nvcc: str, checkout: Path, headers: Path, fmt: Path,
                      flags: list[str], obj: Path, source: str = QMV_REL) -> list[str]:
    """nvcc on a checkout's whole qmv.cu (or another of its CUDA sources:
    host and device, one thread per -gencode in `flags`) with the flags of
    MLX's CMake."""
    common = [f for f in NVFLAGS if f != "-Xcompiler=-fPIC"]
    return [nvcc, *common, *flags, "--threads", "0", f"-I{fmt}", f"-I{headers / 'cccl'}",
            f"-I{checkout}", "-isystem", str(headers), "-c", str(checkout / source), "-o", str(obj)]


# nvcc --time phases that belong to one architecture's device code (the
# rest, cudafe++ and the host compile, is the host side).
DEVICE_PHASES = ("gcc (preprocessing 1)", "cicc", "ptxas", "")


def phase_seconds(time_csv: str) -> dict[str, float]:
    """Seconds per architecture ("sm_90a", or "compute_120 (PTX)" for a
    PTX-only target) and for the host side ("host"), from an `nvcc --time`
    CSV."""
    rows = list(csv.reader(io.StringIO(time_csv), skipinitialspace=True))
    head = [h.strip() for h in rows[0]]
    seconds: dict[str, float] = {}
    real: set[str] = set()
    for row in rows[1:]:
        rec = dict(zip(head, (c.strip() for c in row)))
        if rec.get("unit") != "ms" or rec.get("phase name") == "nvcc (driver)":
            continue
        arch = re.sub(r"^(compute|sm)_", "", rec.get("arch", ""))
        key = arch if arch and rec.get("phase name") in DEVICE_PHASES else "host"
        if rec.get("phase name") == "ptxas":
            real.add(arch)
        seconds[key] = seconds.get(key, 0.0) + float(rec["metric"]) / 1000
    return {(k if k == "host" else f"sm_{k}" if k in real else f"compute_{k} (PTX)"): v
            for k, v in seconds.items()}


def cmd_compile_time(args: argparse.Namespace) -> int:
    nvcc = find_nvcc(args.nvcc)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    pinned, patched = Path(args.mlx).resolve(), Path(args.patched).resolve()
    headers, fmt = Path(args.headers).resolve(), Path(args.fmt).resolve()
    setup = pinned / "setup.py"
    if args.archs:
        gencodes = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in args.archs.split(",")]
    elif setup.is_file():
        gencodes = wheel_gencodes(setup.read_text())
    else:
        raise HarnessError(f"{setup}: not found (give --archs)")
    runs = [("stock", pinned, QMV_REL), ("patched", patched, QMV_REL)]
    runs += [(f"patched_{Path(s).stem}", patched, s) for s in STREAMED_SOURCES if (patched / s).is_file()]
    if args.also:
        runs.append((Path(args.also).stem, pinned, args.also))
    results: dict[str, tuple[float, dict[str, float]]] = {}
    for side, checkout, source in runs:
        if not (checkout / source).is_file():
            raise HarnessError(f"{checkout / source}: not found")
        csv_path = out / f"{side}_time.csv"
        csv_path.unlink(missing_ok=True)
        cmd = whole_qmv_command(nvcc, checkout, headers, fmt, ["--time", str(csv_path), *gencodes],
                                out / f"{side}.o", source)
        print("+ " + " ".join(cmd), flush=True)
        start = time.monotonic()
        run(cmd, out / f"{side}.log")
        wall = time.monotonic() - start
        text = csv_path.read_text()
        results[side] = (wall, phase_seconds(text))
        # Kept without this machine's paths: the checkout, the output folder
        # and nvcc's temporary files by name.
        text = text.replace(str(checkout), side).replace(str(out), ".")
        csv_path.write_text(re.sub(r"[^ ,]*/(tmpxft_)", r"\1", text))
    also = results.pop(Path(args.also).stem) if args.also else None
    table = compile_time_table(results, os.cpu_count() or 0)
    if also:
        wall, parts = also
        table += ("\n`" + args.also + "` (stock): " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items())
                  + f", all parts {sum(parts.values()):.1f}, wall {wall:.1f}\n")
    (out / "compile_time.md").write_text(table)
    print(table)
    return 0


def compile_time_table(results: dict[str, tuple[float, dict[str, float]]], cores: int) -> str:
    """Seconds per part (architecture, host) of the stock qmv.cu and of each
    patched source ("stock", "patched", "patched_<stem>": wall seconds and
    phase_seconds), with the patched sources' sum and the longest of them,
    each against stock."""
    stock_wall, stock = results["stock"]
    files = {k: v for k, v in results.items() if k != "stock"}
    names = ["qmv.cu" if k == "patched" else k.removeprefix("patched_") + ".cu" for k in files]
    keys = list(dict.fromkeys(k for _, parts in files.values() for k in parts if k != "host")) + ["host"]

    def ratio(a: float, b: float) -> str:
        return f"{b / a:.2f}" if a else ""

    lines = [f"nvcc on each whole source, `--threads 0` ({cores} cores); seconds", "",
             "| part | stock qmv.cu | " + " | ".join(f"patched {n}" for n in names)
             + " | patched, all | all / stock |",
             "|---" * (len(names) + 4) + "|"]
    rows = [(k, stock.get(k, 0.0), [parts.get(k, 0.0) for _, parts in files.values()]) for k in keys]
    rows.append(("all parts", sum(stock.values()), [sum(parts.values()) for _, parts in files.values()]))
    rows.append(("wall", stock_wall, [wall for wall, _ in files.values()]))
    for k, a, bs in rows:
        lines.append(f"| {k} | {a:.1f} | " + " | ".join(f"{b:.1f}" for b in bs)
                     + f" | {sum(bs):.1f} | {ratio(a, sum(bs))} |")
    longest = max(range(len(names)), key=lambda i: rows[-2][2][i])
    lines += ["", f"Longest patched source: {names[longest]}, {rows[-2][2][longest]:.1f} s of all parts "
              f"({ratio(rows[-2][1], rows[-2][2][longest])} x stock qmv.cu's {rows[-2][1]:.1f} s)."]
    return "\n".join(lines) + "\n"


def cmd_run(args: argparse.Namespace) -> int:
    bdir = Path(args.build_dir).resolve()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.matrix or args.sweep:
        cmd = [str(bdir / "qmv_matrix"), "--out", str(out)]
        cmd += ["--sweep"] if args.sweep else ["--no-time"] if args.quick else []
        return subprocess.run(cmd).returncode
    cmd = [str(bdir / "qmv_bench"), "--out", str(out)] + (["--quick"] if args.quick else [])
    cmd += ["--ragged"] if args.ragged else []
    p = subprocess.run(cmd)
    if (bdir / "ptxas.md").is_file():
        shutil.copy(bdir / "ptxas.md", out / "ptxas.md")
    return p.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="compile the stock and patched TUs and the harness")
    b.add_argument("--mlx", required=True, help="checkout of upstream mlx at the pin")
    b.add_argument("--patched", help="checkout with the queue applied (default: apply the CUDA patch)")
    b.add_argument("--headers", help="mlx/include of an unpacked mlx-cuda-13 wheel")
    b.add_argument("--wheel", help="mlx-cuda-13 wheel to take the headers from")
    b.add_argument("--fmt", help="fmt >= 11 include folder")
    b.add_argument("--nvcc", default=os.environ.get("NVCC", "nvcc"))
    b.add_argument("--build-dir", default=str(ROOT / "build" / "cuda_qmv"))
    b.add_argument("--jobs", type=int, default=3)
    b.add_argument("--lean", action="store_true",
                   help="instantiate only the configurations the dispatch uses (faster build)")
    b.add_argument("--sweep", action="store_true",
                   help="build qmv_matrix with the fp-mode configuration sweep (+~5 min)")
    b.set_defaults(func=cmd_build)
    r = sub.add_parser("run", help="run the harness (needs an sm_90 GPU)")
    r.add_argument("--build-dir", default=str(ROOT / "build" / "cuda_qmv"))
    r.add_argument("--out", default=".")
    r.add_argument("--quick", action="store_true")
    r.add_argument("--ragged", action="store_true",
                   help="parity on K that is not a whole number of tiles, short timing")
    r.add_argument("--matrix", action="store_true",
                   help="run qmv_matrix (the whole configuration matrix; --quick: parity only)")
    r.add_argument("--sweep", action="store_true",
                   help="run qmv_matrix --sweep (fp-mode configurations; a build with --sweep)")
    r.set_defaults(func=cmd_run)
    t = sub.add_parser("compile-time", help="time nvcc on the stock qmv.cu and the patched sources, per architecture")
    t.add_argument("--mlx", required=True, help="checkout of upstream mlx at the pin")
    t.add_argument("--patched", required=True, help="checkout with the queue applied")
    t.add_argument("--headers", required=True, help="mlx/include of an unpacked mlx-cuda-13 wheel")
    t.add_argument("--fmt", required=True, help="fmt >= 11 include folder")
    t.add_argument("--archs", help="e.g. 90a,80 (default: the pinned setup.py's wheel architectures)")
    t.add_argument("--also", help="another CUDA source of the pinned checkout to time beside them, "
                   "e.g. mlx/backend/cuda/copy/copy_general_input.cu")
    t.add_argument("--nvcc", default=os.environ.get("NVCC", "nvcc"))
    t.add_argument("--out", default=".")
    t.set_defaults(func=cmd_compile_time)
    d = sub.add_parser("ptxas-diff", help="the kernels whose registers, stack or spills differ between two builds")
    d.add_argument("old", help="a build folder (its ptxas.md and ptxas_matrix.md)")
    d.add_argument("new", help="another build folder")
    d.set_defaults(func=cmd_ptxas_diff)
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except HarnessError as e:
        print(f"cuda_qmv: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
