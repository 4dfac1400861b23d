"""bench/metal_qmv.py end to end with the timing source and the platform faked
(dependency injection), so the first real Mac run needs no fixing; plus the
refusals (no Metal, a wheel without the route switch) and the mirrors
(batch limit, bandwidth table)."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "metal_qmv.py"


def load():
    spec = importlib.util.spec_from_file_location("metal_qmv", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


mq = load()


class FakePlatform(mq.Platform):
    def __init__(self, system="Darwin", brand="Apple M3 Max", cores=40):
        self._system, self._brand, self._cores = system, brand, cores

    def system(self):
        return self._system

    def brand(self):
        return self._brand

    def gpu_cores(self):
        return self._cores

    def macos(self):
        return "15.4"


class FakeTimer:
    """A bandwidth model: a product's time is the bytes it reads over 400 GB/s;
    qmv reads W once per vector, qmv_wide and qmv_streamed:V once per tile;
    streamed pays 3 % per vector of V (register pressure)."""

    def __init__(self, opts, switch=True):
        self.opts, self.switch = opts, switch
        self.prepared = []
        self.calls = []

    def route_switch_works(self):
        return (True, "") if self.switch else (False, "an invalid MLX_QMV_ROUTE was accepted")

    def info(self):
        return {"mlx_version": "0.32.0+overlay.test", "architecture": "applegpu_g15s",
                "device_name": "Apple M3 Max", "memory_size": 1 << 36}

    def prepare(self, K, N, dtype, max_m):
        self.prepared.append((K, N, dtype, max_m))
        self.K, self.N, self.dtype = K, N, dtype

    def model(self, route, M):
        wb = mq.weight_bytes(self.K, self.N, 4, 64, self.dtype)
        if route == "qmv":
            reads = M
        elif route == "wide":
            v = math.ceil(M / math.ceil(M / 5))
            reads = math.ceil(M / v)
        else:
            v = int(route.split(":")[1]) if ":" in route else math.ceil(M / math.ceil(M / 5))
            reads = math.ceil(M / v) * (1 + 0.03 * v)
        return reads * wb / 400e9

    def time(self, route, M):
        self.calls.append((route, M))
        return self.model(route, M)

    def rows_equal_m1(self, route, M):
        self.calls.append(("bits", route, M))
        return route != "wide"


def run_main(tmp_path, argv, **kw):
    lines = []
    out = tmp_path / "out.json"
    code = mq.main([*argv, "--json", str(out)], log=lambda *a, **k: lines.append(" ".join(map(str, a))), **kw)
    return code, "\n".join(lines), out


def test_fake_run_end_to_end(tmp_path):
    timers = []

    def factory(opts):
        timers.append(FakeTimer(opts))
        return timers[0]

    code, text, out = run_main(tmp_path, ["--model", "llama3-8b", "--max-m", "7"],
                               timer_factory=factory, plat=FakePlatform())
    assert code == 0, text
    data = json.loads(out.read_text())
    assert data["schema"] == mq.SCHEMA
    assert data["machine"]["chip"] == "M3 Max"
    assert data["machine"]["bandwidth_gbs"] == 400.0
    assert data["machine"]["architecture"] == "applegpu_g15s"
    # 4 llama shapes x 2 dtypes x M = 1..7
    assert len(data["results"]) == 4 * 2 * 7
    t = timers[0]
    assert [p[:3] for p in t.prepared[:2]] == [(4096, 4096, "bfloat16"), (4096, 4096, "float16")]
    row = next(r for r in data["results"] if r["K"] == 4096 and r["N"] == 14336 and r["M"] == 4
               and r["dtype"] == "bfloat16")
    # every route at M = 4: qmv, wide, streamed, streamed:1..4
    assert set(row["times_us"]) == {"qmv", "wide", "streamed", "streamed:1", "streamed:2",
                                    "streamed:3", "streamed:4"}
    wb = mq.weight_bytes(4096, 14336, 4, 64, "bfloat16")
    t_qmv, t_wide, t_s = 4 * wb / 400e9, wb / 400e9, 1.12 * wb / 400e9
    assert row["times_us"]["qmv"] == pytest.approx(t_qmv * 1e6, abs=1e-3)
    assert row["recovered"]["streamed"] == pytest.approx((t_qmv - t_s) / (t_qmv - t_wide), abs=1e-4)
    assert row["best_streamed"] == "streamed:4"
    gb = mq.product_bytes(4096, 14336, 4, 4, 64, "bfloat16") / 1e9
    assert row["gbs"]["wide"] == pytest.approx(gb / t_wide, abs=0.1)
    assert row["fraction_of_bandwidth"]["wide"] == pytest.approx(gb / t_wide / 400, abs=1e-3)
    assert row["rows_equal_m1"]["streamed"] is True
    assert row["rows_equal_m1"]["streamed:3"] is True
    assert row["rows_equal_m1"]["wide"] is False
    # M = 1: no qmv_wide route, no recovered fraction
    m1 = next(r for r in data["results"] if r["M"] == 1)
    assert "wide" not in m1["times_us"] and m1["recovered"]["streamed"] is None
    # the printed table carries the same figures
    assert "M = 1..7 (mat-vec limit 15)" in text
    assert "median_recovered_streamed: 0.9" in text
    assert m1["rows_equal_m1"] is None
    s = data["summary"]
    assert s["rows_equal_m1[streamed]"] is True and s["rows_equal_m1[qmv]"] is True
    assert s["rows_equal_m1[wide]"] is False
    assert 0.8 < s["median_recovered_streamed"] < 1.0


def test_default_m_range_follows_the_batch_limit(tmp_path):
    timer = []
    code, _, out = run_main(tmp_path, ["--shape", "4096x14336", "--dtype", "float16", "--no-check-bits"],
                            timer_factory=lambda o: timer.append(FakeTimer(o)) or timer[0],
                            plat=FakePlatform())
    assert code == 0
    data = json.loads(out.read_text())
    # applegpu_g15s, K = 4096, N = 14336 > 4096: limit 13, so M = 1..12
    assert [r["M"] for r in data["results"]] == list(range(1, 13))
    assert data["results"][1]["rows_equal_m1"] is None
    assert data["summary"]["rows_equal_m1[streamed]"] is None
    assert not any(c[0] == "bits" for c in timer[0].calls)


class StreamedNotExact(FakeTimer):
    def rows_equal_m1(self, route, M):
        return route == "qmv"


def test_a_streamed_row_that_differs_fails_the_run(tmp_path):
    code, text, out = run_main(tmp_path, ["--shape", "512x512", "--max-m", "3", "--dtype", "float16"],
                               timer_factory=StreamedNotExact, plat=FakePlatform())
    assert code == 1 and "exactness claim fails" in text
    assert json.loads(out.read_text())["summary"]["rows_equal_m1[streamed]"] is False


class DefaultOnly(FakeTimer):
    """A wheel without the switch (stock main, or the upstream PR)."""

    def __init__(self, opts, slow=1.0):
        super().__init__(opts, switch=False)
        self.slow = slow

    def time(self, route, M):
        assert route == "default"
        return self.model("qmv", M) * self.slow


def test_default_route_runs_without_the_switch_and_compare_prints_the_ratio(tmp_path):
    code_a, _, _ = run_main(tmp_path, ["--shape", "4096x4096", "--max-m", "3", "--dtype", "bfloat16",
                                       "--default-route"],
                            timer_factory=lambda o: DefaultOnly(o), plat=FakePlatform())
    a = tmp_path / "a.json"
    (tmp_path / "out.json").rename(a)
    code_b, _, b = run_main(tmp_path, ["--shape", "4096x4096", "--max-m", "3", "--dtype", "bfloat16",
                                       "--default-route"],
                            timer_factory=lambda o: DefaultOnly(o, slow=0.5), plat=FakePlatform())
    assert code_a == code_b == 0
    data = json.loads(b.read_text())
    assert data["settings"]["mode"] == "default-route"
    assert set(data["results"][0]["times_us"]) == {"default"}
    assert data["results"][1]["rows_equal_m1"] == {"default": True}
    assert "recovered" not in data["results"][1]
    lines = []
    assert mq.main(["--compare", str(a), str(b)], log=lambda *x, **k: lines.append(" ".join(map(str, x)))) == 0
    table = [ln for ln in lines if ln.startswith("custom 4096x4096")]
    assert len(table) == 3 and all(" 0.50 " in ln for ln in table)


def test_refuses_without_metal(tmp_path):
    code, text, out = run_main(tmp_path, [], plat=FakePlatform(system="Linux"))
    assert code == mq.EXIT_NO_METAL
    assert "no Metal" in text and "Nothing was measured" in text
    assert not out.exists()
    assert not any(ch.isdigit() for ch in text.replace("3", "").replace("Linux", ""))


def test_refuses_a_wheel_without_the_route_switch(tmp_path):
    code, text, out = run_main(tmp_path, [], timer_factory=lambda o: FakeTimer(o, switch=False),
                               plat=FakePlatform())
    assert code == mq.EXIT_NOT_PATCHED
    assert "patched wheel" in text
    assert not out.exists()


def test_script_on_this_machine_exits_nonzero_without_numbers():
    if sys.platform == "darwin":
        pytest.skip("this machine may have Metal")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--json", "/nonexistent/x.json"],
                          capture_output=True, text=True)
    assert proc.returncode == mq.EXIT_NO_METAL
    assert proc.stdout == ""
    assert "Nothing was measured" in proc.stderr


def test_cli_wrapper_maps_no_metal_to_missing_tool(capsys):
    if sys.platform == "darwin":
        pytest.skip("this machine may have Metal")
    from overlay_tool.cli import main

    assert main(["-C", str(ROOT), "bench", "--", "--model", "llama3-8b"]) == 12
    assert "no Metal GPU here" in capsys.readouterr().err


@pytest.mark.parametrize("arch,K,N,limit", [
    ("applegpu_g15s", 4096, 4096, 15), ("applegpu_g15s", 4096, 14336, 13),
    ("applegpu_g15s", 2048, 2048, 13), ("applegpu_g15d", 4096, 4096, 18),
    ("applegpu_g16s", 3840, 15360, 13), ("applegpu_g17s", 4096, 1024, 25),
    ("applegpu_g17s", 1024, 1024, 33), ("applegpu_g14g", 4096, 4096, 10),
    ("applegpu_g13g", 14336, 4096, 6), ("applegpu_g13d", 4096, 14336, 12),
    ("applegpu_g13s", 2048, 512, 14),
])
def test_batch_limit_mirror(arch, K, N, limit):
    assert mq.qmv_batch_limit(arch, K, N) == limit


def test_batch_limit_mirror_matches_the_pinned_source(pinned_checkout):
    """Every return value of get_qmv_batch_limit at the pin, in order, is the
    mirror's (a change upstream shows here at the next bump)."""
    import re

    text = (pinned_checkout / "mlx/backend/metal/quantized.cpp").read_text()
    body = text[text.index("inline int get_qmv_batch_limit"):]
    body = body[: body.index("\n}\n")]
    returns = [int(v) for v in re.findall(r"return (\d+);", body)]
    mirror = Path(SCRIPT).read_text()
    mirror = mirror[mirror.index("def qmv_batch_limit"):mirror.index("def weight_bytes")]
    triples = re.findall(r"return (\d+) if small else (\d+) if mid else (\d+)", mirror)
    mirrored = [int(v) for triple in triples for v in triple]
    assert returns == mirrored


@pytest.mark.parametrize("brand,cores,gbs", [
    ("Apple M3 Max", 30, 300.0), ("Apple M3 Max", 40, 400.0), ("Apple M4 Max", 32, 410.0),
    ("Apple M3 Ultra", 80, 819.0), ("Apple M5 Max", None, 614.0), ("Apple M1", 8, 68.25),
])
def test_bandwidth_table(brand, cores, gbs):
    assert mq.chip_bandwidth(mq.chip_name(brand), cores)[0] == gbs


def test_unknown_chip_has_no_bandwidth():
    bw, why = mq.chip_bandwidth(mq.chip_name("Apple M9 Hyper"), None)
    assert bw is None and "--bandwidth" in why
    assert mq.chip_bandwidth(None, None)[0] is None


TIMER_ON_CPU = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("metal_qmv", sys.argv[1])
mq = importlib.util.module_from_spec(spec)
sys.modules["metal_qmv"] = mq
spec.loader.exec_module(mq)
import mlx.core as mx
mx.set_default_device(mx.cpu)
t = mq.MlxTimer(iters=3, repeats=2, warmup=1, rotate_bytes=1 << 20, bits=4, group_size=64)
t.prepare(512, 256, "bfloat16", 3)
assert len(t.copies) >= 2
assert t.time("qmv", 3) > 0
assert t.rows_equal_m1("streamed:2", 3) is True
assert t.rows_equal_m1("default", 3) is True
ok, why = t.route_switch_works()
assert ok is False and "route switch" in why  # the CPU backend never reads MLX_QMV_ROUTE
for mode, (bits, gs) in mq.FP_MODES.items():  # --quant: the fp modes (uint8 scales, no biases)
    f = mq.MlxTimer(iters=2, repeats=1, warmup=0, rotate_bytes=1 << 18, bits=bits, group_size=gs, mode=mode)
    f.prepare(512, 64, "float16", 3)
    assert len(f.copies[0]) == 2 and f.time("streamed", 3) > 0 and f.rows_equal_m1("default", 3) is True
print("ok")
"""


def test_mlx_timer_code_path_on_cpu(mlx_python: str):
    """MlxTimer's MLX calls (quantize, copies, products, eval, bit views) run
    on the CPU with the patched wheel (the `mlx_python` fixture); only the code
    path is exercised, since the route switch is a Metal feature."""
    proc = subprocess.run([mlx_python, "-c", TIMER_ON_CPU, str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_quant_option_sets_the_fp_modes_bits_and_group_size():
    opts = mq.parse_args(["--quant", "nvfp4", "--shape", "4096x4096"])
    assert (opts.quant, opts.bits, opts.group_size) == ("nvfp4", 4, 16)
    assert mq.parse_args([]).quant == "affine" and mq.parse_args([]).group_size == 64
    # fp: packed weights plus one byte of scale per group, no biases
    assert mq.weight_bytes(4096, 4096, 8, 32, "bfloat16", "mxfp8") == 4096 * 4096 + 4096 * 128
    assert mq.product_bytes(512, 64, 2, 4, 16, "float16", "nvfp4") == 512 * 64 // 2 + 64 * 32 + 2 * (512 + 64) * 2
