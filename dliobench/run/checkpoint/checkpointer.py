"""Checkpoint emulation: ranks write (and optionally read back) their share of the model.

Sizes come from ``model.model_size_bytes`` (DLIO 2.0.0's ``checkpoint.model_size``) times
``1 + checkpoint.optimizer_state_factor``. ``rank_zero`` has rank 0 write it all; ``all_ranks``
gives every rank an equal shard. Writes are fsynced when ``checkpoint.fsync`` is on, and
read-back runs after the written pages are evicted, so both time the storage.
"""

from __future__ import annotations

import contextlib
import shutil
import time

import dliobench.storage.lustre as lustre
from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.dataset import fill as datafill
from dliobench.results.measured import CheckpointEvent
from dliobench.run.checkpoint.files import READ_BYTES, WRITE_BYTES, StampedChunk, checkpoint_writer
from dliobench.run.checkpoint.space import Room, mapped
from dliobench.storage import backend_for

SHRINK = "model.model_size_bytes, checkpoint.epochs_between_checkpoints"  # full disk advice


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
        self.backend = backend_for(self.cfg.checkpoint_folder, config.storage,
                                   "checkpoint.checkpoint_folder")
        self.run_id = run_id
        self.written: list[str] = []  # this rank's shards, deleted by ``finish``
        self.events: list[CheckpointEvent] = []
        self._payload: StampedChunk | None = None

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
        key = f"{self.run_id}/checkpoint-{index:04d}/rank-{self.world.rank:05d}.bin"
        write_s = read_s = 0.0
        if self.nbytes:
            write_s = self._write(key)
            read_s = self._read(key) if self.cfg.read_after_write else 0.0
        self.comm.barrier()  # a checkpoint ends when the slowest rank is done
        self.events.append(CheckpointEvent(index, epoch, step, self.nbytes, write_s,
                                           read_s if self.cfg.read_after_write else None))
        return time.perf_counter() - start

    def _chunk(self) -> StampedChunk:
        if self._payload is None:  # random, dedupe-proof bytes, made once
            self._payload = StampedChunk(self.world.rank, min(WRITE_BYTES, max(self.nbytes, 1)))
        return self._payload

    def _write(self, key: str) -> float:
        """Stream the shard through the backend's writer (fsynced with checkpoint.fsync)."""
        folder = key.rsplit("/", 1)[0]
        local = self.backend.local_path(self.run_id)
        if local is not None and not local.exists() and lustre.wants_striping(self.storage):
            lustre.set_stripe(local, self.storage)
        room = Room.measure(self.backend, len(self.events), self.nbytes, SHRINK)
        with mapped(self.backend, folder, room):
            self.backend.make_room(folder)
        chunk = self._chunk()
        start = time.perf_counter()
        with checkpoint_writer(self.backend, key, room, self.nbytes) as writer:
            chunk.write(writer, self.nbytes, datafill.file_uid(self.world.rank, len(self.events)))
            writer.commit(durable=self.cfg.fsync)
            self.written.append(key)
        return time.perf_counter() - start

    def finish(self) -> None:
        """After the run: delete the shards unless ``checkpoint.keep`` (one rank per node
        removes the emptied folders once every rank is done)."""
        if not self.enabled or self.cfg.keep:
            return
        for key in self.written:
            self.backend.delete(key)
        self.comm.barrier()
        local = self.backend.local_path(self.run_id)
        if self.world.local_rank == 0 and local is not None:
            shutil.rmtree(local, ignore_errors=True)

    def discard(self) -> None:
        """A failed or interrupted run: delete this rank's shards unless ``checkpoint.keep``
        and the folders they leave empty, without waiting for the other ranks."""
        if not self.enabled or self.cfg.keep:
            return
        for key in self.written:
            self.backend.delete(key)
        self.written = []
        local = self.backend.local_path(self.run_id)
        if local is not None:
            for folder in sorted((p for p in local.rglob("*") if p.is_dir()), reverse=True):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            with contextlib.suppress(OSError):
                local.rmdir()

    def _read(self, key: str) -> float:
        """Read the shard back after evicting it, so the read reaches the storage."""
        self.backend.evict([key])
        view = memoryview(bytearray(min(READ_BYTES, self.nbytes)))
        start = time.perf_counter()
        reader = self.backend.open_read(key)
        try:
            while reader.readinto(view):
                pass
        finally:
            reader.close()
        return time.perf_counter() - start
