"""Shared memory that processes killed before their clean-up leave behind, removed later.

A SIGKILLed run cannot clean up: DALI's epoch-id folder, the shared-memory segments of
PyTorch workers killed mid-batch (hundreds of MB each for large samples) and MPICH's
segments stay in /dev/shm, which is RAM. Where a name carries its creator's pid, an entry
whose creator is gone (and, for names other programs share, that has not been touched for a
while) is removed when the next loader starts; MPICH's, which carry none, when no process
maps them any more, at the next MPI job's start.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from pathlib import Path

SHM = Path("/dev/shm")


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(pattern: str, min_age_s: float = 0.0, folder: Path = SHM) -> int:
    """Remove entries of ``folder`` whose whole name matches ``pattern``, whose group
    ``pid`` names a process that no longer exists, untouched for ``min_age_s``. Returns how
    many were removed; entries that vanish meanwhile or cannot be removed are left be."""
    regex = re.compile(pattern)
    removed = 0
    now = time.time()
    for entry in _entries(folder):
        match = regex.fullmatch(entry.name)
        if match is None or alive(int(match["pid"])):
            continue
        try:
            if now - entry.lstat().st_mtime < min_age_s:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
            removed += 1
        except OSError:
            continue
    return removed


def sweep_unmapped(prefix: str, min_age_s: float, folder: Path = SHM) -> int:
    """Remove entries of ``folder`` named ``prefix``* that no process on this host maps and
    that are older than ``min_age_s`` (a segment just created is mapped at once): shared
    memory of jobs killed without their clean-up, whose names carry no pid (MPICH's)."""
    now = time.time()
    candidates = []
    for entry in _entries(folder):
        if entry.name.startswith(prefix):
            with contextlib.suppress(OSError):
                if now - entry.lstat().st_mtime >= min_age_s:
                    candidates.append(entry)
    if not candidates:
        return 0
    mapped = mapped_paths(str(folder / prefix))
    removed = 0
    for entry in candidates:
        if str(entry) not in mapped:
            with contextlib.suppress(OSError):
                entry.unlink()
                removed += 1
    return removed


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def mapped_paths(start: str, procs: list[Path] | None = None) -> set[str]:
    """Paths beginning with ``start`` that the processes ``procs`` (``/proc/<pid>`` folders;
    by default every process on this host) map."""
    mapped: set[str] = set()
    if procs is None:
        procs = [p for p in _entries(Path("/proc")) if p.name.isdigit()]
    for proc in procs:
        with contextlib.suppress(OSError), open(proc / "maps") as maps:
            for line in maps:
                if start in line:
                    mapped.add(line.split(maxsplit=5)[-1].strip().removesuffix(" (deleted)"))
    return mapped
