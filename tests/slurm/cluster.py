"""A real Slurm cluster on 127.0.0.1: one ``slurmctld`` and two ``slurmd`` (nodes n1 and n2,
one CPU each, on ports of their own; Debian's build runs several slurmd on one host), from a
generated slurm.conf in a folder of the caller's, stopped when the ``with`` block ends. Used by
tests/slurm's session fixture and by benchmarks/faults/faults.py's Slurm cases.

Authentication is ``auth/none`` (Slurm 22.05, Debian bookworm's, still ships it), so no munged
is needed for a cluster that only 127.0.0.1 reaches.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

NODES = ("n1", "n2")
READY_WAIT_S = 30.0  # daemons are up in about 1 s; a hang guard
CONF = """\
ClusterName=dliotest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
{nodes}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
NODE = "NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs=1"


@dataclass(frozen=True)
class Cluster:
    """The running test cluster: its slurm.conf and the environment its clients need."""

    conf: Path
    env: dict[str, str]

    def command(self, argv: list[str], cwd: Path, env: dict[str, str] | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client (srun, sbatch) against this cluster (``env``: its own
        environment, by default ``self.env``)."""
        return subprocess.run(argv, cwd=cwd, env=self.env if env is None else env,
                              capture_output=True, text=True, timeout=timeout)

    def wait_for_job(self, job_id: str, timeout: float = 120) -> str:
        """The job's final state (COMPLETED, FAILED, ...), polled every 0.1 s (``sbatch
        --wait`` polls every few seconds: 10 s for a job of one second)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["scontrol", "-o", "show", "job", job_id], env=self.env,
                                 capture_output=True, text=True).stdout
            state = next((f.split("=", 1)[1] for f in out.split() if f.startswith("JobState=")),
                         "")
            if state not in ("", "PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                return state
            time.sleep(0.1)
        raise TimeoutError(f"Slurm job {job_id} did not end within {timeout:.0f} s")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _client_env(conf: Path) -> dict[str, str]:
    """This environment less any Slurm job's variables (the tests may themselves run inside
    one), pointed at the test cluster's slurm.conf."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PMI_"))}
    env["SLURM_CONF"] = str(conf)
    # the mpich wheel's UCX netmod exchanges its long binary addresses through Slurm 22.05's
    # pmi2 plugin, which now and then reads a request torn ("value not properly terminated",
    # then UCX's address.c:1138 assertion: 2 of about 80 starts here); OFI's short addresses
    # never did (docs/slurm.md says the same to users)
    env.setdefault("MPIR_CVAR_CH4_NETMOD", "ofi")
    env.setdefault("FI_PROVIDER", "tcp")
    return env


def _wait_until_idle(env: dict[str, str], root: Path,
                     daemons: list[subprocess.Popen[bytes]]) -> None:
    """Every node idle, as sinfo sees it; fails with the daemons' last log lines (at once
    when a daemon has ended)."""
    deadline = time.monotonic() + READY_WAIT_S
    while time.monotonic() < deadline and all(d.poll() is None for d in daemons):
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=env,
                             capture_output=True, text=True).stdout.split()
        if out.count("idle") == len(NODES):
            return
        time.sleep(0.1)
    logs = "\n".join(p.read_text()[-600:] for p in sorted(root.glob("*.log")))
    raise RuntimeError(f"the test Slurm cluster did not come up:\n{logs}")


def _cancel_jobs(env: dict[str, str]) -> None:
    """Cancel what is still queued or running (a hung task's slurmstepd would outlive the
    daemons), waiting until the queue is empty."""
    subprocess.run(["scancel", "--full", "--user=root"], env=env, capture_output=True)
    deadline = time.monotonic() + READY_WAIT_S
    while time.monotonic() < deadline and subprocess.run(
            ["squeue", "-h"], env=env, capture_output=True, text=True).stdout.strip():
        time.sleep(0.1)


@contextlib.contextmanager
def running(root: Path) -> Iterator[Cluster]:
    """Start slurmctld and one slurmd per node, with their state, spool and logs in ``root``;
    stop them (SIGTERM, then SIGKILL after 10 s) when the block ends."""
    for folder in ("state", *(f"spool/{n}" for n in NODES)):
        (root / folder).mkdir(parents=True)
    nodes = "\n".join(NODE.format(name=n, port=_free_port()) for n in NODES)
    conf = root / "slurm.conf"
    conf.write_text(CONF.format(ctld_port=_free_port(), root=root, nodes=nodes))
    env = _client_env(conf)
    daemons = [subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
               for argv in (["slurmctld", "-D", "-i"],
                            *(["slurmd", "-D", "-N", n] for n in NODES))]
    try:
        _wait_until_idle(env, root, daemons)
        yield Cluster(conf=conf, env=env)
        _cancel_jobs(env)
    finally:
        for daemon in daemons:
            daemon.terminate()
        for daemon in daemons:
            try:
                daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
