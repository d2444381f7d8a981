"""Write a DFTracer-format trace of this process's reads (``run --trace-io``): JSON lines,
one file per process (``<folder>/dliobench-<pid>.pfw``), the events DFTracer writes for
POSIX reads (``"cat": "POSIX"``, ``ts``/``dur`` in microseconds, ``args.fname``,
``offset``, ``count``, ``ret``), so DFTracer's tools and ``workload from-trace`` read ours
and a real job's alike.

Cost per read while on: a clock read and a list append; lines are written in blocks of
``BLOCK`` events, and the rest when the process ends (``atexit``, and multiprocessing's
finalizers, which a loader worker process runs instead). A forked worker starts its own
file and drops what it inherited unwritten from its parent (the parent writes that).
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
from multiprocessing import util
from pathlib import Path

BLOCK = 4096  # events held before a write
_lock = threading.Lock()


class TraceWriter:
    """This process's trace file under ``folder``; picklable (a worker opens its own)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._pid = -1
        self._lines: list[str] = []
        self._count = 0

    def __getstate__(self) -> dict[str, str]:
        return {"folder": self.folder}

    def __setstate__(self, state: dict[str, str]) -> None:
        self.__init__(state["folder"])  # type: ignore[misc]

    def read(self, key: str, offset: int, asked: int, got: int, started: float,
             name: str = "pread64") -> None:
        """Record a read of ``key`` (an absolute path or a backend's key) that began at
        ``started`` (``time.perf_counter``-free wall seconds) and returned ``got`` bytes."""
        now = time.time()
        pid = os.getpid()
        with _lock:
            if pid != self._pid:
                self._start(pid)
            self._count += 1
            self._lines.append(json.dumps({
                "id": self._count, "name": name, "cat": "POSIX", "pid": pid,
                "tid": threading.get_native_id(), "ts": int(started * 1e6),
                "dur": int((now - started) * 1e6), "ph": "X",
                "args": {"fname": key, "offset": offset, "count": asked, "ret": got}}))
            if len(self._lines) >= BLOCK:
                self._write()

    def _start(self, pid: int) -> None:
        """A new process: a file of its own, a start event, flushed at its end."""
        self._pid, self._lines, self._count = pid, [], 0
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        self._lines.append(json.dumps({"id": 0, "name": "start", "cat": "dftracer", "pid": pid,
                                       "tid": pid, "ts": int(time.time() * 1e6), "dur": 0,
                                       "ph": "X", "args": {"ppid": os.getppid()}}))
        atexit.register(self.flush)
        util.Finalize(self, self.flush, exitpriority=100)

    def flush(self) -> None:
        """Write what is held (at exit, and when the run ends)."""
        with _lock:
            if self._pid == os.getpid():
                self._write()

    def _write(self) -> None:
        if not self._lines:
            return
        path = os.path.join(self.folder, f"dliobench-{self._pid}.pfw")
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("\n".join(self._lines) + "\n")
        self._lines = []
