"""`dliobench report` of a real two-rank run under ``mpiexec`` (beside the one-rank run):
one trace process per rank, the scaling and timeline plots."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dliobench.cli.main import main
from tests.unit.test_report import _check_trace, _report, _workload

MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (install the mpi extra)")]


def test_two_ranks_trace_and_scaling(tmp_path: Path) -> None:
    assert MPIEXEC is not None
    workload = _workload(tmp_path)
    base = ["run", str(workload), "--no-progress", "--output", str(tmp_path / "runs"),
            "train.allreduce_bytes=64KiB"]
    assert main(base) == 0
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "dliobench", *base,
                           "--trace"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if (p / "trace.json").exists())
    names = _check_trace(run_dir)
    assert sorted(names) == [0, 1] and names[1].startswith("rank 1 (")
    out = _report(tmp_path)
    assert (out / "scaling.png").exists() and (out / "timeline.png").exists()
    assert not (out / "comparison.png").exists()  # the runs differ in the rank count only
    assert "Not drawn: the runs do not differ" in (out / "report.html").read_text()
