"""Checkpoint emulation: ranks write (and optionally read back) their share of the model.

Sizes come from ``model.model_size_bytes`` (DLIO 2.0.0's ``checkpoint.model_size``) times
``1 + checkpoint.optimizer_state_factor``. ``rank_zero`` has rank 0 write it all; ``all_ranks``
gives every rank an equal shard. Writes are fsynced when ``checkpoint.fsync`` is on, and
read-back runs after the written pages are evicted, so both time the storage.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.dataset import fill as datafill
from dliobench.errors import DatasetError
from dliobench.results.measured import CheckpointEvent
from dliobench.storage import lustre
from dliobench.storage import posix as storage

CHUNK = 64 << 20


def total_bytes(config: Config) -> int:
    """Bytes of one whole checkpoint (model plus optimizer state)."""
    return round(config.model.model_size_bytes * (1 + config.checkpoint.optimizer_state_factor))


def shard_bytes(config: Config, world: World) -> int:
    """This rank's share of a checkpoint."""
    total = total_bytes(config)
    if config.checkpoint.type == "rank_zero":
        return total if world.is_root else 0
    share, extra = divmod(total, world.size)
    return share + (world.rank < extra)


class Checkpointer:
    """Decides when checkpoints are due and writes this rank's part of each."""

    def __init__(self, config: Config, world: World, comm: Comm, run_id: str) -> None:
        self.cfg = config.checkpoint
        self.storage = config.storage
        self.enabled = config.workflow.checkpoint and total_bytes(config) > 0
        self.world, self.comm = world, comm
        self.nbytes = shard_bytes(config, world)
        self.folder = Path(self.cfg.checkpoint_folder) / run_id
        self.events: list[CheckpointEvent] = []
        self._payload: np.ndarray | None = None

    def due(self, epoch: int, step: int, last_in_epoch: bool, global_step: int) -> bool:
        """Whether a checkpoint follows this step (by steps, else by epochs, as DLIO does)."""
        if not self.enabled:
            return False
        if self.cfg.steps_between_checkpoints > 0:
            return (global_step + 1) % self.cfg.steps_between_checkpoints == 0
        done = epoch + 1
        return last_in_epoch and done >= self.cfg.checkpoint_after_epoch and (
            (done - self.cfg.checkpoint_after_epoch) % self.cfg.epochs_between_checkpoints == 0)

    def run(self, epoch: int, step: int) -> float:
        """Write (and read back) this rank's shard; return the seconds all ranks were held."""
        start = time.perf_counter()
        index = len(self.events)
        path = self.folder / f"checkpoint-{index:04d}" / f"rank-{self.world.rank:05d}.bin"
        write_s = read_s = 0.0
        if self.nbytes:
            write_s = self._write(path)
            read_s = self._read(path) if self.cfg.read_after_write else 0.0
        self.comm.barrier()  # a checkpoint ends when the slowest rank is done
        self.events.append(CheckpointEvent(index, epoch, step, self.nbytes, write_s,
                                           read_s if self.cfg.read_after_write else None))
        return time.perf_counter() - start

    def _chunk(self) -> np.ndarray:
        if self._payload is None:  # random, dedupe-proof bytes, made once
            self._payload = np.empty(min(CHUNK, max(self.nbytes, 1)), dtype=np.uint8)
            datafill.fill(self._payload, datafill.base_buffer(self.world.rank), 0, self.world.rank)
        return self._payload

    def _write(self, path: Path) -> float:
        if not path.parent.exists() and lustre.wants_striping(self.storage):
            lustre.set_stripe(path.parent, self.storage)
        path.parent.mkdir(parents=True, exist_ok=True)
        chunk = memoryview(self._chunk().data)
        start = time.perf_counter()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                left = self.nbytes
                while left:
                    left -= os.write(fd, chunk[:min(left, len(chunk))])
                if self.cfg.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise DatasetError(f"cannot write checkpoint {path}: {exc.strerror}; free space or "
                               "choose another checkpoint.checkpoint_folder") from None
        return time.perf_counter() - start

    def _read(self, path: Path) -> float:
        storage.evict([path])
        buf = bytearray(min(CHUNK, self.nbytes))
        view = memoryview(buf)
        start = time.perf_counter()
        fd = os.open(path, os.O_RDONLY)
        try:
            offset = 0
            while offset < self.nbytes:
                n = os.preadv(fd, [view], offset)
                if n == 0:
                    break
                offset += n
        finally:
            os.close(fd)
        return time.perf_counter() - start
