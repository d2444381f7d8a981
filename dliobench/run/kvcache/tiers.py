"""The three tiers a KV entry can live in, each timing its own reads and writes.

- GPU: emulated, a budget and a transfer rate (no device is needed: an entry's read or write
  takes size / rate, slept, as training's compute is);
- CPU: real memory, each entry a ``bytearray`` copied in and out;
- storage: one object per entry through the storage seam (``open_write``/``commit``,
  ``read_range``): POSIX files (O_DIRECT where the file system takes it) or S3 objects; the
  bytes a read transferred are the backend's count.

Every tier shares the run's ``Window``: an operation in flight at its end stops at its next
chunk (16 MiB) with ``Cancelled``, carrying the bytes it moved within the window (a chunk
done after the end is not counted), so a run ends at its duration plus one chunk per thread.
"""

from __future__ import annotations

import errno
import math
import time

from dliobench.storage.backend import Backend
from dliobench.storage.buffers import aligned_map

CHUNK = 16 << 20  # bytes written per call; the fill is this many random bytes, reused


class Cancelled(Exception):
    """An operation stopped at the end of the run's window; ``moved``: its bytes that moved
    within the window."""

    def __init__(self, moved: int = 0) -> None:
        super().__init__("stopped at the end of the duration")
        self.moved = moved


class Window:
    """The end of the run's measured window (``perf_counter`` seconds; inf: none, as a
    ``max_requests`` run has)."""

    def __init__(self, end: float = math.inf) -> None:
        self.end = end

    def check(self, moved: int) -> None:
        """Raise ``Cancelled(moved)`` once the window has ended."""
        if time.perf_counter() > self.end:
            raise Cancelled(moved)


class GpuTier:
    """An emulated GPU memory tier: a transfer takes size / rate seconds."""

    def __init__(self, rate_bytes_per_s: float) -> None:
        self.rate = rate_bytes_per_s
        self.window = Window()

    def transfer(self, nbytes: int) -> float:
        """Emulate moving ``nbytes`` in or out; the seconds it took (cut at the window's
        end: ``Cancelled`` with the bytes moved by then)."""
        start = time.perf_counter()
        need = nbytes / self.rate
        if start + need > self.window.end:
            time.sleep(max(0.0, self.window.end - start))
            raise Cancelled(min(nbytes, int(max(0.0, self.window.end - start) * self.rate)))
        time.sleep(need)
        return time.perf_counter() - start


class CpuTier:
    """Host memory: entries are real buffers."""

    def __init__(self, fill: memoryview) -> None:
        self.fill = fill
        self.window = Window()

    def store(self, nbytes: int) -> tuple[bytearray, float]:
        """A new entry of ``nbytes`` (copied from the fill) and the seconds it took."""
        start = time.perf_counter()
        data = bytearray(nbytes)
        for at in range(0, nbytes, len(self.fill)):
            self.window.check(at)
            n = min(len(self.fill), nbytes - at)
            data[at:at + n] = self.fill[:n]
        return data, time.perf_counter() - start

    @staticmethod
    def load(data: bytearray) -> float:
        """Copy an entry out (what a reload into the GPU would read); the seconds it took."""
        start = time.perf_counter()
        bytes(data)
        return time.perf_counter() - start


class StorageTier:
    """One object per entry under ``prefix`` of ``backend``."""

    def __init__(self, backend: Backend, prefix: str, direct: bool, fill: memoryview) -> None:
        self.backend = backend
        self.prefix = prefix
        self.direct = direct
        self.fill = fill
        self.window = Window()

    def _key(self, name: str) -> str:
        """One flat folder per rank: ``u3/c2/t1`` is ``<prefix>/u3_c2_t1``."""
        return f"{self.prefix}/{name.replace('/', '_')}"

    def write(self, name: str, nbytes: int) -> float:
        """Write the entry ``name`` of ``nbytes`` whole; the seconds it took."""
        start = time.perf_counter()
        writer = self.backend.open_write(self._key(name), direct=self.direct)
        try:
            for at in range(0, nbytes, len(self.fill)):
                self.window.check(at)
                writer.write(self.fill[:min(len(self.fill), nbytes - at)])
                self.window.check(at)  # a chunk done after the end is not counted
            writer.commit()
        except BaseException:
            writer.abort()
            raise
        return time.perf_counter() - start

    def read(self, name: str, nbytes: int) -> tuple[int, float]:
        """Read the entry whole, ``CHUNK`` bytes a call (a client's memory stays bounded
        whatever the entry's size): the bytes the storage transferred and the seconds it
        took. A file system refusing O_DIRECT reads (EINVAL) is read buffered from then on."""
        start = time.perf_counter()
        try:
            moved = self._read_chunks(name, nbytes)
        except OSError as exc:
            if not (self.direct and exc.errno == errno.EINVAL):
                raise
            self.direct = False
            start = time.perf_counter()
            moved = self._read_chunks(name, nbytes)
        return moved, time.perf_counter() - start

    def _read_chunks(self, name: str, nbytes: int) -> int:
        key, moved = self._key(name), 0
        for at in range(0, nbytes, CHUNK):
            self.window.check(moved)
            _, n = self.backend.read_range(key, at, min(CHUNK, nbytes - at), direct=self.direct)
            self.window.check(moved)  # a chunk done after the end is not counted
            moved += n
        return moved

    def delete(self, name: str) -> None:
        """Remove the entry's object."""
        self.backend.delete(self._key(name))


def make_fill(seed: int) -> memoryview:
    """``CHUNK`` random bytes in page-aligned memory (O_DIRECT writes take them as they
    are), drawn from ``seed``."""
    buf = aligned_map(CHUNK)
    buf[:] = _random_bytes(seed, CHUNK)
    return memoryview(buf)


def _random_bytes(seed: int, n: int) -> bytes:
    import numpy as np

    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()
