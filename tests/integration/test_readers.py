"""One writer or many readers per dataset folder, with real ``dliobench run`` processes on a
real folder's ``flock``: runs reading one complete dataset read it at once; a reader waits for
the writer, and a run that must write waits for the readers, each saying so in one line and
writing nothing meanwhile; of two runs that must generate the same files, one does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dliobench.dataset.lock import LOCK_KEY, FolderLock
from dliobench.storage.posix import PosixBackend
from tests.conftest import manifest_files, tiny_workload

GUARD_S = 60.0  # a hang guard: each wait below takes about a second


def _start(workdir: Path, path: Path, name: str, *overrides: str) -> subprocess.Popen[bytes]:
    """``dliobench run`` in the background, its stderr into ``<name>.err``."""
    with open(workdir / f"{name}.err", "wb") as err:
        return subprocess.Popen([sys.executable, "-m", "dliobench", "run", str(path),
                                 "--no-progress", *overrides], stdout=subprocess.DEVNULL,
                                stderr=err)


def _said(workdir: Path, name: str) -> str:
    """What the run ``name`` wrote to stderr so far, its lines joined (a terminal narrower
    than a sentence wraps it)."""
    return " ".join((workdir / f"{name}.err").read_text().split())


def _until(done: Callable[[], bool], procs: list[subprocess.Popen[bytes]]) -> bool:
    """Wait until ``done``; False if every process ended first (or the guard ran out)."""
    deadline = time.monotonic() + GUARD_S
    while time.monotonic() < deadline:
        if done():
            return True
        if all(p.poll() is not None for p in procs):
            return done()
        time.sleep(0.02)
    return False


def _shared_holders(lock_file: Path) -> int:
    """How many processes hold ``lock_file``'s flock shared now (``/proc/locks``)."""
    inode = f":{os.stat(lock_file).st_ino} "
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(1 for ln in lines if "FLOCK" in ln and " READ " in ln and inode in ln + " ")


def _results(workdir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(workdir.glob("reports/*/result.json"))]


def test_three_readers_wait_for_the_writer_then_read_at_once(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int]) -> None:
    """Three ``run ... workflow.generate_data=false`` of one complete dataset, started while
    a writer holds it: each says it waits for that writer (named), then all three hold the
    lock shared at the same time, and all three complete."""
    path = write_workload(tiny_workload(train={"computation_time": 0.05}))
    assert run_cli("generate", str(path), "--no-progress") == 0
    writer = FolderLock(PosixBackend(str(workdir / "data/tiny")))
    writer.acquire(True, "generating")
    try:
        names = ["r0", "r1", "r2"]
        procs = [_start(workdir, path, n, "workflow.generate_data=false") for n in names]
        waiting = f"waiting for the writer of the dataset in data/tiny to finish (generating " \
                  f"by pid {os.getpid()} on"
        assert _until(lambda: all(waiting in _said(workdir, n) for n in names), procs), \
            [_said(workdir, n) for n in names]
        assert all(p.poll() is None for p in procs)
    finally:
        writer.release()
    lock_file = workdir / "data/tiny" / LOCK_KEY
    assert _until(lambda: _shared_holders(lock_file) == 3, procs)  # reading together
    assert [p.wait(timeout=GUARD_S) for p in procs] == [0, 0, 0], \
        [_said(workdir, n) for n in names]
    results = _results(workdir)
    assert [r["status"] for r in results] == ["complete"] * 3
    for name in names:  # the one line said, and nothing else
        assert _said(workdir, name).count("waiting") == 1 and "Traceback" not in \
            _said(workdir, name)


def test_runs_that_must_generate_wait_for_the_readers_and_one_writes(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int]) -> None:
    """A reader holds a dataset of 4 files; two runs that need 8 (generate_data: true) start:
    each says it waits for the readers and writes nothing meanwhile; once the reader lets go,
    one generates the 4 files, the other, after it, finds nothing left to write."""
    path = write_workload(tiny_workload())
    assert run_cli("generate", str(path), "--no-progress", "dataset.num_files_train=4") == 0
    reader = FolderLock(PosixBackend(str(workdir / "data/tiny")))
    reader.acquire(False, "by a run")
    try:
        procs = [_start(workdir, path, n) for n in ("w0", "w1")]
        waiting = "waiting for the dliobench runs reading the dataset in data/tiny to finish " \
                  "before writing it"
        assert _until(lambda: all(waiting in _said(workdir, n) for n in ("w0", "w1")), procs), \
            [_said(workdir, n) for n in ("w0", "w1")]
        assert all(p.poll() is None for p in procs)
        assert len(manifest_files(workdir / "data/tiny")) == 4
        assert len(list((workdir / "data/tiny/train").glob("*.npz"))) == 4  # nothing written
    finally:
        reader.release()
    assert [p.wait(timeout=GUARD_S) for p in procs] == [0, 0], \
        [_said(workdir, n) for n in ("w0", "w1")]
    generated = sorted(int(r.get("generation", {}).get("files", 0)) for r in _results(workdir))
    assert generated == [0, 4]
    assert len(manifest_files(workdir / "data/tiny")) == 8
