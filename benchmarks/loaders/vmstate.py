"""The memory state a benchmark runs in: as the machine's history left it, or as a freshly
booted VM's.

A KVM guest's page costs a fault in the host as well as in the guest the first time it is
touched after the host took it back. On a freshly booted VM that is every page. Later, free
page reporting (virtio-balloon; this project's VMs boot with
``page_reporting.page_reporting_order=11``, see ``/proc/cmdline``) gives free guest memory
back to the host in 8 MiB blocks some 2 s after it is freed, so a long-running VM holds a
mix: pages the guest freed and reused at once stay backed, the rest are fresh again.

``make_fresh`` brings back the freshly booted state for everything a run touches from then
on: it writes back and drops the page cache, compacts memory so the free pages form whole
blocks, and waits for the report. ``touch_costs`` shows the state: microseconds per page to
touch new anonymous memory, and the same pages again after ``MADV_DONTNEED`` (a guest-only
fault, the page recycled): the first exceeds the second by the host's fault.
Root only (``/proc/sys/vm``).
"""

from __future__ import annotations

import mmap
import os
import time
from pathlib import Path

VM = Path("/proc/sys/vm")
SETTLE_S = 4.0  # page reporting runs 2 s after pages are freed (mm/page_reporting.c)
PAGE = mmap.PAGESIZE


def make_fresh(settle_s: float = SETTLE_S) -> None:
    """Give the host back every page the guest can free: page cache, and free memory
    compacted into whole reporting blocks; then wait for the report."""
    os.sync()
    try:
        (VM / "drop_caches").write_text("3\n")
        (VM / "compact_memory").write_text("1\n")
    except OSError as exc:
        raise SystemExit(f"a fresh VM's memory cannot be made here ({exc.strerror}: "
                         f"{exc.filename}): run as root, or without --vm-state fresh") from None
    time.sleep(settle_s)


def _touch(region: mmap.mmap, size: int) -> float:
    """Microseconds per page to write one byte into each page of ``region``."""
    start = time.perf_counter()
    for offset in range(0, size, PAGE):
        region[offset] = 1
    return (time.perf_counter() - start) / (size // PAGE) * 1e6


def touch_costs(mib: int = 256) -> tuple[float, float]:
    """(first touch, recycled) microseconds per page of ``mib`` MiB of new anonymous
    memory: its first touch, then again after ``MADV_DONTNEED`` gave the pages back to the
    guest's allocator only."""
    size = mib << 20
    region = mmap.mmap(-1, size)
    try:
        first = _touch(region, size)
        region.madvise(mmap.MADV_DONTNEED)
        return first, _touch(region, size)
    finally:
        region.close()
