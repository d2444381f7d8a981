"""How many of a rank's read bytes came from the storage device, not from this host's memory.

The counter is the kernel's per-process I/O accounting, ``read_bytes`` of ``/proc/<pid>/io``,
summed over this process and its live descendants (loader workers are child processes). It
counts the bytes the processes had fetched from the block layer (``submit_bio``: page-cache
misses, readahead and O_DIRECT reads), never the bytes a read found in the page cache, so
it is exact where the reads go through a block device on this host. It is chosen over:

- the block device's ``/sys/block/*/stat`` or the cgroup's ``io.stat``/``blkio``: they count
  every process of the host (or of a cgroup that is often the whole machine), not the run;
- ``mincore`` sampling: it says what is resident now, not where a read was served from.

What else the rank reads from a device inside a window counts too (a checkpoint read back
between steps, a module a worker imports): the figure can only overstate the device's part,
never hide it.

The sum over the process tree is conserved when a worker ends: the kernel adds a reaped
child's counters to its parent's (``wait_task_zombie``), so a worker that ends inside the
window is neither lost nor counted twice. A process orphaned to init would be lost; the
loaders start none.

Where the counter cannot see the reads the figure is ``None`` with the reason, never a
guess: a network or FUSE file system, an object store (its bytes come over the network,
which is storage), a file system without a block device of its own (``st_dev`` major 0, such
as NFS or overlay). A memory file system (tmpfs, ramfs) reads from memory by construction:
0 bytes.
"""

from __future__ import annotations

import os
import threading
import time
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import dliobench.storage.wire as wire
from dliobench.storage.fsinfo import mount_of
from dliobench.storage.location import is_url

MEMORY_FS = frozenset({"tmpfs", "ramfs", "devtmpfs"})
WIRE_SAMPLE_S = 0.02  # the wire counter's reading interval while a window is open


@dataclass(frozen=True)
class DeviceReads:
    """What one rank measured: device bytes over its windows (None: unknown), how
    (or why not), and the process that measured (ranks run as threads share one)."""

    nbytes: int | None
    counter: str
    pid: int
    # what crossed the wire to this node over the same windows (storage/wire.py; None: no
    # counter on this file system), the windows' seconds, and the link's rate (bytes/s)
    wire_bytes: int | None = None
    wire_counter: str = ""
    wire_window_s: float = 0.0
    link_bytes_per_s: float | None = None
    link_source: str = ""
    # of those, what crossed while the rank waited for its batches, and the waits' seconds
    # (None: the wire was not sampled: no link rate known)
    wire_wait_bytes: int | None = None
    wire_wait_s: float = 0.0


def counter_for(folder: str) -> tuple[str, str]:
    """(kind, words) for reads of ``folder``: kind ``device`` (the counter is exact),
    ``memory`` (0 by construction) or ``unknown`` (the counter cannot see the reads)."""
    if is_url(folder):
        return "unknown", "an object store: its bytes come over the network, uncounted here"
    fs_type = mount_of(folder)["fs_type"]
    if fs_type in MEMORY_FS:
        return "memory", f"{fs_type}: a memory file system, read from RAM by construction"
    probe = Path(folder)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    dev = os.stat(probe).st_dev
    block = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if os.major(dev) == 0 or not block.exists() or not Path("/proc/self/io").exists():
        return "unknown", (f"{fs_type} has no block device of its own on this host: its "
                           "reads are not counted by /proc/<pid>/io")
    return "device", f"/proc/<pid>/io read_bytes of the rank and its workers ({fs_type})"


def _read_bytes(pid: str) -> int:
    """``read_bytes`` of one process (0 if it ended or cannot be read)."""
    try:
        with open(f"/proc/{pid}/io") as handle:
            for line in handle:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _descendants(root: int) -> list[str]:
    """Pids of the live descendants of ``root``: each thread's ``children`` file in /proc
    (a few reads, where scanning every process's ``stat`` took ~1.3 ms at each epoch's
    edges), or that scan where the kernel has no ``children`` files."""
    if not os.path.exists(f"/proc/{root}/task/{root}/children"):
        return _descendants_by_scan(root)
    tree, frontier = [], [str(root)]
    while frontier:
        kids = [kid for pid in frontier for kid in _children(pid)]
        tree += kids
        frontier = kids
    return tree


def _children(pid: str) -> list[str]:
    """The child pids of every thread of ``pid`` (none if it ended)."""
    kids: list[str] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as handle:
                kids += handle.read().split()
        except OSError:
            continue
    return kids


def _descendants_by_scan(root: int) -> list[str]:
    """Pids of the live descendants of ``root`` (from each process's parent in /proc)."""
    parents: dict[str, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        parents[entry.name] = stat[stat.rfind(")") + 2:].split()[1]
    tree, frontier = [], [str(root)]
    while frontier:
        kids = [pid for pid, parent in parents.items() if parent in frontier]
        tree += kids
        frontier = kids
    return tree


def tree_read_bytes() -> int:
    """Device bytes read so far by this process (its threads, its reaped children) and by
    its live descendants."""
    me = os.getpid()
    return _read_bytes(str(me)) + sum(_read_bytes(pid) for pid in _descendants(me))


class DeviceMeter:
    """Device read bytes accumulated over windows (``open``/``close`` pairs) of one rank.

    On a network file system whose link's rate is known it also reads the wire counter
    every ``WIRE_SAMPLE_S`` while a window is open, so that ``result`` can say what crossed
    the wire while the rank waited for its batches (the node verdict's "while its ranks
    waited": results/node_verdict.py)."""

    def __init__(self, folder: str) -> None:
        self.kind, self.counter = counter_for(folder)
        self.total = 0
        self._opened: int | None = None
        self.wire = None if is_url(folder) else wire.counter_for(folder)
        self.link = wire.link_rate(self.wire.interface) if self.wire and \
            self.wire.interface else (None, "")
        self.wire_total, self.wire_s = 0, 0.0
        self._wire_opened: tuple[int, float] | None = None
        # the wire counter's readings and their perf_counter times, as flat arrays (16 bytes
        # a reading: 50 a second over a 10-hour run is 29 MB, where tuples took 210)
        self._times, self._counts = array("d"), array("d")
        self._spans: list[tuple[float, float]] = []  # the sampled windows
        self._sampler: threading.Thread | None = None
        self._stop = threading.Event()

    def open(self) -> None:
        """A window starts."""
        if self.kind == "device":
            self._opened = tree_read_bytes()
        if self.wire is not None:
            self._wire_opened = (self.wire.read(), time.perf_counter())
            if self.link[0] is not None and self._sampler is None:
                self._sampled(self._wire_opened[1], self._wire_opened[0])
                self._stop.clear()
                self._sampler = threading.Thread(target=self._sample, daemon=True,
                                                 name="dliobench-wire-sampler")
                self._sampler.start()

    def close(self) -> None:
        """A window ends (a close without an open adds nothing)."""
        if self._opened is not None:
            self.total += max(0, tree_read_bytes() - self._opened)
            self._opened = None
        if self.wire is not None and self._wire_opened is not None:
            now, count = time.perf_counter(), self.wire.read()
            self.wire_total += max(0, count - self._wire_opened[0])
            self.wire_s += now - self._wire_opened[1]
            if self._sampler is not None:
                self._stop.set()
                self._sampler.join()
                self._sampler = None
                self._sampled(now, count)
                self._spans.append((self._wire_opened[1], now))
            self._wire_opened = None

    def _sample(self) -> None:
        assert self.wire is not None
        while not self._stop.wait(WIRE_SAMPLE_S):
            self._sampled(time.perf_counter(), self.wire.read())

    def _sampled(self, when: float, count: int) -> None:
        self._times.append(when)
        self._counts.append(count)

    def wire_during(self, waits: Iterable[tuple[float, float]]) -> tuple[int, float] | None:
        """The wire bytes that crossed during ``waits`` (perf_counter spans inside the closed
        windows; the counter interpolated between its readings) and their seconds; None where
        the wire was not sampled."""
        if not self._spans:
            return None
        n = min(len(self._times), len(self._counts))
        t, c = np.array(self._times[:n]), np.array(self._counts[:n])  # copies: the sampler
        # may still append, which an array lending its buffer would refuse
        spans = np.asarray(self._spans)
        w = np.asarray([x for x in waits if x[1] > x[0]], dtype=float).reshape(-1, 2)
        inside = ((w[:, :1] >= spans[:, 0]) & (w[:, 1:] <= spans[:, 1])).any(axis=1)
        w = w[inside]
        crossed = np.interp(w[:, 1], t, c) - np.interp(w[:, 0], t, c)
        return int(max(0.0, float(crossed.sum()))), float((w[:, 1] - w[:, 0]).sum())

    def result(self, waits: Callable[[], Iterable[tuple[float, float]]] | None = None
               ) -> DeviceReads:
        """The rank's device bytes over its windows (None when the counter cannot see them)
        and what crossed the wire to its node meanwhile; with ``waits`` (the rank's waits
        for its batches, perf_counter spans) also what crossed while it waited."""
        nbytes = {"device": self.total, "memory": 0}.get(self.kind)
        if self.wire is None:
            return DeviceReads(nbytes, self.counter, os.getpid())
        during = self.wire_during(waits()) if waits is not None and self._spans else None
        return DeviceReads(nbytes, self.counter, os.getpid(), self.wire_total, self.wire.name,
                           self.wire_s, *self.link,
                           *((during[0], during[1]) if during else (None, 0.0)))
