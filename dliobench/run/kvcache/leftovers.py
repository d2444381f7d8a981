"""The cache entries a killed KV-cache run leaves, found and removed by the next run in the
same folder and by ``dliobench recover`` (issue 54: hundreds of MB here, GBs at size, and the
next run's automatic capacity, 90 % of the free space, shrank without a word).

Each rank holds an ``flock`` on ``<run>/rank<N>/.alive`` in the storage tier while it runs;
the kernel lets go of it when the process dies, even by SIGKILL. A run folder whose every
``.alive`` can be locked belongs to no live process: it is claimed by a rename (one remover
when several ranks look at once) and deleted, and what was removed is said. POSIX only (an
object store's entries have no lock to tell a live run from a dead one); a tier given no
folder is a temporary one (``dliobench-kvcache-*`` in the temporary folder), looked at there.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

from dliobench.base.units import size_text

ALIVE = ".alive"
TEMPORARY = "dliobench-kvcache-"  # the prefix of a temporary tier's folder


def hold(rank_folder: str | Path) -> int:
    """Mark ``rank_folder`` (made already) as this live process's: the descriptor holding
    the lock, for ``release``."""
    fd = os.open(os.path.join(rank_folder, ALIVE), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def release(fd: int, rank_folder: str | Path) -> None:
    """Remove the mark and let go (the run's entries are deleted by then)."""
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(rank_folder, ALIVE))
    os.close(fd)


def _held(mark: Path) -> bool:
    """Whether a live process holds ``mark``'s lock."""
    try:
        fd = os.open(mark, os.O_RDWR)
    except OSError:
        return False  # gone meanwhile: its run removed it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _size(folder: Path) -> tuple[int, int]:
    """Bytes and files under ``folder``."""
    nbytes = files = 0
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file() and path.name != ALIVE:
                nbytes, files = nbytes + path.stat().st_size, files + 1
    return nbytes, files


def sweep(folder: Path) -> list[str]:
    """Remove the run folders in ``folder`` that dead runs left; a sentence for each."""
    said = []
    with contextlib.suppress(OSError):
        for run in sorted(p for p in folder.iterdir() if p.is_dir()):
            marks = list(run.glob(f"rank*/{ALIVE}"))
            if not marks or any(_held(mark) for mark in marks):
                continue  # a live run's, or not a run's (no mark)
            claimed = run.with_name(f".{run.name}.removing-{os.getpid()}")
            try:
                os.rename(run, claimed)
            except OSError:
                continue  # another rank claimed it first
            nbytes, files = _size(claimed)
            shutil.rmtree(claimed, ignore_errors=True)
            if files:  # an emptied run's folder goes without a word
                said.append(f"removed {size_text(nbytes)} ({files} cache entries) that the "
                            f"killed KV-cache run {run.name} left in {folder}")
    return said


def sweep_tier(cache_dir: str) -> list[str]:
    """``sweep`` the storage tier's folder (``kvcache.cache_dir``; none given: the temporary
    tiers, each removed once empty); nothing for an object store."""
    if "://" in cache_dir:
        return []
    if cache_dir:
        return sweep(Path(cache_dir)) if Path(cache_dir).is_dir() else []
    said = []
    for tier in sorted(Path(tempfile.gettempdir()).glob(f"{TEMPORARY}*")):
        said += sweep(tier)
        with contextlib.suppress(OSError):  # only when empty (a live run starting there
            tier.rmdir()                    # makes it again with its own folder)
    return said
