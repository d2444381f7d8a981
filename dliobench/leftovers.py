"""Shared memory that processes killed before their clean-up leave behind, removed later.

A SIGKILLed run cannot clean up: DALI's epoch-id folder and the shared-memory segments of
PyTorch workers killed mid-batch (hundreds of MB each for large samples) stay in /dev/shm,
which is RAM. Each name carries its creator's pid; an entry whose creator is gone (and, for
names other programs share, that has not been touched for a while) is removed when the
next loader starts.
"""

from __future__ import annotations

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
    try:
        entries = list(folder.iterdir())
    except OSError:
        return 0
    now = time.time()
    for entry in entries:
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
