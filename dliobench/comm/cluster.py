"""``dliobench nodes up`` / ``down``: an emulated cluster of K compute and S storage hosts
that lives until ``down`` (docs/running-at-scale.md, "An emulated cluster").

Each host is a network namespace with its own address, link cap, hostname, ``/dev/shm`` and
sshd (``cluster_net``, ``cluster_ssh``); the storage hosts serve a GlusterFS volume that
every compute host mounts at ``gluster.MOUNT`` (``gluster``). Everything lives under one
folder (``DEFAULT_ROOT``: keys, configurations, bricks, logs, ``cluster.json``) and in
namespaces named ``dlb-*``, so ``down`` removes what a killed ``up`` left as well as a whole
cluster: it ends every process in those namespaces (sleepers, sshd, glusterd and bricks,
FUSE clients, ranks), which takes the hosts' mounts with them.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dliobench.base.errors import InputError
from dliobench.comm import cluster_net as net
from dliobench.comm import cluster_ssh, gluster

DEFAULT_ROOT = "/var/tmp/dliobench-cluster"
STATE = "cluster.json"
MARKER = ".dliobench-cluster"  # in a folder `up` made: the only kind `down` removes
POINTER = Path("/run/dliobench-cluster-root")  # the live cluster's folder, for `down`


def _host_binds(root: Path, host: net.Host) -> list[tuple[Path, str]]:
    own = root / "hosts" / host.name
    ssh = root / "etc-ssh"
    for sub in ("run/sshd", "run/gluster"):  # the host's own /run: sockets, pid files
        (own / sub).mkdir(parents=True, exist_ok=True)
    return [(own / "run", "/run"), (ssh, cluster_ssh.SSH_DIR), (ssh / "hosts", "/etc/hosts"),
            *gluster.gluster_binds(own, host.role == "storage")]


def up(compute: int, storage: int, link: float | None = None,
       storage_link: float | None = None, root: str = DEFAULT_ROOT) -> dict[str, Any]:
    """Bring the cluster up; its description (also written to ``ROOT/cluster.json``). On
    failure, what was made is removed and the error is one sentence."""
    hosts = net.plan_hosts(compute, storage, link, storage_link)
    folder = Path(root)
    left = net.leftover_namespaces()
    live = _pointed() or str(folder)
    if left or (Path(live) / STATE).exists():
        raise InputError(f"an emulated cluster is up already ({len(left)} namespaces, "
                         f"{live}): run dliobench nodes down first")
    gluster.check_installed()
    if folder.exists() and any(folder.iterdir()) and not (folder / MARKER).exists():
        raise InputError(f"--root {folder} holds files of its own; give an empty or new "
                         "folder for the cluster (its keys, bricks and logs)")
    try:
        shutil.rmtree(folder, ignore_errors=True)  # a cluster's folder that down left
        folder.mkdir(parents=True)
        (folder / MARKER).touch()  # first: a folder killed before it is still empty
        (folder / "hosts").mkdir()
        POINTER.write_text(f"{folder.resolve()}\n")
        cluster_ssh.write_ssh_folder(folder / "etc-ssh", hosts)
        net.make_bridge()
        pids: dict[str, int] = {}
        for host in hosts:
            net.make_host_network(host)
            pids[host.name] = net.start_sleeper(host, _host_binds(folder, host),
                                                folder / "hosts" / host.name / "sleeper.log")
            cluster_ssh.start_sshd(host, pids[host.name])
        servers = [h for h in hosts if h.role == "storage"]
        gluster.serve([(h, pids[h.name], folder / "hosts" / h.name) for h in servers])
        for host in hosts:
            if host.role == "compute":
                gluster.mount(host, pids[host.name], servers)
    except BaseException:
        down(root)
        raise
    state = {"root": str(folder), "mount": gluster.MOUNT, "volume": gluster.VOLUME,
             "ssh_config": str(folder / "etc-ssh" / "outside_config"),
             "hosts": [{**asdict(h), "netns": h.netns, "pid": pids[h.name]} for h in hosts]}
    (folder / STATE).write_text(json.dumps(state, indent=1) + "\n")
    return state


def down(root: str = DEFAULT_ROOT) -> list[str]:
    """Remove the cluster, or what a killed ``up`` left: every ``dlb-*`` namespace with
    its processes and mounts, and the cluster's folder. What was removed, in words."""
    names = net.leftover_namespaces()
    net.remove_namespaces(names)
    done = [f"{len(names)} namespaces"] if names else []
    for folder in sorted(f for f in {root, _pointed()} if f and (Path(f) / MARKER).exists()):
        shutil.rmtree(folder, ignore_errors=True)
        done.append(folder)
    POINTER.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # the mount point up made, if nothing else is there
        Path(gluster.MOUNT).rmdir()
    return done


def _pointed() -> str:
    """The folder the last ``up`` named ("" if none)."""
    try:
        return POINTER.read_text().strip()
    except OSError:
        return ""


def load(root: str = DEFAULT_ROOT) -> dict[str, Any]:
    """The live cluster's description, or one sentence saying there is none."""
    try:
        state: dict[str, Any] = json.loads((Path(root) / STATE).read_text())
    except (OSError, ValueError):
        raise InputError(f"no emulated cluster is up ({Path(root) / STATE} is missing): "
                         "run dliobench nodes up --compute K --storage S") from None
    return state


def describe(state: dict[str, Any]) -> str:
    """The hosts, their links and the mount, as ``nodes up`` prints them."""
    def rate(bps: float | None) -> str:
        return f"{bps / 1e6:g} MB/s" if bps is not None else "uncapped"

    lines = [f"{h['name']:<12} {h['role']:<8} {h['address']:<15} link {rate(h['link_bytes_per_s'])}"
             for h in state["hosts"]]
    return "\n".join([
        *lines,
        f"volume {state['volume']} (GlusterFS) mounted at {state['mount']} on every compute "
        "host; ssh between hosts works as root with the cluster's key",
        f"from outside: nsenter --net=/run/netns/{net.PREFIX}compute-0 ssh -F "
        f"{state['ssh_config']} compute-0 (the hosts' network is reached from a host's "
        "namespace only); dliobench nodes down removes it all"])
