"""Under MPI, rank 0 shows the job's live figures (every rank's summed), not its own."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import last_result, tiny_workload
from tests.integration.test_live_figures import EPOCH_LINE, SO_FAR, _number

MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (install the mpi extra)")]


def test_rank_0_shows_the_jobs_figures(workdir: Path,
                                       write_workload: Callable[..., Path]) -> None:
    """2 ranks, piped: each epoch's line and the last progress line give the job's
    samples/s and MB/s (both ranks' summed), as result.json does, within 20 %."""
    path = write_workload(tiny_workload(dataset={"num_files_train": 16},
                                        train={"epochs": 2, "computation_time": 0.01}))
    assert MPIEXEC is not None
    done = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "dliobench", "run",
                           str(path)], capture_output=True, text=True, timeout=120, cwd=workdir)
    assert done.returncode == 0, done.stderr
    result = last_result(workdir / "reports")
    assert result["ranks_count"] == 2
    epochs = EPOCH_LINE.findall(done.stdout)
    assert len(epochs) == 2, done.stdout  # rank 0 alone speaks
    for (*_, rate, mb), shown in zip(epochs, result["epochs"], strict=True):
        assert _number(rate) == pytest.approx(shown["samples_per_s"], rel=0.2)
        assert _number(mb) == pytest.approx(shown["bytes_per_s"] / 1e6, rel=0.2)
    last = SO_FAR.findall(done.stdout)[-1]
    assert _number(last[1]) == pytest.approx(result["metrics"]["samples_per_s"], rel=0.2)
