"""Measure JPEG generation for retinanet-sized files (322,957 bytes): files/s and MB/s.

Usage:
    python -m benchmarks.generation.jpeg_generation [--root /tmp/bench-jpeg] [--files 2000]
        [--reps 3] [--size 322957] [--np 1] [--json FILE]

Per repetition it runs `dliobench generate workloads/retinanet.yaml` into a fresh folder
(dataset.num_files_train=--files, as one process or under `mpiexec -n N`), times the command
(Python start-up included) plus a trailing `sync`, and reads the files' count and bytes from
disk, so the mean stored size is checked against the request. Also times the encoder alone
(Pillow encode + COM padding in memory, one core) to separate CPU from storage. Prints
markdown: medians in files/s and MB/s (10^6 bytes/s), the mean file size, the command.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.harness.machine import command
from benchmarks.harness.records import Recorder

REPO = Path(__file__).resolve().parents[2]


def encode_rate(size: int, count: int = 50) -> float:
    """Files/s of the encoder alone (one core, no storage)."""
    from dliobench.formats._image import to_pixels
    from dliobench.formats.jpeg import FORMAT, padded_jpeg

    data = np.random.default_rng(0).integers(0, 256, (1, size), dtype=np.uint8)
    pixels = to_pixels(data, "jpeg")
    start = time.perf_counter()
    for _ in range(count):
        padded_jpeg(pixels, size, FORMAT.save_options)
    return count / (time.perf_counter() - start)


def one_run(root: Path, files: int, size: int, nprocs: int) -> dict[str, float]:
    """Generate into a fresh folder; the files, bytes and seconds it took."""
    folder = root / "data"
    shutil.rmtree(folder, ignore_errors=True)
    cmd = [sys.executable, "-m", "dliobench", "generate", str(REPO / "workloads/retinanet.yaml"),
           f"dataset.data_folder={folder}", f"dataset.num_files_train={files}",
           f"dataset.record_length_bytes={size}", "--no-progress", "--yes"]
    if nprocs > 1:
        cmd = ["mpiexec", "-n", str(nprocs), *cmd]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=root)
    subprocess.run(["sync"], check=True)
    seconds = time.perf_counter() - start
    sizes = [p.stat().st_size for p in folder.rglob("*.jpg")]
    return {"files": len(sizes), "bytes": sum(sizes), "seconds": seconds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path("/tmp/bench-jpeg"))
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--size", type=int, default=322_957)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--np", type=int, default=1)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    record = Recorder(__file__)
    args.root.mkdir(parents=True, exist_ok=True)
    runs = [one_run(args.root, args.files, args.size, args.np) for _ in range(args.reps)]
    shutil.rmtree(args.root / "data", ignore_errors=True)
    fps = statistics.median(r["files"] / r["seconds"] for r in runs)
    mbps = statistics.median(r["bytes"] / r["seconds"] / 1e6 for r in runs)
    mean = statistics.mean(r["bytes"] / r["files"] for r in runs)
    enc = encode_rate(args.size)
    print(f"| files | size requested | mean file | ranks | files/s | MB/s | encoder alone |\n"
          f"|---|---|---|---|---|---|---|\n"
          f"| {args.files} | {args.size:,} | {mean:,.0f} | {args.np} | {fps:,.0f} | "
          f"{mbps:,.1f} | {enc:,.0f} files/s ({enc * args.size / 1e6:,.0f} MB/s) |")
    print(f"\ncommand: {' '.join(command())}  (medians of {args.reps}; wall time with start-up "
          "and sync)")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "encode_files_per_s": enc}, indent=1))
    results = {"files/s": [r["files"] / r["seconds"] for r in runs],
               "MB/s": [r["bytes"] / r["seconds"] / 1e6 for r in runs]}
    print(f"- record: {record.write(results, runs=runs, encode_files_per_s=enc)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
