"""Where the first touch of a run's in-flight memory lands: inside or before the counted window.

Usage: python -m benchmarks.loaders.first_touch --src TREE [TREE ...] [--reps 5] [--files 96]
       [--format npz] [--root /tmp/bench-first-touch] [--align]

One dataset of 16 MiB samples (one per file), page-cached; per repetition each tree in turn
runs ``dliobench run`` (native loader, compute 0, batch 8, 4 threads, prefetch 4, 1 epoch).
From its timeline.csv: the first step (outside the window), the mean wait of the counted steps
that fill the in-flight memory for the first time (steps 1-5: the prefetch depth and the batch
being handed over, 40 samples) and of the later ones, and samples/s from result.json. A loader
that reads into fresh memory pays the first touch (zeroing and a page fault per page; on a
freshly booted VM a host fault too) in steps 1-5; one that makes its memory before the window
pays it in step 0. Prints medians as markdown.

``--align``: instead, the CPU per 16 MiB file of ``read_files`` (the C extension of the first
tree, one thread) into memory made once and touched, starting 0, 16, 64 and 4,080 bytes into
a page, alternating, median of ``--reps``: ``np.empty`` of a large array starts 16 bytes in
(glibc's header before an mmap-ed chunk), where the kernel's copy from the page cache costs
more (``storage.buffers.page_aligned``).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.harness.records import Recorder


def run(tree: Path, args: list[str], out: Path) -> tuple[float, float, float, float]:
    """(samples/s, first step s, mean wait of steps 1-5 ms, of the later steps ms)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, "-m", "dliobench", "run", "-y", "workloads/default.yaml",
                    "reader.data_loader=native", "dataset.record_length_bytes_resize=0",
                    "--output", str(out), *args], check=True, capture_output=True, env=env,
                   cwd=tree)
    newest = max(out.iterdir(), key=lambda p: p.stat().st_mtime)
    metrics = json.loads((newest / "result.json").read_text())["metrics"]
    with open(newest / "timeline.csv", newline="") as handle:
        waits = [float(row["wait_s"]) for row in csv.DictReader(handle)]
    shutil.rmtree(newest)
    return (metrics["samples_per_s"], waits[0], statistics.mean(waits[1:6]) * 1e3,
            statistics.mean(waits[6:]) * 1e3)


OFFSETS = (0, 16, 64, 4080)  # bytes into a page


def alignment(tree: Path, files: list[Path], reps: int) -> None:
    """Print the median CPU ms per file of ``read_files`` into memory at each of ``OFFSETS``.
    """
    code = f"""
import mmap, statistics, sys, time
import numpy as np
from dliobench.storage._readfiles import read_files
names, size = {[str(f) for f in files]!r}, {files[0].stat().st_size}
def at(offset):
    out = []
    for _ in range(8):
        raw = np.empty(size + 2 * mmap.PAGESIZE, np.uint8)
        start = -raw.ctypes.data % mmap.PAGESIZE + offset
        out.append(raw[start:start + size])
        out[-1][::mmap.PAGESIZE] = 1
    return out
memory = {{off: at(off) for off in {OFFSETS!r}}}
got = {{off: [] for off in memory}}
for _ in range({reps}):
    for off, bufs in memory.items():
        cpu = time.thread_time()
        for i in range(0, len(names) - 7, 8):
            read_files(names[i:i + 8], bufs)
        got[off].append((time.thread_time() - cpu) / (len(names) // 8 * 8) * 1e3)
for off, ms in got.items():
    print(f"| {{off}} | {{statistics.median(ms):.3f}} |")
"""
    print(f"# read_files CPU per file ({files[0].stat().st_size:,} bytes), one thread, "
          f"{reps} reps, load {os.getloadavg()[0]:.1f}\n")
    print("| bytes into a page | CPU ms per file |\n|---|---|")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tree,
                   env={**os.environ, "PYTHONPATH": str(tree)})


def main() -> None:
    """Alternate the trees and print the medians."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", type=Path, nargs="+", required=True)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--files", type=int, default=96)
    p.add_argument("--format", default="npz", choices=("npz", "npy"))
    p.add_argument("--root", type=Path, default=Path("/tmp/bench-first-touch"))
    p.add_argument("--align", action="store_true",
                   help="the kernel copy's CPU by where in a page the memory starts")
    a = p.parse_args()
    record = Recorder(__file__, src=a.src[0])
    common = [f"dataset.data_folder={a.root / 'data'}", f"dataset.num_files_train={a.files}",
              "dataset.record_length_bytes=16777216", "dataset.record_length_bytes_stdev=0",
              f"dataset.format={a.format}", "reader.batch_size=8", "reader.read_threads=4",
              "reader.prefetch_size=4", "train.computation_time=0", "train.epochs=1",
              "--no-progress", "reader.odirect=false"]
    env = {**os.environ, "PYTHONPATH": str(a.src[0])}
    subprocess.run([sys.executable, "-m", "dliobench", "generate", "--yes",
                    "workloads/default.yaml", *common], check=True, capture_output=True,
                   env=env, cwd=a.src[0])
    for path in (a.root / "data").rglob(f"*.{a.format}"):
        path.read_bytes()
    if a.align:
        try:
            alignment(a.src[0], sorted((a.root / "data" / "train").rglob(f"*.{a.format}")),
                      a.reps)
        finally:
            shutil.rmtree(a.root, ignore_errors=True)
        return
    (a.root / "runs").mkdir(exist_ok=True)
    got: dict[Path, list[tuple[float, float, float, float]]] = {t: [] for t in a.src}
    loads = [os.getloadavg()[0]]
    try:
        for _ in range(a.reps):
            for tree in a.src:
                got[tree].append(run(tree, common, a.root / "runs"))
            loads.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(a.root, ignore_errors=True)
    print(f"# {a.format}, {a.files} files of 16 MiB, {a.reps} reps, load "
          f"{min(loads):.1f}-{max(loads):.1f}\n")
    print("| tree | samples/s | first step (s) | wait steps 1-5 (ms) | wait later steps (ms) |")
    print("|---|---|---|---|---|")
    for tree, rows in got.items():
        med = [statistics.median(r[k] for r in rows) for k in range(4)]
        print(f"| {tree} | {med[0]:,.0f} | {med[1]:.3f} | {med[2]:.1f} | {med[3]:.1f} |")
    columns = ("samples/s", "first step s", "wait steps 1-5 ms", "wait later steps ms")
    results = {f"{tree} {c}": [r[k] for r in rows] for tree, rows in got.items()
               for k, c in enumerate(columns)}
    print(f"- record: {record.write(results, format=a.format, files=a.files)}")


if __name__ == "__main__":
    main()
