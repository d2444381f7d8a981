"""Raw checkpoint bytes: written 4 MiB at a time from one buffer, yet no 4 KiB repeats."""

from __future__ import annotations

import hashlib
from pathlib import Path

from dliobench.dataset import fill as datafill
from dliobench.run.checkpoint.files import StampedChunk
from dliobench.storage.posix import PosixBackend

SIZE = 64 << 10  # a small buffer: a file of several writes stays small


def _write(root: Path, chunk: StampedChunk, name: str, nbytes: int, file_id: int) -> bytes:
    backend = PosixBackend(str(root))
    writer = backend.open_write(name)
    chunk.write(writer, nbytes, file_id)
    writer.commit(durable=False)
    return (root / name).read_bytes()


def _windows(data: bytes) -> list[bytes]:
    return [hashlib.blake2b(data[i:i + 4096]).digest() for i in range(0, len(data), 4096)]


def test_no_4kib_block_repeats_within_or_across_files(tmp_path: Path) -> None:
    chunk = StampedChunk(seed=7, size=SIZE)
    nbytes = 5 * SIZE + 12_345  # several writes and a cut last one
    one = _write(tmp_path, chunk, "a.bin", nbytes, datafill.file_uid(7, 0))
    two = _write(tmp_path, chunk, "b.bin", nbytes, datafill.file_uid(7, 1))
    assert len(one) == len(two) == nbytes
    blocks = _windows(one) + _windows(two)
    assert len(set(blocks)) == len(blocks)


def test_the_same_file_id_writes_the_same_bytes(tmp_path: Path) -> None:
    uid = datafill.file_uid(3, 4)
    first = _write(tmp_path, StampedChunk(3, SIZE), "a.bin", 3 * SIZE, uid)
    again = _write(tmp_path, StampedChunk(3, SIZE), "b.bin", 3 * SIZE, uid)
    assert first == again
