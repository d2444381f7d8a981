"""The ``diskann`` engine: Microsoft's DiskANN, embedded through ``diskannpy-rust`` 0.49.1
(Microsoft's Rust DiskANN; it imports as ``diskannpy``; docs/vectordb.md says why this
binding). The disk index is built into the index folder and searched by DiskANN's own
reader, which opens ``ann_disk.index`` with O_DIRECT (seen with strace), so each query's
graph hops are reads of the storage under test, outside dliobench's storage seam: POSIX
only, a deviation the result lists.

The binding logs through Rust's ``tracing`` on standard output, filtered by ``RUST_LOG``
read once, at its first use: datagen asks ``info`` (the build's log, captured into the
index's ``build.log``), a run ``warn`` (at ``info`` it writes lines for every query); a
``RUST_LOG`` the user set is kept.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dliobench.base.errors import InputError, MissingExtraError
from dliobench.config.vectordb_keys import VectorDBConfig
from dliobench.run.vectordb.engines.base import Found, captured
from dliobench.run.vectordb.sizes import pq_bytes_for

PREFIX = "ann"  # the index files' prefix: ann_disk.index, ann_pq_*.bin, ann_metadata.bin
INDEX = "index"  # the index's folder inside the index folder


def _binding(log_level: str) -> Any:
    os.environ.setdefault("RUST_LOG", log_level)
    try:
        import diskannpy
    except ImportError:
        raise MissingExtraError("diskannpy-rust", "vectordb") from None
    return diskannpy


class DiskANN:
    """DiskANN's static disk index (its Vamana graph and full vectors on storage, PQ codes
    in memory)."""

    name = "diskann"
    index_types: tuple[str, ...] = ("diskann",)
    deviations: tuple[str, ...] = (
        "DiskANN reads its index itself (O_DIRECT, POSIX), outside the storage seam: its "
        "reads are counted by the device and by DiskANN, not by the seam",
        "the diskann engine builds one index for all vectors; num_shards is recorded, not "
        "split")

    def ready(self, cfg: VectorDBConfig) -> None:
        """Nothing to reach: the binding is imported by the build."""

    def build(self, vectors_file: Path, count: int, folder: Path, cfg: VectorDBConfig,
              log: Path) -> dict[str, Any]:
        """Build the disk index from ``vectors_file`` into ``folder/index``."""
        dap = _binding("info")
        pq = pq_bytes_for(cfg.dimension, cfg.pq_bytes)
        # DiskANN builds in one piece within its budget, else in overlapping partitions: three
        # times the vectors' bytes, at most half this host's memory (ours)
        host_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
        memory_gb = max(0.5, min(3 * count * cfg.dimension * 4 / 1e9, host_gb / 2))
        params = {"graph_degree": cfg.max_degree, "complexity": cfg.search_list_size,
                  "pq_chunks": pq, "build_memory_gb": round(memory_gb, 3),
                  "threads": cfg.build_threads, "metric": "l2 on unit vectors",
                  "index_prefix": PREFIX, "binding": _version()}
        (folder / INDEX).mkdir()
        with captured(log):
            dap.build_disk_index(str(vectors_file), "l2", str(folder / INDEX),
                                 complexity=cfg.search_list_size, graph_degree=cfg.max_degree,
                                 build_memory_maximum=memory_gb, num_threads=cfg.build_threads,
                                 build_pq_bytes=0, num_of_pq_chunks=pq,
                                 vector_dtype=np.float32, index_prefix=PREFIX)
        return params

    def open(self, folder: Path, cfg: VectorDBConfig, log: Path) -> _Searcher:
        """Open ``folder/index`` (one sentence when DiskANN cannot read it)."""
        dap = _binding("warn")
        try:
            with captured(log):
                index = dap.StaticDiskIndex(str(folder / INDEX), num_threads=1,
                                            beam_width=cfg.beam_width,
                                            num_nodes_to_cache=cfg.cache_nodes,
                                            index_prefix=PREFIX)
        except BaseException as exc:  # the binding raises its own types (and a Rust panic)
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise InputError(f"DiskANN cannot open the index in {folder / INDEX} ({exc}); it "
                             "is missing or damaged: rebuild it with `dliobench vectordb "
                             "datagen --force`") from None
        return _Searcher(index, max(cfg.search_list, cfg.k))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"diskannpy-rust {version('diskannpy-rust')}"
    except PackageNotFoundError:
        return "diskannpy-rust (version unknown)"


class _Searcher:
    """Searches with DiskANN's ``batch_search`` on the calling thread (one call per batch);
    the per-query reads are its own ``search_stats`` ``mean_ios``."""

    def __init__(self, index: Any, search_list: int) -> None:
        self.index, self.search_list = index, search_list

    def search(self, queries: npt.NDArray[np.float32], k: int) -> Found:
        got = self.index.batch_search(queries, k, self.search_list, 1)
        stats = got.search_stats or {}
        ios = stats.get("mean_ios")
        return Found(np.asarray(got.identifiers, dtype=np.int64),
                     None if ios is None else float(ios))

    def close(self) -> None:
        self.index = None
