"""The ``dliobench nodes`` subcommand's arguments (kept beside ``parser.py``, which builds the
rest; the work is ``comm.nodes.run``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping

from dliobench.comm.nodes import DEFAULT_LOCAL


def add_nodes_parser(sub: argparse._SubParsersAction,
                     commands: Mapping[str, Callable[[argparse.Namespace], int]]) -> None:
    """`dliobench nodes --nodes K --ranks-per-node P -- run W k=v`."""
    p = sub.add_parser(
        "nodes", help="run a command on K emulated nodes x P ranks on this machine",
        description="Rehearse a multi-node job on one machine: one MPICH mpiexec of K x P "
        "ranks, each node's ranks in their own UTS and mount namespaces (hostname node-k, "
        "their own --local folder and /dev/shm), the other folders shared as a parallel "
        "file system, MPI between nodes over TCP. Needs root (unshare). Example: dliobench "
        f"nodes --nodes 2 --ranks-per-node 2 -- run unet3d storage.stage_to={DEFAULT_LOCAL}")
    p.add_argument("--nodes", type=int, required=True, help="emulated nodes (K)")
    p.add_argument("--ranks-per-node", type=int, required=True, help="ranks per node (P)")
    p.add_argument("--local", default=DEFAULT_LOCAL, metavar="PATH",
                   help=f"the node-local folder each node sees as its own (default "
                   f"{DEFAULT_LOCAL}): point storage.stage_to at it")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                   help="the dliobench command every rank runs, e.g. -- run unet3d k=v")
    p.set_defaults(func=commands["nodes"])
