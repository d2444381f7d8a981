"""The vectors and queries of an index, seeded, written in chunks in DiskANN's vector file
layout (uint32 count, uint32 dimension, then float32 rows), so no more than a chunk is in
memory however many vectors there are.

- ``clustered`` (ours, the default): a mixture on the unit sphere. ``clusters`` centres drawn
  once from the seed; each vector is a centre plus Gaussian noise of standard deviation
  ``spread / sqrt(dim)`` per component (noise of norm ~``spread`` against a unit centre),
  normalized. Queries are fresh draws from the same mixture, so each has real near
  neighbours and recall@k tells a good index from a bad one (upstream issue #625: uniform
  vectors in high dimension are all nearly equidistant).
- ``uniform`` and ``normal``: upstream's (``vdb_benchmark/vdbbench/load_vdb.py``@06b5c2dc
  ``generate_vectors``: ``np.random.random`` or ``normal(0, 1)`` per component, normalized).
- ``npy``: the user's own N x dim float array; queries are drawn from its rows plus the same
  small noise, normalized like the vectors when the metric is COSINE.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from dliobench.base.errors import InputError
from dliobench.run.vectordb.inputs import read_matrix

CHUNK = 65536  # vectors generated and written at a time
HEADER = 8  # DiskANN's vector file: uint32 count, uint32 dimension
Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Draw:
    """What the vectors are drawn from: distribution, count, dimension, seed, and the
    clustered mixture's ``clusters`` and ``spread`` (recorded in the result)."""

    distribution: str
    count: int
    dimension: int
    seed: int
    clusters: int = 64
    spread: float = 0.35
    source: str = ""  # the user's vector file of distribution npy (run/vectordb/inputs.py)
    column: str = ""  # its parquet vector column
    queries_source: str = ""  # the user's queries file, if any
    raw: bool = False  # the user's vectors kept as they are (metric l2), else normalized


def normalize(rows: Vectors) -> Vectors:
    """Rows scaled to unit length (a zero row stays zero)."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1
    return (rows / norms).astype(np.float32, copy=False)


def _centres(draw: Draw) -> Vectors:
    rng = np.random.default_rng([draw.seed, 0])
    return normalize(rng.standard_normal((draw.clusters, draw.dimension)).astype(np.float32))


def _mixture(draw: Draw, rng: np.random.Generator, count: int, centres: Vectors) -> Vectors:
    """``count`` draws around ``centres`` (each row its own centre when there are as many)."""
    picks = (np.arange(count) if len(centres) == count
             else rng.integers(0, len(centres), count))
    noise = rng.standard_normal((count, draw.dimension)).astype(np.float32)
    return normalize(centres[picks] + noise * np.float32(draw.spread / np.sqrt(draw.dimension)))


def _rows(draw: Draw, rng: np.random.Generator, count: int, centres: Vectors) -> Vectors:
    if draw.distribution == "clustered":
        return _mixture(draw, rng, count, centres)
    if draw.distribution == "uniform":
        return normalize(rng.random((count, draw.dimension), dtype=np.float32))
    return normalize(rng.standard_normal((count, draw.dimension)).astype(np.float32))


def user_vectors(path: str, dimension: int, column: str = "") -> Vectors:
    """The user's vectors (.npy, .fvecs, .bvecs, .parquet: ``inputs``), memory-mapped where
    the format allows (one sentence when they cannot be used)."""
    data = read_matrix(path, column)
    if data.ndim != 2 or data.shape[0] < 1 or not np.issubdtype(data.dtype, np.number):
        raise InputError(f"vectordb.vectors_file {path} holds a {data.dtype} array of shape "
                         f"{data.shape}; give N x dimension floats")
    if data.shape[1] != dimension:
        raise InputError(f"vectordb.vectors_file {path} has {data.shape[1]} dimensions, "
                         f"vectordb.dimension is {dimension}; set vectordb.dimension="
                         f"{data.shape[1]}")
    return data


def chunks(draw: Draw) -> Iterator[Vectors]:
    """The vectors, CHUNK rows at a time, the same for the same draw."""
    if draw.distribution == "npy":
        data = user_vectors(draw.source, draw.dimension, draw.column)
        for start in range(0, draw.count, CHUNK):
            rows = np.asarray(data[start:start + CHUNK], dtype=np.float32)
            yield rows if draw.raw else normalize(rows)
        return
    centres = _centres(draw) if draw.distribution == "clustered" else np.empty((0, 0), np.float32)
    for number, start in enumerate(range(0, draw.count, CHUNK)):
        rng = np.random.default_rng([draw.seed, 1, number])
        yield _rows(draw, rng, min(CHUNK, draw.count - start), centres)


def queries(draw: Draw, count: int) -> Vectors:
    """``count`` queries from the vectors' own distribution, drawn apart from them."""
    rng = np.random.default_rng([draw.seed, 2])
    if draw.queries_source:
        given = user_vectors(draw.queries_source, draw.dimension, draw.column)
        if len(given) < count:
            raise InputError(f"vectordb.queries_file {draw.queries_source} has {len(given)} "
                             f"queries, vectordb.num_query_vectors asks {count}; ask fewer")
        rows = np.asarray(given[:count], dtype=np.float32)
        return rows if draw.raw else normalize(rows)
    if draw.distribution == "npy":
        data = user_vectors(draw.source, draw.dimension)
        picks = np.sort(rng.choice(draw.count, size=count, replace=count > draw.count))
        return _mixture(draw, rng, count, normalize(np.asarray(data[picks], np.float32)))
    centres = _centres(draw) if draw.distribution == "clustered" else np.empty((0, 0), np.float32)
    return _rows(draw, rng, count, centres)


def write_file(path: Path, draw: Draw) -> int:
    """Write the vectors in DiskANN's layout, synced; returns the bytes written."""
    written = 0
    with open(path, "wb") as out:
        out.write(np.array([draw.count, draw.dimension], dtype=np.uint32).tobytes())
        written += HEADER
        for rows in chunks(draw):
            out.write(rows.tobytes())
            written += rows.nbytes
        out.flush()
        os.fsync(out.fileno())
    return written


def read_file(path: Path) -> Vectors:
    """The vectors of a DiskANN vector file, memory-mapped (count x dimension)."""
    head = np.fromfile(path, dtype=np.uint32, count=2)
    if len(head) != 2 or path.stat().st_size != HEADER + int(head[0]) * int(head[1]) * 4:
        raise InputError(f"{path} is not a whole DiskANN vector file (its size does not "
                         "match its header); rebuild the index with `dliobench vectordb "
                         "datagen --force`")
    return np.memmap(path, dtype=np.float32, mode="r", offset=HEADER,
                     shape=(int(head[0]), int(head[1])))
