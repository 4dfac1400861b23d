"""Count the weight bytes the quantized mat-vec kernels read, on the emulator.

The emulator's kernels are compiled once more with clang at -O0 and
``-fsanitize-coverage=trace-loads``: every load the kernel source makes (one
per source-level access at -O0, with its width) calls back into a counter
that keeps the loads falling inside the weight buffer (and the scale and bias
buffers). Per threadgroup it also keeps the set of distinct bytes touched: the
traffic a threadgroup causes when its own re-reads hit cache but nothing is
shared between threadgroups, the model of a bandwidth-bound GPU.

Run ``python -m tests.kernel.traffic [patched quantized.h]`` for the table in
docs/benchmarks.md.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import math
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from overlay_tool.emulator import Emulator, quantize, round_to
from overlay_tool.emulator import build

COUNTER = r"""
#include <cstdint>
#include <vector>
namespace {
struct Range { uintptr_t lo = 0, hi = 0; };
Range g_buf[3]; // weights, scales, biases
long long g_loads[3], g_load_bytes[3], g_distinct[3];
std::vector<unsigned char> g_seen[3];
long long g_tg = -1;
}
#define EMU_NOCOV __attribute__((no_sanitize("coverage"))) __attribute__((noinline))
EMU_NOCOV static void emu_count_enter(void* const* dev, const long long* bytes,
                                       unsigned gx, unsigned gy, unsigned gz) {
  long long tg = ((long long)gz << 42) | ((long long)gy << 21) | gx;
  for (int i = 0; i < 3; i++) {
    g_buf[i].lo = (uintptr_t)dev[i];
    g_buf[i].hi = g_buf[i].lo + (uintptr_t)bytes[i];
    if (tg != g_tg) g_seen[i].assign(bytes[i], 0);
  }
  g_tg = tg;
}
EMU_NOCOV static void emu_count(const void* p, int n) {
  uintptr_t a = (uintptr_t)p;
  for (int i = 0; i < 3; i++) {
    if (a >= g_buf[i].lo && a < g_buf[i].hi) {
      g_loads[i] += 1;
      g_load_bytes[i] += n;
      for (int j = 0; j < n && a + j < g_buf[i].hi; j++) {
        unsigned char& s = g_seen[i][a + j - g_buf[i].lo];
        if (!s) { s = 1; g_distinct[i] += 1; }
      }
      return;
    }
  }
}
extern "C" {
EMU_NOCOV void __sanitizer_cov_load1(uint8_t* p) { emu_count(p, 1); }
EMU_NOCOV void __sanitizer_cov_load2(uint16_t* p) { emu_count(p, 2); }
EMU_NOCOV void __sanitizer_cov_load4(uint32_t* p) { emu_count(p, 4); }
EMU_NOCOV void __sanitizer_cov_load8(uint64_t* p) { emu_count(p, 8); }
EMU_NOCOV void __sanitizer_cov_load16(__int128* p) { emu_count(p, 16); }
EMU_NOCOV void __sanitizer_cov_trace_pc_guard_init(uint32_t*, uint32_t*) {}
EMU_NOCOV void __sanitizer_cov_trace_pc_guard(uint32_t*) {}
// __fp16 conversions for the counting build (values are not checked here).
EMU_NOCOV uint16_t __gnu_f2h_ieee(float f) {
  uint32_t u; __builtin_memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u; int e = (int)((u >> 23) & 0xff) - 127 + 15;
  if (e <= 0) return (uint16_t)sign;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  return (uint16_t)(sign | ((uint32_t)e << 10) | ((u >> 13) & 0x3ffu));
}
EMU_NOCOV float __gnu_h2f_ieee(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16; uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ffu;
  uint32_t u = e == 0 ? sign : (e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e - 15 + 127) << 23) | (m << 13)));
  float f; __builtin_memcpy(&f, &u, 4); return f;
}
EMU_NOCOV uint16_t __truncsfhf2(float f) { return __gnu_f2h_ieee(f); }
EMU_NOCOV float __extendhfsf2(uint16_t h) { return __gnu_h2f_ieee(h); }
__attribute__((visibility("default"))) EMU_NOCOV void emu_count_reset() {
  for (int i = 0; i < 3; i++) { g_loads[i] = g_load_bytes[i] = g_distinct[i] = 0; g_seen[i].clear(); }
  g_tg = -1;
}
__attribute__((visibility("default"))) EMU_NOCOV void emu_count_get(long long* out) {
  for (int i = 0; i < 3; i++) { out[3 * i] = g_loads[i]; out[3 * i + 1] = g_load_bytes[i]; out[3 * i + 2] = g_distinct[i]; }
}
}
"""


@dataclass
class Counts:
    weight_loads: int
    weight_load_bytes: int  # summed over lanes (every lane's loads)
    weight_bytes: int  # distinct bytes per threadgroup, summed over threadgroups
    sb_load_bytes: int  # scales + biases, summed over lanes
    sb_bytes: int  # scales + biases, distinct per threadgroup


class CountingEmulator(Emulator):
    """An Emulator whose kernels count their loads (clang -O0, trace-loads)."""

    def prepare(self, specs, *, jobs: int = 2) -> None:
        todo = [s for s in dict.fromkeys(specs) if s.symbol not in self._entries]
        if not todo:
            return
        src = self.source(todo)
        # Tell the counter where the buffers are as every lane enters the body.
        src = src.replace(
            "  auto* a = (emu_args*)u;\n",
            "  auto* a = (emu_args*)u;\n  emu_count_enter(a->dev, a->bytes, gx, gy, gz);\n",
        )
        src = src.replace("  a.K = K; a.N = N; a.M = M;\n",
                          "  a.K = K; a.N = N; a.M = M;\n  for (int i = 0; i < 5; i++) a.bytes[i] = bytes[i];\n")
        src = src.replace("  void* dev[5];\n", "  void* dev[5];\n  long long bytes[5];\n", 1)
        src = src.replace('#line 1 "<emulator entry points>"', COUNTER + '\n#line 1 "<emulator entry points>"')
        cxx = shutil.which("clang++")
        if cxx is None:
            raise RuntimeError("clang++ is needed to count loads")
        # clang 14 has no _Float16 on x86: __fp16 (storage only) is enough to
        # count loads; the counted kernels are not checked for their values.
        flags = ["-D_Float16=__fp16", "-std=c++17", "-O0", "-fPIC", "-shared", "-fno-strict-aliasing",
                 "-ffp-contract=off", "-w", "-fsanitize-coverage=trace-pc-guard,trace-loads"]
        key = hashlib.sha256((src + " ".join(flags) + build.shim_digest()).encode()).hexdigest()[:24]
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        so = self.cache_dir / f"count-{key}.so"
        if not so.exists():
            # Unique scratch names: other processes may build the same key.
            stem = f"count-{key}.{os.getpid()}"
            cpp = self.cache_dir / f"{stem}.cpp"
            tmp = self.cache_dir / f"{stem}.tmp.so"
            cpp.write_text(src)
            subprocess.run([cxx, *flags, "-I", str(build.SHIM_DIR), "-o", str(tmp), str(cpp)], check=True)
            tmp.replace(so)
            cpp.unlink()
        self._load(so, todo)
        lib = self._libs[-1]
        for s in todo:
            self._counter_of[s.symbol] = lib

    def __init__(self, header, **kw):
        super().__init__(header, **kw)
        self._counter_of: dict[str, ctypes.CDLL] = {}

    def count(self, kind: str, **kw) -> Counts:
        xs = np.shape(kw["x"])
        spec, _ = self.qmv_spec(
            kind, M=xs[-2], N=np.shape(kw["w"])[-2], K=xs[-1], bits=kw["bits"],
            group_size=kw["group_size"], dtype=kw["dtype"], vecs_per_tg=kw.get("vecs_per_tg"),
            fast=kw.get("fast"), B=xs[0] if len(xs) == 3 else 1,
        )
        self.prepare([spec])
        lib = self._counter_of[spec.symbol]
        lib.emu_count_reset()
        self.qmv(kind, **kw)
        out = (ctypes.c_longlong * 9)()
        lib.emu_count_get(out)
        return Counts(out[0], out[1], out[2], out[4] + out[7], out[5] + out[8])


def case(bits: int, group_size: int, dtype: str, K: int, N: int, M: int):
    rng = np.random.default_rng(0)
    wq, s, b = quantize(rng.standard_normal((N, K)).astype(np.float32), bits, group_size, dtype)
    x = round_to(rng.standard_normal((M, K)).astype(np.float32), dtype)
    return dict(w=wq, scales=s, biases=b, x=x, bits=bits, group_size=group_size, dtype=dtype)


def table(header: Path, *, K=512, N=64, bits=4, group_size=64, dtype="float16", Ms=range(1, 17)) -> str:
    emu = CountingEmulator(header)
    matrix = N * K * bits // 8
    rows = [
        f"| M | qmv / qmv_fast | qmv_wide (tile) | qmv_streamed (tile) | streamed / qmv |",
        "|---|---|---|---|---|",
    ]
    for m in Ms:
        kw = case(bits, group_size, dtype, K, N, m)
        q = emu.count("qmv_m1", **kw)
        v = -(-m // -(-m // 5))
        wd = emu.count("qmv_wide", **kw) if m >= 2 else None
        st = emu.count("qmv_streamed", **kw)
        rows.append(
            f"| {m} | {q.weight_bytes / matrix:.2f} | "
            + (f"{wd.weight_bytes / matrix:.2f} ({v})" if wd else "-")
            + f" | {st.weight_bytes / matrix:.2f} ({v}) | {st.weight_bytes / q.weight_bytes:.2f} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(Path(sys.argv[1])))
