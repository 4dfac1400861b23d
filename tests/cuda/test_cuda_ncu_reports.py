"""bench/cuda_qmv_stalls.py and bench/cuda_qmv_ncu.py on Nsight Compute CSVs
written here, in the shapes `ncu --page source --csv` and `ncu --page details
--csv` give (column names as Nsight Compute 2025.3 writes them)."""
from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest

import cuda_qmv_stalls  # bench/ (conftest puts it on sys.path)

ROOT = Path(__file__).resolve().parents[2]
REASONS = ["stall_barrier", "stall_long_sb", "stall_math", "stall_not_selected", "stall_selected", "stall_wait"]


def _source_csv(rows: list[tuple[str, str, int, dict[str, int]]]) -> str:
    header = ["Address", "Source", "Warp Stall Sampling (All Samples)", "# Samples",
              "Instructions Executed"] + REASONS + [f"{r} (Not Issued)" for r in REASONS]
    out = io.StringIO()
    out.write("==PROF== Connected to process 1 (qmv_bench)\n")
    out.write('"Kernel Name","void qmv_streamed_kernel<4, 2, 8, 3>(...)",\n')
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(header)
    for addr, sass, execd, stalls in rows:
        total = sum(stalls.values())
        w.writerow([addr, sass, total, total, execd] + [stalls.get(r, 0) for r in REASONS]
                   + [0] * len(REASONS))
    return out.getvalue()


ROWS = [
    ("0x7f00000a4800", "      IMAD.X R175, RZ, RZ, R175, P2", 100, {"stall_math": 30, "stall_not_selected": 50}),
    ("0x7f00000a4810", "      FFMA R10, R8, R9, R10", 800, {"stall_selected": 60, "stall_wait": 10}),
    ("0x7f00000a4820", " @!P0 HADD2.F32 R152, -RZ, R167.H0_H0", 200, {"stall_math": 10, "stall_selected": 20}),
    ("0x7f00000a4830", "      BAR.SYNC.DEFER_BLOCKING 0x0", 100, {"stall_long_sb": 20}),
]


def test_stalls_summarize_reasons_opcodes_and_worst_instructions(tmp_path: Path) -> None:
    path = tmp_path / "src.csv"
    path.write_text(_source_csv(ROWS))
    instrs = cuda_qmv_stalls.read(str(path))
    assert [i.opcode for i in instrs] == ["IMAD", "FFMA", "HADD2", "BAR"]  # predicate and modifiers dropped
    text = cuda_qmv_stalls.report(instrs, top=2)
    lines = text.splitlines()
    assert lines[0] == "total samples 200, instructions executed 1200"
    assert "  stall_selected           0.400" in lines  # 80 of 200
    assert "  stall_math               0.200" in lines
    # IMAD: 80 of 200 samples, 100 of 1200 executed; FFMA 70 / 800.
    assert "  IMAD       0.400  0.083" in lines and "  FFMA       0.350  0.667" in lines
    top = text.split("== top by stall_not_selected\n")[1].splitlines()[0]
    assert "IMAD.X R175, RZ, RZ, R175, P2" in top and top.rstrip().endswith("50 execd 100")
    assert "== top by stall_selected" not in text  # issuing is not a stall


def test_stalls_rejects_a_csv_that_is_not_a_source_page(tmp_path: Path) -> None:
    path = tmp_path / "details.csv"
    path.write_text('"ID","Kernel Name","Metric Name","Metric Value"\n')
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "cuda_qmv_stalls.py"), str(path)],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert r.stderr.strip() == f"{path}: no '\"Address\"' header row (not an ncu --page source CSV)"


@pytest.mark.parametrize("with_pipes", [True, False])
def test_ncu_summary_prints_the_pipes_where_profiled(tmp_path: Path, with_pipes: bool) -> None:
    metrics = [("Duration", "57700"), ("Registers Per Thread", "201"),
               ("smsp__average_warps_issue_stalled_wait_per_issue_active.ratio", "0.32")]
    if with_pipes:
        metrics += [("sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active", "25.4"),
                    ("sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active", "45.1")]
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(["ID", "Kernel Name", "Grid Size", "Block Size", "Metric Name", "Metric Value"])
    for name, value in metrics:
        w.writerow(["0", "void qmv_streamed_kernel<4, 2, 8, 3>(const T *)", "(1792, 1, 1)", "(32, 4, 1)",
                    name, value])
    path = tmp_path / "ncu.csv"
    path.write_text("==PROF== Disconnected\n" + out.getvalue())
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "cuda_qmv_ncu.py"), str(path)],
                       capture_output=True, text=True, check=True)
    lines = r.stdout.splitlines()
    assert lines[1] == "  us 57.7; regs 201"
    assert ("  pipes (% of peak, active): fmaheavy 25, alu 45" in lines) == with_pipes
    assert lines[-1] == "  stalls (cycles per issued instruction): wait 0.32"
