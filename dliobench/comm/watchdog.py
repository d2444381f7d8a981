"""The stall watchdog: a rank that makes no progress for ``train.stall_timeout_s`` ends the job.

Progress is a training step, a checkpoint, a data file written or checked; a rank blocked at
a collective because another
rank stopped (SIGSTOP, a hung file system) or blocked in a read that never returns says so in
one sentence, naming itself and what it was doing, and ends the job, instead of the job
hanging until the batch system's limit. When the run knows who went silent (a whole node
whose ranks were killed: ``lost``), the lowest surviving rank says so, naming the node, and
the others leave the job's end to it.
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
LOST_WAIT_S = 2.0  # what asking who was lost may take (it reads the run folder)
DEFER_S = RESCUE_S + 5.0  # a survivor not speaking for the job waits this long for the one


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
        # who went silent, in words, and the surviving rank that speaks for the job (None:
        # nobody known to be lost); the run reads it from its journals (``results.lost``)
        self.lost: Callable[[], tuple[str, int] | None] | None = None
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
            if idle <= self.seconds:
                continue
            lost = self._ask_lost()
            if lost is not None and lost[1] != self.world.rank and \
                    idle <= self.seconds + DEFER_S:
                continue  # the survivor that speaks for the job ends it, in one sentence
            self._end(idle, lost)

    def _ask_lost(self) -> tuple[str, int] | None:
        """``lost``, given ``LOST_WAIT_S`` at most: it reads the run folder, which may sit
        on the very storage that hangs (then nobody is named, and the job still ends)."""
        if self.lost is None:
            return None
        found: list[tuple[str, int] | None] = []
        ask = self.lost

        def run() -> None:
            try:
                found.append(ask())
            except Exception:  # a damaged folder: nobody is named
                found.append(None)

        thread = threading.Thread(target=run, name="lost", daemon=True)
        thread.start()
        thread.join(LOST_WAIT_S)
        return found[0] if found else None

    def _end(self, idle: float, lost: tuple[str, int] | None) -> None:
        """Say why in one sentence (who was lost, when known), rescue, end the job."""
        w = self.world
        if lost is not None:
            why = f"{lost[0]}; no progress for {idle:.0f} s while {self.doing}"
            sentence = (f"{lost[0]}; rank {w.rank} of {w.size} on {w.host} ends the job after "
                        f"{idle:.0f} s without progress (train.stall_timeout_s)")
        else:
            why = (f"made no progress for {idle:.0f} s while {self.doing} (another rank "
                   "stopped, or storage hangs)")
            sentence = (f"rank {w.rank} of {w.size} on {w.host} {why}; ending the job "
                        "(train.stall_timeout_s)")
        print(f"dliobench: error: {sentence}", file=sys.stderr, flush=True)
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
