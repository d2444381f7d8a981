"""The vector files ANN users have, read for ``vectordb.distribution npy`` (the user's own
vectors), ``vectordb.queries_file`` and ``vectordb.truth_file``:

- ``.npy``: an N x dim array (memory-mapped);
- ``.fvecs`` / ``.bvecs`` / ``.ivecs``: the ANN benchmarks' layout (corpus-texmex's SIFT and
  GIST files, http://corpus-texmex.irisa.fr/): each row is a little-endian int32 dimension,
  then that many float32 / uint8 / int32 values (memory-mapped; uint8 rows become floats);
- ``.parquet``: one vector per row in a list column (``vectordb.vector_column``; empty: the
  only list column, or one named ``vector``, ``emb`` or ``embedding``), read whole into
  memory (the other formats are memory-mapped).

A ground truth the user gives (``.ivecs`` as the ANN benchmarks ship it, or ``.npy`` ids) is
checked against ours on a sample of queries (``check_given``): the distances of the ids it
names must be the exact k least, so a truth made with another metric or of other vectors is
refused in one sentence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dliobench.base.errors import InputError

VECS = {".fvecs": np.float32, ".bvecs": np.uint8, ".ivecs": np.int32}
COLUMNS = ("vector", "emb", "embedding")
SAMPLE = 32  # queries whose given ground truth is checked against ours


def _vecs(path: Path, dtype: Any) -> npt.NDArray[Any]:
    """A .fvecs/.bvecs/.ivecs file's rows, memory-mapped (its dimension from the first row)."""
    size = path.stat().st_size
    if size < 4:
        raise InputError(f"{path} is empty; give a {path.suffix} file of vectors")
    dim = int(np.fromfile(path, dtype="<i4", count=1)[0])
    width = 4 + dim * np.dtype(dtype).itemsize
    if dim < 1 or size % width:
        raise InputError(f"{path} is not a {path.suffix} file: its first row says {dim} "
                         f"dimensions, and {size:,} bytes are not whole rows of {width} bytes")
    rows = np.memmap(path, dtype=np.uint8, mode="r").reshape(size // width, width)
    heads = rows[:, :4].copy().view("<i4")[:, 0]
    if (heads != dim).any():
        raise InputError(f"{path} has rows of other dimensions than its first row's {dim}; "
                         f"give a {path.suffix} file of one dimension")
    return rows[:, 4:].view(np.dtype(dtype).newbyteorder("<"))


def _parquet(path: Path, column: str) -> npt.NDArray[np.float32]:
    """The vector column of a parquet file, as an N x dim array."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    lists = [f.name for f in schema if pa.types.is_list(f.type) or
             pa.types.is_fixed_size_list(f.type) or pa.types.is_large_list(f.type)]
    name = column or (lists[0] if len(lists) == 1 else
                      next((c for c in COLUMNS if c in lists), ""))
    if name not in lists:
        raise InputError(f"{path} has no vector column {name or '(of a list type)'} (its list "
                         f"columns: {', '.join(lists) or 'none'}); name it with "
                         "vectordb.vector_column")
    column_ = pq.read_table(path, columns=[name]).column(name).combine_chunks()
    lengths = pc.unique(pc.list_value_length(column_)).to_pylist()
    if column_.null_count or len(lengths) != 1:
        raise InputError(f"{path}'s column {name} holds vectors of lengths "
                         f"{sorted(x for x in lengths if x is not None)[:5]} or empty rows; "
                         "give one dimension throughout")
    flat = column_.flatten().to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=np.float32).reshape(len(column_), int(lengths[0]))


def read_matrix(path: str, column: str = "") -> npt.NDArray[Any]:
    """The rows of a vector file (.npy, .fvecs, .bvecs, .ivecs, .parquet)."""
    p = Path(path)
    try:
        if p.suffix in VECS:
            return _vecs(p, VECS[p.suffix])
        if p.suffix == ".parquet":
            return _parquet(p, column)
        return np.load(p, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path}: {exc}; give a .npy, .fvecs, .bvecs, .ivecs or "
                         ".parquet file of vectors") from None


def check_given(path: str, ours_ids: npt.NDArray[np.int64], ours_d: npt.NDArray[np.float32],
                queries: npt.NDArray[np.float32], base: npt.NDArray[np.float32],
                k: int) -> dict[str, Any]:
    """Check a given ground truth against ours on a sample of queries: the vectors it names
    must lie at our exact k least distances (ties kept). Returns what was checked."""
    given = read_matrix(path)
    nq = len(queries)
    if given.ndim != 2 or len(given) < nq or given.shape[1] < k:
        raise InputError(f"the ground truth {path} has shape {given.shape}; the index's {nq} "
                         f"queries at k={k} need at least ({nq}, {k})")
    rows = np.unique(np.linspace(0, nq - 1, min(SAMPLE, nq)).astype(np.int64))
    ids = np.asarray(given[rows, :k], dtype=np.int64)
    if ids.min() < 0 or ids.max() >= len(base):
        raise InputError(f"the ground truth {path} names vector {int(ids.max())}, the index "
                         f"holds {len(base)}; it belongs to other vectors")
    off = [int(r) for r, row in zip(rows, ids, strict=True)
           if not np.allclose(np.sort(((np.asarray(base[np.sort(row)], np.float32) -
                                        queries[r]) ** 2).sum(axis=1)),
                              ours_d[r, :k], rtol=1e-3, atol=1e-4)]
    if off:
        raise InputError(f"the ground truth {path} differs from the exact neighbours of the "
                         f"vectors as indexed for {len(off)} of {len(rows)} sampled queries "
                         f"(first: query {off[0]}); it was made with another metric or of "
                         "other vectors (vectordb.metric_type l2 keeps your vectors as they "
                         "are; cosine normalizes them)")
    same = float(np.mean([len(np.intersect1d(a, b)) / k
                          for a, b in zip(ids, ours_ids[rows, :k], strict=True)]))
    return {"file": path, "sampled_queries": len(rows), "matched": True,
            "same_ids_share": round(same, 4)}
