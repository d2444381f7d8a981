"""Write a DFTracer-format trace of this process's reads (``run --trace-io``): JSON lines,
one file per process (``<folder>/dliobench-<pid>.pfw``), the events DFTracer writes for
POSIX reads (``"cat": "POSIX"``, ``ts``/``dur`` in microseconds, ``args.fname``,
``offset``, ``count``, ``ret``), so DFTracer's tools and ``workload from-trace`` read ours
and a real job's alike.

Cost per read while on: a clock read and a tuple appended; lines are written in blocks of
``BLOCK`` events, and the rest when the process ends (``atexit``, and multiprocessing's
finalizers, which a loader worker process runs instead). A forked worker starts its own
file and drops what it inherited unwritten from its parent (the parent writes that).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
from multiprocessing import util
from pathlib import Path

BLOCK = 4096  # events held before a write
log = logging.getLogger(__name__)
_lock = threading.Lock()


class TraceWriter:
    """This process's trace file under ``folder``; picklable (a worker opens its own)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._pid = -1
        self._held: list[tuple[str, int, float, float, str, int, int, int]] = []
        self._head = ""
        self._count = 0
        self._names: dict[str, str] = {}
        self._failed = False

    def __getstate__(self) -> dict[str, str]:
        return {"folder": self.folder}

    def __setstate__(self, state: dict[str, str]) -> None:
        self.__init__(state["folder"])  # type: ignore[misc]

    def read(self, key: str, offset: int, asked: int, got: int, started: float,
             name: str = "pread64") -> None:
        """Record a read of ``key`` (a path) that began at ``started`` (``time.time()``)
        and returned ``got`` bytes: a tuple now, its JSON line when written."""
        now = time.time()
        event = (name, threading.get_native_id(), started, now, key, offset, asked, got)
        with _lock:  # loader threads share the writer: no event lost to a swap in _write
            if os.getpid() != self._pid:
                self._start(os.getpid())
            self._held.append(event)
            if len(self._held) >= BLOCK:
                self._write()

    def _start(self, pid: int) -> None:
        """A new process: a file of its own, a start event, flushed at its end."""
        self._pid, self._held, self._count = pid, [], 0
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        self._head = json.dumps({"id": 0, "name": "start", "cat": "dftracer", "pid": pid,
                                 "tid": pid, "ts": int(time.time() * 1e6), "dur": 0, "ph": "X",
                                 "args": {"ppid": os.getppid()}}) + "\n"
        atexit.register(self.flush)
        util.Finalize(self, self.flush, exitpriority=100)

    def flush(self) -> None:
        """Write what is held (at exit, and when the run ends)."""
        with _lock:
            if self._pid == os.getpid():
                self._write()

    def _write(self) -> None:
        """Append the held events as JSON lines; a trace that cannot be written (its folder
        removed, a full disk) is logged once and dropped, never fails the run."""
        held, self._held = self._held, []
        if not held and not self._head:
            return
        lines = [self._head]
        self._head = ""
        pid = self._pid
        for name, tid, started, now, key, offset, asked, got in held:
            self._count += 1
            lines.append(f'{{"id":{self._count},"name":"{name}","cat":"POSIX","pid":{pid},'
                         f'"tid":{tid},"ts":{int(started * 1e6)},'
                         f'"dur":{int((now - started) * 1e6)},"ph":"X","args":{{"fname":'
                         f'{self._quoted(key)},"offset":{offset},"count":{asked},'
                         f'"ret":{got}}}}}\n')
        try:
            with open(os.path.join(self.folder, f"dliobench-{pid}.pfw"), "a",
                      encoding="utf-8") as handle:
                handle.write("".join(lines))
        except OSError as exc:
            if not self._failed:
                log.warning("the I/O trace in %s cannot be written (%s); its events are "
                            "dropped", self.folder, exc.strerror)
            self._failed = True

    def _quoted(self, key: str) -> str:
        """A path as a JSON string, escaped once per path."""
        quoted = self._names.get(key)
        if quoted is None:
            quoted = self._names[key] = json.dumps(key)
        return quoted
