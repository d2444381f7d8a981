"""Compiled ceilings for ``loaders.py``: what the hardware reads, with no Python in the loop.

- ``compiled``: the C extension's own loop (``dliobench.storage._readfiles.read_files``, the
  GIL released once per call) reading the same files with the same thread count, each call
  ``batch / ceil(threads / prefetch)`` files (the native loader's work item for small
  samples; it reads one 4 MiB or larger file per item), into memory made once that holds
  what the prefetch depth asks for in flight (``prefetch x batch`` samples), page-aligned,
  and touched before the clock starts, as a training process's pinned buffers are.
  ``fresh=True`` instead reads every item into fresh memory (the first touch in the read: a
  page fault per 4 KiB, on this VM's host too): the state of a process whose memory was
  never touched.
- ``compiled`` with ``checked=True``: the same loop through ``read_checked``, which also
  compares each file's headers with the first file's and checks an npz member's CRC-32 (as
  ``np.load`` does, and the native loader): what a compiled npz reader costs, a row beside
  the raw read (the CRC-32 of a 64 KiB member is ~1.2 us of CPU at ~57 GB/s).
- ``fio``: fio on the same files, one file per request (``bs`` = the file's size; O_DIRECT:
  the size rounded down to 4 KiB, the rest of each file unread), ``psync``, one job per read
  thread, each job its share of the files in turn, every epoch, each file opened and closed
  around its read (``openfiles=1``, as a loader does; fio otherwise keeps them all open).

``loaders.py`` divides by the faster of the two: the hardware's ceiling is what the best
compiled reader gets, and fio, with no interpreter at all, is ahead at 64 KiB.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from dliobench.storage._readfiles import read_checked, read_files

from dliobench.formats import get_format
from dliobench.formats.base import Stored
from dliobench.storage.posix import PosixBackend

Rates = tuple[float, float, float]  # samples/s, bytes/s, CPU seconds per sample


def minor_faults() -> int:
    """Minor page faults of this process so far (/proc/self/stat field 10)."""
    return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[7])


def aligned(size: int, touch: bool = False) -> np.ndarray:
    """``size`` bytes starting on a page boundary, as the native loader's sample memory
    (``storage.buffers.page_aligned``): ``np.empty`` of a large array starts 16 bytes into a
    page, where the kernel's copy costs ~40 % more CPU, and later ones wherever the heap
    puts them, so the ceiling's speed depended on this process's history. ``touch``: every
    page written once."""
    raw = np.empty(size + 4096, np.uint8)
    start = -raw.ctypes.data % 4096
    out = raw[start:start + size]
    if touch:
        out[::4096] = 1
    return out


def _items(paths: list[Path], share: int, epochs: int) -> list[list[str]]:
    """Work items of ``share`` consecutive files, every epoch."""
    names = [str(p) for p in paths]
    return [names[i:i + share] for _ in range(epochs) for i in range(0, len(names), share)]


def template(path: Path) -> tuple[bytes, int, int, int, int, int, int]:
    """The headers ``SampleReader.read_many`` checks the files against: the first file's
    (``whole_template`` of its format, by extension)."""
    data = memoryview(path.read_bytes())
    return get_format(path.suffix[1:]).whole_template(Stored(PosixBackend("/"), str(path)), data)


def compiled(paths: list[Path], threads: int, batch: int, prefetch: int, epochs: int,
             fresh: bool = False, checked: bool = False) -> tuple[Rates, float]:
    """(samples/s, bytes/s, CPU s/sample) of ``read_files`` over the files (``checked``:
    ``read_checked`` against the first file's headers), and the minor page faults per
    sample in the timed window."""
    size = max(p.stat().st_size for p in paths)
    read = _checked(template(paths[0])) if checked else _raw
    share = max(1, batch // math.ceil(threads / max(1, prefetch)))
    items = _items(paths, share, epochs)
    slots = max(threads, prefetch * batch // share)  # work items in flight
    per_thread = -(-slots // threads)
    owned = [[[aligned(size, touch=True) for _ in range(share)] for _ in range(per_thread)]
             for _ in range(threads)]  # made once, touched before the clock
    work, total = iter(items), [0] * threads
    lock = threading.Lock()

    def loop(me: int) -> None:
        turn = 0
        while True:
            with lock:
                item = next(work, None)
            if item is None:
                return
            bufs = ([aligned(size) for _ in item] if fresh
                    else owned[me][turn % per_thread][:len(item)])
            turn += 1
            total[me] += read(item, bufs)

    pool = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    faults, start, cpu = minor_faults(), time.perf_counter(), time.process_time()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    seconds, reads = time.perf_counter() - start, len(paths) * epochs
    rates = (reads / seconds, sum(total) / seconds, (time.process_time() - cpu) / reads)
    return rates, (minor_faults() - faults) / reads


def _raw(item: list[str], bufs: list[np.ndarray]) -> int:
    """Bytes ``read_files`` read."""
    return sum(n for n in read_files(item, bufs) if n > 0)


def _checked(head: tuple[bytes, int, int, int, int, int, int],
             ) -> Callable[[list[str], list[np.ndarray]], int]:
    """Bytes ``read_checked`` read, every file checked against ``head``."""
    def read(item: list[str], bufs: list[np.ndarray]) -> int:
        got, misses = read_checked(item, bufs, [head] * len(item))
        if misses:
            raise RuntimeError(f"{misses} files of {item} do not match the first file")
        return sum(n for _, n in got)

    return read


def fio(paths: list[Path], threads: int, epochs: int, direct: bool) -> Rates:
    """(samples/s, bytes/s, CPU s/sample) of fio reading each file with one request.

    fio takes at most 4,096 characters of file names per option, so each job's share of the
    files is hard-linked as ``r.<job>.<n>`` in a folder beside them (``filename_format``)."""
    size = min(p.stat().st_size for p in paths)
    bs = size - size % 4096 if direct else size
    links = paths[0].parent.parent / "fio-links"
    shutil.rmtree(links, ignore_errors=True)
    links.mkdir()
    per_job = len(paths) // threads
    for j in range(threads):
        for k, path in enumerate(paths[j::threads][:per_job]):
            os.link(path, links / f"r.{j}.{k}")
    cmd = ["fio", "--output-format=json", "--group_reporting", f"--direct={int(direct)}",
           "--ioengine=psync", "--iodepth=1", "--rw=read", f"--bs={bs}", f"--filesize={bs}",
           "--thread", "--file_service_type=sequential", f"--loops={epochs}",
           f"--directory={links}", "--invalidate=0", "--openfiles=1", "--name=r",
           f"--numjobs={threads}", f"--nrfiles={per_job}",
           "--filename_format=$jobname.$jobnum.$filenum"]
    cpu = _children_cpu()
    try:
        out = json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                        check=True).stdout)
    finally:
        shutil.rmtree(links, ignore_errors=True)
    job = out["jobs"][0]["read"]
    seconds = job["runtime"] / 1e3  # fio's own clock: the jobs' reads, not its start-up
    reads = per_job * threads * epochs
    return reads / seconds, job["io_bytes"] / seconds, (_children_cpu() - cpu) / reads


def _children_cpu() -> float:
    """User + system CPU seconds of this process's ended children (fio, start-up included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
