"""Start-up of a run over 100,000 S3 objects: from the command to the first step.

Usage: python -m benchmarks.s3.s3_startup [--counts 1000 100000] [--size 1KiB] [--reps 3]

Needs the ``bench`` extra (SeaweedFS's ``weed``). Starts SeaweedFS on 127.0.0.1
(``seaweed.py``), generates one dataset per ``--counts`` entry (one-sample npy objects of
``--size``; generation's PUT rate is reported), then ``--reps`` times, alternating the
datasets: ``dliobench run`` stopping after its first step (``train.total_training_steps=1``,
no compute), timed from the command to its exit, and the first step's own time from its
result. A run reads the manifest (no LIST: it names every object) and looks at no object
before reading it, so the two counts should start alike; the difference is what the larger
manifest costs. Prints a markdown report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import machine
from benchmarks.harness.records import Recorder
from benchmarks.s3.seaweed import Server, seaweed


def overrides(server: Server, count: int, size: str) -> list[str]:
    return [f"dataset.data_folder=s3://{server.bucket}/startup-{count}", "dataset.format=npy",
            f"dataset.num_files_train={count}", f"dataset.record_length_bytes={size}",
            "dataset.record_length_bytes_stdev=0", "dataset.num_samples_per_file=1",
            f"storage.s3.endpoint_url={server.endpoint}", "storage.s3.region=us-east-1",
            "storage.s3.addressing_style=path", "reader.data_loader=native",
            "reader.read_threads=4", "reader.batch_size=8", "reader.sample_shuffle=seed",
            "train.epochs=1", "train.computation_time=0", "train.total_training_steps=1"]


def generate(server: Server, count: int, size: str) -> float:
    """Seconds to generate the dataset."""
    start = time.perf_counter()
    machine.run([sys.executable, "-m", "dliobench", "generate", "--yes",
                 *overrides(server, count, size), "--no-progress"], src=str(machine.REPO))
    return time.perf_counter() - start


def start_up(server: Server, count: int, size: str, out: Path) -> tuple[float, float]:
    """(seconds from the command to its exit, the first step's seconds) of one run."""
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    machine.run([sys.executable, "-m", "dliobench", "run", "-y", *overrides(server, count, size),
                 f"output.folder={out}", "--no-progress"], src=str(machine.REPO))
    wall = time.perf_counter() - start
    result = json.loads(next(out.glob("*/result.json")).read_text())
    return wall, float(result["metrics"]["first_step_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counts", type=int, nargs="+", default=[1000, 100000])
    parser.add_argument("--size", default="1KiB")
    parser.add_argument("--reps", type=int, default=3)
    a = parser.parse_args()
    record = Recorder(__file__)
    work = Path(tempfile.mkdtemp(prefix="s3-startup-"))
    load0 = os.getloadavg()
    made: dict[int, float] = {}
    runs: dict[int, list[tuple[float, float]]] = {c: [] for c in a.counts}
    try:
        with seaweed() as server:
            for count in a.counts:
                made[count] = generate(server, count, a.size)
            for rep in range(a.reps):
                order = a.counts if rep % 2 == 0 else a.counts[::-1]
                for count in order:
                    runs[count].append(start_up(server, count, a.size, work / "out"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = statistics.median
    rows = [f"| {c:,} | {med(w for w, _ in runs[c]):.2f} | "
            + ", ".join(f"{w:.2f}" for w, _ in runs[c])
            + f" | {med(f for _, f in runs[c]):.3f} | {made[c]:.0f} s ({c / made[c]:,.0f} "
            "objects/s) |" for c in a.counts]
    print("\n".join([
        f"## Start-up of a run over many S3 objects (SeaweedFS 4.48 on 127.0.0.1, objects of "
        f"{a.size})", "", *machine.machine_lines(), *machine.code_lines(machine.REPO),
        f"- load average (1, 5, 15 min) at the start: {load0[0]:.2f}, {load0[1]:.2f}, "
        f"{load0[2]:.2f}", machine.load_line(), "",
        "| objects | command to exit after step 1, s (median) | runs (s) | first step, s "
        "(median) | generation |", "|---|---|---|---|---|", *rows]))
    results = {**{f"{c} objects, command to exit s": [w for w, _ in runs[c]] for c in a.counts},
               **{f"{c} objects, first step s": [f for _, f in runs[c]] for c in a.counts},
               **{f"{c} objects, generation s": made[c] for c in a.counts}}
    print(f"\n- record: {record.write(results, size=a.size)}")


if __name__ == "__main__":
    main()
