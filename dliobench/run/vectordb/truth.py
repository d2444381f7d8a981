"""Exact k nearest neighbours of the queries (the ground truth), by our own brute force in
chunks of the vectors, outside any timed window; its checks; and recall@k.

The vectors are unit length (``vectors.normalize``), so squared L2 distance ranks as COSINE
does: ``|q - x|^2 = 2 - 2 q.x``. Ties are broken by the lower id, so the truth is the same on
every machine. Upstream accepted an empty or undersized ground truth silently (mlcommons/
storage issues #375, #489; ``vdb_benchmark/tests/tests/test_issue_489_flat_gt_guard.py``@
b61c7008): ``check`` refuses one that is empty, has a row count other than the queries', ids
outside the index, or distances that do not belong to the vectors they name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dliobench.base.errors import InputError

Ids = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float32]
SPOT = 8  # queries whose recorded distances are recomputed from the vectors they name
DISTANCES = 1 << 24  # distances computed at once (64 MiB of float32): queries x vectors


@dataclass(frozen=True)
class Truth:
    """The exact neighbours of each query: ids and squared L2 distances, k per row."""

    ids: Ids
    distances: Floats


def exact(queries: Floats, chunks: Iterable[Floats], k: int) -> Truth:
    """The k nearest vectors of each query over ``chunks`` (the vectors in order)."""
    nq = len(queries)
    best_d = np.full((nq, 0), np.inf, np.float32)
    best_i = np.zeros((nq, 0), np.int64)
    q_norm = (queries * queries).sum(axis=1, keepdims=True)
    start = 0
    for rows in chunks:
        d = q_norm + (rows * rows).sum(axis=1)[None, :] - 2 * queries @ rows.T
        ids = np.broadcast_to(np.arange(start, start + len(rows)), d.shape)
        start += len(rows)
        cand_d = np.concatenate([best_d, np.maximum(d, 0).astype(np.float32)], axis=1)
        cand_i = np.concatenate([best_i, ids], axis=1)
        keep = min(k, cand_d.shape[1])
        if cand_d.shape[1] > keep:  # the k least, by distance then id (of a few more)
            part = np.argpartition(cand_d, keep - 1, axis=1)[:, :keep]
            cand_d = np.take_along_axis(cand_d, part, 1)
            cand_i = np.take_along_axis(cand_i, part, 1)
        order = np.lexsort((cand_i, cand_d), axis=1)
        best_d, best_i = np.take_along_axis(cand_d, order, 1), np.take_along_axis(cand_i, order, 1)
    if best_i.shape[1] < k:
        raise InputError(f"the index has {start} vectors, fewer than k={k}; lower vectordb.k "
                         "or index more vectors")
    return Truth(best_i, best_d)


def check(truth: Truth, queries: Floats, vectors: Floats, k: int, where: str) -> None:
    """The ground truth fits the index and its queries: one sentence saying what does not."""
    ids, nq, count = truth.ids, len(queries), len(vectors)
    fix = "rebuild it with `dliobench vectordb datagen --force`"
    if ids.size == 0:
        raise InputError(f"the ground truth in {where} is empty; {fix}")
    if ids.shape != (nq, k) or truth.distances.shape != ids.shape:
        raise InputError(f"the ground truth in {where} has shape {ids.shape}, the index's "
                         f"{nq} queries at k={k} need ({nq}, {k}); {fix}")
    if ids.min() < 0 or ids.max() >= count:
        raise InputError(f"the ground truth in {where} names vector {int(ids.max())}, the "
                         f"index holds {count}; it belongs to another index: {fix}")
    rows = np.linspace(0, nq - 1, min(SPOT, nq)).astype(np.int64)
    named = np.asarray(vectors[np.sort(np.unique(ids[rows]))], np.float32)
    lookup = {int(v): n for n, v in enumerate(np.sort(np.unique(ids[rows])))}
    for r in rows:
        got = ((named[[lookup[int(i)] for i in ids[r]]] - queries[r]) ** 2).sum(axis=1)
        if not np.allclose(got, truth.distances[r], rtol=1e-3, atol=1e-4):
            raise InputError(f"the ground truth in {where} does not match the index's vectors "
                             f"(query {int(r)}'s distances differ); {fix}")


def hits(found: Ids, truth: Ids, k: int) -> int:
    """How many of the rows' true k were found (recall's numerator)."""
    return sum(len(np.intersect1d(f[:k], t[:k])) for f, t in zip(found, truth, strict=True))
