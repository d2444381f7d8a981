"""The emulated cluster's ssh: keys made per cluster and one Debian ``sshd`` per host.

Every host mounts the cluster's ``etc-ssh`` folder over ``/etc/ssh`` and its ``hosts`` file
over ``/etc/hosts``, so inside any host ``ssh compute-1`` works as on a real cluster with
passwordless root keys: the client's system configuration (``/etc/ssh/ssh_config``) names
the cluster's key and known hosts, the server's takes the cluster's key. From outside the
hosts (whose network reaches none of them), ``nsenter --net=/run/netns/dlb-compute-0 ssh -F
<root>/etc-ssh/outside_config compute-0`` does the same. Nothing in ``~/.ssh``
or the machine's ``/etc`` changes.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from dliobench.base.errors import InputError
from dliobench.comm.cluster_net import Host, in_host

SSHD = "/usr/sbin/sshd"
SSH_DIR = "/etc/ssh"  # where a host sees the cluster's etc-ssh folder

SSHD_CONFIG = f"""# dliobench nodes: one sshd per emulated host
HostKey {SSH_DIR}/host_key
AuthorizedKeysFile {SSH_DIR}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AcceptEnv *
PidFile none
"""


def client_config(folder: Path, inside: bool) -> str:
    """``ssh_config``: the cluster's key and known hosts (paths as seen inside a host, or
    from outside)."""
    where = SSH_DIR if inside else str(folder)
    return (f"Host *\n  IdentityFile {where}/id_ed25519\n  UserKnownHostsFile "
            f"{where}/known_hosts\n  StrictHostKeyChecking yes\n  BatchMode yes\n"
            "  LogLevel ERROR\n")


def keygen(path: Path) -> str:
    """An ed25519 key pair at ``path``; its public line."""
    try:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dliobench-nodes",
                        "-f", str(path)], check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"ssh-keygen failed ({exc}); dliobench nodes up needs "
                         "openssh-client") from None
    return path.with_suffix(".pub").read_text().strip()


def write_ssh_folder(folder: Path, hosts: list[Host]) -> None:
    """The cluster's ``etc-ssh`` folder: host key, root key, authorized keys, known hosts,
    the server's and the client's configuration, and ``hosts`` for ``/etc/hosts``."""
    if not Path(SSHD).exists() or shutil.which("ssh-keygen") is None:
        raise InputError(f"dliobench nodes up needs Debian's openssh-server ({SSHD}) and "
                         "ssh-keygen: apt-get install openssh-server")
    folder.mkdir(parents=True)
    host_pub = keygen(folder / "host_key")
    (folder / "authorized_keys").write_text(keygen(folder / "id_ed25519") + "\n")
    (folder / "known_hosts").write_text("".join(
        f"{h.name},{h.address} {host_pub}\n" for h in hosts))
    (folder / "sshd_config").write_text(SSHD_CONFIG)
    (folder / "ssh_config").write_text(client_config(folder, inside=True))
    (folder / "outside_config").write_text(client_config(folder, inside=False) + "".join(
        f"Host {h.name}\n  HostName {h.address}\n" for h in hosts))
    (folder / "hosts").write_text("127.0.0.1 localhost\n" + "".join(
        f"{h.address} {h.name}\n" for h in hosts))


def start_sshd(host: Host, pid: int) -> None:
    """``host``'s sshd on its address, port 22 (it detaches; ``down`` ends it)."""
    in_host(pid, SSHD, "-f", f"{SSH_DIR}/sshd_config", "-o", f"ListenAddress={host.address}")
