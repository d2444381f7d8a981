"""Starting N ranks on this host when no launcher did: what mlpstorage does with ``mpirun``.

``dliobench training run --num-accelerators 4`` (and ``checkpointing run --num-processes N``,
``dliobench run --ranks N``) typed in a shell with no launcher around starts the same command
line again as N ranks under the mpi extra's MPICH ``mpiexec`` (Hydra, the one beside this
Python), forwards SIGINT and SIGTERM to it (Hydra passes them to the ranks), and exits with its
status. Under mpiexec, srun or torchrun nothing is started: the process joins the job as
before (``comm.launch``).

mlpstorage's MPI options (``mlpstorage_py/cli/common_args.py@dfe7b1f`` ``add_mpi_arguments``)
are options of this launch: ``--mpi-bin`` picks Hydra's ``mpiexec`` or ``mpirun``,
``--mpi-params`` go to it verbatim, ``--mpi-btl tcp`` keeps ranks off shared memory.
``--allow-run-as-root`` and ``--oversubscribe`` are Open MPI's words for what Hydra does
unasked (it runs as root, and places more ranks than cores on a host), so they add nothing
to its command line.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from dliobench.base.errors import ConfigError, InputError

log = logging.getLogger("dliobench")
FORWARDED = (signal.SIGINT, signal.SIGTERM)
MPI_BINS = ("mpirun", "mpiexec")
BTLS = ("auto", "vader", "tcp")
# --mpi-btl tcp: MPICH's ranks on one host talk through the network module, over TCP
TCP_ONLY = {"MPIR_CVAR_NOLOCAL": "1", "MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}
INSTALL = "pip install 'dliobench[mpi]'"
# what a launcher tells every rank about the job's size (MPICH/Hydra, Open MPI, PMIx; torchrun)
SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "WORLD_SIZE")


@dataclass(frozen=True)
class MpiOptions:
    """mlpstorage's MPI options, as the launch honours them."""

    mpi_bin: str = "mpiexec"
    params: tuple[str, ...] = ()
    btl: str = "auto"
    allow_run_as_root: bool = False
    oversubscribe: bool = False
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, mpi_bin: str | None, params: Sequence[Sequence[str] | str] | None,
              btl: str | None, allow_run_as_root: bool = False,
              oversubscribe: bool = False) -> MpiOptions:
        """From the flags as argparse gives them (``--mpi-params`` may repeat, each one
        string or several words); a string that does not split is one sentence."""
        words: list[str] = []
        for group in params or ():
            for item in [group] if isinstance(group, str) else group:
                try:
                    words += shlex.split(item)
                except ValueError as exc:
                    raise InputError(f"--mpi-params {item!r} does not split into words ({exc});"
                                     " quote it as one string, e.g. --mpi-params=\"-genv "
                                     "FI_PROVIDER=tcp\"") from None
        return cls(mpi_bin or "mpiexec", tuple(words), btl or "auto", allow_run_as_root,
                   oversubscribe, dict(TCP_ONLY) if btl == "tcp" else {})


def launched_ranks() -> int:
    """How many ranks the launcher started (1 without one), from the environment."""
    for var in SIZE_VARS:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 1


def start_or_join(asked: int | None, argv: Sequence[str], options: MpiOptions | None,
                  flag: str) -> int | None:
    """Start ``asked`` ranks here when no launcher did (their exit status), or None to go
    on as this rank: one process, or a rank of a launcher's job, whose size must then be
    ``asked`` (else one sentence naming ``flag``)."""
    if asked and needed(asked):
        return run(asked, argv, options)
    launched = launched_ranks()
    if asked and asked != launched:
        raise ConfigError(f"{flag} {asked} asks for {asked} ranks but the launcher started "
                          f"{launched}; start {asked} (mpiexec -n {asked}), give {flag} "
                          f"{launched}, or run the command without a launcher and dliobench "
                          "starts them")
    return None


def needed(ranks: int) -> bool:
    """True when ``ranks`` > 1 were asked for and no launcher started this process."""
    from dliobench.comm.launch import detect_launcher

    return ranks > 1 and detect_launcher() == "none"


def command(mpiexec: str, ranks: int, options: MpiOptions, argv: Sequence[str]) -> list[str]:
    """The one mpiexec command line: ``dliobench ARGV`` as ``ranks`` ranks on this host."""
    return [mpiexec, *options.params, "-n", str(ranks), sys.executable, "-m", "dliobench",
            *argv]


def _ready(options: MpiOptions, ranks: int) -> str:
    """Hydra's launcher of the name asked for, once the mpi extra is known to be there."""
    from dliobench.comm.nodes import find_mpiexec

    who = f"starting {ranks} ranks on this host"
    if importlib.util.find_spec("mpi4py") is None:
        raise InputError(f"{who} needs the mpi extra (mpi4py and MPICH's mpiexec); install it "
                         f"with {INSTALL}, or start the ranks with your own launcher")
    return find_mpiexec(who, options.mpi_bin)


def run(ranks: int, argv: Sequence[str], options: MpiOptions | None = None) -> int:
    """Run ``dliobench ARGV`` as ``ranks`` ranks under the bundled mpiexec; its exit status
    (128 + the signal's number when a signal ended it)."""
    options = options or MpiOptions()
    cmd = command(_ready(options, ranks), ranks, options, argv)
    log.info("starting %d ranks on this host: %s", ranks, shlex.join(cmd))
    return supervise(cmd, {**os.environ, **options.env})


def supervise(cmd: list[str], env: dict[str, str]) -> int:
    """Run a launcher's ``cmd`` in a session of its own, SIGINT and SIGTERM forwarded to it
    (Hydra passes them to the ranks, here or on other hosts); its exit status (128 + the
    signal's number when a signal ended it)."""
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)

    def forward(signum: int, _frame: object) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    before = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        status = proc.wait()
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
        if proc.poll() is None:  # an exception between the signal and the wait
            proc.send_signal(signal.SIGTERM)
            proc.wait()
    return 128 - status if status < 0 else status
