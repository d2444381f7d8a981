"""dliobench against DLIO 2.0.0 on the same dataset shape, same machine, same run.

Usage: python -m benchmarks.peers.peers [--shape small|large|all] [--reps 3] [--ranks 1 2]
           [--resize BYTES] [--dlio-venv /work/dlio-venv] [--root /work/bench-peers]

Each tool reads the files it generated (same format, sizes and layout: npz, one sample per
file), page-cached (every file is read once before the runs), with computation_time = 0, the
same batch size and read threads; runs alternate between the tools, several repetitions, and
medians are reported with their ratios. Also measured: wall time of a one-step run
(start-up to first batch plus writing results) and peak RSS of the largest process.
DLIO runs under its own Open MPI launcher (../shared/tools/install-dlio-peer.sh), dliobench
under the mpich wheel's mpiexec for more than one rank.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks.harness.records import Recorder
from benchmarks.peers import dlio_peer

REPO = Path(__file__).resolve().parents[2]
# Reads peak RSS of the largest descendant (mpirun's ranks included) after the command ends.
RSS_WRAPPER = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
               "print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
               "file=sys.stderr); sys.exit(r.returncode)")


@dataclass(frozen=True)
class Shape:
    """A dataset shape and the reader settings both tools use."""

    name: str
    files: int
    record_bytes: int
    batch: int = 7
    threads: int = 4
    epochs: int = 3
    resize: int = 0  # record_length_resize on both sides (DLIO's unet3d_a100 default: 2 MiB)


SHAPES = {"small": Shape("small", 8192, 65536),
          "large": Shape("large", 42, 146_600_628, batch=2)}  # >= 10 steps per epoch per rank


def run(cmd: list[str]) -> tuple[float, int, str]:
    """Run ``cmd`` (fail loudly); return wall seconds, peak RSS in bytes, and stderr+stdout."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", RSS_WRAPPER, *cmd], capture_output=True,
                          text=True, cwd=REPO)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])}... failed:\n{proc.stderr[-2000:]}")
    rss = next(int(line.split()[1]) * 1024 for line in proc.stderr.splitlines()
               if line.startswith("MAXRSS_KB"))
    return wall, rss, proc.stdout + proc.stderr


def dlio(args: argparse.Namespace, shape: Shape, ranks: int, folder: Path, out: Path,
         *extra: str) -> list[str]:
    """A DLIO 2.0.0 command line for this shape (unet3d_a100 workload, pytorch reader)."""
    return dlio_peer.command(args.dlio_venv, ranks, {
        **dlio_peer.npz_dataset(folder, shape.files, shape.record_bytes),
        "dataset.record_length_resize": shape.resize, "reader.batch_size": shape.batch,
        "reader.read_threads": shape.threads, "train.computation_time": 0,
        "train.epochs": shape.epochs, "workflow.checkpoint": False, "output.folder": out},
        *extra)


def ours(shape: Shape, ranks: int, folder: Path, out: Path, *extra: str) -> list[str]:
    """A dliobench command line for this shape."""
    launcher = [] if ranks == 1 else [str(Path(sys.executable).parent / "mpiexec"), "-n",
                                      str(ranks)]
    return [*launcher, sys.executable, "-m", "dliobench", "run", "--yes", "workloads/unet3d.yaml",
            f"dataset.data_folder={folder}", f"dataset.num_files_train={shape.files}",
            f"dataset.record_length_bytes={shape.record_bytes}",
            "dataset.record_length_bytes_stdev=0",
            f"dataset.record_length_bytes_resize={shape.resize}",
            f"reader.batch_size={shape.batch}", f"reader.read_threads={shape.threads}",
            "train.computation_time=0", f"train.epochs={shape.epochs}",
            "train.allreduce_bytes=0", "--output", str(out), "--no-progress", *extra]


def dlio_samples_per_s(out: Path) -> float:
    """DLIO's own training throughput (samples/s, summed over ranks) from its summary.json."""
    summary = json.loads(next(out.rglob("summary.json")).read_text())
    return float(summary["metric"]["train_throughput_mean_samples_per_second"])


def ours_samples_per_s(out: Path) -> float:
    """dliobench's samples/s from the newest result.json under ``out``."""
    newest = max(out.rglob("result.json"), key=lambda p: p.stat().st_mtime)
    rate = json.loads(newest.read_text())["metrics"]["samples_per_s"]
    if rate is None:
        raise RuntimeError(f"{newest}: no counted step; give each rank more files")
    return float(rate)


def warm(folder: Path) -> None:
    """Read every file once: both tools then read from the page cache."""
    for path in folder.rglob("*.npz"):
        with open(path, "rb", buffering=0) as handle:
            while handle.read(16 << 20):
                pass


@dataclass
class Contender:
    """One tool/loader/rank-count combination and its measurements."""

    name: str
    ranks: int
    rates: list[float]
    rss: list[int]


def generate(args: argparse.Namespace, shape: Shape, root: Path) -> tuple[Path, Path]:
    """Each tool writes its own copy of the dataset; both end up page-cached."""
    theirs, mine = root / f"dlio-{shape.name}", root / f"ours-{shape.name}"
    run(dlio(args, shape, 1, theirs, root / "dlio-gen", "++workload.workflow.generate_data=True",
             "++workload.workflow.train=False"))
    cmd = ours(shape, 1, mine, root / "runs")
    cmd[cmd.index("run")] = "generate"
    cmd.remove("--output")
    cmd.remove(str(root / "runs"))
    run(cmd)
    warm(theirs)
    warm(mine)
    return theirs, mine


def measure(args: argparse.Namespace, shape: Shape, root: Path) -> list[Contender]:
    """Alternate the tools for ``args.reps`` rounds at each rank count."""
    theirs, mine = generate(args, shape, root)
    contenders: list[Contender] = []
    for ranks in args.ranks:
        dl = Contender("DLIO 2.0.0 (pytorch)", ranks, [], [])
        nat = Contender("dliobench native", ranks, [], [])
        tor = Contender("dliobench pytorch", ranks, [], [])
        for rep in range(args.reps):
            out = root / f"dlio-out-{shape.name}-{ranks}-{rep}"
            _, rss, _ = run(dlio(args, shape, ranks, theirs, out,
                                 "++workload.workflow.generate_data=False",
                                 "++workload.workflow.train=True"))
            dl.rates.append(dlio_samples_per_s(out))
            dl.rss.append(rss)
            for who, loader in ((nat, "native"), (tor, "pytorch")):
                out = root / f"ours-out-{shape.name}-{ranks}-{rep}-{loader}"
                _, rss, _ = run(ours(shape, ranks, mine, out, f"reader.data_loader={loader}"))
                who.rates.append(ours_samples_per_s(out))
                who.rss.append(rss)
        contenders += [dl, nat, tor]
    return contenders


def startup(args: argparse.Namespace, shape: Shape, root: Path) -> list[tuple[str, float]]:
    """Median wall time of a one-step run (process start to exit) for each tool."""
    theirs, mine = root / f"dlio-{shape.name}", root / f"ours-{shape.name}"
    out: list[tuple[str, float]] = []
    walls = [run(dlio(args, shape, 1, theirs, root / f"dlio-start-{i}",
                      "++workload.workflow.generate_data=False",
                      "++workload.workflow.train=True", "++workload.train.total_training_steps=1",
                      "++workload.train.epochs=1"))[0] for i in range(args.reps)]
    out.append(("DLIO 2.0.0 (pytorch)", statistics.median(walls)))
    for loader in ("native", "pytorch"):
        walls = [run(ours(shape, 1, mine, root / "runs", f"reader.data_loader={loader}",
                          "train.total_training_steps=1"))[0] for _ in range(args.reps)]
        out.append((f"dliobench {loader}", statistics.median(walls)))
    return out


def table(shape: Shape, contenders: list[Contender]) -> list[str]:
    """Markdown rows: medians, ratio to DLIO at the same rank count, peak RSS."""
    rows = []
    for c in contenders:
        base = next(d for d in contenders if d.ranks == c.ranks and d.name.startswith("DLIO"))
        rate, ref = statistics.median(c.rates), statistics.median(base.rates)
        rows.append(f"| {shape.name} ({shape.record_bytes:,} B) | {c.ranks} | {c.name} | "
                    f"{rate:,.1f} | {rate * shape.record_bytes / 1e6:,.0f} | "
                    f"{rate / ref:.2f}x | {max(c.rss) / 1e9:.2f} |")
    return rows


def main() -> None:
    """Run the comparison and print markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=[*SHAPES, "all"], default="all")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--dlio-venv", default="/work/dlio-venv")
    parser.add_argument("--root", type=Path, default=Path("/work/bench-peers"))
    parser.add_argument("--resize", type=int, default=0,
                        help="record_length_resize for both tools, bytes (default 0: as read; "
                             "DLIO's unet3d_a100 workload sets 2097152)")
    args = parser.parse_args()
    record = Recorder(__file__)
    results: dict[str, list[float]] = {}
    shapes = list(SHAPES.values()) if args.shape == "all" else [SHAPES[args.shape]]
    shapes = [replace(s, resize=args.resize) for s in shapes]
    print(f"# dliobench vs DLIO 2.0.0, {time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, {args.reps} reps, "
          f"resize {args.resize}\n")
    print("| dataset | ranks | reader | samples/s | MB/s | vs DLIO | peak RSS GB |")
    print("|---|---|---|---|---|---|---|")
    try:
        for shape in shapes:
            args.root.mkdir(parents=True, exist_ok=True)
            contenders = measure(args, shape, args.root)
            for row in table(shape, contenders):
                print(row, flush=True)
            for c in contenders:
                results[f"{shape.name} {c.name} {c.ranks} rank(s) samples/s"] = c.rates
                results[f"{shape.name} {c.name} {c.ranks} rank(s) peak RSS"] = [
                    float(x) for x in c.rss]
            for who, wall in startup(args, shape, args.root):
                results[f"{shape.name} {who} one-step run wall s"] = [wall]
                print(f"| {shape.name} | one-step run | {who} | wall {wall:.2f} s "
                      "(start-up + first batch + results) | | | |", flush=True)
            shutil.rmtree(args.root, ignore_errors=True)
    finally:
        shutil.rmtree(args.root, ignore_errors=True)
    print(f"\n- record: {record.write(results, resize=args.resize)}")


if __name__ == "__main__":
    main()
