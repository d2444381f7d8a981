"""``--hosts`` outside a launcher: the ranks started over ssh from this host, as mlpstorage
starts ``mpirun`` across its ``--hosts`` (``dliobench run W --hosts h1,h2 [--ranks-per-host
P]``, ``training run ... --hosts h1 h2 --num-accelerators N``). The work is
``comm.hosts_launch``; this module hands it what the resolved configuration knows (the data
folder every host must see, the memory a rank needs, the workload file)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dliobench.comm.local_launch import MpiOptions
from dliobench.config.schema import Config


@dataclass(frozen=True)
class HostsAsked:
    """What the command line asked of a launch across hosts."""

    hosts: tuple[str, ...]
    total: int | None = None  # ranks in all (mlpstorage's --num-accelerators)
    per_host: int | None = None  # or ranks per host (--ranks-per-host)
    ssh_user: str | None = None
    options: MpiOptions | None = None


def host_names(given: Iterable[str] | None) -> tuple[str, ...]:
    """The hosts of ``--hosts`` (space or comma separated, ``host:slots`` as mpirun takes
    them), in order."""
    return tuple(h for item in given or () for h in item.split(",") if h)


def asked_of(args: argparse.Namespace) -> HostsAsked | None:
    """``run --hosts h1,h2`` (with ``--ranks N`` in all or ``--ranks-per-host P``), or what
    mlpstorage's front door asked (``hosts_asked``); None without hosts."""
    asked: HostsAsked | None = getattr(args, "hosts_asked", None)
    if asked is not None or not getattr(args, "hosts", None):
        return asked
    return HostsAsked(host_names(args.hosts), total=getattr(args, "ranks", None),
                      per_host=getattr(args, "ranks_per_host", None),
                      ssh_user=getattr(args, "ssh_username", None))


def wanted(asked: HostsAsked | None) -> bool:
    """Whether to start the ranks over ssh: hosts were named and no launcher started this
    process (under mpiexec, srun or torchrun the ranks are already placed)."""
    from dliobench.comm.launch import detect_launcher

    return bool(asked and asked.hosts) and detect_launcher() == "none"


def start_on_hosts(config: Config, asked: HostsAsked, argv: Sequence[str]) -> int:
    """Start ``dliobench ARGV`` on ``asked.hosts`` over ssh (a preflight on every host first,
    one sentence per host that cannot take its ranks); the job's exit status."""
    from dliobench.comm.hosts_launch import place, run_on_hosts
    from dliobench.comm.nodes import find_mpiexec
    from dliobench.dataset.bounds import needs
    from dliobench.dataset.manifest import HEADER_KEY

    options = asked.options or MpiOptions()
    ranks = sum(n for _, n in place(list(asked.hosts), asked.total, asked.per_host))
    per_rank = sum(size for _, size in needs(config, ranks, generating=False))
    source = str(getattr(config, "source", "") or "")
    paths = (os.path.abspath(source),) if source.endswith((".yaml", ".yml")) else ()
    return run_on_hosts(list(asked.hosts), list(argv), total=asked.total,
                        per_host=asked.per_host, ssh_user=asked.ssh_user,
                        data_folder=os.path.abspath(config.dataset.data_folder),
                        manifest=HEADER_KEY, bytes_per_rank=per_rank,
                        mpiexec=find_mpiexec("--hosts", options.mpi_bin), options=options,
                        paths=paths)
