"""Compile emulator translation units into shared libraries, cached by content."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from overlay_tool.errors import EmulatorError, MissingTool

SHIM_DIR = Path(__file__).parent / "shim"
SHIM_FILES = ("metal_shim.h", "emu_runtime.h")


def default_cache_dir() -> Path:
    env = os.environ.get("MLX_OVERLAY_EMULATOR_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mlx-overlay" / "emulator"


def compiler() -> str:
    cxx = os.environ.get("CXX", "g++")
    path = shutil.which(cxx)
    if not path:
        raise MissingTool(f"C++ compiler '{cxx}' not found (install g++, or set CXX)")
    return path


@lru_cache(maxsize=None)
def compiler_id(cxx: str) -> str:
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise MissingTool(f"C++ compiler '{cxx}' does not run ({e})") from e
    return out.splitlines()[0] if out else cxx


@lru_cache(maxsize=None)
def cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    m = re.search(r"^flags\s*:(.*)$", text, re.M)
    return frozenset(m.group(1).split()) if m else frozenset()


def has_fma() -> bool:
    import platform

    if platform.machine() in ("aarch64", "arm64"):
        return True  # FMA is part of the base ARMv8 ISA
    return "fma" in cpu_flags()


def flags(*, contract: bool, opt: str = "-O2", defines: dict[str, str] | None = None) -> list[str]:
    import shlex

    f = [
        "-std=c++17", *shlex.split(opt), "-fPIC", "-shared", "-fvisibility=hidden",
        "-fno-strict-aliasing",  # kernels read uint8_t buffers through uint16_t*
        "-fno-fast-math", "-fno-exceptions", "-fno-rtti",
        "-Wno-attributes", "-Wno-unknown-pragmas", "-Wno-ignored-attributes",
    ]
    import platform

    is_x86 = platform.machine() in ("x86_64", "AMD64")
    if contract:
        if not has_fma():
            raise EmulatorError(
                "contract=True needs a CPU with FMA (this one has none): cannot model contraction"
            )
        # GCC forms FMAs in its widening_mul pass, which -O1 runs only with
        # -fexpensive-optimizations (on by default from -O2).
        f += ["-ffp-contract=fast", "-fexpensive-optimizations"] + (["-mfma"] if is_x86 else [])
    else:
        f += ["-ffp-contract=off"]
    if is_x86 and "f16c" in cpu_flags():
        f += ["-mf16c"]  # hardware float<->half conversion; same rounding (RNE)
    for k, v in (defines or {}).items():
        f.append(f"-D{k}={v}")
    return f


def shim_digest() -> str:
    h = hashlib.sha256()
    for name in SHIM_FILES:
        h.update(name.encode())
        h.update((SHIM_DIR / name).read_bytes())
    return h.hexdigest()


def library_key(source: str, flag_list: list[str]) -> str:
    cxx = compiler()
    h = hashlib.sha256()
    for part in (source, "\0".join(flag_list), compiler_id(cxx), shim_digest(), "v1"):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


class Pending:
    """A compile under way (so several can run side by side)."""

    def __init__(self, source: str, flag_list: list[str], cache_dir: Path):
        self.key = library_key(source, flag_list)
        cache_dir.mkdir(parents=True, exist_ok=True)
        self.so = cache_dir / f"{self.key}.so"
        self.cpp = cache_dir / f"{self.key}.cpp"
        self.proc: subprocess.Popen | None = None
        if self.so.exists():
            return
        self.cpp.write_text(source)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.key}.", suffix=".so", dir=cache_dir)
        os.close(fd)
        self.tmp = Path(tmp)
        self.cmd = [compiler(), *flag_list, "-I", str(SHIM_DIR), "-o", str(self.tmp), str(self.cpp)]
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def wait(self) -> Path:
        if self.proc is None:
            return self.so
        out, _ = self.proc.communicate()
        if self.proc.returncode != 0:
            self.tmp.unlink(missing_ok=True)
            log = self.so.with_suffix(".log")
            log.write_text(out)
            lines = [ln for ln in out.splitlines() if re.search(r":\d+(:\d+)?: (fatal )?error:", ln)]
            first = lines[0] if lines else (out.strip().splitlines() or ["(no output)"])[0]
            raise EmulatorError(
                f"compile error: {first.strip()}",
                hint=f"full compiler output: {log}; translation unit: {self.cpp}",
            )
        os.replace(self.tmp, self.so)
        return self.so


def compile_library(source: str, flag_list: list[str], cache_dir: Path) -> Path:
    return Pending(source, flag_list, cache_dir).wait()
