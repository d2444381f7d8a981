"""Checkpoint shard files as frameworks write them: ``torch.save`` state dicts of real tensors
when torch is installed, raw bytes of the same sizes otherwise.

Tensors hold random, dedupe-proof bytes (``dataset.fill``) and are made once per rank, before
the first write, as a training job holds its state in memory; only the writes are timed. Raw
files are written 4 MiB at a time from one buffer, re-stamped before each write so that every
4 KiB of every file is unique (``StampedChunk``). ``torch.save`` serialises into the storage
seam's writer through a file object (``TorchStream``): the tensors' storages go out in 4 MiB
writes straight from their memory, no spool file anywhere (an S3 shard streams its parts), and
a buffered file's writeback starts as it is written. Every file goes through the storage seam's
streaming writer, so it appears whole or not at all, and is fsynced at commit when asked.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from typing import IO, Any, cast

import numpy as np

from dliobench.base.errors import ConfigError, DatasetError
from dliobench.config.schema import Config
from dliobench.dataset import fill as datafill
from dliobench.run.checkpoint import space
from dliobench.run.checkpoint.layout import DTYPE_BYTES, ShardFile
from dliobench.run.checkpoint.space import Room
from dliobench.storage.backend import Backend, Writer

# one raw write, as fio's bs=4M (benchmarks/checkpoints/checkpoints.py uses both)
WRITE_BYTES = 4 << 20
READ_BYTES = 4 << 20  # one read: 1.92-2.04 GB/s read back against 1.81-1.95 with 16 MiB
TORCH_DTYPES = {"int8": "int8", "uint8": "uint8", "fp16": "float16", "bf16": "bfloat16",
                "fp32": "float32", "fp64": "float64"}


def file_format(config: Config) -> str:
    """'torch' or 'raw': what ``checkpoint.file_format`` resolves to on this host."""
    wanted = config.checkpoint.file_format
    have = importlib.util.find_spec("torch") is not None
    if wanted == "torch" and not have:
        raise ConfigError("checkpoint.file_format is torch but torch is not installed; "
                          "install it (pip install 'dliobench[pytorch]') or use "
                          "checkpoint.file_format=raw")
    return "torch" if wanted == "torch" or (wanted == "auto" and have) else "raw"


class ShardWriter:
    """Writes one rank's shard files in the chosen format, and reads them back."""

    def __init__(self, files: list[ShardFile], fmt: str, seed: int) -> None:
        self.files, self.fmt, self.seed = files, fmt, seed
        self._base = datafill.base_buffer(seed)
        self._states: dict[str, dict[str, Any]] = {}
        self._numbers = {shard.name: number for number, shard in enumerate(files)}
        self._chunk: StampedChunk | None = None
        if fmt == "torch":
            for number, shard in enumerate(files):
                self._states[shard.name] = self._state(shard, number)
        else:  # the raw write buffer, made before the first timed write
            largest = max((f.nbytes for f in files), default=1)
            self._chunk = StampedChunk(seed, min(WRITE_BYTES, largest))

    def _state(self, shard: ShardFile, number: int) -> dict[str, Any]:
        """The shard's tensors: each its own storage, as a framework's state dict."""
        import torch

        state = {}
        for i, tensor in enumerate(shard.tensors):
            raw = np.empty(tensor.numel * DTYPE_BYTES[tensor.dtype], dtype=np.uint8)
            datafill.fill(raw, self._base, self.seed, number * 4096 + i)
            dtype = getattr(torch, TORCH_DTYPES[tensor.dtype])
            state[tensor.name] = torch.from_numpy(raw).view(dtype)
        return state

    def write(self, backend: Backend, key: str, shard: ShardFile, durable: bool,
              room: Room) -> int:
        """Write ``shard`` under ``key`` as checkpoint ``room.index`` (raw files of two
        checkpoints differ); return the bytes the file holds."""
        with checkpoint_writer(backend, key, room, shard.nbytes) as writer:
            if self.fmt == "torch":  # serialised into the writer: no spool file, no copies
                import torch

                stream = TorchStream(writer)
                with space.c_writes():  # a full disk's errno, should torch drop it
                    torch.save(self._states[shard.name], cast("IO[bytes]", stream))
                written = stream.written
            else:
                assert self._chunk is not None
                number = room.index * len(self.files) + self._numbers[shard.name]
                self._chunk.write(writer, shard.nbytes, datafill.file_uid(self.seed, number))
                written = shard.nbytes
            writer.commit(durable=durable)
        return written


@contextlib.contextmanager
def checkpoint_writer(backend: Backend, key: str, room: Room, nbytes: int) -> Iterator[Writer]:
    """The backend's writer of checkpoint file ``key`` (``nbytes`` planned) of checkpoint
    ``room``: anything that interrupts the block aborts it, so no partial file is ever
    committed under its name; a storage error (a full disk whatever the writer, torch
    included: ``space``) is one sentence."""
    writer = backend.open_write(key)
    try:
        yield writer
    except BaseException as exc:
        error = space.write_error(exc, backend, key, room, nbytes)  # before the abort
        writer.abort()
        if error is not None:
            raise error from None
        raise


class TorchStream:
    """A write-only file object over a storage ``Writer``, for ``torch.save`` (whose zip
    writer, given an object with ``write``, neither seeks nor tells): what it writes reaches
    the writer in whole ``WRITE_BYTES`` requests (the last one cut), as fio's ``bs`` in
    benchmarks/checkpoints/checkpoints.py.

    Tensor storages are handed over as views of their memory and go out from there, no copy;
    only what precedes them within a request (zip headers, padding, small tensors, the start
    of a large one) is gathered in one buffer first, so a shard of 195 small tensors is not a
    thousand system calls. ``written`` counts the bytes handed on.
    """

    def __init__(self, writer: Writer, request: int = WRITE_BYTES) -> None:
        self._writer = writer
        self._gather = memoryview(np.empty(request, dtype=np.uint8).data)
        self._held = 0
        self.written = 0

    def write(self, data: memoryview | bytes) -> int:
        """Take ``data`` (see the class); return its length, as a file does."""
        view = memoryview(data).cast("B")
        size, request = len(view), len(self._gather)
        if self._held:  # fill the gathered request up first
            take = min(size, request - self._held)
            self._gather[self._held:self._held + take] = view[:take]
            self._held += take
            view = view[take:]
            if self._held < request:
                return size
            self._hand_on(self._gather)
            self._held = 0
        whole = len(view) - len(view) % request
        for start in range(0, whole, request):
            self._hand_on(view[start:start + request])
        self._held = len(view) - whole
        self._gather[:self._held] = view[whole:]
        return size

    def flush(self) -> None:
        """Hand on what is gathered (torch flushes once, after the zip's last record)."""
        if self._held:
            held, self._held = self._held, 0
            self._hand_on(self._gather[:held])

    def _hand_on(self, view: memoryview) -> None:
        self._writer.write(view)
        self.written += len(view)


class StampedChunk:
    """One buffer of random bytes (``dataset.fill``) written again and again, 4 MiB at a time.

    Before each write the 16 bytes at the start of every 2 KiB are overwritten with (file id,
    block number), the stamps ``dataset.fill`` puts in samples, so no 4 KiB of any file repeats
    (dedupe cannot flatter the result) while the source stays in the CPU cache, as fio's
    buffer does: the copy into the page cache, most of a buffered write's CPU, then reads
    from the cache, not from memory (see benchmarks/RESULTS.md, "Checkpoints").
    """

    def __init__(self, seed: int, size: int = WRITE_BYTES) -> None:
        self.buffer = np.empty(max(1, size), dtype=np.uint8)
        datafill.fill(self.buffer, datafill.base_buffer(seed), seed, 0)
        self._per_write = self.buffer.size // datafill.STAMP_EVERY
        strides = self.buffer[:self._per_write * datafill.STAMP_EVERY]
        self._stamps = strides.reshape(self._per_write, datafill.STAMP_EVERY)[:, :16]
        self._words = np.zeros((self._per_write, 2), dtype="<u8")
        self._blocks = np.arange(self._per_write, dtype="<u8")

    def write(self, writer: Writer, nbytes: int, file_id: int) -> None:
        """Write ``nbytes`` of file ``file_id`` through ``writer`` (the last write cut)."""
        view = memoryview(self.buffer.data)
        self._words[:, 0] = file_id
        left, block = nbytes, 0
        while left:
            self._words[:, 1] = self._blocks + block
            self._stamps[:] = self._words.view(np.uint8).reshape(-1, 16)
            part = view[:min(left, len(view))]
            writer.write(part)
            left -= len(part)
            block += self._per_write


def read(backend: Backend, key: str, buffer: memoryview) -> int:
    """Read the whole object ``key`` into ``buffer`` piece by piece; return the bytes read."""
    try:
        reader = backend.open_read(key, sequential=True)
    except FileNotFoundError:
        raise DatasetError(f"checkpoint file {backend.describe(key)} is missing: write the "
                           "checkpoints first (checkpoint.num_checkpoints_write) and keep "
                           "them (checkpoint.keep=true) for a read-only run") from None
    try:
        total = 0
        while n := reader.readinto(buffer):
            total += n
        return total
    finally:
        reader.close()
