"""The metadata phase under a real ``mpiexec -n 2``: the ranks split the files and rank 0
writes one result with both ranks' figures."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.conftest import tiny_workload
from tests.mpi.test_mpi import mpi_cmd, pytestmark  # noqa: F401  (the mpi marks)


def test_two_ranks_split_the_files(workdir: Path, write_workload: Callable[..., Path],
                                   run_cli: Callable[..., int]) -> None:
    doc = tiny_workload(dataset={"num_files_train": 201, "num_subfolders_train": 2,
                                 "format": "npy", "record_length_bytes": 256})
    path = str(write_workload(doc))
    assert run_cli("generate", path, "--no-progress") == 0
    proc = subprocess.run(mpi_cmd(2, "metadata", path), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "on 2 rank(s)" in proc.stdout
    (found,) = (workdir / "reports").glob("*/metadata.json")
    meta = json.loads(found.read_text())["metadata"]
    assert meta["ranks_count"] == 2
    assert [r["files"] for r in meta["ranks"]] == [101, 100]
    assert meta["ops"]["create"]["files"] == meta["ops"]["unlink"]["files"] == 201
    assert not list((workdir / "data").glob("*.dliobench-md-*"))
