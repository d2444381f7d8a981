"""Data-parallel gradient exchange, emulated: an allreduce of ``train.allreduce_bytes`` per step.

Off by default (0 bytes): MLPerf Storage and DLIO emulate no communication, and a result must
stay comparable with theirs. When asked for, it overlaps the step's emulated compute the way
DDP's bucketed allreduce overlaps the backward pass: a communication thread runs the
collective (on a duplicated communicator, so it never mixes with the main thread's) while the
main thread computes, and the step waits only for what is left of it when compute ends.
``train.allreduce_overlap: false`` runs it after compute, blocking, as a step without
overlap would.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config


def allreduce_bytes(config: Config) -> int:
    """Bytes summed per step (``-1`` is the model's size, as ``model`` is)."""
    size = config.train.allreduce_bytes
    return config.model.model_size_bytes if size < 0 else size


class GradientSync:
    """One rank's per-step allreduce: ``start`` with compute, ``finish`` after it."""

    def __init__(self, config: Config, world: World, comm: Comm) -> None:
        size = allreduce_bytes(config)
        self.enabled = size > 0 and world.size > 1
        self.overlap = config.train.allreduce_overlap
        self._buffer = np.zeros(max(1, size // 4), dtype=np.float32) if self.enabled else None
        self._comm = comm
        self._thread: threading.Thread | None = None
        self._go = threading.Semaphore(0)
        self._done = threading.Semaphore(0)
        self._error: BaseException | None = None
        self._closed = False
        self._inflight = False
        if self.enabled and self.overlap:
            self._comm = comm.dup()
            self._thread = threading.Thread(target=self._serve, name="allreduce", daemon=True)
            self._thread.start()

    def _serve(self) -> None:
        while True:
            self._go.acquire()
            if self._closed:
                return
            try:
                assert self._buffer is not None
                self._comm.allreduce_buffer(self._buffer)
            except BaseException as exc:  # handed to the training thread at finish()
                self._error = exc
            self._done.release()

    def start(self) -> None:
        """The step's compute begins: start the collective alongside it (overlap only)."""
        if self._thread is not None:
            self._inflight = True
            self._go.release()

    def finish(self) -> float:
        """The step's compute ended: the seconds the step waits for communication."""
        if not self.enabled:
            return 0.0
        before = time.perf_counter()
        if self._thread is None:  # blocking, after compute
            assert self._buffer is not None
            self._comm.allreduce_buffer(self._buffer)
        else:
            self._done.acquire()
            self._inflight = False
            if self._error is not None:
                raise self._error
        return time.perf_counter() - before

    def close(self) -> None:
        """Stop the communication thread. One left inside a collective (the run failed
        mid-step, other ranks may never join it) is a daemon and is left behind."""
        if self._thread is not None:
            self._closed = True
            if not self._inflight:
                self._go.release()
                self._thread.join(timeout=5)
            self._thread = None
