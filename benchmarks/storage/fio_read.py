"""dliobench's O_DIRECT reads of UNet3D-sized npz files against fio on the same files.

Usage: python -m benchmarks.storage.fio_read [--files 32] [--reps 3] [--threads 1 4] [--ranks 1 2]
           [--fio-bs 4M 139M] [--batch 4] [--rand-seconds 3] [--root /work/bench-fio]
           [--src DIR]

Generates one dataset (npz, one 146,600,628-byte sample per file, stdev 0) with
``dliobench generate``, then per repetition, for each rank count R and read-thread count T,
alternates (a) ``dliobench run``: native loader, ``reader.odirect=true``,
``train.computation_time=0``, 1 epoch, no allreduce (it reads each file with one preadv into
a fresh aligned buffer), and (b) fio sequential reads of the same files, ``--direct=1
--ioengine=psync`` (iodepth 1), R x T jobs, each job reading its share of the files one after
the other, for each ``--fio-bs``. Figures: dliobench's ``metrics.bytes_per_s`` from
result.json, run with ``metric.exclude_start_steps=0`` so its window is the whole epoch (bytes
actually read / first step start to last step end per rank, summed over ranks); recomputed
from timeline.csv, all ranks' bytes over the union of their spans (fio's way) and the tool's
default window (first step left out: partly read ahead, so it flatters); fio's ``bw_bytes``
(group reporting: all jobs' bytes / the longest job). Context: fio random 4 KiB / 128 KiB
O_DIRECT reads and a one-thread ``dd`` of the page-cached files (the page-cache ceiling).
``sync`` + ``drop_caches`` (root) before each run. Prints markdown: medians in GB/s (10^9
bytes/s), ratios, machine info, the exact commands. The dataset is deleted at the end.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import statistics
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from benchmarks.harness import machine
from benchmarks.harness.machine import run
from benchmarks.harness.records import Recorder

REPO = Path(__file__).resolve().parents[2]
RECORD_BYTES = 146_600_628  # workloads/unet3d.yaml, MLPerf Storage's mean sample size
DD_RATE = re.compile(r"(\d+) bytes .* copied, ([\d.e+-]+) s")


@dataclass
class Series:
    """Repeated measurements of one contender (rates in bytes/s) and how it was run."""

    tool: str
    ranks: int
    threads: int
    setting: str
    rates: list[float] = field(default_factory=list)
    extra: dict[str, list[float]] = field(default_factory=dict)
    command: str = ""

    def median(self, key: str = "") -> float:
        """Median rate, or median of an extra figure."""
        return statistics.median(self.extra[key] if key else self.rates)


def dataset_args(args: argparse.Namespace) -> list[str]:
    """The workload and dataset overrides shared by generate and run."""
    return [str(Path(args.src or REPO) / "workloads" / "unet3d.yaml"),
            f"dataset.data_folder={args.root / 'data'}", f"dataset.num_files_train={args.files}",
            f"dataset.record_length_bytes={RECORD_BYTES}", "dataset.record_length_bytes_stdev=0",
            "dataset.record_length_bytes_resize=0"]


def generate(args: argparse.Namespace) -> list[Path]:
    """Write the dataset; return its files in name order."""
    run([sys.executable, "-m", "dliobench", "generate", *dataset_args(args), "--no-progress",
         "--yes"],
        args.src)
    files = sorted((args.root / "data" / "train").rglob("*.npz"))
    if len(files) != args.files:
        raise RuntimeError(f"expected {args.files} npz files, found {len(files)}")
    return files


def dliobench_cmd(args: argparse.Namespace, ranks: int, threads: int, out: Path) -> list[str]:
    """One O_DIRECT epoch with compute 0 on ``ranks`` ranks."""
    launcher = ([] if ranks == 1 else
                [str(Path(sys.executable).parent / "mpiexec"), "-n", str(ranks)])
    return [*launcher, sys.executable, "-m", "dliobench", "run", "--yes", *dataset_args(args),
            "workflow.generate_data=false", "reader.data_loader=native", "reader.odirect=true",
            f"reader.read_threads={threads}", f"reader.batch_size={args.batch}",
            f"reader.prefetch_size={args.prefetch}", "train.computation_time=0",
            "train.epochs=1", "train.allreduce_bytes=0", "metric.exclude_start_steps=0",
            "--output", str(out), "--no-progress"]


def timeline_rates(timeline: Path) -> tuple[float, float]:
    """From timeline.csv: bytes/s in the tool's default window (each rank's first step left
    out, summed over ranks), and all bytes / the union of the ranks' spans (as fio counts)."""
    per_rank: dict[str, list[dict[str, str]]] = {}
    with open(timeline, newline="") as handle:
        for row in csv.DictReader(handle):
            per_rank.setdefault(row["rank"], []).append(row)

    def end(row: dict[str, str]) -> float:
        return sum(float(row[k]) for k in ("t_start_s", "wait_s", "compute_s", "comm_s",
                                           "ckpt_s"))

    default = 0.0
    for rows in per_rank.values():
        counted = rows[1:]
        default += (sum(int(r["bytes"]) for r in counted)
                    / (end(counted[-1]) - float(counted[0]["t_start_s"])) if counted
                    else float("nan"))
    rows = [r for rr in per_rank.values() for r in rr]
    span = max(end(r) for r in rows) - min(float(r["t_start_s"]) for r in rows)
    return default, sum(int(r["bytes"]) for r in rows) / span


def run_dliobench(args: argparse.Namespace, series: Series) -> None:
    """One dliobench run: record metrics.bytes_per_s and the default-window rate."""
    out = args.root / "runs"
    cmd = dliobench_cmd(args, series.ranks, series.threads, out)
    machine.drop_caches()
    run(cmd, args.src)
    newest = max(out.iterdir(), key=lambda p: p.stat().st_mtime)
    result = json.loads((newest / "result.json").read_text())
    metrics = result["metrics"]
    if not result["honesty"]["odirect"] or result["config"]["train"]["computation_time"] != 0:
        raise RuntimeError(f"{newest}: not an O_DIRECT run with compute 0")
    series.rates.append(float(metrics["bytes_per_s"]))
    default, union = timeline_rates(newest / "timeline.csv")
    series.extra.setdefault("default", []).append(default)
    series.extra.setdefault("union", []).append(union)
    series.extra.setdefault("bytes", []).append(float(metrics["bytes"]))
    series.extra.setdefault("steps", []).append(float(metrics["steps"]))
    series.command = " ".join(cmd)
    shutil.rmtree(newest)


def fio_cmd(folder: Path, files: list[Path], jobs: int, rw: str, bs: str,
            seconds: float = 0) -> list[str]:
    """fio O_DIRECT psync reads: sequential = each job its share of the files in turn;
    random = ``jobs`` jobs over all files for ``seconds``."""
    cmd = ["fio", "--output-format=json", "--group_reporting", "--direct=1", "--ioengine=psync",
           "--iodepth=1", f"--rw={rw}", f"--bs={bs}", f"--directory={folder}", "--thread"]
    names = [str(f.relative_to(folder)) for f in files]
    if rw == "read":
        cmd.append("--file_service_type=sequential")
        for j in range(jobs):
            cmd += [f"--name=seq{j}", f"--filename={':'.join(names[j::jobs])}"]
    else:
        cmd += ["--norandommap", "--time_based", f"--runtime={seconds:g}s",
                f"--numjobs={jobs}", "--name=rand", f"--filename={':'.join(names)}"]
    return cmd


def run_fio(series: Series, cmd: list[str]) -> None:
    """One fio run: record bw_bytes, bytes, IOPS and completion-latency percentiles."""
    machine.drop_caches()
    out = run(cmd).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]["read"]
    pct = job["clat_ns"].get("percentile", {})
    series.rates.append(float(job["bw_bytes"]))
    for key, value in (("iops", job["iops"]), ("bytes", job["io_bytes"]),
                       ("p50", pct.get("50.000000", 0) / 1e3),
                       ("p99", pct.get("99.000000", 0) / 1e3)):
        series.extra.setdefault(key, []).append(float(value))
    series.command = " ".join(cmd)


def run_dd(series: Series, files: list[Path]) -> None:
    """dd each page-cached file to /dev/null in turn; rate from dd's own bytes and seconds."""
    machine.drop_caches()
    for path in files:  # warm: the measured pass reads from the page cache
        run(["dd", f"if={path}", "of=/dev/null", "bs=4M"])
    nbytes = seconds = 0.0
    for path in files:
        match = DD_RATE.search(run(["dd", f"if={path}", "of=/dev/null", "bs=4M"]).stderr)
        if match is None:
            raise RuntimeError("cannot parse dd's output")
        nbytes += int(match.group(1))
        seconds += float(match.group(2))
    series.rates.append(nbytes / seconds)
    series.extra.setdefault("bytes", []).append(nbytes)
    series.command = "for f in FILES; do dd if=$f of=/dev/null bs=4M; done  # twice, 2nd timed"


def one_pair(args: argparse.Namespace, files: list[Path], seq: dict[tuple[int, int, str], Series],
             ranks: int, threads: int, rep: int) -> None:
    """dliobench and fio at one ranks x threads, in alternating order across repetitions."""
    ours = seq.setdefault((ranks, threads, ""), Series(
        "dliobench native (metrics.bytes_per_s)", ranks, threads,
        f"O_DIRECT, batch {args.batch}, prefetch {args.prefetch}"))
    steps = [partial(run_dliobench, args, ours)]
    for bs in args.fio_bs:
        theirs = seq.setdefault((ranks, threads, bs), Series(
            "fio read", ranks, threads, f"bs={bs}, psync, iodepth 1 x {ranks * threads} jobs"))
        steps.append(partial(run_fio, theirs, fio_cmd(files[0].parent, files, ranks * threads,
                                                      "read", bs)))
    for step in (steps if rep % 2 == 0 else steps[::-1]):
        step()


def measure(args: argparse.Namespace, files: list[Path]) -> tuple[list[Series], list[Series]]:
    """All repetitions; returns the sequential series and the context series."""
    seq: dict[tuple[int, int, str], Series] = {}
    ctx: dict[tuple[str, int, str], Series] = {}
    for rep in range(args.reps):
        for ranks in args.ranks:
            for threads in args.threads:
                one_pair(args, files, seq, ranks, threads, rep)
        for jobs in sorted({1, max(args.ranks) * max(args.threads)}):
            for bs in ("4k", "128k"):
                s = ctx.setdefault(("rand", jobs, bs), Series(
                    "fio randread", 1, jobs, f"bs={bs}, psync, iodepth 1 x {jobs} jobs, "
                    f"{args.rand_seconds:g} s"))
                run_fio(s, fio_cmd(files[0].parent, files, jobs, "randread", bs,
                                   args.rand_seconds))
        run_dd(ctx.setdefault(("dd", 1, ""), Series(
            "dd (page cache)", 1, 1, "bs=4M, one thread, files read once before")), files)
        print(f"repetition {rep + 1}/{args.reps} done", file=sys.stderr, flush=True)
    return list(seq.values()), list(ctx.values())


def gb(rate: float) -> str:
    """bytes/s as GB/s text."""
    return f"{rate / 1e9:.3f}"


def seq_table(series: list[Series]) -> list[str]:
    """Markdown rows: median GB/s, the runs, and dliobench / fio at the same ranks x threads
    (with dliobench's own figure and with its bytes over the union of the ranks' spans)."""
    out = ["| ranks | threads per rank | tool | setting | median GB/s | runs (GB/s) | GB per run "
           "| dliobench / this | dliobench union / this |", "|---|---|---|---|---|---|---|---|---|"]
    for s in series:
        ours = next(o for o in series if o.tool.startswith("dliobench")
                    and (o.ranks, o.threads) == (s.ranks, s.threads))
        head = f"| {s.ranks} | {s.threads} |"
        out.append(f"{head} {s.tool} | {s.setting} | {gb(s.median())} | "
                   f"{', '.join(gb(r) for r in s.rates)} | {s.median('bytes') / 1e9:.3f} | "
                   f"{ours.median() / s.median():.2f} | "
                   f"{ours.median('union') / s.median():.2f} |")
        if s is ours:
            for key, tool, setting in (
                    ("union", "dliobench, union", "all ranks' bytes / first start to last end"),
                    ("default", "dliobench, default window", "each rank's first step left out")):
                out.append(f"{head} {tool} | {setting} | {gb(s.median(key))} | "
                           f"{', '.join(gb(r) for r in s.extra[key])} | | | |")
    return out


def ctx_table(series: list[Series]) -> list[str]:
    """Markdown rows of the hardware context (random reads, page-cache dd)."""
    out = ["| tool | setting | median GB/s | median IOPS | clat p50 / p99 (us) | runs (GB/s) |",
           "|---|---|---|---|---|---|"]
    for s in series:
        iops = f"{s.median('iops'):,.0f}" if "iops" in s.extra else ""
        lat = (f"{s.median('p50'):,.0f} / {s.median('p99'):,.0f}" if "p50" in s.extra else "")
        out.append(f"| {s.tool} | {s.setting} | {gb(s.median())} | {iops} | {lat} | "
                   f"{', '.join(gb(r) for r in s.rates)} |")
    return out


def machine_info(args: argparse.Namespace) -> list[str]:
    """Markdown lines: date, machine, file system, device queue, code, fio version, load."""
    df = run(["df", "-T", str(args.root)]).stdout.splitlines()[-1].split()
    dev = Path(df[0]).name
    queue = Path("/sys/block") / dev / "queue"
    qinfo = ", ".join(f"{k} {(queue / k).read_text().strip()}" for k in
                      ("max_sectors_kb", "nr_requests", "scheduler") if (queue / k).exists())
    return [*machine.machine_lines(),
            f"- file system: {args.root} on {df[0]} ({df[1]}); {dev}: {qinfo}",
            f"- {run(['fio', '--version']).stdout.strip()}",
            *machine.code_lines(args.src or REPO),
            f"- dataset: {args.files} npz files x {RECORD_BYTES:,} bytes "
            f"({args.files * RECORD_BYTES / 1e9:.2f} GB), {args.reps} repetitions",
            machine.load_line()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", type=Path, default=Path("/work/bench-fio"),
                   help="work folder on the file system to measure (deleted at the end)")
    p.add_argument("--files", type=int, default=32, help="npz files (default: %(default)s)")
    p.add_argument("--reps", type=int, default=3, help="repetitions (default: %(default)s)")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 4],
                   help="dliobench read threads per rank = fio jobs per rank")
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2], help="MPI ranks")
    p.add_argument("--fio-bs", nargs="+", default=["4M", "139M"],
                   help="fio block sizes of the sequential reads; 139M (145,752,064 bytes) is "
                   "one read per file like dliobench's (fio reads whole blocks only: 99.4 %% of "
                   "each file; 4M: 97.3 %%) (default: %(default)s)")
    p.add_argument("--batch", type=int, default=4, help="dliobench batch size per rank")
    p.add_argument("--prefetch", type=int, default=2, help="dliobench reader.prefetch_size")
    p.add_argument("--rand-seconds", type=float, default=3, help="runtime of each random fio")
    p.add_argument("--src", help="measure the dliobench source tree DIR (a `git clone`) "
                   "instead of the installed one")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Generate, measure, print the report, delete the dataset."""
    args = parse_args(argv)
    if shutil.which("fio") is None:
        sys.exit("fio is not installed (apt-get install -y fio)")
    for jobs in {r * t for r in args.ranks for t in args.threads}:
        if args.files % jobs:
            print(f"warning: {args.files} files do not split evenly over {jobs} fio jobs",
                  file=sys.stderr)
    args.root.mkdir(parents=True, exist_ok=True)
    record = Recorder(__file__, src=args.src or REPO)
    try:
        files = generate(args)
        seq, ctx = measure(args, files)
        print("\n".join(["## O_DIRECT reads: dliobench against fio", "", *machine_info(args),
                         "", "### Sequential reads of the same files (compute 0)", "",
                         *seq_table(seq), "", "### Hardware context", "", *ctx_table(ctx), "",
                         "### Commands (last repetition)", "", "```sh",
                         *[s.command for s in seq + ctx], "```"]))
        results = {f"{s.tool} {s.ranks} rank(s) x {s.threads} thread(s) {s.setting} B/s": s.rates
                   for s in seq + ctx}
        print(f"\n- record: {record.write(results, files=args.files)}")
    finally:
        shutil.rmtree(args.root, ignore_errors=True)


if __name__ == "__main__":
    main()
