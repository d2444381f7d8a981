"""Slurm's ``srun``: whether this process is one task of a job step, the step's layout read
from Slurm's variables, and joining the step as one MPI job through Slurm's PMI.

Sites run MPI builds that take their ranks from the PMI that ``srun --mpi=pmi2`` (or pmix)
serves; the mpich wheel's MPICH does too. Slurm says where each task sits (its node, its rank
on that node, the tasks of each node), so those figures come from Slurm, not from the
hostname: two ``slurmd`` on one host are two nodes. What Slurm cannot do is join tasks it
started without a PMI: each would initialise MPI as a world of one and the job would run as
N independent one-rank benchmarks over the same output, so that is refused in one sentence.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from dliobench.base.errors import ConfigError
from dliobench.comm.world import Comm, LocalComm, World

# Set by srun in every task of a job step (a batch script's own step has none of the first two)
STEP_VARS = ("SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID")
PMI_HINT = ("start the tasks with `srun --mpi=pmi2 ...` (or set MpiDefault=pmi2 in "
            "slurm.conf)")


@dataclass(frozen=True)
class Step:
    """This task's place in its job step, as Slurm describes it."""

    rank: int  # SLURM_PROCID
    size: int  # SLURM_STEP_NUM_TASKS
    local_rank: int  # SLURM_LOCALID
    local_size: int  # this node's entry of SLURM_STEP_TASKS_PER_NODE
    node_count: int  # SLURM_STEP_NUM_NODES
    node: str  # SLURMD_NODENAME: the node's name in slurm.conf


def tasks_per_node(text: str) -> list[int]:
    """Slurm's compressed count list (``"2(x3),1"``) expanded: ``[2, 2, 2, 1]``."""
    counts: list[int] = []
    for item in text.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", item)
        if match is None:
            raise ConfigError(f"SLURM_STEP_TASKS_PER_NODE={text!r} is not Slurm's count list "
                              "(e.g. 2(x3),1); start dliobench with srun, or unset the SLURM_ "
                              "variables")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def step_of(env: Mapping[str, str] | None = None) -> Step | None:
    """The job step this process is a task of, or None outside an ``srun`` step."""
    env = os.environ if env is None else env
    if not all(v in env for v in STEP_VARS):
        return None
    size = _number(env, "SLURM_STEP_NUM_TASKS")
    node_id = _number(env, "SLURM_NODEID", 0)
    per_node = tasks_per_node(env.get("SLURM_STEP_TASKS_PER_NODE", str(size)))
    return Step(rank=_number(env, "SLURM_PROCID"), size=size,
                local_rank=_number(env, "SLURM_LOCALID", 0),
                local_size=per_node[node_id] if node_id < len(per_node) else 1,
                node_count=_number(env, "SLURM_STEP_NUM_NODES", len(per_node)),
                node=env.get("SLURMD_NODENAME", ""))


def _number(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    """A Slurm variable's count; a value that is not one is said in one sentence."""
    text = env.get(name, str(default))
    if not text.isdigit():
        raise ConfigError(f"{name}={text!r} is not a number as srun sets it; start dliobench "
                          "with srun, or unset the SLURM_ variables")
    return int(text)


def launched_by_srun(env: Mapping[str, str] | None = None) -> bool:
    """True when this process is one of several tasks of an ``srun`` step. An MPI launcher
    started inside a step (mpiexec under ``srun -n 1``, or Hydra bootstrapping its proxies
    with srun) sets a PMI_SIZE of its own: then MPI's launcher, not srun, made the ranks.
    torchrun started by srun (one agent per node) sets torchrun's variables and no PMI's:
    then torchrun made them."""
    from dliobench.comm import mpi, torch

    env = os.environ if env is None else env
    step = step_of(env)
    if step is None or step.size < 2:
        return False
    has_pmi = any(v in env for v in (*mpi.LAUNCHER_SIZE_VARS, *mpi.LAUNCHER_RANK_VARS))
    if not has_pmi and all(v in env for v in torch.LAUNCHER_VARS):
        return False
    return env.get("PMI_SIZE", str(step.size)) == str(step.size)


def detect() -> tuple[World, Comm]:
    """Join the step: MPI through Slurm's PMI, with the layout from Slurm's variables."""
    step = step_of()
    if step is None:
        raise ConfigError("--launcher slurm needs srun's environment; "
                          f"{', '.join(v for v in STEP_VARS if v not in os.environ)} not set "
                          "(start dliobench with srun, or use --launcher auto)")
    if step.size == 1:
        return _world(step, rank=0, size=1), LocalComm()
    from dliobench.comm import mpi

    if not mpi.launched_by_mpi():
        raise ConfigError(f"srun started {step.size} tasks without a PMI to join them into one "
                          f"job, so each would run alone; {PMI_HINT}")
    world, comm = mpi.detect()
    if (world.size, world.rank) != (step.size, step.rank):
        raise ConfigError(f"srun started {step.size} tasks but MPI sees a world of "
                          f"{world.size} (this is task {step.rank}, MPI rank {world.rank}): "
                          f"the MPI library did not use srun's PMI; {PMI_HINT}")
    return _world(step, rank=world.rank, size=world.size), comm


def _world(step: Step, rank: int, size: int) -> World:
    import socket

    return World(rank=rank, size=size, local_rank=step.local_rank, local_size=step.local_size,
                 node_count=step.node_count, host=step.node or socket.gethostname(),
                 launcher="slurm")
