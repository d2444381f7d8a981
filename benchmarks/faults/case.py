"""What every fault case shares: its folder and commands (``Case``), how it ended
(``Outcome``), and the checks after it (processes and shared memory left, a killed run's
partial result). ``faults.py`` and ``slurm_faults.py`` both build on it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

PY = sys.executable
MPIEXEC = shutil.which("mpiexec", path=str(Path(PY).parent)) or shutil.which("mpiexec")
TIMEOUT = 120
FORMATS = ("npz", "npy", "hdf5", "tfrecord", "indexed_binary", "jpeg", "png")


@dataclass
class Outcome:
    case: str
    code: int | None = None
    seconds: float = 0.0
    traceback: bool = False
    hang: bool = False
    lost: int = 0  # complete files not recorded, or a run without its result
    leftovers: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.traceback or self.hang or self.lost or self.leftovers
                    or self.problems)


class Case:
    """One case's folder, workload and commands."""

    def __init__(self, root: Path, name: str) -> None:
        self.dir = root / re.sub(r"[^a-z0-9]+", "-", name.lower())
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.out = Outcome(name)
        self.mounts: list[Path] = []

    def workload(self, **sections: dict[str, object]) -> Path:
        doc: dict[str, dict[str, object]] = {
            "model": {"name": "fault"},
            "dataset": {"data_folder": "data", "format": "npz", "num_files_train": 16,
                        "record_length_bytes": 65536},
            "reader": {"batch_size": 2, "read_threads": 2, "prefetch_size": 2},
            "train": {"epochs": 2, "computation_time": 0.0},
        }
        for key, values in sections.items():
            doc.setdefault(key, {}).update(values)
        path = self.dir / "workload.yaml"
        path.write_text(yaml.safe_dump(doc))
        return path

    def tmpfs(self, name: str, size: str) -> Path:
        mount = self.dir / name
        mount.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                       check=True)
        self.mounts.append(mount)
        return mount

    def cmd(self, *args: str, ranks: int = 0) -> list[str]:
        base = [PY, "-m", "dliobench", *args]
        if ranks:
            assert MPIEXEC, "no mpiexec"
            return [MPIEXEC, "-n", str(ranks), *base]
        return base

    def run(self, *args: str, ranks: int = 0, expect: int | None = 0,
            timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
        """Run a command to its end; note a hang, a traceback, an unexpected code."""
        try:
            done = subprocess.run(self.cmd(*args, ranks=ranks), cwd=self.dir, text=True,
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.out.hang = True
            return subprocess.CompletedProcess(args, -1, "", "")
        self.judge(done.returncode, done.stderr, expect, " ".join(args[:1]))
        return done

    def judge(self, code: int, err: str, expect: int | None, what: str,
              faulted: bool = False) -> None:
        if faulted or self.out.code is None:
            self.out.code = code
        if "Traceback" in err or "Exception ignored" in err:
            self.out.traceback = True
        if expect is not None and code != expect:
            self.out.problems.append(f"{what}: exit {code}, expected {expect}: "
                                     f"{err.strip()[-300:]}")

    def start(self, *args: str, ranks: int = 0) -> subprocess.Popen[str]:
        return subprocess.Popen(self.cmd(*args, ranks=ranks), cwd=self.dir, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)

    def finish(self, proc: subprocess.Popen[str], expect: int | None,
               what: str) -> tuple[str, str]:
        try:
            out, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.out.hang = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        self.judge(proc.returncode, err, expect, what, faulted=True)
        return out, err

    def signal(self, proc: subprocess.Popen[str], sig: int, ranks: int, what: str) -> str:
        """Send ``sig`` (to the whole job under MPI, or for SIGKILL), wait; its stderr. One
        process must exit 128 + the signal's number (SIGKILL: killed)."""
        if ranks or sig == signal.SIGKILL:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        expect = -9 if sig == signal.SIGKILL else 128 + sig
        return self.finish(proc, None if ranks else expect, what)[1]

    def sentence(self, err: str, *words: str) -> None:
        """stderr's error is one line holding ``words``."""
        lines = [ln for ln in err.splitlines() if ln.startswith("dliobench:")]
        if not lines or not all(w in lines[0] for w in words):
            self.out.problems.append(f"no sentence with {words}: {err.strip()[-300:]}")

    def check_dataset(self, folder: str, files: int, killed: bool = False) -> None:
        """Nothing lost: the next generate writes exactly the files not on disk (after
        SIGKILL: those not yet recorded, written again alike), and a verifying one finds
        every file intact; no temporary files remain (after SIGKILL: once it resumed)."""
        train = self.dir / folder / "train"
        if not killed:
            self.out.leftovers += [p.name for p in train.rglob(".*tmp*")] if train.exists() else []
        present = sum(1 for p in train.rglob("*") if p.is_file() and not p.name.startswith(".")
                      and not p.name.endswith(".idx")) if train.exists() else 0
        done = self.run("generate", "workload.yaml", "--no-progress",
                        f"dataset.data_folder={folder}", "dataset.check_free_space=false")
        wrote = re.search(r"wrote (\d+) of", done.stdout)
        again = int(wrote.group(1)) if wrote else 0
        if not killed:
            self.out.lost += max(0, again - (files - present))
        self.out.leftovers += [p.name for p in train.rglob(".*tmp*")] if train.exists() else []
        verify = self.run("generate", "workload.yaml", "--no-progress", "--verify",
                          f"dataset.data_folder={folder}")
        if "already" not in verify.stdout or "did not match" in verify.stderr:
            self.out.problems.append(f"verify: {verify.stdout.strip()} {verify.stderr[-200:]}")

    def close(self) -> Outcome:
        for mount in self.mounts:
            subprocess.run(["umount", "-l", str(mount)], check=False)
        return self.out


def said_lines(stderr: str) -> list[str]:
    """stderr's lines less the warnings and notes (``WARNING``/``INFO`` and their indented
    continuation lines): what a command said went wrong."""
    out: list[str] = []
    noted = False
    for line in (ln for ln in stderr.splitlines() if ln.strip()):
        noted = line.startswith(("WARNING ", "INFO ")) or (line[0].isspace() and noted)
        if not noted:
            out.append(line)
    return out


def until(predicate: Callable[[], bool], seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def count(folder: Path, pattern: str = "*") -> int:
    return sum(1 for _ in folder.rglob(pattern)) if folder.exists() else 0


@contextlib.contextmanager
def watch_processes(case: Case) -> Iterator[None]:
    """Processes of ours (python -m dliobench under the case's folder) left afterwards, and
    shared-memory leftovers, are the case's leftovers."""
    shm_before = set(os.listdir("/dev/shm"))
    yield
    time.sleep(0.5)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cwd.startswith(str(case.dir)) and b"dliobench" in cmd:
            case.out.leftovers.append(f"process {entry.name}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)
    time.sleep(1.0)  # other programs' short-lived entries (semaphores) come and go
    new = (set(os.listdir("/dev/shm")) - shm_before) & set(os.listdir("/dev/shm"))
    time.sleep(1.0)
    # multiprocessing's named semaphores (sem.mp-*) live as long as a spawn/forkserver
    # process of anyone's: Python's resource tracker removes them, not us
    # and MPICH's segments come only from MPI cases (other jobs may run meanwhile)
    new = {n for n in new & set(os.listdir("/dev/shm")) if not n.startswith("sem.mp-")
           and not _owner_alive(n) and ("mpi" in case.out.case or "mpich" not in n)}
    case.out.leftovers += [f"/dev/shm/{n}" for n in sorted(new)]
    for name in new:  # clean up for the next case
        path = Path("/dev/shm") / name
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(True)


def _owner_alive(name: str) -> bool:
    """A pid-named entry of a process still running (another program's, not a leftover)."""
    match = re.fullmatch(r"(?:dliobench-dali-|torch_)(\d+)[-_].*", name)
    return match is not None and Path(f"/proc/{match.group(1)}").exists()



def recovered(case: Case, reports: Path, ranks: set[int]) -> None:
    """The killed run's partial result: as a surviving rank wrote it, else as `dliobench
    recover` assembles it from the journals; it must hold steps of ``ranks`` and say where
    every rank's records end. A run left without one counts as lost."""
    runs = list(reports.glob("*"))
    if not runs:
        case.out.lost += 1
        return
    if not (runs[0] / "result.json").exists():
        case.run("recover", str(runs[0]))
    if not (runs[0] / "result.json").exists():
        case.out.lost += 1
        return
    result = json.loads((runs[0] / "result.json").read_text())
    held = {r["rank"] for r in result["ranks"] if r["steps"]}
    if result["status"] != "partial" or not ranks <= held or "ranks_ended" not in result:
        case.out.problems.append(f"result: {result['status']}, ranks with steps {held}")
