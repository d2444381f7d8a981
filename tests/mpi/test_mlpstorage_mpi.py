"""mlpstorage's ``training run --num-accelerators 2`` under ``mpiexec -n 2``: the ranks are
the accelerators, one run folder where mlpstorage puts it; a count the launcher did not start
is one line for the job (docs/mlpstorage.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.mpi.test_mpi import MPIEXEC, mpirun

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (install the mpi extra)")]
SIZE = ["--param", "dataset.num_files_train=28", "dataset.record_length_bytes=65536",
        "dataset.record_length_bytes_stdev=0", "train.epochs=1", "reader.data_loader=native"]


def test_two_accelerators_are_two_ranks_and_one_run(workdir: Path) -> None:
    done = mpirun(2, "training", "run", "--hosts", "127.0.0.1", "--model", "unet3d",
                  "--accelerator-type", "b200", "--num-accelerators", "2", "--data-dir",
                  str(workdir / "data"), "--results-dir", str(workdir / "r"), *SIZE)
    assert done.returncode == 0, done.stderr
    runs = list((workdir / "r" / "training" / "unet3d" / "run").iterdir())
    assert len(runs) == 1, runs
    result = json.loads((runs[0] / "result.json").read_text())
    assert len(result["ranks"]) == 2


def test_a_count_the_launcher_did_not_start_is_one_line(workdir: Path) -> None:
    done = mpirun(2, "training", "run", "--model", "unet3d", "--num-accelerators", "4",
                  "--results-dir", str(workdir / "r"))
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "launcher started 2" in lines[0] and not os.path.exists(workdir / "r")
