"""How a job of several ranks ends: together when all went well, at once when one rank fails.

MPI_Finalize at exit waits for every rank, so a rank that stopped would hang the others
forever: a failing rank names itself in one sentence and aborts the whole job; a job whose
ranks were all told to stop (SIGTERM from a batch system) says so once, by rank 0; under
torchrun, a rank that only lost a peer leaves the blame to the rank that failed.

Light on purpose: the command line installs the SIGTERM handler from here before it knows
the launcher, so nothing heavy (numpy, mpi4py, torch) is imported at the top.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from dliobench.base.errors import DlioBenchError, Terminated

if TYPE_CHECKING:
    from dliobench.comm.world import Comm, World

T = TypeVar("T")

TERMINATED_GRACE_S = 5.0  # batch systems allow 30 s or more between SIGTERM and SIGKILL
# where a run's partial result went (if it could be written) is said by the run itself
TERMINATED = "terminated (SIGTERM); generated files are kept"


def terminated_line(exc: BaseException) -> str:
    """The line a job stopped by SIGTERM ends with: what its command said it kept
    (``Terminated.kept``: a KV-cache run's partial result), else ``TERMINATED``."""
    kept = getattr(exc, "kept", None)
    return f"terminated (SIGTERM); {kept}" if kept else TERMINATED


def stop_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C (partial results, clean-up), by raising ``Terminated``."""
    signal.signal(signal.SIGTERM, _terminate)


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM: raise ``Terminated`` once."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the clean-up
    raise Terminated("terminated by SIGTERM")


def on_every_rank(world: World, comm: Comm, work: Callable[[], T],
                  stall_timeout_s: float) -> T:
    """Run ``work``; under MPI or torchrun a failing rank names itself and ends the whole job
    at once, and the ranks finish together, watched (``train.stall_timeout_s``)."""
    try:
        done = work()
        if world.size > 1:
            from dliobench.comm.watchdog import Watchdog

            with Watchdog(stall_timeout_s, world, comm) as watchdog:
                watchdog.beat("waiting for the other ranks to finish")
                comm.barrier()
        return done
    except BaseException as exc:
        if world.size > 1:
            _end_the_job(world, comm, exc)
        raise


def _end_the_job(world: World, comm: Comm, exc: BaseException) -> None:
    """This rank failed (or was told to stop) in a job of several: say it, end every rank."""
    code = exc.exit_code if isinstance(exc, (DlioBenchError, Terminated)) else 1
    if isinstance(exc, Terminated):  # a batch system signals every rank: one line
        if world.is_root:
            _say(terminated_line(exc))
        else:  # rank 0 (signalled too) first writes the partial result and says so
            time.sleep(TERMINATED_GRACE_S)
    elif world.launcher == "torch" and _torch_peer_lost(exc):
        _say(f"rank {world.rank} of {world.size} on {world.host} stops: another rank ended "
             "(its own message says why)")
        from dliobench.comm.torch import wait_to_be_stopped

        wait_to_be_stopped()
    else:
        reason = str(exc) or type(exc).__name__
        message = f"rank {world.rank} of {world.size} on {world.host}: {reason}"
        _say(f"error: {message}")
        if world.launcher == "torch":
            from dliobench.comm.torch import record_failure

            record_failure(message)
    comm.abort(code)


def _torch_peer_lost(exc: BaseException) -> bool:
    from dliobench.comm.torch import lost_a_peer

    return lost_a_peer(exc)


def _say(sentence: str) -> None:
    """One line on stderr, at once: the job may be killed right after."""
    print(f"dliobench: {sentence}", file=sys.stderr, flush=True)
