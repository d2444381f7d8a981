"""What an engine is: it builds an index into a folder from a vector file, and opens an
index for searching. A search returns each query's ids and what the engine itself counted
of its reads (DiskANN's per-query I/Os; None where an engine does not count them). Engines'
libraries print on the process's standard output; ``captured`` sends it to the run's log."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from dliobench.config.vectordb_keys import VectorDBConfig


@dataclass(frozen=True)
class Found:
    """One search call's answer: ids (queries x k) and the engine's own count of reads per
    query (None: not counted)."""

    ids: npt.NDArray[np.int64]
    reads_per_query: float | None


class Searcher(Protocol):
    """An open index."""

    def search(self, queries: npt.NDArray[np.float32], k: int) -> Found:
        """The k nearest ids of each query."""

    def close(self) -> None:
        """Let the index go."""


class Engine(Protocol):
    """Builds and opens indexes of one kind."""

    name: str
    index_types: tuple[str, ...]  # what it builds
    deviations: tuple[str, ...]  # how it departs from upstream's, for the result

    def ready(self, cfg: VectorDBConfig) -> None:
        """Refuse, in one sentence, before any work, what cannot build (a server not there)."""

    def build(self, vectors_file: Path, count: int, folder: Path, cfg: VectorDBConfig,
              log: Path) -> dict[str, Any]:
        """Build the index of the vectors in ``vectors_file`` into ``folder`` (which exists);
        returns the parameters it built with."""

    def open(self, folder: Path, cfg: VectorDBConfig, log: Path) -> Searcher:
        """Open the index in ``folder`` for searching with ``cfg``'s search parameters."""


@contextlib.contextmanager
def captured(log: Path) -> Iterator[None]:
    """The process's file descriptor 1 appended to ``log`` for the block (a library's own
    printing; Python's ``sys.stdout`` is flushed first and keeps its place)."""
    sys.stdout.flush()
    log.parent.mkdir(parents=True, exist_ok=True)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = os.dup(1)
    try:
        os.dup2(out, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(out)
