"""mlx-overlay emulate: prove kernel order properties on the Metal emulator.

Runs, on the CPU, against a quantized.h (default: the work checkout's, i.e. the
patched one after `mlx-overlay apply`):
  1. the address-space type check (C++ for OpenCL, clang);
  2. the negative control: stock qmv_wide differs from the M = 1 kernel;
  3. when the header has qmv_streamed_impl: every row of qmv_streamed at
     M = 2..7 is bitwise equal to the same row of the M = 1 kernel.
With --fp, the same three steps for the fp modes (mxfp4, nvfp4 with and
without its global scale, mxfp8) on fp_quantized.h next to that header:
fp_qmv_wide as the negative control, fp_qmv_streamed_impl when present.
See docs/emulator.md for what the emulator can and cannot prove.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from overlay_tool.errors import ConfigError, MissingTool, TestFailure

HEADER_IN_CHECKOUT = Path("mlx/backend/metal/kernels/quantized.h")


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "emulate",
        help="check qmv_streamed's bit-identity with the M = 1 kernel on the Metal emulator (CPU)",
        description=__doc__.split("\n", 2)[2] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--header", type=Path, default=None,
                        help=f"the quantized.h to test (default: <work checkout>/{HEADER_IN_CHECKOUT})")
    parser.add_argument("--contract", action="store_true",
                        help="build with floating-point contraction on (-ffp-contract=fast, needs FMA)")
    parser.add_argument("--all-group-sizes", action="store_true",
                        help="sweep group sizes 32, 64, 128 (default: 64)")
    parser.add_argument("--quick", action="store_true",
                        help="a small sweep (float32, 4 bits: the most order-sensitive case) "
                        "instead of every dtype and bits")
    parser.add_argument("--typecheck-only", action="store_true", help="only the address-space type check")
    parser.add_argument("--fp", action="store_true",
                        help="also check the fp modes (fp_quantized.h in the header's folder)")
    parser.set_defaults(func=run)


def _header(args: argparse.Namespace) -> Path:
    if args.header is not None:
        if not args.header.is_file():
            raise ConfigError(f"{args.header}: no such header")
        return args.header
    from overlay_tool.project import Project

    project = Project.discover(args.project)
    path = project.work_dir / HEADER_IN_CHECKOUT
    if not path.is_file():
        raise ConfigError(f"{path}: no work checkout header", hint="run `mlx-overlay apply` first, or pass --header")
    return path


def run(args: argparse.Namespace) -> int:
    try:
        import numpy  # noqa: F401
    except ImportError as err:
        raise MissingTool("the emulator needs numpy (pip install 'mlx-overlay[emulator]')") from err
    from overlay_tool.emulator import Emulator, typecheck
    from overlay_tool.emulator.parity import sweep

    header = _header(args)
    t0 = time.monotonic()
    typecheck(header)
    print(f"type check: {header} passes (C++ for OpenCL address spaces)")
    fp_header = header.parent / "fp_quantized.h"
    if args.fp:
        if not fp_header.is_file():
            raise ConfigError(f"{fp_header}: no fp_quantized.h next to the header")
        from overlay_tool.emulator.fp import FpEmulator

        # With contraction on, the fp kernels are built with everything
        # inlined, as a GPU compiler builds a kernel: the fp qdot returns
        # scale * accum and the caller adds it in another statement, so under
        # GCC's default inlining the two fuse only where qdot happened to be
        # inlined, and even the stock M = 1 kernel's bits change with -O1/-O3
        # (tests/kernel/test_fp_qmv_streamed.py, docs/qmv_streamed.md).
        fp_emu = FpEmulator(fp_header, contract=args.contract,
                            **({"opt": "-O1 -finline-limit=100000"} if args.contract else {}))
        fp_emu.typecheck()
        print(f"type check: {fp_header} passes (C++ for OpenCL address spaces)")
    if args.typecheck_only:
        return 0
    emu = Emulator(header, contract=args.contract)
    gs = (32, 64, 128) if args.all_group_sizes else (64,)
    grid = dict(group_sizes=gs)
    if args.quick:
        grid.update(dtypes=("float32",), bits=(4,))
    neg = sweep(emu, "qmv_wide", ms=range(2, 6), cancel=True, **grid)
    print(f"negative control: stock qmv_wide differs from the M = 1 kernel in {neg.share:.0%} "
          f"of {neg.compared} outputs")
    if neg.differing == 0:
        raise TestFailure("negative control failed: qmv_wide equals the M = 1 kernel, the harness cannot see order")
    failures = []
    if "qmv_streamed_impl" not in emu.extraction.names:
        print("qmv_streamed_impl: not in this header (stock?); nothing more to prove")
    else:
        res = sweep(emu, "qmv_streamed", ms=range(2, 8), cancel=True, **grid)
        failures += _report("qmv_streamed", res, args, t0)
    if args.fp:
        failures += _fp(fp_emu, args, t0)
    if failures:
        raise TestFailure("; ".join(failures))
    return 0


def _report(kernel: str, res, args: argparse.Namespace, t0: float) -> list[str]:
    for line in res.mismatches[:20]:
        print(f"  MISMATCH {line}")
    print(f"{kernel} vs M = 1 kernel: {res.differing} of {res.compared} outputs differ "
          f"({'contraction on' if args.contract else 'contraction off'}; {time.monotonic() - t0:.0f} s)")
    if res.differing:
        return [f"{kernel} is not bit-identical to the M = 1 kernel in {len(res.mismatches)} case(s)"]
    return []


def _fp(emu, args: argparse.Namespace, t0: float) -> list[str]:
    """The fp stage: fp_qmv_wide must differ, fp_qmv_streamed must not."""
    from overlay_tool.emulator.fpparity import sweep

    grid = dict(dtypes=("float32",)) if args.quick else {}
    neg = sweep(emu, "qmv_wide", ms=range(2, 6), cancel=True, **grid)
    print(f"fp negative control: stock fp_qmv_wide differs from the M = 1 kernel in "
          f"{neg.share:.0%} of {neg.compared} outputs")
    if neg.differing == 0:
        raise TestFailure("fp negative control failed: fp_qmv_wide equals the M = 1 kernel")
    if "fp_qmv_streamed_impl" not in emu.extraction.names:
        print("fp_qmv_streamed_impl: not in this header (stock?); nothing more to prove")
        return []
    res = sweep(emu, "qmv_streamed", ms=range(2, 8), cancel=True, **grid)
    return _report("fp_qmv_streamed", res, args, t0)
