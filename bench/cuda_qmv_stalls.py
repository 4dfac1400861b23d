#!/usr/bin/env python3
"""Summary of Nsight Compute's per-instruction stall sampling (a CSV of
`ncu --section SourceCounters --page source --print-source sass --csv`, as
bench/cuda_qmv_open_cells_device.sh and cuda_qmv_full_device.sh write):
the share of all warp samples per stall reason, the share of samples and of
executed instructions per opcode, and the instructions with the most samples
of the largest reasons.

Usage: python3 bench/cuda_qmv_stalls.py SRC_CSV [--top N]
"""
from __future__ import annotations

import argparse
import csv
import re
from collections import Counter
from dataclasses import dataclass


@dataclass
class Instr:
    address: str
    sass: str
    executed: int
    stalls: dict[str, int]  # reason -> samples (all samples)

    @property
    def opcode(self) -> str:
        """The mnemonic without predicate, modifiers or operands: FFMA, LDS, HADD2."""
        words = self.sass.split()
        if words and words[0].startswith("@"):
            words = words[1:]
        return words[0].split(".")[0] if words else "?"


def read(path: str) -> list[Instr]:
    """The instructions of the first kernel in a --page source CSV."""
    lines = open(path).read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"Address"')), None)
    if start is None:
        raise SystemExit(f"{path}: no '\"Address\"' header row (not an ncu --page source CSV)")
    rows = csv.reader(lines[start:])
    header = next(rows)
    col = {h: i for i, h in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "(Not Issued)" not in h]
    out = []
    for r in rows:
        if len(r) != len(header):
            break  # the next kernel's name row, or the end
        out.append(Instr(r[col["Address"]], r[col["Source"]].strip(),
                         int(r[col["Instructions Executed"]] or 0),
                         {s: int(r[col[s]] or 0) for s in reasons}))
    return out


def report(instrs: list[Instr], top: int = 8) -> str:
    reasons = Counter[str]()
    by_op = Counter[str]()
    exec_op = Counter[str]()
    for ins in instrs:
        reasons.update(ins.stalls)
        by_op[ins.opcode] += sum(ins.stalls.values())
        exec_op[ins.opcode] += ins.executed
    total = sum(reasons.values()) or 1
    executed = sum(exec_op.values()) or 1
    lines = [f"total samples {total}, instructions executed {executed}"]
    lines += [f"  {r:<24} {n / total:.3f}" for r, n in reasons.most_common() if n]
    lines.append("== by opcode: share of samples, share of executed instructions")
    lines += [f"  {op:<10} {n / total:.3f}  {exec_op[op] / executed:.3f}"
              for op, n in by_op.most_common(top * 2) if n]
    for reason, n in reasons.most_common(4):
        if reason == "stall_selected" or not n:
            continue
        lines.append(f"== top by {reason}")
        worst = sorted(instrs, key=lambda i: -i.stalls[reason])[:top]
        lines += [f"  {i.address[-5:]:>6} {re.sub(r'  +', ' ', i.sass):<56} {i.stalls[reason]} "
                  f"execd {i.executed}" for i in worst if i.stalls[reason]]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args()
    print(report(read(args.csv), args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
