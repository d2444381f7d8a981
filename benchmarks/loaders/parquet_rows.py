"""DLRM rows/s: dliobench's parquet reads against pyarrow's own best scan of the same files.

Usage: python -m benchmarks.loaders.parquet_rows [--files 8] [--rows 524288] [--reps 3]
       [--np 1 2] [--root /work/bench-parquet] [--src DIR [DIR ...]]

One DLRM-shaped dataset (workloads/dlrm.yaml: 160-byte rows of 40 float32 in 3 columns, row
groups of 8,192) is generated once and read page-cached at compute 0: by `dliobench run` with
the native and pytorch loaders (1 rank, and N ranks under mpiexec), and by pyarrow alone, each
file's row groups read with `ParquetFile.read_row_group` (and, separately, `iter_batches` of
16,384 rows) by a thread pool of 1, 2 and 4 threads, each with pyarrow's own column threads
(`use_threads=True`, its default) and without, the best median kept as "pyarrow's best".
With several `--src` trees (e.g. a `git worktree` of main beside a branch) each rep runs
dliobench from each in turn, so load changes hit both alike. Prints a markdown table with the
ratio and what one B200 needs (upstream's batch / compute time). Data is deleted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.harness import machine
from benchmarks.harness.records import Recorder

B200_ROWS_PER_S = 16_384 / 0.0005  # dlrm_b200.yaml @ 8349485: batch 16,384, 0.0005 s
COLUMNS = ["label", "numerical_features", "categorical_features"]


def shape(folder: Path, files: int, rows: int) -> list[str]:
    return [f"dataset.data_folder={folder}", f"dataset.num_files_train={files}",
            f"dataset.num_samples_per_file={rows}", "train.computation_time=0",
            "train.epochs=2", "--no-progress"]


def ours(folder: Path, out: Path, files: int, rows: int, loader: str, ranks: int,
         src: str) -> float:
    """rows/s of one `dliobench run` of the tree ``src`` (summed over ranks)."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "dliobench", "run", "--yes", "workloads/dlrm.yaml",
           *shape(folder, files, rows), f"reader.data_loader={loader}", "--output", str(out)]
    if ranks > 1:
        cmd = [str(Path(sys.executable).parent / "mpiexec"), "-n", str(ranks), *cmd]
    machine.run(cmd, src)
    result = json.loads(next(out.glob("*/result.json")).read_text())
    return float(result["metrics"]["samples_per_s"])


def pyarrow_scan(paths: list[Path], threads: int, how: str, use_threads: bool) -> float:
    """rows/s of pyarrow reading every row of ``paths`` (the three columns)."""
    import pyarrow.parquet as pq  # the parquet extra: imported when used

    def read(path: Path) -> int:
        handle = pq.ParquetFile(path)
        if how == "row_group":
            return sum(handle.read_row_group(i, columns=COLUMNS, use_threads=use_threads)
                       .num_rows for i in range(handle.num_row_groups))
        return sum(b.num_rows for b in handle.iter_batches(
            batch_size=16_384, columns=COLUMNS, use_threads=use_threads))

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        rows = sum(pool.map(read, paths))
    return rows / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--rows", type=int, default=524_288)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--np", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--root", type=Path, default=Path("/work/bench-parquet"))
    parser.add_argument("--src", nargs="+", default=[str(machine.REPO)],
                        help="dliobench source trees to run (alternating within each rep)")
    args = parser.parse_args()
    record = Recorder(__file__, src=args.src[0])
    shutil.rmtree(args.root, ignore_errors=True)
    data, out = args.root / "data", args.root / "out"
    results: dict[str, list[float]] = {}
    try:
        machine.run([sys.executable, "-m", "dliobench", "generate", "-y", "workloads/dlrm.yaml",
                     *shape(data, args.files, args.rows)])
        paths = sorted((data / "train").rglob("*.parquet"))
        nbytes = sum(p.stat().st_size for p in paths)
        pyarrow_scan(paths, 2, "row_group", True)  # warm the page cache
        for _ in range(args.reps):
            for ranks in args.np:
                for loader in ("native", "pytorch"):
                    for src in args.src:
                        name = f" [{Path(src).name}]" if len(args.src) > 1 else ""
                        results.setdefault(f"dliobench {loader}, {ranks} rank(s){name}",
                                           []).append(ours(data, out, args.files, args.rows,
                                                           loader, ranks, src))
            for how in ("row_group", "iter_batches"):
                for threads in (1, 2, 4):
                    for use_threads in (True, False):
                        results.setdefault(f"pyarrow {how}, {threads} thread(s), use_threads="
                                           f"{use_threads}", []).append(
                            pyarrow_scan(paths, threads, how, use_threads))
    finally:
        shutil.rmtree(args.root, ignore_errors=True)
    best = max(statistics.median(v) for k, v in results.items() if k.startswith("pyarrow"))
    print(f"# DLRM parquet rows/s: {args.files} files x {args.rows:,} rows "
          f"({nbytes / 1e6:,.0f} MB), page-cached, {args.reps} reps\n")
    code = dict.fromkeys(line for src in args.src for line in machine.code_lines(src))
    print(*machine.machine_lines(), *code, sep="\n")
    print("\n| reader | rows/s median | range | vs pyarrow's best | B200s fed at AU 1 |")
    print("|---|---|---|---|---|")
    for name, got in results.items():
        med = statistics.median(got)
        print(f"| {name} | {med:,.0f} | {min(got):,.0f}-{max(got):,.0f} | {med / best:.2f} | "
              f"{med / B200_ROWS_PER_S:.3f} |")
    print(f"\nOne B200 needs {B200_ROWS_PER_S:,.0f} rows/s (batch 16,384 per 0.0005 s).")
    print("\n" + machine.load_line())
    print(f"- record: {record.write(results, files=args.files, rows=args.rows)}")


if __name__ == "__main__":
    main()
