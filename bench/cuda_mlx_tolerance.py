#!/usr/bin/env python3
"""MLX's test_qmm and test_qmv_wide loops, outside pytest, with every error.

In the device runs of 2026-11-30 and 2026-12-01 test_qmm failed its tolerance
check on the patched CUDA build, and the failing subtest could not be named:
the worker crashed formatting the message, and the stock build, run beside
it, hit the 120 s test limit before reaching the end of the loop. This script
runs the same loops (the same keys, shapes, dtypes, tolerances and order as
python/tests/test_quantized.py at the pin) in one plain process and writes,
per subtest, the maximum error against the dequantize-then-matmul reference
and whether each row is bit-identical to that row's M = 1 product. Run on the
stock and the patched build, it tells a kernel defect of the queue (a subtest
that fails on the patched build only) from a property of stock `qmv` (one whose
rows are identical to M = 1 and fail at M = 1 too).

The queue changes only products of at most 16 vectors (M * B <= 16); with
--max-m 16 test_qmm's loop keeps its M = 8 subtests, the ones the queue
routes, and leaves out M = 32, 33 and 64, which run stock's matrix kernels
(each new one compiled at run time: about 5 s a subtest on the H200).

Each subtest's operands come from the same two keys, whatever ran before it,
so a loop can stop and go on: --resume PREV.csv copies PREV's rows to the
output and measures only the subtests after them (the loops do not fit one
10-minute device call on a fresh machine: session 18 reached 1025 of
test_qmv_wide's 1188 subtests in 520 s).

Usage: python3 bench/cuda_mlx_tolerance.py --out FILE.csv [--suite qmm|qmv_wide|all] [--limit N]
           [--max-m M] [--resume PREV.csv]
"""
from __future__ import annotations

import argparse
import os
import time
from functools import partial
from itertools import islice, product
from typing import Any, Callable, Iterator, NamedTuple

# As python/tests/mlx_tests.py, which test_quantized.py imports: the
# dequantize-then-matmul reference in float32 otherwise runs on cuBLAS in
# TF32 (MLX_ENABLE_TF32 defaults to 1), about 1e-2 off at K = 512, ten times
# test_qmv_wide's tolerance (the H200 run of 2026-12-02, session 17: 1041 of
# its 1188 subtests "failed", the rows computed alone by as much); and the
# CUDA backend's caches of kernels do not stop a loop of many configurations.
os.environ["MLX_ENABLE_TF32"] = "0"
os.environ["MLX_ENABLE_CACHE_THRASHING_CHECK"] = "0"

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

HEADER = ("suite,mode,group_size,bits,M,N,K,B,transposed,dtype,max_err,tol,ok,"
          "rows_identical_to_M1,max_err_M1,error")
OK_COLUMN = HEADER.split(",").index("ok")


def _bits(a: mx.array) -> np.ndarray:
    """The bit patterns of a (float16/bfloat16/float32) array."""
    view = mx.uint32 if a.dtype == mx.float32 else mx.uint16
    return np.array(a.view(view))


def _key(suite: str, x: mx.array, w: mx.array, *, transposed: bool = True, mode: str = "affine",
         group_size: int | None = None, bits: int | None = None) -> str:
    """A subtest's first columns, up to dtype: what names it in the CSV."""
    M, K = x.shape[-2:]
    N = w.shape[-2] if transposed else w.shape[-1]
    B = x.size // (M * K)
    return (f"{suite},{mode},{group_size or ''},{bits or ''},{M},{N},{K},{B},{transposed},"
            f"{str(x.dtype).split('.')[-1]}")


def _measure(suite: str, x: mx.array, w: mx.array, *, transposed: bool = True, mode: str = "affine",
             group_size: int | None = None, bits: int | None = None, tol: float) -> str:
    """One subtest: quantize w, multiply x by it, compare with x times the
    dequantized w (as the test does) and with each row of x multiplied alone.
    A subtest that raises (a kernel that does not compile there) is a row
    whose `ok` is `error` and whose `error` is the message's first line: the
    loop goes on."""
    key = _key(suite, x, w, transposed=transposed, mode=mode, group_size=group_size, bits=bits)
    try:
        w_q, *sb = mx.quantize(w, group_size=group_size, bits=bits, mode=mode)
        w_hat = mx.dequantize(w_q, *sb, group_size=group_size, bits=bits, mode=mode)
        y_hat = x @ (mx.swapaxes(w_hat, -1, -2) if transposed else w_hat)

        def qmm(a: mx.array) -> mx.array:
            return mx.quantized_matmul(a, w_q, *sb, transpose=transposed, group_size=group_size, bits=bits,
                                       mode=mode)

        y_q = qmm(x)
        y_1 = mx.concatenate([qmm(x[..., i : i + 1, :]) for i in range(x.shape[-2])], axis=-2)
        err = (y_q - y_hat).abs().max().item()
        err_1 = (y_1 - y_hat).abs().max().item()
        same = np.all(_bits(y_q) == _bits(y_1), axis=-1)  # per row (and batch)
    except RuntimeError as e:
        message = (str(e).strip().splitlines() or [type(e).__name__])[0].replace(",", ";")
        return f"{key},,{tol},error,,,{message}"
    return f"{key},{err:.6g},{tol},{err < tol},{int(same.sum())}/{same.size},{err_1:.6g},"


class Subtest(NamedTuple):
    """A subtest's name (its CSV row's first columns) and its measurement,
    made when called."""

    key: str
    measure: Callable[[], str]


def _subtest(suite: str, x: mx.array, w: mx.array, *, tol: float, **quantization: Any) -> Subtest:
    return Subtest(_key(suite, x, w, **quantization), partial(_measure, suite, x, w, tol=tol, **quantization))


def qmm(max_m: int | None = None) -> Iterator[Subtest]:
    """test_qmm: float16 on the GPU, M in {8, 32, 33, 64} (those up to max_m),
    tolerance 1.5e-3. Each subtest is measured when called."""
    key = mx.random.key(0)
    k1, k2 = mx.random.split(key)
    dtype = mx.float16 if (mx.default_device() == mx.gpu) else mx.float32
    tol = 1e-3 if dtype == mx.float32 else 1.5e-3
    tests = product([128, 64, 32], [2, 4, 8], [8, 32, 33, 64], [128, 256], [128, 256], [True, False])
    for group_size, bits, M, N, K, transposed in tests:
        if max_m is not None and M > max_m:
            continue
        x = (mx.random.normal(shape=(M, K), key=k1) / K**0.5).astype(dtype)
        w = (mx.random.normal(shape=(N, K) if transposed else (K, N), key=k2) / K**0.5).astype(dtype)
        yield _subtest("qmm", x, w, transposed=transposed, group_size=group_size, bits=bits, tol=tol)


def qmv_wide() -> Iterator[Subtest]:
    """test_qmv_wide: float32, M in 2..9, B in {1, 3}, affine and fp modes,
    then its tiny shapes; tolerance 1e-3. Each subtest is measured when
    called."""
    key = mx.random.key(0)
    k1, k2 = mx.random.split(key)
    Ms, Ns, Bs = [2, 3, 4, 5, 6, 7, 9], [256, 67], [1, 3]

    def operands(M: int, N: int, K: int, B: int) -> tuple[mx.array, mx.array]:
        x = mx.random.normal(shape=(M, K) if B == 1 else (B, M, K), key=k1)
        w = mx.random.normal(shape=(N, K) if B == 1 else (B, N, K), key=k2)
        return x, w

    for group_size, bits, K in product([32, 64, 128], [2, 3, 4, 5, 6, 8], [128, 512]):
        for M, N, B in product(Ms, Ns, Bs):
            yield _subtest("qmv_wide", *operands(M, N, K, B), group_size=group_size, bits=bits, tol=1e-3)
    for mode, K in product(["mxfp4", "nvfp4", "mxfp8"], [128, 512]):
        for M, N, B in product(Ms, Ns, Bs):
            yield _subtest("qmv_wide", *operands(M, N, K, B), mode=mode, tol=1e-3)
    for M, K, N in [(2, 32, 10), (4, 32, 7), (3, 64, 5), (5, 64, 3)]:
        for bits, group_size, mode in [(4, 32, "affine"), (6, 32, "affine"), (4, 16, "nvfp4")]:
            yield _subtest("qmv_wide", *operands(M, N, K, 1), mode=mode, group_size=group_size, bits=bits,
                           tol=1e-3)


def earlier_rows(path: str) -> dict[str, list[str]]:
    """An earlier run's rows by suite, in its order."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise SystemExit(f"{path}: cannot read the earlier run: {e.strerror}") from None
    if not lines or lines[0] != HEADER:
        raise SystemExit(f"{path}: not a cuda_mlx_tolerance.py result (its first line is not its header)")
    rows: dict[str, list[str]] = {}
    for line in lines[1:]:
        rows.setdefault(line.split(",")[0], []).append(line)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--suite", choices=["qmm", "qmv_wide", "all"], default="all")
    ap.add_argument("--limit", type=int, help="only the first LIMIT subtests of each suite")
    ap.add_argument("--max-m", type=int, help="test_qmm's subtests with at most MAX_M rows only")
    ap.add_argument("--resume", metavar="PREV.csv", help="keep PREV's rows and measure the subtests after them")
    args = ap.parse_args()
    earlier = earlier_rows(args.resume) if args.resume else {}
    print(f"mlx {mx.__version__}, device {mx.default_device()}", flush=True)
    # Written row by row: a run cut by a time limit keeps what it measured.
    with open(args.out, "w") as f:
        f.write(HEADER + "\n")
        suites: tuple[tuple[str, Iterator[Subtest]], ...] = (("qmm", qmm(args.max_m)), ("qmv_wide", qmv_wide()))
        for name, subtests in suites:
            if args.suite not in (name, "all"):
                continue
            t = time.perf_counter()
            count, failed = 0, []
            kept = earlier.get(name, [])
            matched = 0
            for row, subtest in zip(kept, subtests):
                matched += 1
                if not row.startswith(subtest.key + ","):
                    raise SystemExit(f"{args.resume}: its {name} rows are not this loop's (a row "
                                     f"{row.split(',', 11)[:10]} where this loop has {subtest.key}): "
                                     "another --max-m?")
                f.write(row + "\n")
                if row.split(",")[OK_COLUMN] in ("False", "error"):
                    failed.append(row)
            if matched < len(kept):
                raise SystemExit(f"{args.resume}: {len(kept)} {name} rows, more than this loop's {matched}")
            if kept:
                print(f"{name}: {len(kept)} subtests kept from {args.resume}, {len(failed)} of them over "
                      "tolerance or failed to run", flush=True)
            failed_before = len(failed)
            for subtest in islice(subtests, None if args.limit is None else max(args.limit - len(kept), 0)):
                row = subtest.measure()
                f.write(row + "\n")
                f.flush()
                count += 1
                if row.split(",")[OK_COLUMN] in ("False", "error"):
                    failed.append(row)
                    print("  over tolerance or error: " + row, flush=True)
            print(f"{name}: {count} subtests, {len(failed) - failed_before} over tolerance or failed to run, "
                  f"{time.perf_counter() - t:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
