#!/usr/bin/env python3
"""Summary of an Nsight Compute CSV written by cuda_qmv_device.sh --ncu
(`ncu --page details --csv` plus the per-reason stall metrics): per kernel
launch the duration, registers, occupancy, executed instructions, issue rate,
the pipes' use where profiled (sm__inst_executed_pipe_*) and the stall
reasons (cycles per issued instruction) above 0.1.

Usage: python3 bench/cuda_qmv_ncu.py NCU_CSV
"""
from __future__ import annotations

import csv
import re
import sys

KEYS = [
    ("Duration", "us", 1e-3),
    ("Registers Per Thread", "regs", 1),
    ("Dynamic Shared Memory Per Block", "smem B", 1),
    ("Theoretical Occupancy", "occ. theor. %", 1),
    ("Achieved Occupancy", "occ. achieved %", 1),
    ("Executed Instructions", "instr (M)", 1e-6),
    ("Issued Warp Per Scheduler", "issued/sched/cycle", 1),
    ("Warp Cycles Per Issued Instruction", "warp cycles/issue", 1),
    ("DRAM Throughput", "DRAM %", 1),
]


def short(name: str) -> str:
    s = re.sub(r"mlx_\w+::", "", name.replace("void ", ""))
    s = s.replace("integer_subbyte<4, 0>", "u4").replace("unsigned char", "u8")
    return re.sub(r"\(const.*$", "", s)


def main(argv: list[str]) -> int:
    lines = open(argv[1]).read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
    rows = list(csv.reader(lines[start:]))
    hdr = {h: i for i, h in enumerate(rows[0])}
    kernels: dict[str, dict] = {}
    for r in rows[1:]:
        if len(r) < len(hdr) - 5:
            continue
        key = f"{r[hdr['ID']]}: {short(r[hdr['Kernel Name']])} grid {r[hdr['Grid Size']]} block {r[hdr['Block Size']]}"
        kernels.setdefault(key, {})[r[hdr["Metric Name"]]] = r[hdr["Metric Value"]]
    for key, m in kernels.items():
        print(f"- {key}")
        vals = []
        for name, label, scale in KEYS:
            if name in m:
                v = float(m[name].replace(",", "")) * scale
                vals.append(f"{label} {v:.3g}")
        print("  " + "; ".join(vals))
        stalls = []
        for name, v in m.items():
            if "issue_stalled" in name:
                x = float(v.replace(",", ""))
                if x > 0.1:
                    stalls.append((x, name.split("stalled_")[1].replace("_per_issue_active.ratio", "")))
        pipes = [(name.split("pipe_")[1].split(".")[0], float(v.replace(",", "")))
                 for name, v in m.items() if name.startswith("sm__inst_executed_pipe_")]
        if pipes:
            print("  pipes (% of peak, active): " + ", ".join(f"{p} {x:.0f}" for p, x in pipes))
        stalls.sort(reverse=True)
        print("  stalls (cycles per issued instruction): "
              + ", ".join(f"{n} {x:.2f}" for x, n in stalls))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
