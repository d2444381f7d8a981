"""Before/after: the same `dliobench run` from two or more source trees, alternating.

Usage: python -m benchmarks.compare.ab --src NAME=DIR [NAME=DIR ...] [--reps 5]
       [--shape small|large] [--loaders native pytorch] [--task read|generate]
       [--root /work/bench-ab]

Each source tree (e.g. a `git clone` checked out at the commit to measure) generates its own
copy of the dataset (manifest formats may differ between versions) and reads it page-cached
with compute 0, the trees taking turns run by run (the harness's ``interleave``: the order
rotates each repetition), so a noisy machine disturbs them alike. ``--task generate`` times
`dliobench generate` of the shape into a fresh folder instead (GB/s = bytes on disk / wall time
of the command plus a sync, after a cache drop). Prints the median, the range of the
repetitions, and the median's ratio to the first tree's, and writes the run's JSON record
(``benchmarks/records/``). Data is deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from benchmarks.harness import machine
from benchmarks.harness.records import Recorder
from benchmarks.harness.timing import interleave, spreads

SHAPES = {  # bytes per sample, files, batch, epochs
    "small": (65536, 8192, 8, 2),
    "large": (146_600_628, 42, 2, 3),
}


def overrides(shape: str, folder: Path, out: Path, loader: str) -> list[str]:
    size, files, batch, epochs = SHAPES[shape]
    return [f"dataset.data_folder={folder}", f"dataset.num_files_train={files}",
            f"dataset.record_length_bytes={size}", "dataset.record_length_bytes_stdev=0",
            f"reader.batch_size={batch}", "reader.read_threads=4", "reader.prefetch_size=4",
            f"reader.data_loader={loader}", "train.computation_time=0",
            f"train.epochs={epochs}", "--no-progress", "--output", str(out)]


def run_once(src: str, shape: str, folder: Path, out: Path, loader: str) -> float:
    """samples/s of one run of ``src``'s dliobench."""
    shutil.rmtree(out, ignore_errors=True)
    machine.run([sys.executable, "-m", "dliobench", "run", "--yes", "workloads/default.yaml",
                 *overrides(shape, folder, out, loader), "reader.odirect=false"], src=src)
    result = next(out.glob("*/result.json"))
    return float(json.loads(result.read_text())["metrics"]["samples_per_s"])


def generate_once(src: str, shape: str, folder: Path) -> float:
    """GB/s of one `dliobench generate` of ``src`` into a fresh ``folder``."""
    import os
    import time

    shutil.rmtree(folder, ignore_errors=True)
    machine.drop_caches()
    size, files, _, _ = SHAPES[shape]
    start = time.perf_counter()
    machine.run([sys.executable, "-m", "dliobench", "generate", "--yes", "workloads/default.yaml",
                 f"dataset.data_folder={folder}", f"dataset.num_files_train={files}",
                 f"dataset.record_length_bytes={size}", "dataset.record_length_bytes_stdev=0",
                 "--no-progress"], src=src)
    os.sync()
    seconds = time.perf_counter() - start
    nbytes = sum(p.stat().st_size for p in (folder / "train").rglob("*") if p.is_file())
    shutil.rmtree(folder, ignore_errors=True)
    return nbytes / seconds / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", nargs="+", required=True, metavar="NAME=DIR")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--shape", choices=list(SHAPES), default="small")
    parser.add_argument("--loaders", nargs="+", default=["native", "pytorch"])
    parser.add_argument("--task", choices=["read", "generate"], default="read")
    parser.add_argument("--root", type=Path, default=Path("/work/bench-ab"))
    args = parser.parse_args()
    trees = dict(item.split("=", 1) for item in args.src)
    if args.task == "generate":
        args.loaders = ["generate"]
    record = Recorder("ab", src=next(iter(trees.values())))
    shutil.rmtree(args.root, ignore_errors=True)
    try:
        for name, src in trees.items():  # generate, then read once to warm the cache
            for loader in args.loaders if args.task == "read" else []:
                run_once(src, args.shape, args.root / name, args.root / "out", loader)
        contenders = {
            (name, loader): (lambda s=src, n=name, ld=loader: generate_once(
                s, args.shape, args.root / n) if args.task == "generate" else
                run_once(s, args.shape, args.root / n, args.root / "out", ld))
            for loader in args.loaders for name, src in trees.items()}
        rates = interleave(contenders, args.reps)
    finally:
        shutil.rmtree(args.root, ignore_errors=True)
    size = SHAPES[args.shape][0]
    print(f"# before/after, {args.shape} samples ({size:,} B), {args.reps} alternating reps\n")
    print(*machine.machine_lines(), f"- measured with: `{' '.join(machine.command())}`",
          *(f"- {name}: {src}" for name, src in trees.items()), sep="\n")
    unit = "GB/s" if args.task == "generate" else "samples/s"
    print(f"\n| task | tree | {unit} median | range | vs first |")
    print("|---|---|---|---|---|")
    first = next(iter(trees))
    spread = spreads(rates)
    for loader in args.loaders:
        base = spread[first, loader].median
        for name in trees:
            got = spread[name, loader]
            print(f"| {loader} | {name} | {got.median:,.3f} | {got.low:,.3f}-{got.high:,.3f} | "
                  f"{got.median / base:.3f} |")
    print("\n" + machine.load_line())
    path = record.write({f"{ld} {name} {unit}": v for (name, ld), v in rates.items()},
                        trees=trees, shape=args.shape, task=args.task)
    print(f"- record: {path}")


if __name__ == "__main__":
    main()
