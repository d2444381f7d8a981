"""A backend that wraps another to trace its reads (``run --trace-io``) and to issue a
traced job's read requests (``reader.read_requests``) instead of one read per range: those
requests exactly, so a replay reads what the trace shows, no more (a file's bytes that no
request covers are not read).

Nothing is wrapped when neither is asked for, so a run without them pays nothing. With a
request pattern, whole-file batch reads (``read_wholes``) are hidden, so each file is read
through ``read_range`` with the pattern.
"""

from __future__ import annotations

import time
from typing import Any

from dliobench.config.read_requests import Requests
from dliobench.storage.backend import Backend
from dliobench.storage.trace_writer import TraceWriter


class TracedBackend:
    """``inner`` with traced reads and/or a request pattern; everything else passes
    through unchanged (it is picklable when ``inner`` is: loader workers receive it)."""

    def __init__(self, inner: Backend, writer: TraceWriter | None,
                 requests: Requests | None) -> None:
        self.inner, self.writer, self.requests = inner, writer, requests

    def __getattr__(self, name: str) -> Any:
        # read_checked, submit_checked, names (the C queue's threads, which name files
        # themselves): a traced run's files go through read_wholes, traced
        if name.startswith("__") or name in ("inner", "writer", "requests", "read_checked",
                                             "submit_checked", "names"):
            raise AttributeError(name)
        if name == "read_wholes":
            if self.requests is not None or not hasattr(self.inner, name):
                raise AttributeError(name)  # every file through read_range (the pattern; S3)
            return self._read_wholes
        return getattr(self.inner, name)

    def read_range(self, key: str, offset: int, length: int,
                   direct: bool = False) -> tuple[memoryview, int]:
        """See ``Backend.read_range``: the pattern's requests when the range is a whole
        file, each one traced."""
        if self.requests is not None and offset == 0 and not direct:
            return self._patterned(key, length)
        return self._one(key, offset, length, direct)

    def _one(self, key: str, offset: int, length: int, direct: bool) -> tuple[memoryview, int]:
        started = time.time()
        data, nbytes = self.inner.read_range(key, offset, length, direct)
        if self.writer is not None:
            self.writer.read(self.inner.describe(key), offset, length, len(data), started)
        return data, nbytes

    def _patterned(self, key: str, length: int) -> tuple[memoryview, int]:
        """The file read as the pattern's requests, and only those: bytes no request covers
        stay zero, as a trace that never shows them read says (the emulated compute does not
        look at them)."""
        assert self.requests is not None
        out = bytearray(length)
        total = 0
        for o, n in self.requests.for_size(length):
            data, nbytes = self._one(key, o, n, False)
            total += nbytes
            end = min(o + len(data), length)
            out[o:end] = data[: end - o]
        return memoryview(out), total

    def _read_wholes(self, keys: list[str], sizes: list[int],
                     pool: Any = None) -> list[tuple[memoryview, int] | None]:
        """The inner batch read, each file traced as one read of its size."""
        started = time.time()
        got = self.inner.read_wholes(keys, sizes, pool)  # type: ignore[attr-defined]
        if self.writer is not None:
            for key, size, one in zip(keys, sizes, got, strict=True):
                if one is not None:
                    self.writer.read(self.inner.describe(key), 0, size, len(one[0]), started)
        return got


def traced(backend: Backend, trace_folder: str, requests: str) -> Backend:
    """``backend``, wrapped only when a trace folder or a request pattern is set."""
    if not trace_folder and not requests:
        return backend
    writer = TraceWriter(trace_folder) if trace_folder else None
    pattern = Requests.parse(requests) if requests else None
    return TracedBackend(backend, writer, pattern)
