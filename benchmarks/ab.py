"""Before/after: the same `dliobench run` from two or more source trees, alternating.

Usage: python benchmarks/ab.py --src NAME=DIR [NAME=DIR ...] [--reps 5]
       [--shape small|large] [--loaders native pytorch] [--root /work/bench-ab]

Each source tree (e.g. a `git clone` checked out at the commit to measure) generates its own
copy of the dataset (manifest formats may differ between versions) and reads it page-cached
with compute 0, the trees taking turns run by run, so a noisy machine disturbs them alike.
Prints samples/s per tree and loader: the median, the range of the repetitions, and the
median's ratio to the first tree's. Data is deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

import benchinfo

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
    benchinfo.run([sys.executable, "-m", "dliobench", "run", "workloads/default.yaml",
                   *overrides(shape, folder, out, loader)], src=src)
    result = next(out.glob("*/result.json"))
    return float(json.loads(result.read_text())["metrics"]["samples_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", nargs="+", required=True, metavar="NAME=DIR")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--shape", choices=list(SHAPES), default="small")
    parser.add_argument("--loaders", nargs="+", default=["native", "pytorch"])
    parser.add_argument("--root", type=Path, default=Path("/work/bench-ab"))
    args = parser.parse_args()
    trees = dict(item.split("=", 1) for item in args.src)
    rates: dict[tuple[str, str], list[float]] = {(t, ld): [] for t in trees for ld in args.loaders}
    shutil.rmtree(args.root, ignore_errors=True)
    try:
        for name, src in trees.items():  # generate, then read once to warm the cache
            for loader in args.loaders:
                run_once(src, args.shape, args.root / name, args.root / "out", loader)
        for _ in range(args.reps):
            for loader in args.loaders:
                for name, src in trees.items():
                    rate = run_once(src, args.shape, args.root / name, args.root / "out", loader)
                    rates[name, loader].append(rate)
    finally:
        shutil.rmtree(args.root, ignore_errors=True)
    size = SHAPES[args.shape][0]
    print(f"# before/after, {args.shape} samples ({size:,} B), {args.reps} alternating reps\n")
    print(*benchinfo.machine_lines(), f"- measured with: `{' '.join(['python', *sys.argv])}`",
          *(f"- {name}: {src}" for name, src in trees.items()), sep="\n")
    print("\n| loader | tree | samples/s median | range | vs first |")
    print("|---|---|---|---|---|")
    first = next(iter(trees))
    for loader in args.loaders:
        base = statistics.median(rates[first, loader])
        for name in trees:
            got = rates[name, loader]
            med = statistics.median(got)
            print(f"| {loader} | {name} | {med:,.1f} | {min(got):,.1f}-{max(got):,.1f} | "
                  f"{med / base:.3f} |")
    print("\n" + benchinfo.load_line())


if __name__ == "__main__":
    main()
