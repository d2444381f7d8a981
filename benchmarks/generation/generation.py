"""Measure dataset generation throughput against `dd` and DLIO 2.0.0 on one file system.

Usage:
    python -m benchmarks.generation.generation [--root /work/bench-gen] [--shape unet3d|small|all]
        [--reps 3] [--np 1 2] [--dlio-np 1 2] [--no-dlio] [--quiet-below 0.15] [--json FILE]
        [--src DIR]    # DIR: a `git clone` of the commit to measure (default: installed)

Per shape and repetition, in a rotating order, it runs (a) `dd if=/dev/zero of=F bs=4M
count=512 oflag=direct` (rate from dd's own byte count and seconds), and the same dd copying
2 GiB of random bytes from /dev/shm (a virtual disk may store zeros for less), (b) `dliobench
generate` into a fresh folder, as one process and under `mpiexec -n N` for each --np (bytes
from the manifest, time = wall time of the command, Python start-up included, plus a trailing
`sync`), (c) DLIO 2.0.0 generating the same shape when its venv
exists (time = "Starting data generation" to "Generation done" in its log: start-up excluded,
and DLIO does not fsync, so its files may still be in the page cache; the `sync` after it is
recorded apart). Each dataset is deleted after measuring; `sync`, a page-cache drop and a
wait for other processes to leave the CPUs (mostly) idle precede every run, and the CPU
share other processes took during each run is recorded (a disturbed run shows there).
Prints markdown: medians in GB/s (10^9 bytes/s), the ratios, machine info and the exact
commands. Needs root for the cache drop (else it warns and goes on).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np

from benchmarks.harness import machine
from benchmarks.harness.records import Recorder
from benchmarks.peers import dlio_peer

REPO = Path(__file__).resolve().parents[2]
DD_ARGS = ["bs=4M", "count=512", "oflag=direct"]
RANDOM_SOURCE = Path(f"/dev/shm/dliobench-gen-random-{os.getpid()}.bin")  # dd random: from RAM
DLIO_STAMP = r"\[INFO\] (\S+) {}"
LEGEND = (
    "GB/s = bytes of the files written / time (10^9 bytes/s). Time: dd's own figure; "
    "dliobench: wall time of the command (start-up included) + a trailing `sync`; DLIO: its "
    "logged generation phase (start-up excluded; it does not fsync), and *incl. sync* adds the "
    "`sync` run right after it. *CPU taken by others*: share of all CPUs used by other "
    "processes and kernel threads during each run. *Extra disk traffic*: bytes the device read "
    "and wrote beyond the files' bytes (libraries loaded at start-up after the cache drop, "
    "file-system journal, other processes' I/O)."
)


@dataclass(frozen=True)
class Shape:
    """A dataset shape: npz files of one sample each."""

    name: str
    files: int
    record_bytes: int


SHAPES = {
    "unet3d": Shape("unet3d", math.ceil(4e9 / 146_600_628), 146_600_628),
    "small": Shape("small", 20_000, 64 << 10),
}


@dataclass
class Sample:
    """One measured run of one tool."""

    shape: str
    tool: str
    rep: int
    bytes: int
    seconds: float
    sync_s: float
    wall_s: float
    load1: float
    others_cpu: float = 0.0
    extra_io_gb: float = 0.0

    @property
    def gbps(self) -> float:
        """Throughput in 10^9 bytes per second, as timed for the tool."""
        return self.bytes / self.seconds / 1e9

    @property
    def gbps_durable(self) -> float:
        """Throughput counting the trailing sync too (DLIO's time excludes it)."""
        extra = self.sync_s if self.tool.startswith("DLIO") else 0.0
        return self.bytes / (self.seconds + extra) / 1e9


Runner = Callable[[Path, Shape, int], "Sample"]


def run(cmd: list[str], cwd: Path | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command, raise with its output when it fails."""
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "LC_ALL": "C", **(env or {})}, check=False)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return proc


def timed_sync() -> float:
    """Seconds a `sync` takes (dirty pages still to be written)."""
    t0 = time.perf_counter()
    os.sync()
    return time.perf_counter() - t0


def manifest_totals(folder: Path) -> tuple[int, int]:
    """(files, bytes) the dataset's manifest records: schema 1 (one JSON document) or 2 (a
    header naming .npy columns), so any version can be measured."""
    legacy = folder / "dliobench-manifest.json"
    if legacy.exists():
        files = json.loads(legacy.read_text())["files"]
        return len(files), sum(files.values())
    header = json.loads((folder / "dliobench-manifest/manifest.json").read_text())
    if header["journals"]:
        raise RuntimeError(f"the manifest in {folder} has journals not folded in")
    sizes = np.load(folder / header["columns"]["size"])
    held = sizes[sizes >= 0]
    return int(held.size), int(held.sum())


def tree_bytes(folder: Path) -> int:
    """Total size of the regular files under ``folder``."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def load1() -> float:
    """The one-minute load average."""
    return os.getloadavg()[0]


def busy_cpu_s() -> float:
    """CPU seconds spent so far by the whole machine (all cores, not idle or iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    """CPU seconds spent by this script's finished child processes (and theirs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wait_quiet(below: float, timeout_s: float) -> None:
    """Wait (up to ``timeout_s``) until other processes use less than ``below`` of the CPUs."""
    deadline = time.monotonic() + timeout_s
    while True:
        busy0 = busy_cpu_s()
        time.sleep(2.0)
        share = (busy_cpu_s() - busy0) / (2.0 * (os.cpu_count() or 1))
        if share < below or time.monotonic() > deadline:
            return
        print(f"  waiting: other processes use {share:.0%} of the CPUs", file=sys.stderr,
              flush=True)


def disk_bytes(device: str) -> int:
    """Bytes read plus written so far by block device ``device`` (0 when not listed)."""
    name = Path(device).name
    for line in Path("/proc/diskstats").read_text().splitlines():
        f = line.split()
        if f[2] == name:
            return (int(f[5]) + int(f[9])) * 512
    return 0


def measured(tool: Runner, work: Path, shape: Shape, rep: int, device: str) -> Sample:
    """Run ``tool``; record the CPU share other processes took meanwhile and the disk traffic
    beyond the tool's file bytes (its own metadata and journal, and other processes' I/O)."""
    busy0, ours0, io0, t0 = busy_cpu_s(), children_cpu_s(), disk_bytes(device), time.perf_counter()
    sample = tool(work, shape, rep)
    wall = time.perf_counter() - t0
    others = busy_cpu_s() - busy0 - (children_cpu_s() - ours0)
    sample.others_cpu = max(others, 0.0) / (wall * (os.cpu_count() or 1))
    sample.extra_io_gb = (disk_bytes(device) - io0 - sample.bytes) / 1e9 if io0 else math.nan
    return sample


def run_dd(work: Path, shape: Shape, rep: int, source: str = "/dev/zero") -> Sample:
    """(a) dd of 2 GiB with O_DIRECT from ``source``; the rate from dd's own report."""
    target = work / "dd.bin"
    t0 = time.perf_counter()
    proc = run(["dd", f"if={source}", f"of={target}", *DD_ARGS])
    wall = time.perf_counter() - t0
    found = re.search(r"^(\d+) bytes .* copied, ([\d.e+-]+) s", proc.stderr, re.M)
    if not found:
        raise RuntimeError(f"cannot parse dd's output: {proc.stderr!r}")
    tool = "dd" if source == "/dev/zero" else "dd random"
    return Sample(shape.name, tool, rep, int(found[1]), float(found[2]), 0.0, wall, load1())


def make_random_source() -> None:
    """2 GiB of random bytes in memory for `dd random` (removed by main at the end)."""
    if not RANDOM_SOURCE.exists() or RANDOM_SOURCE.stat().st_size < 2 << 30:
        with open(RANDOM_SOURCE, "wb") as out:
            for _ in range(32):
                out.write(os.urandom(64 << 20))


def dliobench_cmd(args: argparse.Namespace, shape: Shape, folder: Path,
                  nprocs: int = 1) -> list[str]:
    """The `dliobench generate` command line for ``shape`` into ``folder``."""
    src = Path(args.src) if args.src else REPO
    launcher = [sys.executable, "-m", "dliobench"] if args.src else [args.dliobench]
    if nprocs > 1:
        launcher = [str(Path(sys.executable).parent / "mpiexec"), "-n", str(nprocs), *launcher]
    return [*launcher, "generate", str(src / "workloads" / "unet3d.yaml"),
            "dataset.format=npz", "dataset.num_samples_per_file=1",
            f"dataset.data_folder={folder}", f"dataset.num_files_train={shape.files}",
            f"dataset.record_length_bytes={shape.record_bytes}",
            "dataset.record_length_bytes_stdev=0", "--no-progress"]


def run_dliobench(args: argparse.Namespace, work: Path, shape: Shape, rep: int,
                  nprocs: int = 1) -> Sample:
    """(b) dliobench generate; time = wall time of the command + a trailing sync."""
    folder = work / "data"
    cmd = dliobench_cmd(args, shape, folder, nprocs)
    t0 = time.perf_counter()
    if args.src:  # run from inside the tree: `python -m` puts the current folder first
        run(cmd, cwd=Path(args.src), env={"PYTHONPATH": args.src})
    else:
        run(cmd)
    wall = time.perf_counter() - t0
    sync_s = timed_sync()
    files, nbytes = manifest_totals(folder)
    if files != shape.files or nbytes != tree_bytes(folder / "train"):
        raise RuntimeError(f"manifest and files disagree in {folder}")
    return Sample(shape.name, dliobench_name(nprocs), rep, nbytes, wall + sync_s, sync_s, wall,
                  load1())


def dliobench_name(nprocs: int) -> str:
    """The tool's name in the tables: "dliobench" for one process."""
    return "dliobench" if nprocs == 1 else f"dliobench np={nprocs}"


def dlio_cmd(args: argparse.Namespace, shape: Shape, folder: Path, out: Path,
             nprocs: int) -> list[str]:
    """DLIO 2.0.0's own launcher and generation-only workflow for ``shape``."""
    return dlio_peer.command(args.dlio_venv, nprocs, {
        "workflow.generate_data": True, "workflow.train": False, "workflow.checkpoint": False,
        **dlio_peer.npz_dataset(folder, shape.files, shape.record_bytes),
        "output.folder": out})


def dlio_phase_seconds(log: str) -> float:
    """Seconds between DLIO's "Starting data generation" and "Generation done" log lines."""
    stamps = []
    for text in ("Starting data generation", "Generation done"):
        found = re.search(DLIO_STAMP.format(text), log)
        if not found:
            raise RuntimeError(f"no '{text}' line in DLIO's log")
        stamps.append(dt.datetime.fromisoformat(found[1]))
    return (stamps[1] - stamps[0]).total_seconds()


def run_dlio(args: argparse.Namespace, work: Path, shape: Shape, rep: int,
             nprocs: int) -> Sample:
    """(c) DLIO 2.0.0; time = its logged generation phase (no fsync), sync kept apart."""
    folder, out = work / "data", work / "out"
    t0 = time.perf_counter()
    run(dlio_cmd(args, shape, folder, out, nprocs), cwd=work)
    wall = time.perf_counter() - t0
    sync_s = timed_sync()
    seconds = dlio_phase_seconds((out / "dlio.log").read_text())
    return Sample(shape.name, f"DLIO np={nprocs}", rep, tree_bytes(folder / "train"),
                  seconds, sync_s, wall, load1())


def runners(args: argparse.Namespace) -> dict[str, Runner]:
    """The tools to measure, by name."""
    out: dict[str, Runner] = {"dd": run_dd,
                              "dd random": partial(run_dd, source=str(RANDOM_SOURCE))}
    for n in args.np:
        out[dliobench_name(n)] = partial(run_dliobench, args, nprocs=n)
    if not args.no_dlio:
        for n in args.dlio_np:
            out[f"DLIO np={n}"] = partial(run_dlio, args, nprocs=n)
    return out


def measure(args: argparse.Namespace, shape: Shape) -> list[Sample]:
    """Run every tool ``args.reps`` times, rotating the order; delete each dataset after."""
    tools = runners(args)
    names = list(tools)
    device = run(["df", "--output=source", str(args.root)]).stdout.splitlines()[-1].strip()
    samples = []
    for rep in range(args.reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            work = Path(args.root) / f"{shape.name}-{name.replace(' ', '').replace('=', '')}-{rep}"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            machine.drop_caches()
            if args.quiet_below < 1:
                wait_quiet(args.quiet_below, args.quiet_timeout)
            try:
                sample = measured(tools[name], work, shape, rep, device)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            samples.append(sample)
            print(f"  {shape.name} rep {rep} {name:12s} {sample.gbps:6.3f} GB/s "
                  f"({sample.bytes / 1e9:.3f} GB in {sample.seconds:.2f} s, sync "
                  f"{sample.sync_s:.2f} s, wall {sample.wall_s:.1f} s, load {sample.load1:.2f}, "
                  f"others {sample.others_cpu:.0%} CPU, extra disk traffic "
                  f"{sample.extra_io_gb:.2f} GB)",
                  file=sys.stderr, flush=True)
    return samples


def machine_info(args: argparse.Namespace, root: Path) -> list[str]:
    """Markdown lines: date, machine, file system, code, load."""
    df = run(["df", "-T", str(root)]).stdout.splitlines()[-1].split()
    return [*machine.machine_lines(),
            f"- file system: {root} on {df[0]} ({df[1]}), mounted at {df[-1]}",
            *machine.code_lines(args.src or REPO), machine.load_line()]


def table(samples: list[Sample]) -> list[str]:
    """Markdown table of median GB/s per tool and the ratios of dliobench to the others."""
    by_tool: dict[str, list[Sample]] = {}
    for s in samples:
        by_tool.setdefault(s.tool, []).append(s)
    med = {t: statistics.median(s.gbps for s in ss) for t, ss in by_tool.items()}
    dur = {t: statistics.median(s.gbps_durable for s in ss) for t, ss in by_tool.items()}
    lines = ["| tool | median GB/s | dliobench / tool | incl. sync: median GB/s | "
             "dliobench / tool | runs (GB/s) | GB per run | CPU taken by others | "
             "extra disk traffic (GB) |", "|---|---|---|---|---|---|---|---|---|"]
    for tool, ss in by_tool.items():
        runs = ", ".join(f"{s.gbps:.3f}" for s in ss)
        ratio = med.get("dliobench", math.nan) / med[tool]
        ratio_dur = dur.get("dliobench", math.nan) / dur[tool]
        lines.append(f"| {tool} | {med[tool]:.3f} | {ratio:.2f} | {dur[tool]:.3f} | "
                     f"{ratio_dur:.2f} | {runs} | {ss[0].bytes / 1e9:.3f} | "
                     f"{', '.join(f'{s.others_cpu:.0%}' for s in ss)} | "
                     f"{', '.join(f'{s.extra_io_gb:.2f}' for s in ss)} |")
    return lines


def goals(samples: list[Sample], nps: list[int]) -> list[str]:
    """The issue's goals (3x DLIO at the same process count, 70% of dd), met or missed."""
    med: dict[str, float] = {}
    for tool in {s.tool for s in samples}:
        med[tool] = statistics.median(s.gbps for s in samples if s.tool == tool)
    out = []
    for n in nps:
        ours = med.get(dliobench_name(n))
        if ours is None:
            continue
        for ref, goal in ((f"DLIO np={n}", 3.0), ("dd", 0.7), ("dd random", 0.7)):
            if ref in med:
                ratio = ours / med[ref]
                verdict = "met" if ratio >= goal else f"missed by {goal - ratio:.2f}"
                out.append(f"- {dliobench_name(n)} / {ref}: **{ratio:.2f}** "
                           f"(goal {goal:g}: {verdict})")
    return out


def commands(args: argparse.Namespace, shape: Shape) -> list[str]:
    """The exact commands, with the per-run folders as placeholders."""
    folder = Path(args.root, "RUN", "data")
    cmds = [f"dd if=/dev/zero of={args.root}/RUN/dd.bin {' '.join(DD_ARGS)}",
            f"dd if={RANDOM_SOURCE} of={args.root}/RUN/dd.bin {' '.join(DD_ARGS)}"]
    cmds += [(f"cd {args.src} && PYTHONPATH={args.src} " if args.src else "")
             + " ".join(dliobench_cmd(args, shape, folder, n)) for n in args.np]
    cmds += [f"(cd {args.root}/RUN && "
             + " ".join(dlio_cmd(args, shape, folder, Path(args.root, "RUN", "out"), n)) + ")"
             for n in args.dlio_np if not args.no_dlio]
    return ["```sh", *cmds, "```"]


def report(args: argparse.Namespace, results: dict[str, list[Sample]]) -> str:
    """The markdown report of every measured shape."""
    out = ["## Generation", "", *machine_info(args, Path(args.root)), "", LEGEND, ""]
    for name, samples in results.items():
        shape = SHAPES[name]
        out += [f"### {name}: npz, 1 sample per file, {shape.files} files x "
                f"{shape.record_bytes:,} bytes, {args.reps} repetitions", "",
                f"Load (1 min) after the runs: {min(s.load1 for s in samples):.2f} to "
                f"{max(s.load1 for s in samples):.2f}; CPU taken by other processes during "
                f"the runs: median {statistics.median(s.others_cpu for s in samples):.0%}, "
                f"max {max(s.others_cpu for s in samples):.0%} of the machine.", "",
                *table(samples), "", *goals(samples, args.np), "", *commands(args, shape), ""]
    return "\n".join(out)


def default_dliobench() -> str:
    """dliobench next to this Python, else on PATH, else the test venv's."""
    beside = Path(sys.executable).parent / "dliobench"
    return str(beside) if beside.exists() else (shutil.which("dliobench")
                                                or "/tmp/venvtest/bin/dliobench")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default="/work/bench-gen",
                   help="folder on the file system to measure (default: %(default)s)")
    p.add_argument("--shape", choices=[*SHAPES, "all"], default="unet3d",
                   help="dataset shape: unet3d (4.1 GB of 146.6 MB files), small (20,000 x "
                        "64 KiB) or all (default: %(default)s)")
    p.add_argument("--reps", type=int, default=3, help="repetitions (default: %(default)s)")
    p.add_argument("--dliobench", default=default_dliobench(),
                   help="the dliobench command (default: %(default)s)")
    p.add_argument("--src", help="measure the dliobench source tree DIR (e.g. a `git clone` "
                   "at a commit) with `python -m dliobench`, instead of --dliobench")
    p.add_argument("--dlio-venv", default="/work/dlio-venv",
                   help="venv holding DLIO 2.0.0 (default: %(default)s)")
    p.add_argument("--np", type=int, nargs="+", default=[1],
                   help="dliobench process counts (N > 1: mpiexec -n N, the mpiexec next to "
                        "this Python; default: %(default)s)")
    p.add_argument("--dlio-np", type=int, nargs="+", default=[1],
                   help="DLIO process counts to measure (default: %(default)s)")
    p.add_argument("--no-dlio", action="store_true", help="skip DLIO")
    p.add_argument("--quiet-below", type=float, default=0.15,
                   help="before each run, wait until other processes use less than this share "
                        "of the CPUs (1 = do not wait; default: %(default)s)")
    p.add_argument("--quiet-timeout", type=float, default=600,
                   help="longest wait for quiet, in seconds (default: %(default)s)")
    p.add_argument("--files", type=int,
                   help="override the number of files of every shape (for a quick try)")
    p.add_argument("--json", help="also write every run as JSON to this file")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Measure the chosen shapes and print the markdown report."""
    args = parse_args(argv)
    if not (Path(args.dlio_venv) / "bin" / "dlio_benchmark").exists():
        args.no_dlio = True
    Path(args.root).mkdir(parents=True, exist_ok=True)
    names = list(SHAPES) if args.shape == "all" else [args.shape]
    if args.files:
        for name in names:
            SHAPES[name] = replace(SHAPES[name], files=args.files)
    record = Recorder(__file__, src=args.src or REPO)
    make_random_source()
    try:
        results = {name: measure(args, SHAPES[name]) for name in names}
    finally:
        RANDOM_SOURCE.unlink(missing_ok=True)
    if args.json:
        Path(args.json).write_text(json.dumps(
            {k: [asdict(s) for s in v] for k, v in results.items()}, indent=1))
    print(report(args, results))
    rates: dict[str, list[float]] = {}
    for name, samples in results.items():
        for s in samples:
            rates.setdefault(f"{name} {s.tool} GB/s", []).append(s.gbps)
    runs = {k: [asdict(s) for s in v] for k, v in results.items()}
    print(f"\n- record: {record.write(rates, runs=runs)}")


if __name__ == "__main__":
    main()
