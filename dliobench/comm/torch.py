"""torch.distributed: the only module that imports it.

``detect()`` joins the process group torchrun (or any launcher setting ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``) describes, over gloo: dliobench's buffers
are numpy arrays in host memory, so NCCL, which needs CUDA tensors, has nothing to carry.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, TypeVar

import numpy as np

from dliobench.base import interrupts
from dliobench.base.errors import ConfigError, MissingExtraError
from dliobench.comm.world import World

T = TypeVar("T")
# All three present: a torch launcher (torchrun, torch.distributed.launch) started us.
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR")
DESTROY_WAIT_S = 1.0  # abort: how long tearing down the process group may take
PEER_LOST_WAIT_S = 5.0  # a rank that lost a peer waits this long for torchrun to stop it
# what gloo says when the rank at the other end of a connection is gone
PEER_LOST_SIGNS = ("Connection closed by peer", "Connection reset by peer",
                   "remote worker crashing")


def launched_by_torch() -> bool:
    """True when torchrun (or a launcher setting its variables) started this process."""
    return all(v in os.environ for v in LAUNCHER_VARS)


class TorchComm:
    """The Comm protocol over one torch.distributed process group (gloo)."""

    def __init__(self, group: Any = None) -> None:
        self._group = group  # None: the default (world) group

    def barrier(self) -> None:
        """Block until every rank arrives."""
        import torch.distributed as dist

        dist.barrier(group=self._group)

    def bcast(self, value: T, root: int = 0) -> T:
        """Root's value on every rank (pickled, as ``broadcast_object_list``)."""
        import torch.distributed as dist

        box = [value]
        dist.broadcast_object_list(box, src=root, group=self._group)
        out: T = box[0]
        return out

    def gather(self, value: Any, root: int = 0) -> list[Any] | None:
        """One value per rank on root."""
        import torch.distributed as dist

        mine = dist.get_rank() == root
        out: list[Any] | None = [None] * dist.get_world_size() if mine else None
        dist.gather_object(value, out, dst=root, group=self._group)
        return out

    def allgather(self, value: Any) -> list[Any]:
        """One value per rank everywhere."""
        import torch.distributed as dist

        out: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(out, value, group=self._group)
        return out

    def allreduce_buffer(self, buffer: np.ndarray) -> None:
        """Sum a numeric buffer over all ranks in place (the tensor shares its memory)."""
        import torch
        import torch.distributed as dist

        dist.all_reduce(torch.from_numpy(buffer), op=dist.ReduceOp.SUM, group=self._group)

    def dup(self) -> TorchComm:
        """A new group of the same ranks (``new_group``): its collectives do not mix with
        this group's, so another thread may issue them."""
        import torch.distributed as dist

        return TorchComm(dist.new_group())

    def abort(self, code: int) -> None:
        """End this rank now with ``code``; torchrun's agent then stops the other ranks.

        The process group is torn down first where that finishes within ``DESTROY_WAIT_S``
        (with a peer dead it may block; exiting matters more).
        """
        import torch.distributed as dist

        sys.stdout.flush()
        sys.stderr.flush()

        def destroy() -> None:
            with contextlib.suppress(Exception):  # the job is failing; exit regardless
                dist.destroy_process_group()

        teardown = threading.Thread(target=destroy, name="destroy", daemon=True)
        teardown.start()
        teardown.join(DESTROY_WAIT_S)
        os._exit(code)


def lost_a_peer(exc: BaseException) -> bool:
    """Whether ``exc`` is gloo finding another rank gone (that rank failed, and says why)."""
    return any(sign in str(exc) for sign in PEER_LOST_SIGNS)


def record_failure(message: str) -> None:
    """Leave this rank's one-sentence error where torchrun's agent reads it
    (``TORCHELASTIC_ERROR_FILE``): its failure table then shows the sentence, and its
    timestamp makes this rank the root cause rather than the ranks that lost it."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    doc = {"message": {"message": message,
                       "extraInfo": {"py_callstack": message,
                                     "timestamp": str(int(time.time()))}}}
    with contextlib.suppress(OSError), open(path, "w") as handle:
        json.dump(doc, handle)


def wait_to_be_stopped() -> None:
    """A rank that lost a peer does not fail on its own: it waits (``PEER_LOST_WAIT_S`` at
    most) for torchrun, which saw the failing rank end first, to stop it with SIGTERM, so
    torchrun names the failing rank as the root cause, not this one."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # stopped: end quietly, no second report
    if interrupts.terminated_while_ending():  # torchrun asked already, while it saved its part
        return
    time.sleep(PEER_LOST_WAIT_S)


def detect() -> tuple[World, TorchComm]:
    """Join the job's process group (``env://``) and describe this rank's place."""
    try:
        import torch.distributed as dist
    except ImportError as exc:
        raise MissingExtraError("torch", "torch") from exc
    missing = [v for v in (*LAUNCHER_VARS, "MASTER_PORT") if v not in os.environ]
    if missing and not dist.is_initialized():
        raise ConfigError(f"--launcher torch needs torchrun's environment; {', '.join(missing)} "
                          "not set (start dliobench with torchrun, or use --launcher auto)")
    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method="env://")
    comm = TorchComm()
    host = socket.gethostname()
    hosts = comm.allgather(host)
    rank, size = dist.get_rank(), dist.get_world_size()
    world = World(rank=rank, size=size,
                  local_rank=int(os.environ.get("LOCAL_RANK", rank)),
                  local_size=int(os.environ.get("LOCAL_WORLD_SIZE", size)),
                  node_count=len(set(hosts)), host=host, launcher="torch")
    return world, comm
