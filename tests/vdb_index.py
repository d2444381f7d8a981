"""The keys of the tiny DiskANN index the ``vdb_index`` fixture (tests/conftest.py) builds
once per test session: 3,000 clustered vectors of 32 dimensions, 100 queries, k 10."""

from __future__ import annotations

from pathlib import Path

SMALL = ["vectordb.max_degree=24", "vectordb.search_list_size=48", "vectordb.pq_bytes=16"]
FLAGS = ["--num-vectors", "3000", "--dimension", "32", "--num-query-vectors", "100"]


def keys(index_dir: Path) -> list[str]:
    """The overrides and flags naming the tiny index in ``index_dir`` (overrides first)."""
    return [*SMALL, *FLAGS, "--index-dir", str(index_dir)]
