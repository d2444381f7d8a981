"""``dliobench vectordb run --num-query-processes 2`` typed without a launcher: dliobench
starts two ranks under the mpi extra's mpiexec (upstream's query processes), each a query
client of the same index, rank 0 merging their queries and recall hits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import last_result
from tests.mpi.test_mpi import MPIEXEC
from tests.vdb_index import keys

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (install the mpi extra)")]


def test_two_query_processes_share_the_queries(vdb_index: Path, workdir: Path,
                                              run_cli: Callable[..., int]) -> None:
    assert run_cli("vectordb", "run", *keys(vdb_index), "--queries", "101",
                   "--num-query-processes", "2") == 0
    result = last_result(workdir / "reports")
    v = result["vectordb"]
    assert result["ranks_count"] == 2 and v["ranks"] == 2 and v["clients"] == 2
    assert [r["queries"] for r in v["per_rank"]] == [51, 50] and v["queries"] == 101
    assert v["valid"] and v["recall"] == sum(r["hits"] for r in v["per_rank"]) / 1010
