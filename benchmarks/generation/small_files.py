"""Small-file generation against fio creating and writing the same files on the same disk.

Usage:
    python -m benchmarks.generation.small_files [--root /work/bench-smallgen] [--files 100000]
        [--reps 3] [--np 1 2] [--fio-jobs 1 2] [--subfolders 0] [--src DIR [DIR ...]]

Per repetition, in a rotating order, it runs (a) `dliobench generate` of ``--files`` npy
files of one 3,968-byte sample (files of exactly 4 KiB) into a fresh folder, as one process
and under `mpiexec -n N` for each --np, from each source tree --src (e.g. `git worktree`s
of the commits to compare, named by their commit); (b) fio creating and writing as many 4 KiB files
(`--create_on_open=1 --rw=write --bs=4k --ioengine=psync`), the files split over --fio-jobs
processes. Time: wall time of the command plus a trailing `sync` (dliobench's start-up,
manifest and page-cache eviction included; fio's setup included); fio's own run time and
dliobench's logged generation time are recorded beside it. A cache drop precedes every run;
the load average and the CPU share other processes took are recorded; every dataset is
deleted after measuring. Prints markdown: median files/s per tool and the ratios to fio.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.generation import generation as gen
from benchmarks.harness import machine
from benchmarks.harness.records import Recorder

REPO = Path(__file__).resolve().parents[2]
FILE_BYTES = 4096
SAMPLE_BYTES = FILE_BYTES - 128  # an npy header of a (1, n) uint8 array is 128 bytes
MPIEXEC = Path(sys.executable).parent / "mpiexec"


@dataclass
class Run:
    """One measured run of one tool."""

    tool: str
    rep: int
    files: int
    seconds: float  # wall time of the command + the trailing sync
    own_s: float  # the tool's own figure: fio's run time, dliobench's logged generation time
    load1: float
    others_cpu: float

    @property
    def rate(self) -> float:
        """Files per second, wall time and sync."""
        return self.files / self.seconds


def dliobench_cmd(args: argparse.Namespace, folder: Path, ranks: int) -> list[str]:
    """The `dliobench generate` command of the shape into ``folder``."""
    launcher = [sys.executable, "-m", "dliobench"]
    if ranks > 1:
        launcher = [str(MPIEXEC), "-n", str(ranks), *launcher]
    return [*launcher, "generate", "default", "dataset.format=npy",
            f"dataset.record_length_bytes={SAMPLE_BYTES}", "dataset.record_length_bytes_stdev=0",
            f"dataset.num_files_train={args.files}",
            f"dataset.num_subfolders_train={args.subfolders}",
            f"dataset.data_folder={folder}", f"output.folder={folder.parent / 'out'}",
            "--no-progress"]


def fio_cmd(args: argparse.Namespace, folder: Path, jobs: int) -> list[str]:
    """fio creating and writing the same number of 4 KiB files over ``jobs`` processes."""
    return ["fio", "--name=small", f"--directory={folder}", f"--numjobs={jobs}",
            f"--nrfiles={args.files // jobs}", f"--filesize={FILE_BYTES}",
            f"--bs={FILE_BYTES}", "--rw=write", "--ioengine=psync", "--create_on_open=1",
            "--openfiles=1", "--file_service_type=sequential", "--group_reporting",
            "--output-format=json"]


def run_dliobench(args: argparse.Namespace, work: Path, ranks: int,
                  src: str) -> tuple[int, float, float]:
    """(files, wall + sync seconds, logged generation seconds) of one generation."""
    folder = work / "data"
    t0 = time.perf_counter()
    proc = machine.run(dliobench_cmd(args, folder, ranks), src)
    seconds = time.perf_counter() - t0 + gen.timed_sync()
    files, nbytes = gen.manifest_totals(folder)
    if files != args.files or nbytes != files * FILE_BYTES:
        raise RuntimeError(f"expected {args.files} files of {FILE_BYTES} bytes in {folder}")
    logged = re.search(r"wrote \d+ of \d+ files, .* in ([\d.]+) s", proc.stdout)
    return files, seconds, float(logged[1]) if logged else float("nan")


def run_fio(args: argparse.Namespace, work: Path, jobs: int,
            src: str = "") -> tuple[int, float, float]:
    """(files, wall + sync seconds, fio's own run time) of one fio job set."""
    folder = work / "fio"
    folder.mkdir()
    t0 = time.perf_counter()
    proc = gen.run(fio_cmd(args, folder, jobs), cwd=work)
    seconds = time.perf_counter() - t0 + gen.timed_sync()
    job = json.loads(proc.stdout[proc.stdout.index("{"):])["jobs"][0]
    files = sum(1 for _ in folder.iterdir())
    if files != args.files // jobs * jobs:
        raise RuntimeError(f"fio left {files} files in {folder}")
    return files, seconds, job["write"]["runtime"] / 1e3


def measure(args: argparse.Namespace) -> list[Run]:
    """Every tool ``args.reps`` times in a rotating order; each dataset deleted after."""
    tools = {**{f"dliobench {commit(src)}" + (f" np={n}" if n > 1 else ""): (run_dliobench, n, src)
                for src in args.src for n in args.np},
             **{f"fio {j} job{'s' if j > 1 else ''}": (run_fio, j, "") for j in args.fio_jobs}}
    names, runs = list(tools), []
    for rep in range(args.reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            work = Path(args.root) / "run"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            machine.drop_caches()
            busy0, ours0, load = gen.busy_cpu_s(), gen.children_cpu_s(), gen.load1()
            t0 = time.perf_counter()
            try:
                fn, n, src = tools[name]
                files, seconds, own = fn(args, work, n, src)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            wall = time.perf_counter() - t0
            others = gen.busy_cpu_s() - busy0 - (gen.children_cpu_s() - ours0)
            share = max(others, 0.0) / ((os.cpu_count() or 1) * wall)
            run = Run(name, rep, files, seconds, own, load, share)
            runs.append(run)
            print(f"  rep {rep} {name:16s} {run.rate:8.0f} files/s ({seconds:.2f} s; own "
                  f"figure {files / own:.0f} files/s; load {load:.1f}, others "
                  f"{run.others_cpu:.0%} CPU)", file=sys.stderr, flush=True)
    return runs


def report(args: argparse.Namespace, runs: list[Run]) -> str:
    """Markdown: machine, table of medians, ratios, commands."""
    by: dict[str, list[Run]] = {}
    for r in runs:
        by.setdefault(r.tool, []).append(r)
    med = {t: statistics.median(r.rate for r in rs) for t, rs in by.items()}
    own = {t: statistics.median(r.files / r.own_s for r in rs) for t, rs in by.items()}
    df = gen.run(["df", "-T", str(args.root)]).stdout.splitlines()[-1].split()
    out = ["## Small-file generation against fio", "", *machine.machine_lines(),
           f"- file system: {args.root} on {df[0]} ({df[1]})",
           *[line for src in args.src for line in machine.code_lines(src)],
           machine.load_line(), "",
           f"{args.files:,} files of {FILE_BYTES:,} bytes, {args.reps} repetitions; files/s = "
           "files / (wall time of the command + a trailing `sync`); *own figure*: fio's "
           "reported run time, dliobench's logged generation time.", "",
           "| tool | median files/s | runs (files/s) | own figure: median files/s | "
           "load (1 min) at start | CPU taken by others |", "|---|---|---|---|---|---|"]
    for tool, rs in by.items():
        out.append(f"| {tool} | {med[tool]:,.0f} | {', '.join(f'{r.rate:,.0f}' for r in rs)} | "
                   f"{own[tool]:,.0f} | {', '.join(f'{r.load1:.1f}' for r in rs)} | "
                   f"{', '.join(f'{r.others_cpu:.0%}' for r in rs)} |")
    fios = [t for t in by if t.startswith("fio")]
    ours = [t for t in by if t.startswith("dliobench")]
    out.append("")
    if fios:
        best = max(fios, key=lambda t: med[t])
        for tool in ours:
            ratio = med[tool] / med[best]
            out.append(f"- {tool} / {best} (the faster fio): **{ratio:.2f}** (goal 0.7: "
                       f"{'met' if ratio >= 0.7 else f'missed by {0.7 - ratio:.2f}'}); against "
                       f"fio's own run time {own[tool] / own[best]:.2f}")
    cmds = [f"cd {src} && PYTHONPATH={src} " + " ".join(
        dliobench_cmd(args, Path(args.root, "run", "data"), n)) for src in args.src
        for n in args.np]
    cmds += [" ".join(fio_cmd(args, Path(args.root, "run", "fio"), j)) for j in args.fio_jobs]
    return "\n".join([*out, "", "```sh", *cmds, "```", ""])


def commit(src: str) -> str:
    """The short commit a source tree is at."""
    return gen.run(["git", "-C", src, "log", "-1", "--format=%h"]).stdout.strip()


def main() -> None:
    """Measure and print the markdown report."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default="/work/bench-smallgen")
    p.add_argument("--files", type=int, default=100_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--np", type=int, nargs="+", default=[1, 2])
    p.add_argument("--fio-jobs", type=int, nargs="+", default=[1, 2])
    p.add_argument("--subfolders", type=int, default=0)
    p.add_argument("--src", nargs="+", default=[str(REPO)],
                   help="dliobench source trees to measure (default: this one)")
    args = p.parse_args()
    Path(args.root).mkdir(parents=True, exist_ok=True)
    record = Recorder(__file__, src=args.src[0])
    runs = measure(args)
    print(report(args, runs))
    results: dict[str, list[float]] = {}
    for r in runs:
        results.setdefault(f"{r.tool} files/s", []).append(r.rate)
    print(f"\n- record: {record.write(results, files=args.files, runs=[asdict(r) for r in runs])}")


if __name__ == "__main__":
    main()
