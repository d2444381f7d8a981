"""The stall watchdog: a rank that makes no progress for ``train.stall_timeout_s`` ends the job.

Progress is a training step, a checkpoint, a data file written or checked; a rank blocked at
a collective because another
rank stopped (SIGSTOP, a hung file system) or blocked in a read that never returns says so in
one sentence, naming itself and what it was doing, and ends the job, instead of the job
hanging until the batch system's limit.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType

from dliobench.comm.world import Comm, World

EXIT_STALLED = 1
RESCUE_S = 10.0  # what ``on_stall`` may take before the job ends regardless


class Watchdog:
    """One rank's watchdog thread (``seconds`` 0: off)."""

    def __init__(self, seconds: float, world: World, comm: Comm) -> None:
        self.seconds, self.world, self.comm = seconds, world, comm
        self._doing: tuple[str, tuple[object, ...]] = ("starting", ())
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # called with the sentence before the job ends (the run keeps what was measured)
        self.on_stall: Callable[[str], None] | None = None
        if seconds > 0:
            self._thread = threading.Thread(target=self._watch, name="watchdog", daemon=True)
            self._thread.start()

    def beat(self, doing: str, *args: object) -> None:
        """Progress: this rank is now ``doing`` (a %-template for the sentence, formatted only
        if it is ever said: this runs every step)."""
        self._last = time.monotonic()
        self._doing = (doing, args)

    @property
    def doing(self) -> str:
        """What the rank was last doing, in words."""
        template, args = self._doing
        return template % args if args else template

    def _watch(self) -> None:
        while not self._stop.wait(min(1.0, self.seconds / 4)):
            idle = time.monotonic() - self._last
            if idle > self.seconds:
                w = self.world
                why = (f"made no progress for {idle:.0f} s while {self.doing} (another rank "
                       "stopped, or storage hangs)")
                print(f"dliobench: error: rank {w.rank} of {w.size} on {w.host} {why}; ending "
                      "the job (train.stall_timeout_s)", file=sys.stderr, flush=True)
                self._rescue(why)
                if w.size > 1:
                    self.comm.abort(EXIT_STALLED)
                os._exit(EXIT_STALLED)

    def _rescue(self, why: str) -> None:
        """Give ``on_stall`` ``RESCUE_S`` at most (it writes to storage that may hang too)."""
        if self.on_stall is None:
            return
        rescue = threading.Thread(target=self.on_stall, args=(why,), name="rescue", daemon=True)
        rescue.start()
        rescue.join(RESCUE_S)

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        """The watched work is over: stop watching."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
