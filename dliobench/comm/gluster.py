"""A GlusterFS volume on the emulated cluster: each storage host runs ``glusterd`` and
serves a brick in its folder; each compute host mounts the volume with the FUSE client,
through its own link, at the same path (``MOUNT``).

Debian's glusterfs-server 10.3. Its state (``/var/lib/glusterd``), logs and sockets are
per host: folders of the host's own mounted over those paths inside it (its sockets are in
the host's own ``/run``). GlusterFS talks over the hosts' 198.18.0.0/15 addresses
(``cluster_net.DATA_SUBNET``: it takes every 127/8 address for its own host); bricks in a
folder of the root file system need ``force``.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from dliobench.base.errors import InputError
from dliobench.comm.cluster_net import Host, in_host

VOLUME = "dliobench"
MOUNT = "/mnt/dliobench"  # where every compute host sees the volume
GLUSTERD_STATE = "/var/lib/glusterd"
READY_TIMEOUT_S = 60.0


def gluster_binds(host_dir: Path, storage: bool) -> list[tuple[Path, str]]:
    """The folders a host mounts over gluster's paths: its logs, and a storage
    host's glusterd state (seeded from the package's ``/var/lib/glusterd``: hooks, groups)."""
    (host_dir / "log").mkdir(parents=True, exist_ok=True)
    binds = [(host_dir / "log", "/var/log/glusterfs")]
    if storage:
        state = host_dir / "glusterd"
        shutil.copytree(GLUSTERD_STATE, state, symlinks=True)
        (host_dir / "brick").mkdir()
        binds.append((state, GLUSTERD_STATE))
    return binds


def check_installed() -> None:
    """One sentence when Debian's glusterfs-server is missing."""
    if shutil.which("glusterd") is None or not Path(GLUSTERD_STATE).is_dir():
        raise InputError("dliobench nodes up needs GlusterFS (glusterd, mount.glusterfs): "
                         "apt-get install glusterfs-server")


def _gluster(pid: int, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return in_host(pid, "gluster", "--mode=script", *args, check=check)


def _answers(pid: int) -> bool:
    """glusterd answers (``volume list`` says "No volumes present" once it does)."""
    return _gluster(pid, "volume", "list", check=False).returncode == 0


def _until(ready: Callable[[], bool], what: str, logs: Path) -> None:
    """Wait until ``ready()``, or say in one sentence that ``what`` did not happen."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready():
        if time.monotonic() > deadline:
            raise InputError(f"{what} within {READY_TIMEOUT_S:.0f} s; see the storage "
                             f"hosts' logs ({logs}/storage-*/log)")
        time.sleep(0.2)


def serve(storage: list[tuple[Host, int, Path]]) -> None:
    """Start glusterd on each storage host (host, sleeper pid, its folder), join them, and
    create and start the volume of one brick per host (distributed)."""
    logs = storage[0][2].parent
    for host, pid, _ in storage:
        in_host(pid, "glusterd", "-p", "/run/gluster/glusterd.pid")
        _until(partial(_answers, pid), f"glusterd on {host.name} did not answer", logs)
    first = storage[0][1]
    for host, _, _ in storage[1:]:
        _gluster(first, "peer", "probe", host.data_address)
    _until(lambda: _gluster(first, "pool", "list").stdout.count("Connected") == len(storage),
           "the storage hosts' glusterd did not join", logs)
    bricks = [f"{host.data_address}:{folder / 'brick'}" for host, _, folder in storage]
    _gluster(first, "volume", "create", VOLUME, "transport", "tcp", *bricks, "force")
    _gluster(first, "volume", "start", VOLUME)


def mount(host: Host, pid: int, servers: list[Host]) -> None:
    """Mount the volume at ``MOUNT`` inside the compute host ``host`` (its FUSE client runs
    there, so its traffic crosses the host's link), its volume file from the first server
    or the others."""
    Path(MOUNT).mkdir(parents=True, exist_ok=True)
    backups = ":".join(s.data_address for s in servers[1:])
    options = ["-o", f"backup-volfile-servers={backups}"] if backups else []
    in_host(pid, "mount", "-t", "glusterfs", *options,
            f"{servers[0].data_address}:/{VOLUME}", MOUNT)
