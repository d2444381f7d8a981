"""The ``dliobench nodes`` subcommand's arguments (kept beside ``parser.py``, which builds the
rest; the work is ``comm.nodes.run``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping

from dliobench.comm.cluster import DEFAULT_ROOT
from dliobench.comm.gluster import MOUNT
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
        f"nodes --nodes 2 --ranks-per-node 2 -- run unet3d storage.stage_to={DEFAULT_LOCAL}. "
        "An emulated cluster of network hosts that lives until taken down: dliobench nodes "
        "up --compute K --storage S [--link MB/s] [--storage-link MB/s]; dliobench nodes "
        "down (dliobench nodes up --help says more).")
    p.add_argument("--nodes", type=int, help="emulated nodes (K)")
    p.add_argument("--ranks-per-node", type=int, help="ranks per node (P)")
    p.add_argument("--local", default=DEFAULT_LOCAL, metavar="PATH",
                   help=f"the node-local folder each node sees as its own (default "
                   f"{DEFAULT_LOCAL}): point storage.stage_to at it")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                   help="the dliobench command every rank runs, e.g. -- run unet3d k=v")
    p.set_defaults(func=commands["nodes"])


def cluster_parser() -> argparse.ArgumentParser:
    """`dliobench nodes up ...` / `dliobench nodes down` (parsed from the nodes command's
    remainder, so the one-shot `dliobench nodes --nodes K ... -- run ...` keeps its form)."""
    p = argparse.ArgumentParser(
        prog="dliobench nodes", description="An emulated cluster on this machine: K compute "
        "and S storage hosts, each a network namespace with its own address, link cap (tc "
        "tbf), hostname, /dev/shm and sshd; the storage hosts serve a GlusterFS volume that "
        f"every compute host mounts at {MOUNT}. Needs root, iproute2, openssh-server and "
        "glusterfs-server.")
    sub = p.add_subparsers(dest="action", required=True)
    u = sub.add_parser(
        "up", help="bring the cluster up (it lives until `nodes down`)",
        description="Bring up K compute and S storage hosts, each a network namespace with "
        "its own address (127.100.x.y), link cap, hostname, /dev/shm and sshd; the storage "
        f"hosts serve a GlusterFS volume every compute host mounts at {MOUNT}. It prints "
        "the hosts and the mount, and lives until `dliobench nodes down`. Example: "
        "dliobench nodes up --compute 4 --storage 1 --link 40")
    u.add_argument("--compute", type=int, required=True, help="compute hosts (K)")
    u.add_argument("--storage", type=int, default=1, help="storage hosts (S, default 1)")
    u.add_argument("--link", type=float, metavar="MB/s",
                   help="each compute host's link cap in MB/s (10^6), both ways; default none")
    u.add_argument("--storage-link", type=float, metavar="MB/s",
                   help="each storage host's link cap in MB/s (10^6); default none")
    u.add_argument("--root", default=DEFAULT_ROOT,
                   help=f"the cluster's folder: keys, bricks, logs (default {DEFAULT_ROOT})")
    d = sub.add_parser("down", help="remove the cluster, or what a killed `up` left",
                       description="End every process in the cluster's namespaces (sshd, "
                       "glusterd, the FUSE clients, ranks), delete the namespaces and the "
                       "cluster's folder: a live cluster or what a killed `up` left.")
    d.add_argument("--root", default=DEFAULT_ROOT, help=f"default {DEFAULT_ROOT}")
    return p


def run_cluster(argv: list[str]) -> int:
    """`nodes up` / `nodes down`: what it made or removed, printed."""
    from dliobench.comm import cluster

    args = cluster_parser().parse_args(argv)
    if args.action == "down":
        done = cluster.down(args.root)
        print("removed " + ", ".join(done) if done else "no emulated cluster was up")
        return 0
    state = cluster.up(args.compute, args.storage, args.link, args.storage_link, args.root)
    print(cluster.describe(state))
    return 0
