"""Fault sweep: full disks, SIGTERM/SIGKILL/SIGSTOP, concurrent writers and leftovers, tried
the way an operator meets them, through the real CLI (and mpiexec), on real tmpfs mounts.

Usage (as root, for the tmpfs mounts): python -m benchmarks.faults.faults [--only SUBSTRING]
    [--root /work/bench-faults] [--json FILE]

Each case checks what the Faults issue asks: the exit code, one sentence and no Python
traceback on stderr, no hang (every command has a time limit), no data lost (every complete
file is recorded, so the next `generate` writes exactly the others, and `--verify` then finds
nothing damaged; every run leaves a result), no temporary files, no process of ours left and
no shared-memory leftovers. Prints a table and the totals; exits 1 if any case failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from benchmarks.faults.case import (
    FORMATS,
    MPIEXEC,
    PY,
    TIMEOUT,
    Case,
    Outcome,
    count,
    recovered,
    said_lines,
    until,
    watch_processes,
)
from benchmarks.harness.records import Recorder

# --- the cases --------------------------------------------------------------------------

def full_disk(root: Path, fmt: str, size: int) -> Outcome:
    """The disk fills up while generating (check off): one sentence, complete files
    recorded, resumable to a verified dataset."""
    case = Case(root, f"full disk {fmt} {size}B")
    with watch_processes(case):
        disk = case.tmpfs("disk", "2M")
        files = (6_000_000 if fmt == "jpeg" else 3_000_000) // size  # JPEG compresses
        case.workload(dataset={"format": fmt, "num_files_train": files,
                               "record_length_bytes": size,
                               "num_samples_per_file": 4 if fmt == "indexed_binary" else 1})
        folder = f"{disk.name}/data"
        done = case.run("generate", "workload.yaml", "--no-progress",
                        f"dataset.data_folder={folder}", "dataset.check_free_space=false",
                        expect=1)
        case.sentence(done.stderr, "is full")
        subprocess.run(["mount", "-o", "remount,size=64M", str(disk)], check=True)
        case.check_dataset(folder, files)
    return case.close()


def space_check(root: Path, fmt: str, files: int, size: int, refuse: bool) -> Outcome:
    """The space check refuses a dataset that would not fit, before writing anything, and
    lets one through that fits."""
    case = Case(root, f"space check {fmt} {files} x {size}B")
    with watch_processes(case):
        disk = case.tmpfs("disk", "2M")
        case.workload(dataset={"format": fmt, "num_files_train": files,
                               "record_length_bytes": size,
                               "num_samples_per_file": 4 if fmt == "indexed_binary" else 1,
                               "data_folder": f"{disk.name}/data"})
        # --yes: a dataset of more than half the free space is asked for first (not here)
        done = case.run("generate", "workload.yaml", "--no-progress", "--yes",
                        expect=int(refuse))
        if refuse:
            case.sentence(done.stderr, "needs", "are free")
            if count(disk / "data/train", "*"):
                case.out.problems.append("files were written before the refusal")
    return case.close()


def sized(root: Path, columns: list[dict[str, object]]) -> Outcome:
    """Files take the bytes asked (parquet stored 8-bit columns as 32-bit values: 4x): a
    dataset whose samples fit a small disk is generated there (old: refused, or the disk
    full), its files within 5 % of the bytes asked, and read back exactly once."""
    label = ",".join(str(c["dtype"]) for c in columns) if columns else "uint8 row"
    case = Case(root, f"size parquet {label}")
    with watch_processes(case):
        disk = case.tmpfs("disk", "2M")
        files, rows, width = 12, 32, 4096
        dataset: dict[str, object] = {"format": "parquet", "num_files_train": files,
                                      "num_samples_per_file": rows, "record_length_bytes": width,
                                      "data_folder": f"{disk.name}/data"}
        if columns:
            dataset["parquet"] = {"columns": columns}
        case.workload(dataset=dataset)
        case.run("generate", "workload.yaml", "--no-progress", "--yes")  # most of the disk
        written = sum(p.stat().st_size for p in (disk / "data").rglob("*.parquet"))
        if abs(written / (files * rows * width) - 1) > 0.05:
            case.out.problems.append(f"files hold {written:,} bytes, {files * rows * width:,} "
                                     "asked")
        case.run("run", "workload.yaml", "--no-progress")
        results = list((case.dir / "reports").glob("*/result.json"))
        if not results:
            case.out.lost += 1
        elif not json.loads(results[0].read_text())["metrics"]["exactly_once"]:
            case.out.problems.append("samples not read exactly once")
    return case.close()


def signal_generate(root: Path, sig: int, after: int, size: int, ranks: int = 0) -> Outcome:
    """A generation signalled part way: exit code, complete files kept and recorded."""
    name = signal.Signals(sig).name
    case = Case(root, f"{name} generate {size}B after {after} files{' mpi' if ranks else ''}")
    files = 4000 if size <= 8192 else 60
    with watch_processes(case):
        case.workload(dataset={"num_files_train": files, "record_length_bytes": size})
        proc = case.start("generate", "workload.yaml", "--no-progress", ranks=ranks)
        if not until(lambda: count(case.dir / "data/train", "img_*") >= after):
            case.out.problems.append("generation ended before the signal")
        err = case.signal(proc, sig, ranks, "generate")
        if sig != signal.SIGKILL and not ranks:
            case.sentence(err, "terminated" if sig == signal.SIGTERM else "interrupted")
        if ranks and proc.returncode == 0:
            case.out.problems.append("mpiexec exited 0 after the signal")
        time.sleep(0.3)
        if ranks and sig == signal.SIGKILL:  # the next MPI job removes MPICH's segments
            time.sleep(6)
            case.run("generate", "workload.yaml", "--no-progress", ranks=ranks)
        case.check_dataset("data", files, killed=sig == signal.SIGKILL)
    return case.close()


def signal_run(root: Path, sig: int, loader: str, ranks: int = 0) -> Outcome:
    """A run signalled part way: a partial result with the steps measured; nothing of
    ours left running."""
    name = signal.Signals(sig).name
    case = Case(root, f"{name} run {loader}{' mpi' if ranks else ''}")
    with watch_processes(case):
        case.workload(reader={"data_loader": loader},
                      train={"epochs": 500, "computation_time": 0.005})
        case.run("generate", "workload.yaml", "--no-progress")
        proc = case.start("run", "workload.yaml", "--no-progress", ranks=ranks)
        reports = case.dir / "reports"
        until(lambda: count(reports, "*") > 0)
        time.sleep(2.5)
        err = case.signal(proc, sig, ranks, "run")
        if sig != signal.SIGKILL:
            results = list(reports.glob("*/result.json"))
            if not results:
                case.out.lost += 1
            else:
                result = json.loads(results[0].read_text())
                if result["status"] != "partial" or not result["metrics"]["steps"]:
                    case.out.problems.append(f"result: {result['status']}")
        said = said_lines(err)  # warnings and notes aside
        if len(said) > 2 + ranks:  # MPI: a line per rank, the launcher's
            case.out.problems.append(f"{len(said)} lines on stderr: {err[-300:]}")
        if sig == signal.SIGKILL:  # its journals make the partial result (recover)
            recovered(case, reports, set())
        if sig == signal.SIGKILL:  # the next run removes what the killed one left
            time.sleep(6)
            case.run("run", "workload.yaml", "--no-progress", "train.epochs=1", ranks=ranks)
    return case.close()


def stopped_rank(root: Path, command: str) -> Outcome:
    """SIGSTOP rank 1 of a 2-rank job: the job ends after the stall timeout."""
    case = Case(root, f"SIGSTOP rank 1 {command} mpi")
    with watch_processes(case):
        # generate: 20,000 small files, so it is still writing when rank 1 is stopped (4,000
        # were all written within the 0.5 s below once small-file generation got fast)
        case.workload(dataset={"num_files_train": 20000 if command == "generate" else 16,
                               "record_length_bytes": 4096 if command == "generate" else 65536},
                      train={"epochs": 2000, "computation_time": 0.002, "stall_timeout_s": 3})
        if command == "run":
            case.run("generate", "workload.yaml", "--no-progress")
        proc = case.start(command, "workload.yaml", "--no-progress", ranks=2)
        target = case.dir / ("reports" if command == "run" else "data/train")
        until(lambda: count(target, "*") > (0 if command == "run" else 300))
        time.sleep(0.5)
        pid = _rank_pid(case.dir, 1)
        if pid is None:
            case.out.problems.append("rank 1 not found")
        else:
            os.kill(pid, signal.SIGSTOP)
        _, err = case.finish(proc, None, command)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # "made no progress ...", or, where the journals show who went silent, "rank 1 on ...
        # stopped: ...; rank 0 of 2 ... ends the job after 3 s without progress"
        case.sentence(err, "progress", "train.stall_timeout_s")
        if command == "generate":  # MPI_Abort SIGKILLs the stopped rank
            case.check_dataset("data", 20000, killed=True)
        else:  # the stalled job assembled its partial result before it ended
            case.out.lost += 0 if list((case.dir / "reports").glob("*/result.json")) else 1
    return case.close()


TORCHRUN = shutil.which("torchrun", path=str(Path(PY).parent))


def killed_rank(root: Path, launcher: str, ranks: int, victim: int = 1) -> Outcome:
    """SIGKILL a rank of a training job once every rank journaled steps: what every rank
    measured (to its last journaled second) reaches a partial result, written by a surviving
    rank (torchrun) or, when the launcher SIGKILLs every rank (MPICH), by `dliobench
    recover`; nothing is lost and the partial result says where each rank's records end."""
    case = Case(root, f"SIGKILL rank {victim} of {ranks} run {launcher}")
    with watch_processes(case):
        case.workload(train={"epochs": 2000, "computation_time": 0.005})
        case.run("generate", "workload.yaml", "--no-progress")
        run = ["run", "workload.yaml", "--no-progress"]
        if launcher == "torchrun":
            assert TORCHRUN, "no torchrun"
            proc = subprocess.Popen([TORCHRUN, "--standalone", f"--nproc-per-node={ranks}",
                                     "-m", "dliobench", *run], cwd=case.dir, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
        else:
            proc = case.start(*run, ranks=ranks)
        reports = case.dir / "reports"
        until(lambda: all(b'"k":"steps"' in b"".join(
            p.read_bytes() for p in reports.glob(f"*/journal/rank-{r:05d}.jsonl"))
            for r in range(ranks)))
        pid = _rank_pid(case.dir, victim, "RANK" if launcher == "torchrun" else "PMI_RANK")
        if pid is None:
            case.out.problems.append(f"rank {victim} not found")
        else:
            os.kill(pid, signal.SIGKILL)
        if launcher == "torchrun":  # torchrun's own ChildFailedError traceback is not ours
            torchruns(case, proc)
        else:
            case.finish(proc, None, "run")
        if launcher == "torchrun" and not list(reports.glob("*/result.json")):
            case.out.problems.append("no surviving rank wrote the partial result")
        recovered(case, reports, set(range(ranks)))
        if launcher == "mpi":  # the next MPI job removes the shared memory the killed one left
            time.sleep(6)
            case.run("run", "workload.yaml", "--no-progress", "train.epochs=1", ranks=ranks)
    return case.close()


def killed_node(root: Path) -> Outcome:
    """SIGKILL both ranks of emulated node-1 of 2 x 2 (`dliobench nodes`, needs root): the
    survivors end the job within the stall timeout with one sentence naming node-1, and the
    partial result holds every rank's journaled measurements."""
    case = Case(root, "SIGKILL node 1 of 2 x 2 run nodes")
    with watch_processes(case):
        case.workload(train={"epochs": 2000, "computation_time": 0.005, "stall_timeout_s": 3})
        proc = case.start("nodes", "--nodes", "2", "--ranks-per-node", "2", "--local",
                          str(case.dir / "local"), "--", "run", "workload.yaml", "--no-progress")
        reports = case.dir / "reports"
        until(lambda: all(b'"k":"steps"' in b"".join(
            p.read_bytes() for p in reports.glob(f"*/journal/rank-{r:05d}.jsonl"))
            for r in range(4)))
        pids = [json.loads(p.read_bytes().split(b"\n")[0][9:])["pid"] for r in (2, 3)
                for p in reports.glob(f"*/journal/rank-{r:05d}.jsonl")]
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        start = time.monotonic()
        _, err = case.finish(proc, None, "nodes run")
        if time.monotonic() - start > 3 + 10:
            case.out.problems.append(f"ended {time.monotonic() - start:.0f} s after the kill")
        if len([ln for ln in err.splitlines() if ln.startswith("dliobench:")]) != 1:
            case.out.problems.append(f"not one sentence: {err.strip()[-300:]}")
        case.sentence(err, "node node-1 (ranks 2, 3) stopped")
        results = list(reports.glob("*/result.json"))
        if not results:
            case.out.lost += 1
        elif len(json.loads(results[0].read_text())["ranks"]) != 4:
            case.out.problems.append("the partial result lacks ranks")
    return case.close()


def torchruns(case: Case, proc: subprocess.Popen[str]) -> None:
    """Wait for a torchrun job; judge its stderr without torchrun's own traceback (the
    agent's ``ChildFailedError``, printed above its failure table)."""
    try:
        _, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        case.out.hang = True
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
    ours = re.sub(r"Traceback \(most recent call last\):.*?ChildFailedError:", "", err,
                  flags=re.S)
    case.judge(proc.returncode, ours, None, "torchrun", faulted=True)




def _rank_pid(folder: Path, rank: int, variable: str = "PMI_RANK") -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        mark = f"\0{variable}={rank}\0".encode()
        if cwd == str(folder) and mark in b"\0" + env \
                and os.getppid() != int(entry.name):
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if not (Path(f"/proc/{parent}/environ").exists() and mark
                    in b"\0" + Path(f"/proc/{parent}/environ").read_bytes()):
                return int(entry.name)  # the rank itself, not one of its workers
    return None


def full_output_disk(root: Path, free_kb: int) -> Outcome:
    """The results folder's disk is full (or nearly): the measurements still reach the
    user, in a fallback folder named in one sentence."""
    case = Case(root, f"full output disk {free_kb} kB free")
    with watch_processes(case):
        disk = case.tmpfs("out", "1M")
        with contextlib.suppress(OSError), open(disk / "filler", "wb") as handle:
            while True:
                handle.write(b"x" * 4096)
                handle.flush()
        if free_kb:
            os.truncate(disk / "filler", os.path.getsize(disk / "filler") - free_kb * 1024)
        case.workload(train={"computation_time": 0.001})
        case.run("generate", "workload.yaml", "--no-progress")
        done = case.run("run", "workload.yaml", "--no-progress", "--output", str(disk / "r"),
                        expect=None)
        case.out.code = done.returncode
        written = list((disk / "r").glob("*/result.json"))
        line = next((ln for ln in done.stderr.splitlines() if "could not write" in ln), "")
        if "accelerator utilization" not in done.stdout:
            case.out.problems.append("no summary")
        if written and done.returncode == 0:
            pass  # it fitted
        elif " are in " in line:
            fallback = Path(line.rsplit(" are in ", 1)[1])
            if not (fallback / "result.json").exists():
                case.out.lost += 1
            shutil.rmtree(fallback, ignore_errors=True)
        else:
            case.out.lost += 1
    return case.close()


def concurrent(root: Path, first: list[str], second: list[str], label: str) -> Outcome:
    """Two commands on one data folder at once: the second waits or is refused with the
    holder named; the dataset stays consistent."""
    case = Case(root, f"concurrent {label}")
    with watch_processes(case):
        case.workload(dataset={"num_files_train": 3000, "record_length_bytes": 4096})
        if first[0] == "run":
            case.run("generate", "workload.yaml", "--no-progress")
        one = case.start(*first)
        until(lambda: count(case.dir / "data", "*") > 50 or count(case.dir / "reports") > 0)
        two = subprocess.run(case.cmd(*second), cwd=case.dir, capture_output=True, text=True,
                             timeout=TIMEOUT)
        case.judge(two.returncode, two.stderr, None, second[0])
        case.finish(one, 0, first[0])
        if two.returncode not in (0, 1):
            case.out.problems.append(f"second: exit {two.returncode}")
        if two.returncode == 1:  # refused: the folder is busy, or holds another dataset
            case.sentence(two.stderr, "being" if "being" in two.stderr else "other parameters")
        case.check_dataset("data", 3000)
    return case.close()


def concurrent_runs(root: Path, generated: bool) -> Outcome:
    """Three runs of one dataset started at once, each about 1 s long: readers of a complete
    dataset (``workflow.generate_data=false``) read it together; runs that may generate an
    absent one wait for the one that does. Every run completes with its result, and the
    dataset is written once."""
    case = Case(root, f"concurrent three runs {'reading' if generated else 'generating'}")
    with watch_processes(case):
        case.workload(dataset={"num_files_train": 400, "record_length_bytes": 4096},
                      train={"epochs": 1, "computation_time": 0.05},
                      reader={"batch_size": 20})
        if generated:
            case.run("generate", "workload.yaml", "--no-progress")
        args = ["run", "workload.yaml", "--no-progress",
                f"workflow.generate_data={str(not generated).lower()}"]
        procs = [case.start(*args) for _ in range(3)]
        for proc in procs:
            case.finish(proc, 0, "run")
        results = [json.loads(p.read_text()) for p in (case.dir / "reports").glob("*/result.json")]
        case.out.lost += 3 - sum(r.get("status") == "complete" for r in results)
        writes = sum(bool(r.get("generation")) for r in results)
        if writes != (0 if generated else 1):
            case.out.problems.append(f"{writes} of the runs generated the dataset")
        case.check_dataset("data", 400)
    return case.close()


def signal_checkpoint(root: Path) -> Outcome:
    """SIGTERM while a checkpoint is written: no partial checkpoint file remains."""
    case = Case(root, "SIGTERM during a checkpoint")
    with watch_processes(case):
        case.workload(model={"model_size_bytes": "1GB"}, workflow={"checkpoint": True},
                      checkpoint={"steps_between_checkpoints": 2},
                      train={"epochs": 3, "computation_time": 0.01})
        case.run("generate", "workload.yaml", "--no-progress")
        proc = case.start("run", "workload.yaml", "--no-progress")
        folder = case.dir / "checkpoints"
        until(lambda: count(folder, "*") > 0, 60)
        time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        case.finish(proc, 143, "run")
        case.out.leftovers += [p.name for p in folder.rglob("*") if p.is_file()]
    return case.close()


KV_SLOW = ("kvcache", "--model", "tiny-1b", "--num-users", "8", "--gpu-mem-gb", "64",
           "--cpu-mem-gb", "0", "--gpu-bandwidth-gbps", "0.001", "--generation-mode", "none",
           "--cache-dir", "cache")  # a 1 MB/s tier: every request is still in flight at the end


def kvcache_slow_tier(root: Path) -> Outcome:
    """A KV-cache run on a tier too slow for its requests ends at its duration (plus a
    start-up allowance), with its result: before, it waited for its requests (minutes)."""
    case = Case(root, "kvcache slow tier duration")
    with watch_processes(case):
        (case.dir / "cache").mkdir()
        case.run(*KV_SLOW, "--duration", "2", timeout=20)
        reports = list((case.dir / "reports").glob("*/result.json"))
        case.out.lost += 0 if reports else 1
        case.out.leftovers += [p.name for p in (case.dir / "cache").rglob("*")]
    return case.close()


def killed_kvcache(root: Path) -> Outcome:
    """SIGKILL of a KV-cache run once it journaled its figures: ``recover`` makes its partial
    result (before: no journal, nothing to recover)."""
    case = Case(root, "SIGKILL kvcache recover")
    with watch_processes(case):
        (case.dir / "cache").mkdir()
        proc = case.start(*KV_SLOW, "--duration", "60")
        journals = case.dir / "reports"
        until(lambda: any(b'"k":"kvcache"' in p.read_bytes()
                          for p in journals.glob("*/journal/rank-*.jsonl")), 60)
        case.signal(proc, signal.SIGKILL, 0, "kvcache")
        for run_dir in journals.glob("*"):
            case.run("recover", str(run_dir))
        results = [json.loads(p.read_text()) for p in journals.glob("*/result.json")]
        if not any(r.get("kvcache") and r["status"] == "partial" for r in results):
            case.out.lost += 1
    return case.close()


def full_checkpoint_disk(root: Path, fmt: str) -> Outcome:
    """The checkpoint folder's disk holds one checkpoint, not two (``fmt``: torch or raw of
    the llama3_8b preset scaled down, or ``training``: a training run's checkpoints): one
    sentence, the completed checkpoint's figures in a partial result, nothing left of the
    checkpoint that did not fit."""
    case = Case(root, f"full checkpoint disk {fmt}")
    with watch_processes(case):
        disk = case.tmpfs("ckpt", "16M")
        folder = f"checkpoint.checkpoint_folder={disk}"
        if fmt == "training":  # 6 MB after every epoch, kept until the end: 2 fit
            case.workload(train={"epochs": 3, "computation_time": 0.001})
            case.run("generate", "workload.yaml", "--no-progress")
            done = case.run("run", "workload.yaml", "--no-progress", folder,
                            "workflow.checkpoint=true", "model.model_size_bytes=6MB",
                            "checkpoint.optimizer_state_factor=0", expect=1)
        else:  # 11.2 MB a checkpoint, the first kept
            preset = Path(__file__).resolve().parents[2] / "workloads" / "llama3_8b.yaml"
            done = case.run("run", str(preset), "--no-progress", folder,
                            "checkpoint.scale=0.0001", f"checkpoint.file_format={fmt}",
                            "checkpoint.time_between_checkpoints=0", "checkpoint.keep=true",
                            "checkpoint.num_checkpoints_write=2", expect=1)
        case.out.code = done.returncode
        case.sentence(done.stderr, "is full", "needs", "was free")
        results = [json.loads(p.read_text()) for p in case.dir.glob("reports/*/result.json")]
        figures = [r.get("checkpoint", {}).get("checkpoints" if fmt == "training" else "write")
                   for r in results if r.get("status") == "partial" and r.get("errors")]
        if not any(figures):
            case.out.lost += 1  # the completed checkpoints' figures are gone
        names = {p.parent.name for p in disk.rglob("*") if p.is_file()}
        case.out.leftovers += sorted(names - {"checkpoint-0000"})  # the failed one's parts
    return case.close()


def split_checkpoint_set(root: Path) -> Outcome:
    """A split checkpoint set (a write-only ``--run-set`` invocation, then a read-only one)
    on a 32 MB disk: both succeed and the checkpoint disk is empty afterwards (the read phase
    removed what it read; it used to leave the whole set on the disk)."""
    case = Case(root, "split checkpoint set")
    with watch_processes(case):
        disk = case.tmpfs("ckpt", "32M")
        preset = Path(__file__).resolve().parents[2] / "workloads" / "llama3_8b.yaml"
        common = [str(preset), "--run-set", "--no-progress", f"checkpoint.checkpoint_folder={disk}",
                  "checkpoint.scale=0.0001", "checkpoint.file_format=raw",
                  "checkpoint.time_between_checkpoints=0"]
        case.run("run", *common, "checkpoint.num_checkpoints_write=2",
                 "checkpoint.num_checkpoints_read=0")
        case.run("run", *common, "checkpoint.num_checkpoints_write=0",
                 "checkpoint.num_checkpoints_read=2")
        case.out.leftovers += sorted(f"{p.parent.name}/{p.name}" for p in disk.rglob("*")
                                     if p.is_file())
    return case.close()


def signal_staging(root: Path) -> Outcome:
    """SIGTERM while the dataset is staged: no partial staged copy remains."""
    case = Case(root, "SIGTERM during staging")
    with watch_processes(case):
        case.workload(dataset={"num_files_train": 3000, "record_length_bytes": 65536},
                      storage={"stage_to": "staged"})
        case.run("generate", "workload.yaml", "--no-progress")
        proc = case.start("run", "workload.yaml", "--no-progress")
        until(lambda: count(case.dir / "staged", "*") > 100)
        proc.send_signal(signal.SIGTERM)
        case.finish(proc, 143, "run")
        staged = case.dir / "staged"
        case.out.leftovers += [p.name for p in staged.rglob(".*tmp*")] if staged.exists() else []
    return case.close()


def cases(root: Path) -> list[tuple[str, Callable[[], Outcome]]]:
    out: list[tuple[str, Callable[[], Outcome]]] = []
    for fmt in FORMATS:
        for size in (4000, 100_000):
            out.append((f"full disk {fmt} {size}", lambda f=fmt, s=size: full_disk(root, f, s)))
        # the samples fit, with the format's overhead and 4 KiB blocks they do not
        files = 100 if fmt == "indexed_binary" else 400
        if fmt != "jpeg":
            out.append((f"space check {fmt}",
                        lambda f=fmt, n=files: space_check(root, f, n, 4097, True)))
    # JPEGs are padded to the requested size (COM segments), so the check counts them as
    # asked: 1.6 MB of them fit in 2 MB and must be let through (24 of them no longer fit)
    out.append(("space check jpeg fits", lambda: space_check(root, "jpeg", 16, 100_000, False)))
    out.append(("space check jpeg 24", lambda: space_check(root, "jpeg", 24, 100_000, True)))
    out.append(("space check jpeg", lambda: space_check(root, "jpeg", 900, 4097, True)))
    # parquet's 8- and 16-bit columns take their bytes (they took 4x and 2x)
    out.append(("size parquet uint8 row", lambda: sized(root, [])))
    out.append(("size parquet narrow columns", lambda: sized(root, [
        {"name": "image", "dtype": "uint8", "size": 4084},
        {"name": "box", "dtype": "int16", "size": 4}, {"name": "label", "dtype": "int32"}])))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
        for size, after in ((4096, 800), (4 << 20, 10)):
            out.append((f"{sig.name} generate {size}",
                        lambda g=sig, s=size, a=after: signal_generate(root, g, a, s)))
    for loader in ("native", "pytorch", "dali"):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
            out.append((f"{sig.name} run {loader}",
                        lambda g=sig, ld=loader: signal_run(root, g, ld)))
    if MPIEXEC:
        out.append(("SIGTERM generate mpi",
                    lambda: signal_generate(root, signal.SIGTERM, 800, 4096, ranks=2)))
        out.append(("SIGKILL generate mpi",
                    lambda: signal_generate(root, signal.SIGKILL, 800, 4096, ranks=2)))
        out.append(("SIGTERM run mpi", lambda: signal_run(root, signal.SIGTERM, "native", 2)))
        out.append(("SIGKILL run mpi", lambda: signal_run(root, signal.SIGKILL, "native", 2)))
        out.append(("SIGSTOP run mpi", lambda: stopped_rank(root, "run")))
        out.append(("SIGSTOP generate mpi", lambda: stopped_rank(root, "generate")))
        out.append(("SIGKILL rank 1 of 3 run mpi", lambda: killed_rank(root, "mpi", 3)))
        if os.geteuid() == 0 and shutil.which("unshare"):
            out.append(("SIGKILL node 1 of 2 x 2 run nodes", lambda: killed_node(root)))
    if TORCHRUN:
        for victim in (1, 0):  # rank 0 killed: rank 1, sent SIGTERM, writes the result
            out.append((f"SIGKILL rank {victim} of 2 run torchrun",
                        lambda v=victim: killed_rank(root, "torchrun", 2, v)))
    out.append(("full output disk 0", lambda: full_output_disk(root, 0)))
    out.append(("full output disk 8", lambda: full_output_disk(root, 8)))
    gen = ["generate", "workload.yaml", "--no-progress"]
    out.append(("concurrent two generates", lambda: concurrent(
        root, gen, [*gen, "dataset.generation_seed=7"], "two generates other seed")))
    out.append(("concurrent generate and run", lambda: concurrent(
        root, gen, ["run", "workload.yaml", "--no-progress"], "generate then run")))
    out.append(("concurrent npz and npy", lambda: concurrent(
        root, gen, [*gen, "dataset.format=npy"], "npz and npy generates")))
    out.append(("concurrent run and generate", lambda: concurrent(
        root, ["run", "workload.yaml", "--no-progress", "train.epochs=20"],
        [*gen, "dataset.generation_seed=7"], "run then generate")))
    out.append(("concurrent three readers", lambda: concurrent_runs(root, True)))
    out.append(("concurrent three generating runs", lambda: concurrent_runs(root, False)))
    out.append(("SIGTERM checkpoint", lambda: signal_checkpoint(root)))
    out.append(("SIGTERM staging", lambda: signal_staging(root)))
    for fmt in ("torch", "raw", "training"):
        out.append((f"full checkpoint disk {fmt}", lambda f=fmt: full_checkpoint_disk(root, f)))
    out.append(("split checkpoint set", lambda: split_checkpoint_set(root)))
    out.append(("kvcache slow tier duration", lambda: kvcache_slow_tier(root)))
    out.append(("SIGKILL kvcache recover", lambda: killed_kvcache(root)))
    if shutil.which("slurmctld") and os.geteuid() == 0:  # a test Slurm cluster per case
        from benchmarks.faults import slurm_faults

        out += slurm_faults.cases(root)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path("/work/bench-faults"))
    ap.add_argument("--only", default="", help="run the cases whose name holds this")
    ap.add_argument("--json", type=Path, help="write every outcome here")
    args = ap.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    record = Recorder(__file__)
    outcomes: list[Outcome] = []
    for name, run in cases(args.root):
        if args.only and args.only not in name:
            continue
        start = time.monotonic()
        try:
            outcome = run()
        except Exception as exc:  # a defect of this script's case, said as a failed case
            outcome = Outcome(name, problems=[f"the case itself failed: {exc!r}"])
        outcome.seconds = time.monotonic() - start
        outcomes.append(outcome)
        print(f"{'ok  ' if outcome.ok else 'FAIL'} {outcome.case:45s} exit {outcome.code} "
              f"{outcome.seconds:5.1f} s {'; '.join(outcome.problems + outcome.leftovers)[:200]}",
              flush=True)
    total = len(outcomes)
    print(f"\n{total} cases: ok {sum(o.ok for o in outcomes)}, "
          f"data lost {sum(o.lost for o in outcomes)}, "
          f"tracebacks {sum(o.traceback for o in outcomes)}, "
          f"hangs {sum(o.hang for o in outcomes)}, "
          f"leftovers {sum(bool(o.leftovers) for o in outcomes)}, "
          f"other problems {sum(bool(o.problems) for o in outcomes)}")
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    totals = {"cases": total, "ok": sum(o.ok for o in outcomes)}
    print(f"- record: {record.write(totals, outcomes=[asdict(o) for o in outcomes])}")
    shutil.rmtree(args.root, ignore_errors=True)
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
