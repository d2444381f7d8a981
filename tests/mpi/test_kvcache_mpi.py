"""``dliobench kvcache`` under a real ``mpiexec -n 2``: each rank its users and storage
folder, rank 0 merging them (the worst rank's storage read P95, as v3.0 scores it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import last_result
from tests.mpi.test_mpi import MPIEXEC, mpirun

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (install the mpi extra)")]

PRESET = Path(__file__).resolve().parents[2] / "workloads" / "kvcache_8b_200u.yaml"


def test_two_clients_each_with_their_users(workdir: Path) -> None:
    proc = mpirun(2, "kvcache", str(PRESET), "--num-users", "2", "--max-requests", "6",
                  "--entry-scale", "0.002", "--cache-dir", "tier", timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = last_result(workdir / "reports")
    kv = result["kvcache"]
    assert result["ranks_count"] == 2 and kv["clients"] == 2
    assert [r["rank"] for r in kv["ranks"]] == [0, 1]
    assert kv["total_requests"] == 12 == sum(r["requests"] for r in kv["ranks"])
    assert kv["worst_rank_storage_read_p95_ms"] == max(r["storage_read_p95_ms"]
                                                       for r in kv["ranks"])
    assert kv["aggregated_read_bandwidth_gbps"] > 0  # the ranks' storage read GB/s summed
    assert not list((workdir / "tier").iterdir())
