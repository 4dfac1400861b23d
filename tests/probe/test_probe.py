"""The end-to-end exactness probe.

The emulator substrate is core and never skipped: the patched dispatch
(qmv_streamed for M >= 2) must give bit-identical logits and the same tokens
as M = 1 decoding, and the stock dispatch (qmv_wide for M >= 2, as on Apple
GPU generation >= 15) must diverge — the negative control that proves the
probe can fail.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

from overlay_tool import probe
from overlay_tool.cli import main
from overlay_tool.probe_model import ProbeConfig, run_probe

ROOT = Path(__file__).resolve().parents[2]


# ---- the harness itself ----------------------------------------------------------


class ToyForward:
    """A deterministic fake model: logits depend on the token and the state;
    ``flip`` changes one bit of one logit in products of M >= 2 rows."""

    def __init__(self, flip: bool, vocab: int = 16) -> None:
        self.flip, self.vocab = flip, vocab

    def __call__(self, tokens, state):
        rows = []
        for t in tokens:
            state = (state * 7 + t + 1) % 1009
            rng = np.random.default_rng(state)
            rows.append(rng.standard_normal(self.vocab).astype(np.float32))
        vals = np.stack(rows)
        if self.flip and len(tokens) >= 2:
            bits = vals.view(np.uint32).copy()
            bits[-1, 3] ^= 1  # one ulp of one logit of the last row
            vals = bits.view(np.float32)
        return vals.astype(np.float64), vals.view(np.uint32), state


def test_harness_passes_an_invariant_model():
    cfg = ProbeConfig(limit=5)
    res = run_probe(cfg, ToyForward(flip=False), 0, lambda s: s, [1, 2, 3])
    assert res.passed and len(res.checks) == 4
    assert [c.M for c in res.checks] == [2, 3, 4, 5]


def test_harness_catches_one_ulp_that_leaves_tokens_alone():
    cfg = ProbeConfig(limit=4)
    res = run_probe(cfg, ToyForward(flip=True), 0, lambda s: s, [1, 2, 3])
    assert not res.passed and res.diverged
    for c in res.checks:
        assert c.tokens_equal and not c.logits_equal
        assert c.logits_differing == 1 and c.first_position_differing == c.M - 1


# ---- the emulator substrate (core: never skipped) ----------------------------------


@pytest.mark.parametrize("dtype,limit,layers", [
    ("bfloat16", 6, 2),  # M = 2..6: tiles of 2..5 and one split tile (3 + 3)
    ("float16", 3, 1),   # half: load_vector's partial sums in half precision
])
def test_emulator_patched_passes_and_stock_diverges(stock_header, patched_header, dtype, limit, layers):
    cfg = ProbeConfig(dtype=dtype, limit=limit, layers=layers)
    rep = probe.run_emulator(cfg, stock_header, patched_header)
    arms = {a.name: a for a in rep.arms}
    assert arms["patched"].error is None, arms["patched"].error
    assert arms["stock"].error is None, arms["stock"].error
    patched, stock = arms["patched"].result, arms["stock"].result
    assert patched["kernels"] == {"M=1": "qmv_m1", "M>=2": "qmv_streamed"}
    assert [c["M"] for c in patched["checks"]] == list(range(2, limit + 1))
    assert all(c["passed"] for c in patched["checks"]), patched["checks"]
    # the negative control: qmv_wide's rows differ from M = 1 in the logit bits
    assert stock["kernels"]["M>=2"] == "qmv_wide"
    assert all(not c["logits_equal"] for c in stock["checks"]), stock["checks"]
    # both arms decode the same greedy tokens at M = 1 (the same M = 1 kernels)
    assert patched["greedy_tokens"] == stock["greedy_tokens"]
    assert rep.status == "pass" and arms["patched"].outcome == "pass"
    assert arms["stock"].outcome == "diverge"


def test_emulator_fails_when_the_patched_arm_is_not_exact(stock_header):
    """If the 'patched' header were the stock one (qmv_wide for M >= 2), the
    substrate must report a failure, not a pass."""
    cfg = ProbeConfig(limit=2, layers=1)
    rep = probe.SubstrateReport("emulator", "pass")
    arm = probe.Arm("patched", "pass", "stock header in the patched arm")
    arm.result = probe.run_emulator_arm(cfg, stock_header, "qmv_wide")
    rep.arms.append(arm)
    probe._finish(rep)
    assert rep.status == "fail" and "patched: expected pass, got diverge" in rep.reason


# ---- the MLX substrates, through a stand-in Python -----------------------------------


def fake_python(tmp_path: Path, body: str) -> str:
    path = tmp_path / "fake-python"
    path.write_text(f"#!{sys.executable}\nimport json, sys\nargs = sys.argv[1:]\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


NO_MLX = ('print(json.dumps({"error": "mlx-missing", "message": "mlx is not importable: no module"}))\n'
          "sys.exit(3)")

CANNED = '''
control = "--control" in args
route = args[args.index("--route-m2") + 1] if "--route-m2" in args else ""
assert "MLX_QMV_ROUTE" not in __import__("os").environ
diverge = control or route == "wide"
check = {"k": 1, "M": 2, "tokens_equal": True, "logits_equal": not diverge, "positions_differing": int(diverge),
         "first_position_differing": 0 if diverge else None, "logits_differing": int(diverge),
         "max_abs_diff": 0.0, "passed": not diverge}
print("some noise on stdout")
print(json.dumps({"info": {"mlx_version": "0.0+overlay", "device": args[args.index("--device") + 1]},
                  "passed": not diverge, "greedy_tokens": [1, 2], "checks": [check]}))
'''


def test_mlx_substrate_plumbing_with_a_stand_in(tmp_path):
    py = fake_python(tmp_path, CANNED)
    rep = probe.run_mlx("metal", ProbeConfig(limit=2), py)
    assert rep.status == "pass", rep.reason
    arms = {a.name: a.outcome for a in rep.arms}
    assert arms == {"default": "pass", "wide": "diverge"}
    assert rep.info["mlx_version"] == "0.0+overlay"
    rep = probe.run_mlx("cpu", ProbeConfig(limit=2), py)
    assert {a.name: a.outcome for a in rep.arms} == {"default": "pass", "control": "diverge"}


def test_mlx_substrate_not_run_without_mlx(tmp_path):
    rep = probe.run_mlx("cpu", ProbeConfig(limit=2), fake_python(tmp_path, NO_MLX))
    assert rep.status == "not run" and "not importable" in rep.reason


def test_cli_all_substrates(tmp_path, stock_header, patched_header, capsys):
    out = tmp_path / "probe.json"
    code = main(["-C", str(ROOT), "probe", "--python", fake_python(tmp_path, NO_MLX), "--limit", "3",
                 "--layers", "1", "--stock-header", str(stock_header),
                 "--patched-header", str(patched_header), "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    data = json.loads(out.read_text())
    status = {s["substrate"]: s["status"] for s in data["substrates"]}
    assert status == {"emulator": "pass", "cpu": "not run", "metal": "not run", "cuda": "not run",
                      "cuda-harness": "not run"}
    cuda = next(s for s in data["substrates"] if s["substrate"] == "cuda")
    assert "no CUDA GPU on this machine" in cuda["reason"]
    assert "emulator: PASS" in text and "[ok] stock: diverge" in text


def test_cli_explicit_substrate_that_cannot_run_is_an_error(tmp_path, capsys):
    code = main(["-C", str(ROOT), "probe", "--substrate", "cpu", "--python", fake_python(tmp_path, NO_MLX)])
    assert code == 12
    assert "cpu not run" in capsys.readouterr().err


def test_cli_rejects_a_header_without_the_streamed_kernel(tmp_path, stock_header, capsys):
    code = main(["-C", str(ROOT), "probe", "--substrate", "emulator", "--stock-header", str(stock_header),
                 "--patched-header", str(stock_header)])
    assert code == 2
    assert "has no qmv_streamed_impl" in capsys.readouterr().err


# ---- a real mlx wheel, where one is installed ----------------------------------------


def test_cpu_wheel_passes_and_its_control_diverges(mlx_python: str):
    rep = probe.run_mlx("cpu", ProbeConfig(limit=4, layers=1), mlx_python)
    assert rep.status == "pass", rep.reason


def test_stock_metal_wheel_is_expected_to_diverge_on_gen15(tmp_path):
    body = CANNED.replace('"0.0+overlay"', '"0.32.4"').replace(
        '"device": args', '"architecture": "applegpu_g15s", "device": args').replace(
        'diverge = control or route == "wide"', "diverge = True")
    rep = probe.run_mlx("metal", ProbeConfig(limit=2), fake_python(tmp_path, body))
    assert rep.info["wheel"].startswith("stock")
    assert {a.name: (a.expect, a.outcome) for a in rep.arms} == {
        "default": ("diverge", "diverge"), "wide": ("diverge", "diverge")}
    assert rep.status == "pass"


def test_overlay_wheel_keeps_the_exactness_expectation(tmp_path):
    body = CANNED.replace('"0.0+overlay"', '"0.32.0+abc123"').replace(
        'diverge = control or route == "wide"', "diverge = True")
    rep = probe.run_mlx("metal", ProbeConfig(limit=2), fake_python(tmp_path, body))
    assert rep.status == "fail" and "default: expected pass, got diverge" in rep.reason


# ---- the CUDA harness substrate, through a stand-in library -----------------------

# A stand-in for libqmv_probe.so with the same C entry point: an affine
# bfloat16 product row by row, accumulated in bfloat16 as MLX's 4-bit CUDA
# qmv does, the same arithmetic for every M (so
# the patched arm must pass); impl 7 flips one bit of the last row of M >= 2
# products (so a broken kernel is caught).
FAKE_HARNESS_C = r"""
#include <stdint.h>
#include <string.h>
static float bf(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t to_bf(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
int qmv_probe(int impl, int dtype, int bits, int group, const void* x, const void* w,
              const void* scales, const void* biases, void* out, int m, int n, int k) {
  if (dtype != 0 || (impl != 1 && impl != 7)) return -10;
  const uint16_t* xs = x; const uint32_t* ws = w; const uint16_t* s = scales;
  const uint16_t* b = biases; uint16_t* o = out;
  int per = 32 / bits, groups = k / group;
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < n; ++c) {
      float acc = 0;
      for (int i = 0; i < k; ++i) {
        uint32_t q = (ws[(long)c * (k / per) + i / per] >> ((i % per) * bits)) & ((1u << bits) - 1);
        float wv = bf(s[c * groups + i / group]) * (float)q + bf(b[c * groups + i / group]);
        acc = bf(to_bf(acc + bf(xs[(long)r * k + i]) * wv));
      }
      o[(long)r * n + c] = to_bf(acc) ^ (impl == 7 && m >= 2 && r == m - 1 && c == 0);
    }
  return 0;
}
const char* qmv_probe_error(int code) { return code == -10 ? "no such impl" : "?"; }
int qmv_probe_last_streamed(void) { return 1; }
"""


@pytest.fixture(scope="module")
def fake_harness(tmp_path_factory) -> Path:
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("no C compiler: the harness substrate's stand-in needs cc")
    d = tmp_path_factory.mktemp("harness")
    (d / "fake.c").write_text(FAKE_HARNESS_C)
    subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", str(d / "libfake.so"), str(d / "fake.c")],
                   check=True)
    return d / "libfake.so"


def test_cuda_harness_arms_through_the_c_entry_point(fake_harness):
    cfg = ProbeConfig(limit=3, layers=1, dim=128, hidden=192, vocab=256)
    rep = probe.run_cuda_harness(cfg, fake_harness)
    assert rep.status == "pass", rep.reason
    assert {a.name: a.outcome for a in rep.arms} == {"patched": "pass", "control": "diverge"}
    assert rep.info["library"] == str(fake_harness)
    assert rep.info["patched_products"]["K=128 N=256"] == {"streamed": [1, 2, 3], "fallback": []}
    assert "patched K=192 N=128: streamed kernel at M = 1-3; stock fallback at M = none" in \
        probe.format_report([rep])


def test_cuda_harness_catches_a_kernel_that_is_not_exact(fake_harness, monkeypatch):
    from overlay_tool import probe_harness

    monkeypatch.setattr(probe_harness, "PATCHED", 7)
    cfg = ProbeConfig(limit=3, layers=1, dim=128, hidden=192, vocab=256)
    rep = probe.run_cuda_harness(cfg, fake_harness)
    assert rep.status == "fail" and "patched: expected pass, got diverge" in rep.reason


def test_cuda_harness_not_run_without_a_library_or_a_kernel(tmp_path, monkeypatch):
    monkeypatch.delenv("MLX_OVERLAY_CUDA_HARNESS", raising=False)
    rep = probe.run_cuda_harness(ProbeConfig())
    assert rep.status == "not run" and "MLX_OVERLAY_CUDA_HARNESS" in rep.reason
    rep = probe.run_cuda_harness(ProbeConfig(), tmp_path / "missing.so")
    assert rep.status == "not run" and "no such harness library" in rep.reason
    rep = probe.run_cuda_harness(ProbeConfig(dtype="float32"), tmp_path / "missing.so")
    assert rep.status == "not run" and "bfloat16 and float16" in rep.reason
    rep = probe.run_cuda_harness(ProbeConfig(bits=3), tmp_path / "missing.so")
    assert rep.status == "not run" and "4/8 bits" in rep.reason
