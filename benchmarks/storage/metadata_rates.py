"""Metadata rates of this machine's disk: ``dliobench metadata`` on 1 and 2 ranks.

Usage: python -m benchmarks.storage.metadata_rates [--files 100000] [--subfolders 100]
           [--ranks 1 2] [--reps 2] [--cold] [--root /work/bench-md] [--src DIR]

Generates a file-per-sample dataset of ``--files`` npy files of 4 KiB in ``--subfolders``
subfolders (``dliobench generate``), then per repetition and rank count runs ``dliobench
metadata`` (``mpiexec -n R`` from this Python's venv for R > 1): stat, open, close of every
file, create and unlink of as many scratch files beside it. With ``--cold`` the kernel's
dentry and inode caches are dropped (``echo 2 > /proc/sys/vm/drop_caches``, root) before
each run, so stat and open go to the disk's metadata; otherwise they are answered from
memory, as right after generation. Prints markdown: per rank count and operation the median
over repetitions of the job's ops/s, the ranks' range, and the median p50/p99/max latency
in microseconds, machine info and the exact commands; deletes the data.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

from benchmarks.harness import machine
from benchmarks.harness.machine import run
from benchmarks.harness.records import Recorder

REPO = Path(__file__).resolve().parents[2]
OPS = ("stat", "open", "close", "create", "unlink")


def _dliobench(ranks: int) -> list[str]:
    cmd = [sys.executable, "-m", "dliobench"]
    if ranks == 1:
        return cmd
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
    return [mpiexec, "-n", str(ranks), *cmd]


def _drop_metadata_caches() -> None:
    try:
        Path("/proc/sys/vm/drop_caches").write_text("2\n")
    except OSError as exc:
        print(f"warning: cannot drop the dentry and inode caches ({exc})", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--subfolders", type=int, default=100)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--root", default="/work/bench-md")
    ap.add_argument("--src", default=str(REPO))
    args = ap.parse_args()
    record = Recorder(__file__, src=args.src)
    root = Path(args.root)
    overrides = [f"dataset.data_folder={root / 'data'}", f"dataset.num_files_train={args.files}",
                 f"dataset.num_subfolders_train={args.subfolders}", "dataset.format=npy",
                 "dataset.record_length_bytes=4096", "dataset.record_length_bytes_stdev=0"]
    try:
        run([*_dliobench(1), "generate", "--yes", "default", *overrides, "--no-progress",
             f"output.folder={root / 'out'}"], args.src)
        figures: dict[tuple[int, str], dict[str, list[float]]] = {}
        commands: dict[int, str] = {}
        for _ in range(args.reps):
            for ranks in args.ranks:
                if args.cold:
                    _drop_metadata_caches()
                out = root / "out" / f"r{ranks}"
                cmd = [*_dliobench(ranks), "metadata", "default", *overrides,
                       f"output.folder={out}"]
                commands[ranks] = " ".join(cmd)
                run(cmd, args.src)
                newest = max(out.glob("*/metadata.json"), key=lambda p: p.stat().st_mtime)
                meta = json.loads(newest.read_text())["metadata"]
                for op in OPS:
                    slot = figures.setdefault((ranks, op), {})
                    job = meta["ops"][op]
                    rates = [r["ops"][op]["ops_per_s"] for r in meta["ranks"]]
                    for key, value in (("rate", job["ops_per_s"]), ("min", min(rates)),
                                       ("max", max(rates)), ("p50", job["p50_s"] * 1e6),
                                       ("p99", job["p99_s"] * 1e6),
                                       ("pmax", job["max_s"] * 1e6)):
                        slot.setdefault(key, []).append(value)
        _report(args, figures, commands)
        results = {f"{r} rank(s) {op} {k}": v for (r, op), f in figures.items()
                   for k, v in f.items()}
        print(f"- record: {record.write(results, cold=args.cold, files=args.files)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _report(args: argparse.Namespace, figures: dict[tuple[int, str], dict[str, list[float]]],
            commands: dict[int, str]) -> None:
    med = statistics.median
    state = "cold (dentry and inode caches dropped before each run)" if args.cold else \
        "warm (attributes cached, as right after generation)"
    print(f"Metadata rates, {args.files:,} npy files of 4 KiB in {args.subfolders} subfolders, "
          f"{state}, medians of {args.reps} repetitions:\n")
    print("| ranks | op | job ops/s | ranks' ops/s | p50 us | p99 us | max us |")
    print("|---|---|---|---|---|---|---|")
    for (ranks, op), f in figures.items():
        print(f"| {ranks} | {op} | {med(f['rate']):,.0f} | {med(f['min']):,.0f}-"
              f"{med(f['max']):,.0f} | {med(f['p50']):.1f} | {med(f['p99']):.1f} | "
              f"{med(f['pmax']):,.0f} |")
    print()
    for line in [*machine.machine_lines(), *machine.code_lines(args.src),
                 *(f"- {r} rank(s): `{c}`" for r, c in commands.items()),
                 machine.load_line()]:
        print(line)


if __name__ == "__main__":
    main()
