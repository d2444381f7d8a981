"""Cost of `reader.verify_samples` (every sample read checked against its recorded CRC-32C).

Usage: python -m benchmarks.loaders.verify_cost [--shape small|large] [--reps 5]
       [--loaders native pytorch] [--root /work/bench-verify]

One dataset generated with `dataset.sample_checksums=true`, read page-cached at compute 0
with the check off and on, alternating run by run; prints samples/s medians, ranges and the
ratio on/off. Data is deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from benchmarks.compare.ab import SHAPES, overrides
from benchmarks.harness import machine
from benchmarks.harness.records import Recorder
from benchmarks.harness.timing import interleave, spreads


def run_once(shape: str, folder: Path, out: Path, loader: str, verify: bool) -> float:
    """samples/s of one run with the check on or off."""
    shutil.rmtree(out, ignore_errors=True)
    machine.run([sys.executable, "-m", "dliobench", "run", "--yes", "workloads/default.yaml",
                 *overrides(shape, folder, out, loader), "dataset.sample_checksums=true",
                 f"reader.verify_samples={str(verify).lower()}", "reader.odirect=false"])
    result = next(out.glob("*/result.json"))
    return float(json.loads(result.read_text())["metrics"]["samples_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--shape", choices=list(SHAPES), default="small")
    parser.add_argument("--loaders", nargs="+", default=["native", "pytorch"])
    parser.add_argument("--root", type=Path, default=Path("/work/bench-verify"))
    args = parser.parse_args()
    record = Recorder("verify_cost")
    rates: dict[tuple[str, bool], list[float]] = {}
    shutil.rmtree(args.root, ignore_errors=True)
    data, out = args.root / "data", args.root / "out"
    try:
        for loader in args.loaders:
            run_once(args.shape, data, out, loader, False)  # generate, warm the cache
            def one(verify: bool, loader: str = loader) -> Callable[[], float]:
                return lambda: run_once(args.shape, data, out, loader, verify)

            rates.update(interleave({(loader, v): one(v) for v in (False, True)}, args.reps))
    finally:
        shutil.rmtree(args.root, ignore_errors=True)
    size = SHAPES[args.shape][0]
    print(f"# reader.verify_samples off/on, {args.shape} samples ({size:,} B), "
          f"{args.reps} alternating reps\n")
    print(*machine.machine_lines(), f"- measured with: `{' '.join(machine.command())}`",
          sep="\n")
    print("\n| loader | verify | samples/s median | range | on/off |")
    print("|---|---|---|---|---|")
    spread = spreads(rates)
    for loader in args.loaders:
        off = spread[loader, False].median
        for verify in (False, True):
            got = spread[loader, verify]
            print(f"| {loader} | {'on' if verify else 'off'} | {got.median:,.1f} | "
                  f"{got.low:,.1f}-{got.high:,.1f} | {got.median / off:.3f} |")
    print("\n" + machine.load_line())
    path = record.write({f"{ld} verify {'on' if v else 'off'} samples/s": got
                         for (ld, v), got in rates.items()}, shape=args.shape)
    print(f"- record: {path}")


if __name__ == "__main__":
    main()
