"""Leftovers of killed processes are removed; those of live ones, and fresh ones, stay."""

from __future__ import annotations

import mmap
import os
import subprocess
import time
from pathlib import Path

from dliobench.base import leftovers


def test_only_entries_of_dead_processes_old_enough_are_removed(tmp_path: Path) -> None:
    dead = _dead_pid()
    (tmp_path / f"thing-{dead}-a").mkdir()
    (tmp_path / f"thing-{dead}-a" / "ids.npy").write_bytes(b"x")
    (tmp_path / f"thing-{dead}-b").write_bytes(b"x")
    (tmp_path / f"thing-{os.getpid()}-c").write_bytes(b"x")  # ours: alive
    (tmp_path / "other-1-d").write_bytes(b"x")  # not ours
    young = tmp_path / f"young-{dead}-e"
    young.write_bytes(b"x")
    assert leftovers.sweep(r"thing-(?P<pid>\d+)-.*", folder=tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "other-1-d", f"thing-{os.getpid()}-c", f"young-{dead}-e"]
    assert leftovers.sweep(r"young-(?P<pid>\d+)-.*", min_age_s=60, folder=tmp_path) == 0
    os.utime(young, (time.time() - 120, time.time() - 120))
    assert leftovers.sweep(r"young-(?P<pid>\d+)-.*", min_age_s=60, folder=tmp_path) == 1


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert not leftovers.alive(proc.pid)
    return proc.pid


def test_unmapped_old_segments_are_removed_mapped_and_young_ones_stay(tmp_path: Path) -> None:
    old = time.time() - 120
    for name in ("seg_a", "seg_b", "seg_c", "other"):
        (tmp_path / name).write_bytes(b"x" * 4096)
        os.utime(tmp_path / name, (old, old))
    (tmp_path / "seg_young").write_bytes(b"x")
    with open(tmp_path / "seg_b", "r+b") as handle, mmap.mmap(handle.fileno(), 4096):
        (tmp_path / "seg_c").unlink()  # removed by its own job: nothing to do
        assert leftovers.sweep_unmapped("seg_", min_age_s=60, folder=tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "seg_b", "seg_young"]
