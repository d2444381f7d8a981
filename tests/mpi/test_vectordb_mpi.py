"""``dliobench vectordb run`` under a real ``mpiexec -n 2``: each rank a query client of the
same index (upstream's query processes), rank 0 merging their queries and recall hits."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import last_result
from tests.mpi.test_mpi import MPIEXEC, mpirun
from tests.vdb_index import keys

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (install the mpi extra)")]


def test_two_ranks_share_the_queries(vdb_index: Path, workdir: Path) -> None:
    proc = mpirun(2, "vectordb", "run", *keys(vdb_index), "--queries", "101", timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = last_result(workdir / "reports")
    v = result["vectordb"]
    assert result["ranks_count"] == 2 and v["ranks"] == 2 and v["clients"] == 2
    assert [r["queries"] for r in v["per_rank"]] == [51, 50] and v["queries"] == 101
    assert v["valid"] and v["recall"] == sum(r["hits"] for r in v["per_rank"]) / 1010
