"""The emulated cluster's network: each host a network namespace on one bridge, its link
capped by ``tc`` tbf (``dliobench nodes up``; docs/running-at-scale.md, "An emulated
cluster").

Layout, as checked on this machine kind (issue 51):

- the bridge ``br0`` lives in a namespace of its own (``dlb-bridge``), which must not answer
  ARP for 127.0.0.0/8 (``arp_ignore=8``), or it replies for every host's address;
- host H is the namespace ``dlb-H``: ``eth0`` (a veth whose peer, named H, is a port of the
  bridge) holds its address in 127.100.0.0/16, ``route_localnet=1`` lets 127/8 leave ``lo``,
  and ``lo`` keeps only 127.0.0.1/32 (its usual 127.0.0.0/8 would claim every host's address);
  a second address in 198.18.0.0/15 carries GlusterFS (``DATA_SUBNET``);
- a host's hostname, ``/dev/shm``, ``/etc/hosts``, ``/etc/ssh`` and daemon folders are its
  own UTS and mount namespaces, held by a sleeper process entered with ``nsenter``: a FUSE
  mount made there stays in the host (``ip netns exec`` would unshare the mount namespace
  again and hide it);
- a link's rate caps both directions: tbf on the host's ``eth0`` (what it sends) and on the
  bridge's port (what it receives). netem is absent on this kernel, so no delay is emulated;
- every veth sends packets of one TCP segment (``gso_max_segs 1``), as a real wire carries
  them, so the bytes ``tc -s`` counts on a link are the bytes the host's interface counts.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from dliobench.base.errors import InputError

PREFIX = "dlb-"  # every namespace the cluster makes, so `down` finds what a killed `up` left
BRIDGE_NS = f"{PREFIX}bridge"
NETNS_DIR = Path("/run/netns")
SUBNET = "127.100"  # hosts' addresses: storage-s 127.100.1.(s+1), compute-k 127.100.2.(k+1)
# GlusterFS's own traffic: glusterd takes every 127/8 address for itself ("Probe on localhost
# not needed"), so storage hosts could not join one another there; each host also holds an
# address in the benchmarking range 198.18.0.0/15 (RFC 2544), which GlusterFS uses
DATA_SUBNET = "198.18"
READY = "ready"
SHM_SIZE = "50%"
TBF_LATENCY = "100ms"  # the queue a capped link holds before it drops
TBF_MIN_BURST = 256 * 1024  # bytes: above a veth's 64 KiB GSO packets
# packets of one segment, as on a real wire: tc then counts the bytes a host's /proc/net/dev
# counts (a 64 KiB GSO packet is one skb to the receiving veth, but tc adds each segment's
# headers: 4 % more at a 1448-byte MSS)
WIRE_SIZED = ("gso_max_segs", "1")


@dataclass(frozen=True)
class Host:
    """One emulated host: its name, role (``compute`` or ``storage``), address, link cap in
    bytes per second (None: uncapped) and the address its file-system traffic uses."""

    name: str
    role: str
    address: str
    link_bytes_per_s: float | None
    data_address: str = ""

    @property
    def netns(self) -> str:
        return f"{PREFIX}{self.name}"


def plan_hosts(compute: int, storage: int, link: float | None,
               storage_link: float | None) -> list[Host]:
    """The hosts of a cluster of ``compute`` + ``storage`` hosts, links in MB/s (10^6)."""
    if compute < 1 or compute > 250:
        raise InputError(f"dliobench nodes up takes 1 to 250 compute hosts, not --compute "
                         f"{compute}")
    if storage < 1 or storage > 250:
        raise InputError(f"dliobench nodes up takes 1 to 250 storage hosts, not --storage "
                         f"{storage}")
    for flag, rate in (("--link", link), ("--storage-link", storage_link)):
        if rate is not None and rate <= 0:
            raise InputError(f"{flag} is a rate in MB/s above 0, not {rate:g}")
    if os.geteuid() != 0:
        raise InputError("dliobench nodes up needs root: it makes network namespaces, "
                         "mounts and tc queues (run it as root, or in a container with "
                         "--privileged)")

    def cap(rate: float | None) -> float | None:
        return rate * 1e6 if rate is not None else None

    return ([Host(f"storage-{s}", "storage", f"{SUBNET}.1.{s + 1}", cap(storage_link),
                  f"{DATA_SUBNET}.1.{s + 1}") for s in range(storage)] +
            [Host(f"compute-{k}", "compute", f"{SUBNET}.2.{k + 1}", cap(link),
                  f"{DATA_SUBNET}.2.{k + 1}") for k in range(compute)])


def sh(*cmd: str, netns: str | None = None, check: bool = True) -> str:
    """Run a command (in ``netns`` when given); its stdout, or one sentence on failure."""
    full = ["ip", "netns", "exec", netns, *cmd] if netns else list(cmd)
    try:
        done = subprocess.run(full, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"dliobench nodes could not run {shlex.join(full)} ({exc}); it "
                         "needs iproute2 and root") from None
    if check and done.returncode != 0:
        why = " ".join(done.stderr.split()) or f"exit status {done.returncode}"
        raise InputError(f"{shlex.join(full)} failed ({why}); dliobench nodes needs root "
                         "and iproute2 (ip, tc)")
    return done.stdout


def leftover_namespaces() -> list[str]:
    """The cluster's network namespaces that exist now (a live cluster or a killed `up`)."""
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(PREFIX))
    except OSError:
        return []


def tbf(dev: str, rate: float, netns: str) -> None:
    """Cap ``dev``'s egress at ``rate`` bytes/s (tc tbf; tc's ``bit`` rate is 10^0 bits)."""
    burst = max(TBF_MIN_BURST, int(rate / 100))
    sh("tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{int(rate * 8)}bit",
       "burst", str(burst), "latency", TBF_LATENCY, netns=netns)


def make_bridge() -> None:
    """The bridge's namespace and ``br0``, silent on ARP for 127/8."""
    sh("ip", "netns", "add", BRIDGE_NS)
    sh("sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=8",
       "net.ipv4.conf.default.arp_ignore=8", netns=BRIDGE_NS)
    sh("ip", "link", "add", "br0", "type", "bridge", netns=BRIDGE_NS)
    sh("ip", "link", "set", "br0", "up", netns=BRIDGE_NS)


def make_host_network(host: Host) -> None:
    """``host``'s namespace, its veth to the bridge, its address and its link cap."""
    ns = host.netns
    sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", host.name, "netns", BRIDGE_NS, "type", "veth", "peer", "name",
       "eth0", "netns", ns)
    sh("ip", "link", "set", host.name, "master", "br0", netns=BRIDGE_NS)
    sh("ip", "link", "set", host.name, *WIRE_SIZED, "up", netns=BRIDGE_NS)
    sh("sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1",
       "net.ipv4.conf.eth0.route_localnet=1", netns=ns)
    sh("ip", "link", "set", "lo", "up", netns=ns)
    sh("ip", "addr", "del", "127.0.0.1/8", "dev", "lo", netns=ns, check=False)
    sh("ip", "addr", "add", "127.0.0.1/32", "dev", "lo", netns=ns)
    sh("ip", "addr", "add", f"{host.address}/16", "dev", "eth0", netns=ns)
    sh("ip", "addr", "add", f"{host.data_address}/16", "dev", "eth0", netns=ns)
    sh("ip", "link", "set", "eth0", *WIRE_SIZED, "up", netns=ns)
    if host.link_bytes_per_s is not None:
        tbf("eth0", host.link_bytes_per_s, ns)
        tbf(host.name, host.link_bytes_per_s, BRIDGE_NS)


def start_sleeper(host: Host, binds: list[tuple[Path, str]], log: Path) -> int:
    """A process holding ``host``'s UTS and mount namespaces (in its network namespace):
    hostname, its own /dev/shm, and ``binds`` (folder or file, target) mounted over the
    targets; its pid once it is ready."""
    steps = [f"hostname {shlex.quote(host.name)}",
             f"mount -t tmpfs -o size={SHM_SIZE},mode=1777 tmpfs /dev/shm"]
    steps += [f"{{ [ -e {shlex.quote(target)} ] || mkdir -p {shlex.quote(target)}; }} && "
              f"mount --bind {shlex.quote(str(source))} {shlex.quote(target)}"
              for source, target in binds]
    steps += [f"echo {READY}", "exec sleep infinity </dev/null >/dev/null 2>&1"]
    cmd = ["nsenter", f"--net={NETNS_DIR / host.netns}", "unshare", "--uts", "--mount",
           "--propagation", "private", "sh", "-c", " && ".join(steps)]
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                                start_new_session=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != READY:
        proc.wait()
        why = " ".join(log.read_text().split()) or f"exit status {proc.returncode}"
        raise InputError(f"cannot set up the emulated host {host.name} ({why}): dliobench "
                         "nodes needs root and util-linux's nsenter and unshare")
    proc.stdout.close()
    return proc.pid


def in_host(pid: int, *cmd: str, check: bool = True,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` inside the host whose sleeper is ``pid`` (its network, UTS and mount
    namespaces), to the end; one sentence on failure when ``check``."""
    full = ["nsenter", "-t", str(pid), "-n", "-u", "-m", "--", *cmd]
    done = subprocess.run(full, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    if check and done.returncode != 0:
        why = " ".join((done.stderr or done.stdout).split()) or f"status {done.returncode}"
        raise InputError(f"{shlex.join(cmd)} failed in an emulated host ({why})")
    return done


def namespace_pids(netns: str) -> list[int]:
    """Every process in ``netns`` (sleepers, daemons, FUSE clients, stray ranks)."""
    return [int(p) for p in sh("ip", "netns", "pids", netns, check=False).split()]


def remove_namespaces(names: list[str], grace_s: float = 2.0) -> None:
    """End every process in the namespaces ``names`` (SIGTERM, then SIGKILL after
    ``grace_s``) and delete them: their veths, the hosts' mounts and /dev/shm go with them."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [p for ns in names for p in namespace_pids(ns)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
            time.sleep(0.05)
        if not pids:
            break
    for ns in names:
        sh("ip", "netns", "del", ns, check=False)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
