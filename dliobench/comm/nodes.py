"""Emulated nodes on one machine: K nodes x P ranks under one MPICH ``mpiexec``
(``dliobench nodes``), for tests and for rehearsing a multi-node job before the cluster.

Each emulated node is a UTS and mount namespace (``unshare``) held open by a sleeper: its
own hostname (``node-0`` ...), its own node-local folder (``--local``, a per-node folder
bind-mounted over one path) and its own ``/dev/shm`` (a tmpfs of its own); the folders
outside ``--local`` (the data and output folders: the "parallel file system") stay shared.
Hydra starts one proxy per host through ``ssh``; here its ``-launcher-exec`` is a small
script that enters the host's namespaces (``nsenter``) instead, so every rank of node k runs
in node k, as a proxy on host k would. MPICH then maps ranks to nodes by host: shared memory
within a node, its network module between nodes, here OFI's tcp provider
(``MPIR_CVAR_CH4_NETMOD=ofi FI_PROVIDER=tcp``, unless the environment says otherwise): UCX,
the wheel's default, sees one machine and uses cross-memory attach between the "nodes"
(``UCX_TLS=self,tcp`` keeps it on TCP should a user choose it).

Needs ``unshare``/``nsenter`` and the right to create mount namespaces (root, or
CAP_SYS_ADMIN). ``-disable-auto-cleanup``: Hydra leaves the other nodes' ranks running when
one node's ranks die, as a rank's journal and the stall watchdog then decide what happens
(docs/running-at-scale.md, "Emulated nodes").
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dliobench.base.errors import InputError

NODE_PREFIX = "node-"
DEFAULT_LOCAL = "/tmp/dliobench-node-local"  # the node-local folder every node sees
SHM_SIZE = "50%"  # each node's /dev/shm, of the machine's memory (a tmpfs is lazy)
# MPI between nodes over TCP: OFI's tcp provider (UCX segfaulted a survivor in 1 of 3 node
# deaths; OFI never in 4), and UCX kept off shared memory should a user pick it
NETWORK_PATH = {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "UCX_TLS": "self,tcp"}
READY = "ready"
AGENT = """#!/bin/sh
# Hydra's "ssh" for emulated nodes: -x HOST COMMAND... runs COMMAND in HOST's namespaces.
[ "$1" = -x ] && shift
host=$1; shift
case "$host" in
{cases}
*) echo "dliobench nodes: no emulated node is called $host" >&2; exit 255;;
esac
exec nsenter -t "$pid" -u -m -- sh -c "$*"
"""


@dataclass(frozen=True)
class Layout:
    """The emulated job's shape: ``nodes`` x ``ranks_per_node`` ranks, ``local`` the path
    each node sees as its own folder."""

    nodes: int
    ranks_per_node: int
    local: str = DEFAULT_LOCAL

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.ranks_per_node < 1:
            raise InputError(f"dliobench nodes needs at least 1 node and 1 rank per node, "
                             f"not {self.nodes} x {self.ranks_per_node}")
        if not os.path.isabs(self.local):
            raise InputError(f"--local must be an absolute path, not {self.local!r}")

    def hosts(self) -> list[str]:
        """The nodes' hostnames, in rank order (node k holds ranks k*P .. k*P+P-1)."""
        return [f"{NODE_PREFIX}{k}" for k in range(self.nodes)]


def find_mpiexec(who: str = "dliobench nodes", name: str = "mpiexec") -> str:
    """MPICH's Hydra ``mpiexec`` (or its ``mpirun``; the one beside this Python first), or
    one sentence, naming ``who`` needs it, why there is none."""
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        raise InputError(f"{who} needs MPICH's {name} and found none; install the mpi "
                         "extra (pip install 'dliobench[mpi]'), which brings it")
    try:
        text = subprocess.run([found, "--version"], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"{found} --version failed ({exc}); {who} needs MPICH's "
                         f"{name} (Hydra)") from None
    if "HYDRA" not in text:
        raise InputError(f"{found} is not MPICH's Hydra {name} ({who} starts ranks through "
                         "Hydra, as the mpi extra's mpi4py expects); install the mpi extra or "
                         f"put MPICH's {name} first on PATH")
    return found


class EmulatedNodes:
    """The nodes' namespaces, held open while the job runs (a context manager)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.folder = Path(tempfile.mkdtemp(prefix="dliobench-nodes-"))
        self.sleepers: list[subprocess.Popen[str]] = []

    def __enter__(self) -> EmulatedNodes:
        try:
            Path(self.layout.local).mkdir(parents=True, exist_ok=True)
            for host in self.layout.hosts():
                self.sleepers.append(self._start(host))
            self._write_agent()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def node_folder(self, host: str) -> Path:
        """Where ``host``'s node-local folder and its /dev/shm live outside the node."""
        return self.folder / host

    def _start(self, host: str) -> subprocess.Popen[str]:
        """A sleeper holding ``host``'s namespaces, once they are set up."""
        own = self.node_folder(host)
        (own / "local").mkdir(parents=True)
        script = " && ".join([
            f"hostname {host}",
            f"mount --bind {shlex.quote(str(own / 'local'))} {shlex.quote(self.layout.local)}",
            f"mount -t tmpfs -o size={SHM_SIZE},mode=1777 tmpfs /dev/shm",
            f"echo {READY}", "exec sleep infinity"])
        cmd = ["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c", script]
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, start_new_session=True)
        except OSError as exc:
            raise InputError(f"cannot start the emulated node {host} ({exc.strerror}): "
                             "dliobench nodes needs util-linux's unshare and nsenter") from None
        assert proc.stdout is not None and proc.stderr is not None
        if proc.stdout.readline().strip() != READY:
            proc.wait()
            why = " ".join(proc.stderr.read().split()) or f"exit status {proc.returncode}"
            raise InputError(f"cannot create the namespaces of the emulated node {host} "
                             f"({why}): dliobench nodes needs root (or CAP_SYS_ADMIN) to "
                             "make mount and UTS namespaces")
        return proc

    def _write_agent(self) -> None:
        cases = "\n".join(f"{host}) pid={proc.pid};;" for host, proc in
                          zip(self.layout.hosts(), self.sleepers, strict=True))
        agent = self.agent
        agent.write_text(AGENT.format(cases=cases))
        agent.chmod(0o755)

    @property
    def agent(self) -> Path:
        """The script Hydra runs in place of ssh."""
        return self.folder / "agent.sh"

    def close(self) -> None:
        """End the sleepers (the namespaces go with their last process) and remove the
        nodes' folders."""
        for proc in self.sleepers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self.sleepers = []
        shutil.rmtree(self.folder, ignore_errors=True)


def mpiexec_command(mpiexec: str, layout: Layout, agent: Path, argv: list[str]) -> list[str]:
    """The one ``mpiexec`` of the whole job: ``dliobench ARGV`` on every rank."""
    hosts = ",".join(f"{h}:{layout.ranks_per_node}" for h in layout.hosts())
    return [mpiexec, "-launcher", "ssh", "-launcher-exec", str(agent), "-disable-auto-cleanup",
            "-hosts", hosts, "-n", str(layout.nodes * layout.ranks_per_node),
            sys.executable, "-m", "dliobench", *argv]


def run(layout: Layout, argv: list[str]) -> int:
    """Run ``dliobench ARGV`` on emulated nodes; mpiexec's exit status."""
    if not argv:
        raise InputError("dliobench nodes needs the command to run on every rank after --, "
                         "e.g. dliobench nodes --nodes 2 --ranks-per-node 2 -- run unet3d")
    mpiexec = find_mpiexec()
    env = {**os.environ, **{k: os.environ.get(k, v) for k, v in NETWORK_PATH.items()}}
    with EmulatedNodes(layout) as nodes:
        cmd = mpiexec_command(mpiexec, layout, nodes.agent, argv)
        proc = subprocess.Popen(cmd, env=env)
        try:
            return proc.wait()
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.wait()
