"""Which launcher started this process, and joining its job.

Precedence when not told (``--launcher auto``): a task of a several-task ``srun`` step
(Slurm's SLURM_STEP_* and SLURM_PROCID, ``comm.slurm``) first, then an MPI launcher's variables
(PMI_*, OMPI_*, PMIX_*), then torchrun's (RANK, WORLD_SIZE and MASTER_ADDR), else one process.
Slurm comes first because srun's PMI sets MPI's variables too, and only Slurm knows its nodes
(and a task srun started without a PMI must be refused, not run alone); MPI comes before
torchrun because an MPI job may also carry RANK (some site wrappers set it), while torchrun
never sets MPI's variables.
"""

from __future__ import annotations

from dliobench.comm.world import Comm, LocalComm, World

LAUNCHERS = ("auto", "slurm", "mpi", "torch", "none")


def detect_launcher() -> str:
    """``"slurm"``, ``"mpi"``, ``"torch"`` or ``"none"``, from this process's environment."""
    from dliobench.comm import mpi, slurm, torch

    if slurm.launched_by_srun():
        return "slurm"
    if mpi.launched_by_mpi():
        return "mpi"
    if torch.launched_by_torch():
        return "torch"
    return "none"


def join(launcher: str = "auto") -> tuple[World, Comm]:
    """This rank's ``World`` and ``Comm`` under ``launcher`` (``auto``: detected)."""
    chosen = detect_launcher() if launcher == "auto" else launcher
    if chosen == "slurm":
        from dliobench.comm import slurm

        return slurm.detect()
    if chosen == "mpi":
        from dliobench.comm import mpi

        return mpi.detect()
    if chosen == "torch":
        from dliobench.comm import torch

        return torch.detect()
    return World.single(), LocalComm()


def quiet_rank() -> bool:
    """A rank other than 0 of an srun, MPI or torchrun job (from the environment alone)."""
    import contextlib
    import os

    from dliobench.base.errors import ConfigError
    from dliobench.comm import mpi, slurm, torch

    if any(os.environ.get(v, "0") != "0" for v in mpi.LAUNCHER_RANK_VARS):
        return True
    with contextlib.suppress(ConfigError):  # garbled Slurm variables: said when joining
        if slurm.launched_by_srun() and os.environ.get("SLURM_PROCID", "0") != "0":
            return True
    return torch.launched_by_torch() and os.environ.get("RANK", "0") != "0"
