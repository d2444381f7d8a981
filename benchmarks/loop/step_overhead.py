"""The harness's own time per step: step wall minus wait, compute, comm and checkpoint.

Usage: python -m benchmarks.loop.step_overhead [--steps 2000] [--reps 3] [--ranks 1 2]
           [--compute 0.002 0] [--allreduce-bytes 0 4096] [--files 1024] [--batch 4]
           [--threads 2] [--root /work/bench-step] [--src DIR] [--baseline DIR] [--progress]

With ``--baseline DIR`` (another source tree, e.g. ``git worktree add /tmp/base main``) every
configuration also runs on that tree, alternating with the measured one, and a second table
gives what the measured tree adds per step: the difference of the medians (and p99s) of the
overhead, and of the median wait. That is how the per-rank journal (``results.journal``) is
measured: it costs nothing inline per step (a thread appends the steps once a second), so
whatever it costs shows as overhead or wait beside the baseline's.

Generates a small npz dataset (64 KiB samples, one per file) and reads it once, so every run
reads from the page cache. Then, per repetition, runs ``dliobench run`` (native loader,
``train.total_training_steps`` steps) for each rank count (``mpiexec -n R`` from this
Python's venv for R > 1), compute time and, on more than one rank, allreduce size (the
per-step MPI_Allreduce after compute is timed as ``comm_s``). From timeline.csv, for each
step i followed by step i+1 of the same rank and epoch:

    overhead_i = (t_start[i+1] - t_start[i]) - wait_i - compute_i - comm_i - ckpt_i

which is the time of the loop's own work (recording the step, the sample-id bookkeeping,
the calls around compute). runner.py takes ``start`` just before asking the
loader for the batch, ``wait`` = until the batch arrived, ``compute``/``comm`` as measured by
their own calls, so these spans tile the step except for the harness's code between them.
The last step of each epoch has no next step in its epoch (the gap to the next epoch holds
the epoch's delivery check and a barrier) and is left out; that gap is shown apart. The
CSV rounds times to 1 us, so each overhead carries up to about +-3 us of rounding. Also
shown: the overhead with comm not subtracted (the goal's "wall - wait - compute", where the
allreduce counts as overhead). Prints markdown: medians over repetitions of each run's
median and p99, in microseconds, machine info and the exact commands; deletes the data.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.harness import machine
from benchmarks.harness.machine import run
from benchmarks.harness.records import Recorder

REPO = Path(__file__).resolve().parents[2]
SAMPLE_BYTES = 65536
SPANS = ("wait_s", "compute_s", "comm_s", "ckpt_s")


@dataclass
class Config:
    """One measured configuration and its per-run figures (microseconds)."""

    ranks: int
    compute: float
    allreduce: int
    tree: str | None = None  # the source tree measured (None: the installed dliobench)
    figures: dict[str, list[float]] = field(default_factory=dict)
    command: str = ""

    def add(self, figures: dict[str, float]) -> None:
        """Record one run's figures."""
        for key, value in figures.items():
            self.figures.setdefault(key, []).append(value)

    def median(self, key: str) -> float:
        """Median over runs of one figure."""
        return statistics.median(self.figures[key])


def dataset_args(args: argparse.Namespace) -> list[str]:
    """The workload and dataset overrides shared by generate and run."""
    return [str(Path(args.src or REPO) / "workloads" / "default.yaml"),
            f"dataset.data_folder={args.root / 'data'}", f"dataset.num_files_train={args.files}",
            f"dataset.record_length_bytes={SAMPLE_BYTES}", "dataset.record_length_bytes_stdev=0",
            "dataset.record_length_bytes_resize=0",
            "reader.odirect=false"]  # page-cached, as before default.yaml read with O_DIRECT


def generate(args: argparse.Namespace) -> None:
    """Write the dataset and read every file once (page-cached from then on)."""
    run([sys.executable, "-m", "dliobench", "generate", *dataset_args(args), "--no-progress"],
        args.src)
    for path in (args.root / "data").rglob("*.npz"):
        path.read_bytes()


def run_cmd(args: argparse.Namespace, cfg: Config, out: Path) -> list[str]:
    """The dliobench command line of one configuration."""
    launcher = ([] if cfg.ranks == 1 else
                [str(Path(sys.executable).parent / "mpiexec"), "-n", str(cfg.ranks)])
    return [*launcher, sys.executable, "-m", "dliobench", "run", *dataset_args(args),
            "workflow.generate_data=false", "reader.data_loader=native",
            f"reader.batch_size={args.batch}", f"reader.read_threads={args.threads}",
            f"train.computation_time={cfg.compute:g}", f"train.allreduce_bytes={cfg.allreduce}",
            f"train.total_training_steps={args.steps}", "--output", str(out),
            *([] if args.progress else ["--no-progress"])]


def overheads(timeline: Path) -> dict[str, float]:
    """Per-run figures (us) from one timeline.csv: overhead median/p99 with and without comm
    subtracted, median wait and comm, the epoch-boundary gap, and the steps counted."""
    rows: dict[tuple[int, int], list[list[float]]] = {}
    with open(timeline, newline="") as handle:
        for row in csv.DictReader(handle):
            key = (int(row["rank"]), int(row["epoch"]))
            rows.setdefault(key, []).append([float(row[k]) for k in ("step", "t_start_s",
                                                                     *SPANS)])
    inner, boundary = [], []
    for (rank, epoch), steps in rows.items():
        a = np.array(sorted(steps))
        inner.append(np.column_stack([np.diff(a[:, 1]), a[:-1, 2:]]))
        nxt = rows.get((rank, epoch + 1))
        if nxt:  # last step's end to the next epoch's first start
            boundary.append(min(r[1] for r in nxt) - a[-1, 1] - a[-1, 2:].sum())
    t = np.concatenate(inner) * 1e6  # columns: gap to next start, wait, compute, comm, ckpt
    full = t[:, 0] - t[:, 1:].sum(axis=1)
    with_comm = full + t[:, 3]
    return {"med": float(np.median(full)), "p99": float(np.percentile(full, 99)),
            "med_c": float(np.median(with_comm)), "p99_c": float(np.percentile(with_comm, 99)),
            "wait": float(np.median(t[:, 1])), "comm": float(np.median(t[:, 3])),
            "boundary": float(np.median(boundary)) * 1e6 if boundary else float("nan"),
            "counted": float(len(full)), "excluded": float(len(rows))}


def measure(args: argparse.Namespace) -> list[Config]:
    """All repetitions of every configuration, alternating configurations within each."""
    trees = [args.src, *([args.baseline] if args.baseline else [])]
    configs = [Config(r, c, a if r > 1 else 0, tree) for r in args.ranks for c in args.compute
               for a in (args.allreduce_bytes if r > 1 else [0]) for tree in trees]
    out = args.root / "runs"
    for rep in range(args.reps):
        for cfg in configs:
            cmd = run_cmd(args, cfg, out)
            run(cmd, cfg.tree)
            newest = max(out.iterdir(), key=lambda p: p.stat().st_mtime)
            cfg.add(overheads(newest / "timeline.csv"))
            cfg.command = " ".join([*([f"PYTHONPATH={cfg.tree}"] if cfg.tree else []), *cmd])
            shutil.rmtree(newest)
        print(f"repetition {rep + 1}/{args.reps} done", file=sys.stderr, flush=True)
    return configs


def added(configs: list[Config], baseline: str) -> list[str]:
    """Markdown rows: per configuration, the measured tree's figures minus the baseline's."""
    out = ["| ranks | compute (ms) | allreduce (B) | added overhead: median / p99 (us) | "
           "added median wait (us) |", "|---|---|---|---|---|"]
    base = {(c.ranks, c.compute, c.allreduce): c for c in configs if c.tree == baseline}
    for c in configs:
        b = base.get((c.ranks, c.compute, c.allreduce))
        if c.tree == baseline or b is None:
            continue
        out.append(f"| {c.ranks} | {c.compute * 1e3:g} | {c.allreduce} | "
                   f"{c.median('med') - b.median('med'):+.1f} / "
                   f"{c.median('p99') - b.median('p99'):+.1f} | "
                   f"{c.median('wait') - b.median('wait'):+.1f} |")
    return out


def table(configs: list[Config]) -> list[str]:
    """Markdown rows, one per configuration (medians over runs)."""
    out = ["| tree | ranks | compute (ms) | allreduce (B) | overhead median (us) | "
           "overhead p99 (us) | incl. comm: median / p99 (us) | median wait (us) | "
           "median comm (us) | epoch boundary gap (us) | steps counted / left out per run | "
           "runs: median, p99 (us) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in configs:
        runs = "; ".join(f"{m:.1f}, {p:.1f}" for m, p in zip(c.figures["med"], c.figures["p99"],
                                                              strict=True))
        out.append(f"| {c.tree or 'installed'} | {c.ranks} | {c.compute * 1e3:g} | "
                   f"{c.allreduce} | {c.median('med'):.1f} "
                   f"| {c.median('p99'):.1f} | {c.median('med_c'):.1f} / "
                   f"{c.median('p99_c'):.1f} | {c.median('wait'):.1f} | "
                   f"{c.median('comm'):.1f} | {c.median('boundary'):,.0f} | "
                   f"{c.median('counted'):.0f} / {c.median('excluded'):.0f} | {runs} |")
    return out


def machine_info(args: argparse.Namespace) -> list[str]:
    """Markdown lines: date, machine, code, load, workload shape."""
    return [*machine.machine_lines(), *machine.code_lines(args.src or REPO),
            f"- dataset: {args.files} npz files x {SAMPLE_BYTES:,} bytes, page-cached; batch "
            f"{args.batch}, {args.threads} read threads, {args.steps} steps per run, "
            f"{args.reps} repetitions",
            machine.load_line()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", type=Path, default=Path("/work/bench-step"),
                   help="work folder (deleted at the end)")
    p.add_argument("--files", type=int, default=1024, help="npz files of 64 KiB")
    p.add_argument("--steps", type=int, default=2000, help="steps per run")
    p.add_argument("--reps", type=int, default=3, help="repetitions (default: %(default)s)")
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2], help="MPI ranks")
    p.add_argument("--compute", type=float, nargs="+", default=[0.002, 0.0],
                   help="train.computation_time values in seconds (default: %(default)s)")
    p.add_argument("--allreduce-bytes", type=int, nargs="+", default=[0, 4096],
                   help="train.allreduce_bytes values for runs on more than one rank")
    p.add_argument("--batch", type=int, default=4, help="reader.batch_size")
    p.add_argument("--threads", type=int, default=2, help="reader.read_threads")
    p.add_argument("--src", help="measure the dliobench source tree DIR (a `git clone`) "
                   "instead of the installed one")
    p.add_argument("--progress", action="store_true", help="runs show their progress "
                   "(piped: the live figures' plain lines) instead of --no-progress")
    p.add_argument("--baseline", help="also measure the source tree DIR, alternating, and "
                   "print what --src adds per step beside it")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Generate, measure, print the report, delete the data."""
    args = parse_args(argv)
    args.root.mkdir(parents=True, exist_ok=True)
    record = Recorder(__file__, src=args.src or REPO)
    try:
        generate(args)
        configs = measure(args)
        print("\n".join(["## Harness overhead per step", "", *machine_info(args), "",
                         *table(configs), "",
                         *([f"Added by {args.src or 'the installed tree'} beside "
                            f"{args.baseline}:", "", *added(configs, args.baseline), ""]
                           if args.baseline else []),
                         "```sh", *[c.command for c in configs], "```"]))
        results = {f"{c.tree or 'installed'} {c.ranks} rank(s) compute {c.compute} allreduce "
                   f"{c.allreduce} {key} us": values
                   for c in configs for key, values in c.figures.items()}
        print(f"\n- record: {record.write(results, steps=args.steps)}")
    finally:
        shutil.rmtree(args.root, ignore_errors=True)


if __name__ == "__main__":
    main()
