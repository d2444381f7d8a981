"""dliobench under a real Slurm (tests/slurm/conftest.py): ``srun -n 2`` joins its two tasks
into one job through Slurm's PMI and writes one result.json with Slurm's nodes; the shipped
sbatch script does the same as a batch job; a step srun started without a PMI is refused in
one sentence instead of running as two one-rank benchmarks."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import tiny_workload
from tests.slurm.cluster import Cluster

SBATCH_SCRIPT = Path(__file__).parents[2] / "examples" / "slurm" / "dliobench.sbatch"
DLIOBENCH = [sys.executable, "-m", "dliobench"]
pytestmark = pytest.mark.mpi  # real MPI ranks, as tests/mpi: `-m "not mpi"` leaves them out


def results(workdir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(workdir.glob("reports/*/result.json"))]


def assert_one_job_on_two_nodes(workdir: Path) -> None:
    """One result.json, of 2 ranks, one on each of Slurm's nodes n1 and n2."""
    [result] = results(workdir)
    assert result["launcher"] == "slurm"
    assert result["ranks_count"] == 2 and [r["rank"] for r in result["ranks"]] == [0, 1]
    assert [(n["host"], n["ranks"]) for n in result["nodes"]] == [("n1", [0]), ("n2", [1])]
    assert result["metrics"]["exactly_once"] is True


def test_srun_two_ranks_write_one_result(slurm: Cluster, workdir: Path,
                                         write_workload: Callable[..., Path]) -> None:
    path = write_workload(tiny_workload())
    proc = slurm.command(["srun", "-n", "2", "--mpi=pmi2", *DLIOBENCH, "run", str(path),
                          "--no-progress"], cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert_one_job_on_two_nodes(workdir)


def test_srun_without_pmi_is_refused_in_one_sentence(
        slurm: Cluster, workdir: Path, write_workload: Callable[..., Path]) -> None:
    """MpiDefault=none and no --mpi: each task would be a world of one."""
    path = write_workload(tiny_workload())
    proc = slurm.command(["srun", "-n", "2", *DLIOBENCH, "run", str(path), "--no-progress"],
                         cwd=workdir)
    assert proc.returncode != 0
    said = [line for line in proc.stderr.splitlines() if line.startswith("dliobench:")]
    assert said == ["dliobench: error: srun started 2 tasks without a PMI to join them into "
                    "one job, so each would run alone; start the tasks with `srun --mpi=pmi2 "
                    "...` (or set MpiDefault=pmi2 in slurm.conf)"]  # said once, by task 0
    assert "Traceback" not in proc.stderr and results(workdir) == []


def test_mpi_that_ignores_srun_pmi_is_refused(slurm: Cluster, workdir: Path,
                                              write_workload: Callable[..., Path]) -> None:
    """PMI's variables present but no PMI behind them (as with --mpi=pmix and an MPI built
    without PMIx): MPI starts a world of one in each task."""
    path = write_workload(tiny_workload())
    proc = slurm.command(["srun", "-n", "2", "--export=ALL,PMI_SIZE=2,PMI_RANK=0",
                          *DLIOBENCH, "run", str(path), "--no-progress"], cwd=workdir)
    assert proc.returncode != 0
    assert "srun started 2 tasks but MPI sees a world of 1" in proc.stderr
    assert "Traceback" not in proc.stderr and results(workdir) == []


def test_shipped_sbatch_script_runs_one_job(slurm: Cluster, workdir: Path,
                                            write_workload: Callable[..., Path]) -> None:
    path = write_workload(tiny_workload())
    env = {**slurm.env, "DLIOBENCH": " ".join(DLIOBENCH)}
    proc = slurm.command(["sbatch", "--parsable", "-N", "2", "--ntasks-per-node=1",
                          f"--output={workdir}/job.out", str(SBATCH_SCRIPT), str(path)],
                         cwd=workdir, env=env)
    assert proc.returncode == 0, proc.stderr
    state = slurm.wait_for_job(proc.stdout.strip().split(";")[0])
    assert state == "COMPLETED", (workdir / "job.out").read_text()
    assert "results: reports/" in (workdir / "job.out").read_text()
    assert_one_job_on_two_nodes(workdir)
