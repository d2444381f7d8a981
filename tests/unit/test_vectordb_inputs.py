"""The vector files ANN users have (run/vectordb/inputs.py): .fvecs/.bvecs/.ivecs as the ANN
benchmarks ship them (corpus-texmex: an int32 dimension before each row), parquet with a
vector column, and a given ground truth checked against ours on a sample of queries."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dliobench.base.errors import InputError
from dliobench.run.vectordb.inputs import check_given, read_matrix
from dliobench.run.vectordb.truth import exact


def write_vecs(path: Path, rows: np.ndarray) -> Path:
    """Rows in the texmex layout: each an int32 dimension, then its values."""
    head = np.full((len(rows), 1), rows.shape[1], dtype="<i4")
    path.write_bytes(np.hstack([head.view(np.uint8).reshape(len(rows), 4),
                                rows.view(np.uint8).reshape(len(rows), -1)]).tobytes())
    return path


@pytest.mark.parametrize("suffix,dtype", [(".fvecs", np.float32), (".bvecs", np.uint8),
                                          (".ivecs", np.int32)])
def test_vecs_files_read_back(tmp_path: Path, suffix: str, dtype: type) -> None:
    rows = (np.random.default_rng(1).random((7, 5)) * 100).astype(dtype)
    got = read_matrix(str(write_vecs(tmp_path / f"x{suffix}", rows)))
    assert got.shape == (7, 5) and np.array_equal(np.asarray(got), rows)


def test_a_vecs_file_of_broken_rows_is_one_sentence(tmp_path: Path) -> None:
    path = write_vecs(tmp_path / "x.fvecs", np.ones((3, 4), np.float32))
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(InputError, match="not whole rows of 20 bytes"):
        read_matrix(str(path))


def test_parquet_vector_column(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = np.random.default_rng(2).random((6, 3)).astype(np.float32)
    pq.write_table(pa.table({"id": list(range(6)), "emb": [list(r) for r in rows]}),
                   tmp_path / "v.parquet")
    assert np.allclose(read_matrix(str(tmp_path / "v.parquet")), rows)
    with pytest.raises(InputError, match="no vector column other"):
        read_matrix(str(tmp_path / "v.parquet"), "other")


def test_a_given_ground_truth_is_checked_on_a_sample(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    base = rng.random((500, 8)).astype(np.float32)
    queries = rng.random((40, 8)).astype(np.float32)
    ours = exact(queries, [base], 10)
    given = write_vecs(tmp_path / "gt.ivecs", ours.ids.astype(np.int32))
    said = check_given(str(given), ours.ids, ours.distances, queries, base, 10)
    assert said["matched"] and said["same_ids_share"] == 1.0 and said["sampled_queries"] == 32
    cosine = exact(queries / np.linalg.norm(queries, axis=1, keepdims=True),
                   [base / np.linalg.norm(base, axis=1, keepdims=True)], 10)  # another metric
    wrong = write_vecs(tmp_path / "cos.ivecs", cosine.ids.astype(np.int32))
    with pytest.raises(InputError, match="another metric or of other vectors"):
        check_given(str(wrong), ours.ids, ours.distances, queries, base, 10)


def test_parquet_vectors_of_two_lengths_are_one_sentence(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"vector": [[1.0, 2.0], [1.0, 2.0, 3.0]]}), tmp_path / "v.parquet")
    with pytest.raises(InputError, match="lengths \\[2, 3\\]"):
        read_matrix(str(tmp_path / "v.parquet"))
