"""``--benchmark-mode sweep`` on the diskann engine (run/vectordb/sweep.py): a timed window per
point of threads x search list on the tiny index the ``vdb_index`` fixture builds; the milvus
engine's sweep and the report's curves are in test_vectordb_milvus.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import last_result
from tests.vdb_index import keys


def test_a_sweep_of_the_diskann_engine_on_the_same_shape(vdb_index: Path, workdir: Path,
                                                         run_cli: Callable[..., int]) -> None:
    assert run_cli("vectordb", "run", "vectordb.sweep_threads=1,2",
                   "vectordb.sweep_search_list=16,48", *keys(vdb_index), "--benchmark-mode",
                   "sweep", "--runtime", "0.2", "--results-dir", str(workdir / "r")) == 0
    v = last_result(workdir / "r")["vectordb"]
    assert v["engine"] == "diskann" and len(v["sweep"]) == 4
    assert v["sweep"][-1]["recall"] >= v["sweep"][0]["recall"] - 0.05  # L 48 vs 16
