"""Reading a Slurm step from the environment srun gives its tasks (the variables as srun 22.05
sets them; no cluster needed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.base.errors import ConfigError
from dliobench.comm import slurm
from dliobench.comm.launch import detect_launcher
from tests.conftest import tiny_workload

# task 5 of `srun -N 3 -n 7` (3+3+1 tasks): the second task of the second node
TASK = {"SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "7", "SLURM_PROCID": "4",
        "SLURM_NODEID": "1", "SLURM_LOCALID": "1", "SLURM_STEP_TASKS_PER_NODE": "3(x2),1",
        "SLURM_STEP_NUM_NODES": "3", "SLURMD_NODENAME": "n2"}


def test_step_layout_comes_from_slurm() -> None:
    assert slurm.tasks_per_node("3(x2),1") == [3, 3, 1]
    assert slurm.step_of(TASK) == slurm.Step(rank=4, size=7, local_rank=1, local_size=3,
                                             node_count=3, node="n2")


def test_batch_script_is_not_a_step() -> None:
    """A batch script's own process has SLURM_PROCID and SLURM_NTASKS but no step: a plain
    `dliobench run` in it is one process."""
    assert slurm.step_of({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2", "SLURM_PROCID": "0"}) is None


def test_mpiexec_inside_a_step_is_mpi() -> None:
    """Hydra bootstrapping its proxies with srun: PMI_SIZE is MPI's rank count, not srun's."""
    assert slurm.launched_by_srun(TASK)
    assert slurm.launched_by_srun({**TASK, "PMI_SIZE": "7"})
    assert not slurm.launched_by_srun({**TASK, "PMI_SIZE": "16"})
    assert not slurm.launched_by_srun({**TASK, "SLURM_STEP_NUM_TASKS": "1"})


def test_torchrun_started_by_srun_is_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """`srun -N 2 --ntasks-per-node 1 torchrun ...`: a worker carries its agent's step (2
    tasks, no PMI) and torchrun's variables; torchrun made the ranks."""
    torchrun = {"RANK": "5", "WORLD_SIZE": "16", "MASTER_ADDR": "n1", "MASTER_PORT": "29400"}
    for name, value in {**TASK, "SLURM_STEP_NUM_TASKS": "2", **torchrun}.items():
        monkeypatch.setenv(name, value)
    assert detect_launcher() == "torch"


def test_auto_finds_slurm(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in TASK.items():
        monkeypatch.setenv(name, value)
    assert detect_launcher() == "slurm"


def test_a_garbled_count_list_is_one_sentence() -> None:
    with pytest.raises(ConfigError, match="not Slurm's count list"):
        slurm.step_of({**TASK, "SLURM_STEP_TASKS_PER_NODE": "3x2"})
    with pytest.raises(ConfigError, match="SLURM_LOCALID='-1' is not a number"):
        slurm.step_of({**TASK, "SLURM_LOCALID": "-1"})


def test_launcher_slurm_outside_srun_is_one_sentence(
        run_cli: Callable[..., int], write_workload: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name in slurm.STEP_VARS:
        monkeypatch.delenv(name, raising=False)
    path = write_workload(tiny_workload())
    assert run_cli("run", str(path), "--launcher", "slurm", "--no-progress") == 2
    err = capsys.readouterr().err
    assert err.startswith("dliobench: error: --launcher slurm needs srun's environment; ")
    assert "start dliobench with srun" in err and len(err.strip().splitlines()) == 1
