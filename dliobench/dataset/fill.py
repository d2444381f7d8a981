"""Fast, deterministic, dedupe-proof sample bytes.

numpy's generator makes only ~1 GB/s per core, so one random base buffer (seeded by the
dataset seed) is tiled into each sample, and every 2 KiB a 16-byte stamp (file id, block
number) is written over it. Any 4 KiB window of any file then holds a full stamp no other
window holds: storage dedupe or compression cannot flatter results, and the bytes depend only
on the seed and the file index, never on which worker wrote them.
"""

from __future__ import annotations

import hashlib

import numpy as np

BASE_BYTES = 4 << 20
STAMP_EVERY = 2048


def base_buffer(seed: int) -> np.ndarray:
    """The random bytes every file is tiled from, the same for a given seed."""
    return np.random.default_rng([seed, 0x5EED]).integers(0, 256, BASE_BYTES, dtype=np.uint8)


def file_uid(seed: int, file_index: int) -> int:
    """A 64-bit id of one file, unique per (seed, index) for all practical purposes."""
    digest = hashlib.blake2b(f"{seed}:{file_index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def fill(out: np.ndarray, base: np.ndarray, seed: int, file_index: int,
         compressibility: float = 0.0, offset: int = 0) -> None:
    """Fill the uint8 array ``out`` with the bytes of file ``file_index``, in C order, from
    byte ``offset`` of them on (a multiple of ``STAMP_EVERY``: a file filled piece by piece
    gets the same bytes as at once).

    ``compressibility`` c zeroes the first c of every 2 KiB stride after its stamp, so a
    compressor shrinks the data by about c (fio's buffer_compress_percentage / 100).
    """
    if offset % STAMP_EVERY:
        raise ValueError(f"fill offset {offset} is not a multiple of {STAMP_EVERY}")
    if not out.flags.c_contiguous:  # e.g. samples between record framing: fill, then place
        dense = np.empty(out.shape, dtype=np.uint8)
        fill(dense, base, seed, file_index, compressibility, offset)
        out[...] = dense
        return
    flat = out.reshape(-1)
    n = flat.size
    start = (file_index * 7919 * 4096 + offset) % base.size
    pos = 0
    while pos < n:
        take = min(n - pos, base.size - start)
        flat[pos:pos + take] = base[start:start + take]
        pos += take
        start = 0
    blocks = n // STAMP_EVERY
    if blocks:
        stamps = flat[: blocks * STAMP_EVERY].reshape(blocks, STAMP_EVERY)[:, :16]
        words = np.empty((blocks, 2), dtype="<u8")
        words[:, 0] = file_uid(seed, file_index)
        words[:, 1] = np.arange(offset // STAMP_EVERY, offset // STAMP_EVERY + blocks,
                                dtype="<u8")
        stamps[:] = words.view(np.uint8).reshape(blocks, 16)
    zeros = int(compressibility * (STAMP_EVERY - 16))
    if zeros:
        strides = flat[: blocks * STAMP_EVERY].reshape(blocks, STAMP_EVERY)
        strides[:, 16:16 + zeros] = 0
        tail = flat[blocks * STAMP_EVERY:]
        tail[: min(zeros, tail.size)] = 0


def fill_rows(out: np.ndarray, base: np.ndarray, seed: int, file_indices: np.ndarray,
              compressibility: float = 0.0) -> None:
    """Fill row k of the 2-D uint8 array ``out`` (rows contiguous) with the bytes of file
    ``file_indices[k]``: the same bytes as ``fill``, for a batch of small files in a few numpy
    calls instead of a few per file."""
    rows, n = out.shape
    idx = np.asarray(file_indices, dtype=np.int64)
    size = base.size
    starts = (idx % size) * ((7919 * 4096) % size) % size  # == (i * 7919 * 4096) % size
    whole = starts + n <= size  # rows that wrap around the base buffer are filled one by one
    windows = np.lib.stride_tricks.sliding_window_view(base, n) if n <= size else None
    if windows is not None and whole.all():
        out[...] = windows[starts]
    else:
        for r in range(rows):
            if windows is not None and whole[r]:
                out[r] = windows[starts[r]]
            else:
                fill(out[r], base, seed, int(idx[r]), compressibility)
    blocks = n // STAMP_EVERY
    if blocks:
        stamps = np.lib.stride_tricks.as_strided(
            out, (rows, blocks, 16), (out.strides[0], STAMP_EVERY, 1), writeable=True)
        words = np.empty((rows, blocks, 2), dtype="<u8")
        words[:, :, 0] = np.array([file_uid(seed, int(i)) for i in idx], dtype="<u8")[:, None]
        words[:, :, 1] = np.arange(blocks, dtype="<u8")
        stamps[...] = words.view(np.uint8).reshape(rows, blocks, 16)
    zeros = int(compressibility * (STAMP_EVERY - 16))
    if zeros and blocks:
        after_stamps = out[:, 16:]
        strides = np.lib.stride_tricks.as_strided(
            after_stamps, (rows, blocks, zeros), (out.strides[0], STAMP_EVERY, 1),
            writeable=True)
        strides[...] = 0
    if zeros:
        tail = min(zeros, n - blocks * STAMP_EVERY)
        if tail > 0:
            out[:, blocks * STAMP_EVERY:blocks * STAMP_EVERY + tail] = 0
