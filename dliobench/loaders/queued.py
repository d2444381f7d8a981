"""Samples submitted to a ``ReadQueue`` by the native loader, taken in order by ``batch``:
``Started`` (``SampleReader.start_many``: per-file lists of keys, sizes and templates) and
``NamedBatch`` (``submit_named``: file indices only, read into one block)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

import dliobench.storage.checked_reads as checked_reads

Samples = list[tuple[np.ndarray, int]]  # each sample and the bytes read for it, in order
# ``SampleReader._results``: the samples of ``read_checked``'s results
Finish = Callable[[list[int], list[str], Sequence[tuple[np.ndarray, int] | tuple[memoryview, int]
                                                  | None], int], Samples]
PAGE = 4096  # a named batch's rows start this many bytes apart (``_named.h``)


class SampleReader(Protocol):
    """What ``NamedBatch`` uses of ``loaders.base.SampleReader`` (which imports this module)."""

    @property
    def keys(self) -> Sequence[str]: ...

    @property
    def backend(self) -> Any: ...

    @property
    def templates(self) -> dict[int, checked_reads.Template | None]: ...

    @property
    def resize_bytes(self) -> int: ...

    @property
    def sample_crcs(self) -> object | None: ...

    def uniform_file_size(self) -> int | None: ...

    def finish(self, sample_id: int, key: str,
               whole: tuple[np.ndarray | memoryview, int] | None) -> tuple[np.ndarray, int]: ...


class Started:
    """Samples ``SampleReader.start_many`` submitted: ``result`` waits for them."""

    __slots__ = ("finish", "keys", "pending", "sample_ids")

    def __init__(self, finish: Finish, sample_ids: list[int], keys: list[str],
                 pending: checked_reads.Pending) -> None:
        self.finish, self.sample_ids, self.keys, self.pending = finish, sample_ids, keys, pending

    def result(self) -> Samples:
        """Each sample and the bytes read for it, in order (as ``read_many``)."""
        got, misses = self.pending.result()
        return self.finish(self.sample_ids, self.keys, got, misses)

    def batch(self) -> tuple[list[np.ndarray], int]:
        """The samples, in order, and the bytes read for them."""
        samples, sizes = zip(*self.result(), strict=True)
        return list(samples), sum(sizes)

    def cancel(self) -> None:
        """Leave the samples unread if no thread has started them."""
        self.pending.cancel()


def file_names(reader: SampleReader) -> tuple[object, int] | None:
    """The C names of ``reader``'s files and their one size, where a batch can be submitted
    by index (``NamedBatch``): every file one size, named by its index
    (``FileKeys.pattern``) on a backend that makes names in C; else None."""
    pattern = getattr(reader.keys, "pattern", None)
    make = getattr(reader.backend, "names", None)
    size = reader.uniform_file_size()
    if pattern is None or make is None or size is None:
        return None
    names = make(*pattern())
    return None if names is None else (names, size)


class NamedBatch:
    """One-sample files of one size submitted by index (``ReadQueue.submit_named``): the
    reader threads name them, read them into the rows of one block and check them against
    the size's template. ``wait`` takes the samples: one 2-D view of the block, a row per
    sample, when all passed (no Python per sample), else each through
    ``SampleReader.finish`` as ``read_many``'s results (the first file of a size, a damaged
    one: decoded by its format, which words its error). Also the native loader's slot for
    the batch (``wait``, ``take``, ``abandon``)."""

    __slots__ = ("ids", "nbytes", "queue", "reader", "samples", "size", "template", "ticket")

    def __init__(self, reader: SampleReader, queue: checked_reads.ReadQueue, names: object,
                 ids: np.ndarray | list[int], size: int, chunk: int) -> None:
        self.reader, self.queue, self.size = reader, queue, size
        self.ids = np.asarray(ids, dtype=np.int64)
        self.template = reader.templates.get(size)
        self.ticket = queue.submit_named(names, self.ids, size, self.template, chunk)
        self.samples: list[np.ndarray] | np.ndarray = []
        self.nbytes = 0

    def wait(self) -> None:
        """Block until every file is read; raise the first error (in words, read again)."""
        block, results, passed, misses, nbytes = self.queue.wait(self.ticket)
        reader, n, template = self.reader, len(results), self.template
        stride = -(-self.size // PAGE) * PAGE
        rows = np.frombuffer(block, np.uint8).reshape(n, stride) if n else None
        if not misses and template is not None and rows is not None \
                and not reader.resize_bytes and reader.sample_crcs is None:
            self.samples, self.nbytes = rows[:, template[5]:template[6]], nbytes
            return
        view = memoryview(block)
        out: list[np.ndarray] = []
        total = 0
        for i, (sample_id, got) in enumerate(zip(self.ids.tolist(), results, strict=True)):
            whole: tuple[np.ndarray, int] | tuple[memoryview, int] | None = None
            if passed[i] and template is not None and rows is not None:
                whole = rows[i, template[5]:template[6]], got
            elif got >= 0:
                whole = view[i * stride:i * stride + got], got
            sample, count = reader.finish(sample_id, reader.keys[sample_id], whole)
            out.append(sample)
            total += count
        self.samples, self.nbytes = out, total

    def take(self) -> tuple[int, list[np.ndarray] | np.ndarray]:
        """Bytes read and the samples (a list, or one array a row per sample), handed over:
        no reference kept."""
        samples, self.samples = self.samples, []
        return self.nbytes, samples

    def batch(self) -> tuple[list[np.ndarray] | np.ndarray, int]:
        """The samples, in order, and the bytes read for them."""
        self.wait()
        nbytes, samples = self.take()
        return samples, nbytes

    def abandon(self) -> None:
        """Leave the files no thread has started unread."""
        self.queue.cancel(self.ticket)
