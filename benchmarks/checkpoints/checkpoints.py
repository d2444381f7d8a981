"""dliobench's checkpoint-only workflow (llama3_8b scaled down) against fio and dd writing and
reading the same bytes on the same disk.

Usage: python -m benchmarks.checkpoints.checkpoints [--scale 0.02] [--reps 7] [--ranks 1 8]
           [--formats torch raw] [--root /work/bench-ckpt] [--src DIR]

For each launched rank count R and file format: ``mpiexec -n R dliobench run
workloads/llama3_8b.yaml`` (an 8-rank TP 1 x PP 1 x DP 8 ZeRO-3 layout, so R=1 writes all 16
files of a checkpoint, R=8 one rank's two files each) with ``checkpoint.scale``, ``--per-run``
writes then as many reads, fsync on, eviction before each read. Its figure is the aggregate
rate: a checkpoint's bytes over the slowest rank's time (MLPerf's duration), averaged over the
repetitions as total bytes / total duration.

Against it, fio doing the same I/O: R jobs (one per rank), each writing its rank's bytes as
as many files as the rank writes (``nrfiles``, one after another:
``file_service_type=sequential``), each file fsynced when it is done (``fsync_on_close``, as
each checkpoint file is fsynced at its commit), buffered, in requests of dliobench's size
(``run.checkpoint.files.WRITE_BYTES`` / ``READ_BYTES``), nothing preallocated (``fallocate=none``: a
checkpoint writer appends to new files; fio's default fallocates them before its clock
starts); then the same jobs read those files (``invalidate=1``: fio drops their cached pages
first, as the run's eviction does). fio's files are counted after each write, so a job
writing another job's file cannot pass unseen. For R=1 also ``dd`` of the same bytes with
``oflag=direct`` (write) and ``iflag=direct`` (read).

Contenders run in ``--reps`` rounds, back to back, dliobench first in even rounds and fio
first in odd ones; each round's dliobench / fio ratio is paired (other load on the machine
moves both alike), and the report gives the median and range of those ratios with the load
average. ``sync`` + ``drop_caches`` before every contender. Prints markdown with the commands;
the files are deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import sys
import time
from pathlib import Path

from benchmarks.harness import machine
from benchmarks.harness.machine import run
from benchmarks.harness.records import Recorder
from benchmarks.peers import dlio_peer

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from dliobench.run.checkpoint.files import READ_BYTES, WRITE_BYTES  # noqa: E402

PRESET = REPO / "workloads" / "llama3_8b.yaml"
DD_RATE = re.compile(r"(\d+) bytes .* copied, ([\d.e+-]+) s")


SETTLE_S = [20.0]  # --settle: seconds between the cache drop and each contender


def fresh_memory() -> None:
    """Drop the page cache, then wait ``--settle`` seconds. This VM hands freed memory back to
    its host from about 2 s after it is freed on (virtio-balloon free page reporting, a share
    of the free pages at a time) and page cache built on handed-back pages costs host faults:
    fio, writing 0.2 s after the drop, reused the dropped pages and wrote 1.35x faster (1 job)
    than 5 s later, while dliobench's ranks start writing 2-4 s after it (Python, MPI). 5 s
    was not enough either: 8 plain Python writer processes, starting 1.3 s after fio would,
    took 2.2-2.5 s where fio's 8 jobs took 1.2-2.0 s; 20 s after the drop both took 3.7-3.9
    s. Waiting puts every contender in one state."""
    machine.drop_caches()
    time.sleep(SETTLE_S[0])


def mpiexec() -> str:
    """The mpiexec next to this Python (the mpich wheel's), else the one on PATH."""
    found = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which(
        "mpiexec")
    if found is None:
        raise SystemExit("no mpiexec: install the mpi extra")
    return found


def dliobench(ranks: int, fmt: str, src: str, args: argparse.Namespace) -> tuple[dict, str]:
    """One checkpoint-only run of the code in ``src``; its result's ``checkpoint`` and the
    command."""
    out = args.root / "out"
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "dliobench", "run", str(PRESET),
           f"checkpoint.scale={args.scale}", f"checkpoint.num_checkpoints_write={args.per_run}",
           f"checkpoint.num_checkpoints_read={args.per_run}",
           "checkpoint.time_between_checkpoints=0", f"checkpoint.file_format={fmt}",
           f"checkpoint.checkpoint_folder={args.root / 'ckpt'}", f"output.folder={out}",
           "--no-progress"]
    fresh_memory()
    run(cmd, src)
    latest = sorted(p for p in out.iterdir() if (p / "result.json").exists())[-1]
    ckpt = json.loads((latest / "result.json").read_text())["checkpoint"]
    shutil.rmtree(latest)
    return ckpt, " ".join([f"PYTHONPATH={src}", "mpiexec", *cmd[1:3], "python", *cmd[4:]])


def fio(ranks: int, per_job: int, files: int, rw: str, folder: Path) -> tuple[float, str]:
    """fio ``rw`` (write or read) with ``ranks`` jobs of ``per_job`` bytes in ``files`` files
    each, as dliobench's ranks do: bytes/s."""
    request = WRITE_BYTES if rw == "write" else READ_BYTES
    cmd = ["fio", "--name=ckpt", f"--directory={folder}", "--filename_format=ckpt.$jobnum.$filenum",
           f"--rw={rw}", f"--bs={request}", "--ioengine=psync", "--direct=0",
           f"--numjobs={ranks}", f"--size={per_job}", f"--nrfiles={files}",
           "--file_service_type=sequential", "--fallocate=none", "--group_reporting",
           "--output-format=json"]
    cmd.append("--fsync_on_close=1" if rw == "write" else "--invalidate=1")
    folder.mkdir(parents=True, exist_ok=True)
    fresh_memory()
    doc = json.loads(run(cmd).stdout)
    made = list(folder.iterdir())
    assert len(made) == ranks * files, f"fio made {len(made)} files, not {ranks * files}"
    return float(doc["jobs"][0][rw]["bw_bytes"]), shlex.join(c for c in cmd if "output" not in c)


def dd(nbytes: int, rw: str, path: Path) -> tuple[float, str]:
    """dd of ``nbytes`` with O_DIRECT (write with a final fsync, or read): bytes/s."""
    block = 16 << 20
    count = max(1, nbytes // block)
    if rw == "write":
        cmd = ["dd", "if=/dev/zero", f"of={path}", f"bs={block}", f"count={count}",
               "oflag=direct", "conv=fsync"]
    else:
        cmd = ["dd", f"if={path}", "of=/dev/null", f"bs={block}", "iflag=direct"]
    fresh_memory()
    match = DD_RATE.search(run(cmd).stderr)
    assert match, "dd printed no rate"
    return int(match.group(1)) / float(match.group(2)), " ".join(cmd)


def contenders(ranks: int, nbytes: int, files: int, args: argparse.Namespace) -> dict[str,
                                                                                     tuple]:
    """One repetition of fio (and for one rank dd): write then read ``nbytes`` in ``files``
    files in all, (bytes/s, command)."""
    folder = args.root / "fio"
    shutil.rmtree(folder, ignore_errors=True)  # fresh files, as each checkpoint's are
    out = {"fio write": fio(ranks, nbytes // ranks, files // ranks, "write", folder),
           "fio read": fio(ranks, nbytes // ranks, files // ranks, "read", folder)}
    shutil.rmtree(folder, ignore_errors=True)
    if ranks == 1:
        path = args.root / "dd.bin"
        out["dd write"] = dd(nbytes, "write", path)
        out["dd read"] = dd(nbytes, "read", path)
        path.unlink(missing_ok=True)
    return out


TINY = {"files": 8, "record": 1 << 20}  # the dataset both tools train on before checkpointing


def dlio_training_checkpoint(args: argparse.Namespace, model_bytes: int) -> tuple[float, int,
                                                                                  str]:
    """DLIO 2.0.0's training-time checkpoint (rank 0 torch.saves a model of ``model_bytes``
    int8 plus its default 24.7 MB layer file, no fsync) after one epoch of a tiny dataset:
    (bytes/s from its per_epoch_stats.json duration, bytes written, command)."""
    root = args.root / "dlio"
    shutil.rmtree(root, ignore_errors=True)
    cmd = dlio_peer.command(args.dlio_venv, 1, {
        **dlio_peer.npz_dataset(root / "data", TINY["files"], TINY["record"]),
        "reader.batch_size": 2, "train.computation_time": 0, "train.epochs": 1,
        "workflow.generate_data": True, "workflow.checkpoint": True,
        "checkpoint.model_size": model_bytes, "checkpoint.checkpoint_after_epoch": 1,
        "checkpoint.checkpoint_folder": root / "ckpt", "output.folder": root / "out"})
    fresh_memory()
    run(cmd)
    stats = json.loads(next((root / "out").rglob("per_epoch_stats.json")).read_text())
    seconds = float(stats["1"]["ckpt1"]["duration"])
    written = sum(p.stat().st_size for p in (root / "ckpt").iterdir())
    shutil.rmtree(root, ignore_errors=True)
    return written / seconds, written, " ".join(cmd)


def ours_training_checkpoint(args: argparse.Namespace, nbytes: int, fsync: bool) -> tuple[
        float, str]:
    """dliobench's training-time checkpoint (rank_zero, ``nbytes``) after one epoch of the
    same tiny dataset: (bytes/s from result.json, command)."""
    root = args.root / "ours-train"
    cmd = [sys.executable, "-m", "dliobench", "run", "--yes", "workloads/unet3d.yaml",
           f"dataset.data_folder={root / 'data'}", f"dataset.num_files_train={TINY['files']}",
           f"dataset.record_length_bytes={TINY['record']}", "dataset.record_length_bytes_stdev=0",
           "reader.batch_size=2", "train.computation_time=0", "train.epochs=1",
           "workflow.checkpoint=true", "checkpoint.type=rank_zero",
           "checkpoint.checkpoint_after_epoch=1",  # unet3d's is upstream's 5, as DLIO's below
           f"model.model_size_bytes={nbytes}", f"checkpoint.fsync={str(fsync).lower()}",
           f"checkpoint.checkpoint_folder={root / 'ckpt'}", f"output.folder={root / 'out'}",
           "--no-progress"]
    fresh_memory()
    run(cmd, args.src[0])
    result = json.loads(next((root / "out").rglob("result.json")).read_text())
    shutil.rmtree(root / "out", ignore_errors=True)
    return float(result["checkpoint"]["write_bytes_per_s"]), " ".join(["python", *cmd[1:]])


def against_dlio(args: argparse.Namespace, commands: list[str]) -> list[str]:
    """Rounds of DLIO 2.0.0's training-time checkpoint and ours of the same bytes; medians."""
    model_bytes = round(args.scale * 112_425_623_552)  # llama3_8b's checkpoint, scaled
    theirs, ours_nosync, ours_sync = [], [], []
    written = 0
    for rep in range(args.reps):
        rate, written, cmd = dlio_training_checkpoint(args, model_bytes)
        theirs.append(rate)
        ours_nosync.append(ours_training_checkpoint(args, written, False)[0])
        rate, ours_cmd = ours_training_checkpoint(args, written, True)
        ours_sync.append(rate)
        if rep == 0:
            commands += [cmd, ours_cmd.replace("fsync=true", "fsync=false|true")]
    shutil.rmtree(args.root / "ours-train", ignore_errors=True)
    d, n, f = [statistics.median(x) for x in (theirs, ours_nosync, ours_sync)]
    return ["| tool (1 rank, training-time checkpoint after 1 epoch) | write GB/s | "
            "dliobench / DLIO |", "|---|---|---|",
            f"| DLIO 2.0.0 (torch.save of {written / 1e9:.2f} GB, no fsync; median of "
            f"{len(theirs)}) | {gbps(d)} | |",
            f"| dliobench rank_zero, fsync off (same bytes) | {gbps(n)} | {n / d:.2f} |",
            f"| dliobench rank_zero, fsync on (same bytes) | {gbps(f)} | {f / d:.2f} |"]


def gbps(x: float | None) -> str:
    return "n/a" if x is None else f"{x / 1e9:.3f}"


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def variants(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(label, format, source tree) of each dliobench run in a round; the label names the
    commit when several trees are compared."""
    def label(fmt: str, src: str) -> str:
        if len(args.src) == 1:
            return fmt
        return f"{fmt}@{run(['git', '-C', src, 'log', '-1', '--format=%h']).stdout.strip()}"
    return [(label(fmt, src), fmt, src) for src in args.src for fmt in args.formats]


def compare(ranks: int, args: argparse.Namespace, commands: list[str],
            details: list[str]) -> list[str]:
    """``--reps`` rounds of every dliobench format and fio (and dd), back to back, the order
    alternating by round; medians of the rates and of each round's paired ratios (each
    round's ratios and load go to ``details``)."""
    rounds: list[dict[str, tuple[float, float]]] = []
    slowest: dict[str, list[tuple[float, float]]] = {}
    about: dict[str, str] = {}
    loads: list[float] = []
    shape = (0, 0)  # bytes and files per checkpoint, from round 0's dliobench run (it goes first)
    runs = variants(args)
    for rep in range(args.reps):
        loads.append(os.getloadavg()[0])
        rates: dict[str, tuple[float, float]] = {}
        steps = ["dliobench", "others"] if rep % 2 == 0 else ["others", "dliobench"]
        for step in steps:
            if step == "others":
                others = contenders(ranks, *shape, args)
                for tool in ("fio", "dd"):
                    if f"{tool} write" in others:
                        rates[tool] = (others[f"{tool} write"][0], others[f"{tool} read"][0])
                        if rep == 0:
                            commands += [others[f"{tool} write"][1], others[f"{tool} read"][1]]
                continue
            for name, fmt, src in runs if rep % 2 == 0 else runs[::-1]:
                ckpt, cmd = dliobench(ranks, fmt, src, args)
                shape = (int(ckpt["write"]["bytes_per_checkpoint"]),
                         int(ckpt["files_per_checkpoint"]))
                about[name] = f"{shape[0] / 1e9:.2f} GB, {shape[1]} files"
                rates[f"dliobench {name}"] = (ckpt["write"]["aggregate_bytes_per_s"],
                                              ckpt["read"]["aggregate_bytes_per_s"])
                slowest.setdefault(name, []).append(
                    (ckpt["write"]["throughput_bytes_per_s_mean"],
                     ckpt["read"]["throughput_bytes_per_s_mean"]))
                if rep == 0:
                    commands.append(cmd)
        rounds.append(rates)
    lines = []
    for name in sorted(rounds[0], key=lambda n: not n.startswith("dliobench")):
        w = statistics.median(r[name][0] for r in rounds)
        rd = statistics.median(r[name][1] for r in rounds)
        if name.startswith("dliobench"):
            fmt = name.split()[1]
            sw = statistics.median(x for x, _ in slowest[fmt])
            sr = statistics.median(y for _, y in slowest[fmt])
            lines.append(f"| {ranks} | {name} ({about[fmt]} per checkpoint; MLPerf throughput, "
                         f"slowest rank: {gbps(sw)}, {gbps(sr)}) | {gbps(w)} | {gbps(rd)} | |")
            continue
        pairs = {fmt: [(r[f"dliobench {fmt}"][0] / r[name][0],
                        r[f"dliobench {fmt}"][1] / r[name][1]) for r in rounds]
                 for fmt, _, _ in runs}
        ratios = "; ".join(f"{fmt} {_spread([w for w, _ in v])}, {_spread([x for _, x in v])}"
                           for fmt, v in pairs.items())
        details += [f"- {ranks} rank(s), dliobench {fmt} / {name} (write, read) by round: "
                    + ", ".join(f"{w:.2f} {x:.2f} (load {load:.1f})"
                                for (w, x), load in zip(v, loads, strict=True))
                    for fmt, v in pairs.items()]
        lines.append(f"| {ranks} | {name} | {gbps(w)} | {gbps(rd)} | {ratios} |")
    lines.append(f"| {ranks} | load average (1 min) at each round's start | "
                 f"{_spread(loads)} | | |")
    return lines


def planning_line() -> str:
    """Markdown line: seconds to plan llama3_1t's 1,024-rank layout (every rank's files and
    tensors, and the totals), best of 5, in this process."""
    sys.path.insert(0, str(REPO))
    from dliobench.config.load import load
    from dliobench.run.checkpoint.layout import layout_for

    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        config, _ = load(REPO / "workloads" / "llama3_1t.yaml")
        layout = layout_for(config, 1)
        files = sum(len(layout.rank_files(r)) for r in range(layout.world))
        total = sum(layout.totals())
        best = min(best, time.perf_counter() - start)
    return (f"- planning llama3_1t ({layout.world} ranks, {files} files, {total / 2**30:,.1f} "
            f"GiB per checkpoint): {best:.3f} s (best of 5, one process)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=0.02)
    parser.add_argument("--reps", type=int, default=7, help="rounds of all contenders")
    parser.add_argument("--per-run", type=int, default=1,
                        help="checkpoints each dliobench run writes and reads")
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--formats", nargs="+", default=["torch", "raw"])
    parser.add_argument("--root", type=Path, default=Path("/work/bench-ckpt"))
    parser.add_argument("--src", nargs="+", default=[str(REPO)],
                        help="dliobench source trees, each run in every round (before/after)")
    parser.add_argument("--dlio-venv", default="", help="also compare with DLIO 2.0.0's "
                        "training-time checkpoint (../shared/tools/install-dlio-peer.sh VENV)")
    parser.add_argument("--only-dlio", action="store_true", help="skip fio/dd")
    parser.add_argument("--settle", type=float, default=20.0,
                        help="seconds to wait after each cache drop (see fresh_memory)")
    args = parser.parse_args()
    SETTLE_S[0] = args.settle
    args.root.mkdir(parents=True, exist_ok=True)
    record = Recorder(__file__, src=args.src[0])
    lines = ["| ranks | contender | write GB/s (median) | read GB/s (median) | dliobench / it "
             "per round: median (range), write; read |", "|---|---|---|---|---|"]
    commands: list[str] = []
    details: list[str] = []
    try:
        for ranks in [] if args.only_dlio else args.ranks:
            lines += compare(ranks, args, commands, details)
        if args.only_dlio:
            lines = []
        if args.dlio_venv:
            lines += ["", *against_dlio(args, commands)]
    finally:
        shutil.rmtree(args.root, ignore_errors=True)
    code = list(dict.fromkeys(line for src in args.src for line in machine.code_lines(src)))
    print("\n".join([*machine.machine_lines(), *code, "",
                     *lines, "", *details, "", "Commands (one repetition each):", "",
                     *[f"    {c}" for c in commands], "", planning_line(),
                     machine.load_line()]))
    # the rounds are kept in the table's rows and details, not yet as numbers of their own
    print(f"- record: {record.write({'table': lines, 'details': details}, commands=commands)}")


if __name__ == "__main__":
    main()
