"""Which files of a dataset are complete on storage: each rank checks its own slice.

Rank r checks files ``[start_r, stop_r)`` (a contiguous share): their manifest entries are
gathered from the columns and each data and side file is stat'ed against them, so no rank
holds or stats the whole dataset. ``--verify`` re-reads the slice for its CRC-32C as well.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import crc32c
import numpy as np

from dliobench.comm.world import World
from dliobench.dataset.layout import TRAIN
from dliobench.dataset.manifest import Manifest
from dliobench.dataset.plan import Plan
from dliobench.storage.backend import Backend

VERIFY_CHUNK = 8 << 20
REMOTE_THREADS = 8  # requests in flight per rank verifying objects in an object store
CHECK_CHUNK = 8192  # files checked per round of the thread pool


@dataclass(frozen=True)
class SliceState:
    """This rank's slice: files to (re)write, files found damaged, bytes of the good ones."""

    missing: list[int]
    damaged: list[int]
    present_bytes: int


def share(total: int, parts: int, index: int) -> tuple[int, int]:
    """Bounds of part ``index`` of ``total`` items split into near-equal contiguous parts."""
    base, extra = divmod(total, parts)
    start = index * base + min(index, extra)
    return start, start + base + (index < extra)


def check_slice(plan: Plan, manifest: Manifest, world: World, verify: bool = False,
                advance: Callable[[int], object] | None = None) -> SliceState:
    """Stat (and with ``verify`` re-read, in a thread per core) this rank's slice.

    In an object store the manifest is taken at its word unless ``verify``: a request per
    object before a run reads it would cost minutes at 100,000 objects (hours at MLPerf's
    millions), S3 commits objects whole, and a read finds an object gone or short anyway.
    """
    start, stop = share(len(plan.keys), world.size, world.rank)
    ids = np.arange(start, stop, dtype=np.int64)
    entries = manifest.entries(ids)
    remote = plan.backend.local_path(TRAIN) is None  # an object store: a request per stat

    def state(row: int) -> tuple[bool, bool]:  # (complete, damaged)
        index = int(ids[row])
        keys = plan.object_keys(index)
        sizes = [int(entries.size[row]), *(int(s) for s in entries.side_size[row])]
        if remote and not verify:
            return sizes[0] >= 0, False
        backend = plan.backend
        ok = sizes[0] >= 0 and _size(backend, keys[0]) == sizes[0]
        for key, want in zip(keys[1:], sizes[1:], strict=True):
            have = _size(backend, key)
            ok = ok and have is not None and (want < 0 or have == want)
        if not (ok and verify):
            return ok, False
        crcs = [int(entries.crc[row]), *(int(c) for c in entries.side_crc[row])]
        good = all(length < 0 or crc_of(backend, key, length) == crc
                   for key, length, crc in zip(keys, sizes, crcs, strict=True))
        return good, not good

    threads = REMOTE_THREADS if remote and verify else (os.cpu_count() or 1) if verify else 1
    held = np.flatnonzero(entries.size >= 0)  # files the manifest lacks are missing, unchecked
    missing, damaged, present = ids[entries.size < 0].tolist(), [], 0
    if advance is not None and missing:
        advance(len(missing))
    with ThreadPoolExecutor(threads) as pool:
        for first in range(0, held.size, CHECK_CHUNK):  # a future per file only for a chunk:
            rows = held[first:first + CHECK_CHUNK].tolist()  # 2 GB at 10^6 files
            states = pool.map(state, rows) if threads > 1 else map(state, rows)
            for row, (ok, bad) in zip(rows, states, strict=True):
                size = max(int(entries.size[row]), 0)
                if ok:
                    present += size
                else:
                    missing.append(int(ids[row]))
                if bad:
                    damaged.append(int(ids[row]))
                if advance is not None:
                    advance(1)
    return SliceState(sorted(missing), damaged, present)


def _size(backend: Backend, key: str) -> int | None:
    """The object's size; None when it is missing or cannot be one (a symlink loop, a path
    through a regular file): either way not a complete file, to be written again."""
    try:
        return backend.size(key)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return None
        raise


def crc_of(backend: Backend, key: str, size: int) -> int:
    """CRC-32C of an object's first ``size`` bytes, read in chunks (-1 if it is missing)."""
    crc, offset = 0, 0
    try:
        while offset < size:
            data, _ = backend.read_range(key, offset, min(VERIFY_CHUNK, size - offset))
            if not len(data):
                return -1
            crc = crc32c.crc32c(data, crc)
            offset += len(data)
    except FileNotFoundError:
        return -1
    return crc
