"""Checkpoint shard files as frameworks write them: ``torch.save`` state dicts of real tensors
when torch is installed, raw bytes of the same sizes otherwise.

Tensors hold random, dedupe-proof bytes (``dataset.fill``) and are made once per rank, before
the first write, as a training job holds its state in memory; only the writes are timed. Every
file goes through the storage seam's streaming writer, so it appears whole or not at all, and
is fsynced at commit when asked.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from typing import Any

import numpy as np

from dliobench.config.schema import Config
from dliobench.dataset import fill as datafill
from dliobench.errors import ConfigError, DatasetError
from dliobench.run.ckpt_layout import DTYPE_BYTES, ShardFile
from dliobench.storage import Backend
from dliobench.storage.backend import Writer

CHUNK = 64 << 20
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
        self._chunk: np.ndarray | None = None
        if fmt == "torch":
            for number, shard in enumerate(files):
                self._states[shard.name] = self._state(shard, number)

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

    def _raw_chunk(self) -> memoryview:
        if self._chunk is None:
            largest = max((f.nbytes for f in self.files), default=1)
            self._chunk = np.empty(max(1, min(CHUNK, largest)), dtype=np.uint8)
            datafill.fill(self._chunk, self._base, self.seed, 0)
        return memoryview(self._chunk.data)

    def write(self, backend: Backend, key: str, shard: ShardFile, durable: bool) -> int:
        """Write ``shard`` under ``key``; return the bytes the file holds."""
        with checkpoint_writer(backend, key) as writer:
            if self.fmt == "torch":  # torch writes the spool file itself: no Python copies
                import torch

                spool = writer.spool_path()
                torch.save(self._states[shard.name], str(spool))
                written = spool.stat().st_size
            else:
                write_repeated(writer, self._raw_chunk(), shard.nbytes)
                written = shard.nbytes
            writer.commit(durable=durable)
        return written


@contextlib.contextmanager
def checkpoint_writer(backend: Backend, key: str) -> Iterator[Writer]:
    """The backend's writer of checkpoint file ``key``; anything that interrupts the block
    aborts it (no partial file), a storage error as one sentence."""
    writer = backend.open_write(key)
    try:
        yield writer
    except BaseException as exc:
        writer.abort()
        if isinstance(exc, OSError):
            raise DatasetError(f"cannot write checkpoint {backend.describe(key)}: "
                               f"{exc.strerror}; free space or choose another "
                               "checkpoint.checkpoint_folder") from None
        raise


def write_repeated(writer: Writer, chunk: memoryview, nbytes: int) -> None:
    """Write ``nbytes`` through ``writer``, ``chunk`` after ``chunk`` (the last one cut)."""
    left = nbytes
    while left:
        part = chunk[:min(left, len(chunk))]
        writer.write(part)
        left -= len(part)


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
