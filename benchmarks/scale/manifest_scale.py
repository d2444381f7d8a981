"""A 100 M-file manifest: how long a rank of 1,024 takes to plan its shard, and its memory.

Usage: python -m benchmarks.scale.manifest_scale [--files 100000000] [--ranks 1024]
       [--probe 0 511 1023] [--root /work/bench-manifest] [--keep]

Writes real (not sparse) schema-2 columns for ``--files`` files of random sizes, streamed in
chunks through the backend's writer as compaction writes them (timed), then, for each probed
rank, in a fresh process after dropping the page cache: resolve the plan, load the manifest
header, gather the sizes of the files the rank reads (2 epochs, sample and file shuffles on),
and report the time, the tracemalloc peak and the peak RSS growth. Goal (Seam issue): under
5 s and 64 MB per rank. Prints a markdown report; the data is deleted unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import machine
from benchmarks.harness.records import Recorder

sys.path.insert(0, str(machine.REPO))
from tests.unit.test_manifest_scale import PLAN_ONE_RANK  # the test's probe


def overrides(files: int) -> list[str]:
    return [f"dataset.num_files_train={files}", "dataset.num_samples_per_file=1",
            "dataset.record_length_bytes=100000", "dataset.record_length_bytes_stdev=1000",
            "reader.batch_size=4", "train.epochs=2", "reader.sample_shuffle=seed",
            "reader.file_shuffle=seed"]


def write_manifest(root: Path, files: int) -> float:
    """Real columns of ``files`` random sizes and CRCs, streamed in chunks through the
    backend's writer as compaction writes them, and the header naming them."""
    from dliobench.config.load import load
    from dliobench.dataset.columns import CHUNK_ROWS, npy_header
    from dliobench.dataset.manifest import Manifest
    from dliobench.storage.posix import PosixBackend

    cfg, _ = load(None, [f"dataset.data_folder={root}", *overrides(files)])
    backend = PosixBackend(str(root))
    manifest = Manifest.new(backend, cfg.dataset, ())
    manifest.num_files, manifest.generation = files, 1
    backend.make_room("dliobench-manifest")
    rng = np.random.default_rng(1)
    start = time.perf_counter()
    for name, dtype, low, high in (("size", "<i8", 90_000, 110_000), ("crc", "<u4", 0, 2**32)):
        writer = backend.open_write(manifest.column_key(name))
        writer.write(npy_header(dtype, (files,)))
        for first in range(0, files, CHUNK_ROWS):
            count = min(CHUNK_ROWS, files - first)
            writer.write(rng.integers(low, high, count).astype(dtype).tobytes())
        writer.commit()
    manifest.save_header()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=100_000_000)
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--probe", type=int, nargs="+", default=[0, 511, 1023])
    parser.add_argument("--root", type=Path, default=Path("/work/bench-manifest"))
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    record = Recorder(__file__)
    shutil.rmtree(args.root, ignore_errors=True)
    args.root.mkdir(parents=True)
    try:
        write_s = write_manifest(args.root, args.files)
        on_disk = sum(p.stat().st_size for p in (args.root / "dliobench-manifest").iterdir())
        rows = []
        for rank in args.probe:
            machine.drop_caches()
            done = subprocess.run([sys.executable, "-c", PLAN_ONE_RANK, str(args.root), str(rank),
                                   str(args.ranks), *overrides(args.files)],
                                  capture_output=True, text=True, check=True,
                                  cwd=machine.REPO)
            rows.append((rank, json.loads(done.stdout)))
    finally:
        if not args.keep:
            shutil.rmtree(args.root, ignore_errors=True)
    print(f"# 100 M-file manifest: one rank's plan, {args.files:,} files, {args.ranks} ranks\n")
    print(*machine.machine_lines(), *machine.code_lines(machine.REPO), sep="\n")
    print(f"- columns written (streamed in 1 M-row chunks): {write_s:.1f} s, "
          f"{on_disk / 1e9:.2f} GB on disk\n")
    print("| rank | files it reads (2 epochs) | plan + sizes, cold cache (s) | tracemalloc "
          "peak (MB) | peak RSS growth (MB) |")
    print("|---|---|---|---|---|")
    for rank, got in rows:
        print(f"| {rank} | {got['files']:,} | {got['seconds']:.2f} | {got['traced'] / 1e6:.1f} "
              f"| {got['rss_growth'] / 1e6:.1f} |")
    print("\n" + machine.load_line())
    results = {f"rank {rank} {key}": value for rank, got in rows for key, value in got.items()}
    path = record.write({**results, "write s": write_s, "bytes on disk": on_disk},
                        files=args.files, ranks=args.ranks)
    print(f"- record: {path}")


if __name__ == "__main__":
    main()
