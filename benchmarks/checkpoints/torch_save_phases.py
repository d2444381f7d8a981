"""Where a torch-format checkpoint write spends its time: one rank's shard files of
llama3_8b (scaled), written by dliobench's checkpoint writer in one process, phase by phase.

Usage: python -m benchmarks.checkpoints.torch_save_phases [--scale 0.02] [--reps 3] [--root DIR]
           [--settle 20]

Phases, interleaved in ``--reps`` rounds (the order reversed every other round, so other load
on the machine hits each alike), each after ``sync`` + ``drop_caches`` and ``--settle``
seconds (see checkpoints.py ``fresh_memory``):

- serialise: ``torch.save`` of every file's state dict into a stream that drops the bytes
  (pickling, torch's CRC-32 of every record, the zip framing, no I/O);
- serialise, no CRC: the same with ``torch.serialization.set_crc32_options(False)``;
- torch write: ``ShardWriter.write`` of every file (``TorchStream`` into the POSIX writer,
  4 MiB requests, fsync at each commit), as the checkpoint-only workflow writes them;
- torch write, no write-behind: the same with ``posix.WRITE_BEHIND_BYTES`` out of reach (the
  whole file's writeback waits for its fsync);
- torch to a path (before 28eb92a): ``torch.save`` to the writer's temporary file by name
  (torch's own C++ file writer), then the same commit and fsync, as dliobench did before;
- raw write: the same files as raw bytes (``StampedChunk``), the same requests and fsyncs.

For each: wall GB/s and the process's user and system CPU seconds per GB (``os.times``), with
the 1-minute load average at the round's start. Prints markdown; the files are deleted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.harness import machine
from benchmarks.harness.records import Recorder

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from dliobench.config.load import load  # noqa: E402
from dliobench.run.checkpoint.files import ShardWriter  # noqa: E402
from dliobench.run.checkpoint.layout import layout_for  # noqa: E402
from dliobench.run.checkpoint.space import Room  # noqa: E402
from dliobench.storage import posix  # noqa: E402
from dliobench.storage.posix import PosixBackend  # noqa: E402


class Drop:
    """A write-only stream that counts and drops what torch writes."""

    def __init__(self) -> None:
        self.written = 0

    def write(self, data: memoryview) -> int:
        self.written += len(data)
        return len(data)

    def flush(self) -> None:
        pass


def phases(scale: float, root: Path) -> tuple[int, dict[str, Callable[[], None]]]:
    """The planned bytes of one rank's files (all 16 of llama3_8b's checkpoint) and each
    phase as a function."""
    import torch

    config, _ = load(REPO / "workloads" / "llama3_8b.yaml", [f"checkpoint.scale={scale}"])
    files = [f for r in range(layout_for(config, 1).world)
             for f in layout_for(config, 1).rank_files(r)]
    shards = {fmt: ShardWriter(files, fmt, seed=1) for fmt in ("torch", "raw")}
    backend = PosixBackend(str(root))
    room = Room(0, sum(f.nbytes for f in files), None, "checkpoint.scale")

    def serialise(crc: bool) -> Callable[[], None]:
        def go() -> None:
            torch.serialization.set_crc32_options(crc)
            try:
                for state in shards["torch"]._states.values():
                    torch.save(state, Drop())  # type: ignore[arg-type]
            finally:
                torch.serialization.set_crc32_options(True)
        return go

    def write(fmt: str, behind: int = posix.WRITE_BEHIND_BYTES) -> Callable[[], None]:
        def go() -> None:
            shutil.rmtree(root, ignore_errors=True)
            backend.make_room("")
            posix.WRITE_BEHIND_BYTES, usual = behind, posix.WRITE_BEHIND_BYTES
            try:
                for shard in files:
                    shards[fmt].write(backend, shard.name, shard, durable=True, room=room)
            finally:
                posix.WRITE_BEHIND_BYTES = usual
        return go

    def to_path() -> None:
        shutil.rmtree(root, ignore_errors=True)
        backend.make_room("")
        for shard in files:
            writer = backend.open_write(shard.name)
            torch.save(shards["torch"]._states[shard.name], str(writer.spool_path()))
            writer.commit(durable=True)

    return room.need, {"serialise": serialise(True), "serialise, no CRC": serialise(False),
                       "torch write": write("torch"),
                       "torch write, no write-behind": write("torch", 1 << 62),
                       "torch to a path (before 28eb92a)": to_path, "raw write": write("raw")}


def timed(go: Callable[[], None], settle: float) -> tuple[float, float, float]:
    """(wall, user CPU, system CPU) seconds of ``go`` after a cache drop and ``settle``."""
    machine.drop_caches()
    time.sleep(settle)
    before, start = os.times(), time.perf_counter()
    go()
    wall, after = time.perf_counter() - start, os.times()
    return wall, after.user - before.user, after.system - before.system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=0.02)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--root", type=Path, default=Path("/work/bench-ckpt-phases"))
    parser.add_argument("--settle", type=float, default=20.0)
    args = parser.parse_args()
    record = Recorder(__file__)
    nbytes, steps = phases(args.scale, args.root)
    seen: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in steps}
    try:
        for rep in range(args.reps):
            for name in list(steps) if rep % 2 == 0 else list(steps)[::-1]:
                load_1 = os.getloadavg()[0]
                seen[name].append((*timed(steps[name], args.settle), load_1))
    finally:
        shutil.rmtree(args.root, ignore_errors=True)
    gb = nbytes / 1e9
    lines = [f"{gb:.2f} GB of tensors in 16 files, {args.reps} rounds, medians (per round: "
             "GB/s at load)", "", "| phase | GB/s | user CPU-s/GB | system CPU-s/GB | rounds |",
             "|---|---|---|---|---|"]
    for name, rows in seen.items():
        med = [statistics.median(r[i] for r in rows) for i in range(3)]
        rounds = ", ".join(f"{gb / r[0]:.2f} at {r[3]:.1f}" for r in rows)
        lines.append(f"| {name} | {gb / med[0]:.3f} | {med[1] / gb:.2f} | {med[2] / gb:.2f} "
                     f"| {rounds} |")
    print("\n".join([*machine.machine_lines(), *machine.code_lines(str(REPO)), "", *lines,
                     "", machine.load_line()]))
    results = {f"{name} GB/s": [gb / r[0] for r in rows] for name, rows in seen.items()}
    print(f"\n- record: {record.write(results, rounds=seen)}")


if __name__ == "__main__":
    main()
