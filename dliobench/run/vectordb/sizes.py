"""``dliobench vectordb datasize``: the bytes a vector index takes, pure arithmetic.

Two figures: upstream's estimate (mlcommons/storage ``mlpstorage_py/benchmarks/
vectordbbench.py``@be69aeb5 ``datasize``: raw float32 bytes x an overhead per index type x the
shards), and the diskann engine's files as it lays them out (``engines/diskann.py``): the
vectors file, the disk index (one node per vector: the vector, its degree and up to R
neighbour ids, packed into 4 KiB sectors after one header sector), the in-memory PQ codes
and pivots, the queries and their ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass

SECTOR = 4096
FLOAT = 4
# vectordbbench.py@be69aeb5 datasize(): index overhead over the raw vector bytes
UPSTREAM_OVERHEAD = {"diskann": 1.3, "hnsw": 1.5, "aisaq": 0.15, "ivf_flat": 1.05,
                     "ivf_sq8": 0.40, "flat": 1.0}


@dataclass(frozen=True)
class Shape:
    """What sizes an index: vectors, dimension, graph degree, PQ bytes, queries, k."""

    vectors: int
    dimension: int
    degree: int
    pq_bytes: int
    queries: int
    k: int


def pq_bytes_for(dimension: int, asked: int) -> int:
    """A vector's in-memory PQ code: as asked, else a quarter of its raw bytes (at most the
    dimension: one byte per chunk, one chunk per dimension at most)."""
    return min(dimension, asked or max(1, dimension))


def raw_bytes(vectors: int, dimension: int) -> int:
    """The vectors as float32."""
    return vectors * dimension * FLOAT


def upstream_estimate(vectors: int, dimension: int, index_type: str, shards: int) -> int:
    """Upstream's datasize total (its overhead table; unknown types as DISKANN)."""
    overhead = UPSTREAM_OVERHEAD.get(index_type.lower(), 1.3)
    return int(raw_bytes(vectors, dimension) * overhead * shards)


def disk_index_bytes(shape: Shape) -> int:
    """DiskANN's disk index: a header sector, then the nodes packed into sectors."""
    node = shape.dimension * FLOAT + FLOAT + shape.degree * FLOAT
    if node <= SECTOR:
        per_sector = SECTOR // node
        sectors = -(-shape.vectors // per_sector)
    else:
        sectors = shape.vectors * -(-node // SECTOR)
    return SECTOR * (1 + sectors)


def engine_files(shape: Shape) -> dict[str, int]:
    """The diskann engine's files and their bytes (the ground truth: ids and distances)."""
    return {
        "vectors": 8 + raw_bytes(shape.vectors, shape.dimension),
        "disk_index": disk_index_bytes(shape),
        "pq": 8 + shape.vectors * shape.pq_bytes + 256 * shape.dimension * FLOAT,
        "queries": raw_bytes(shape.queries, shape.dimension),
        "ground_truth": shape.queries * shape.k * 8,
    }
