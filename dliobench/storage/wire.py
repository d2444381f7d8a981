"""Bytes that crossed the wire to this node, for reads of a network file system, and the
rate of the link they crossed (docs/running-at-scale.md, "What crossed the wire").

The counter is chosen per data folder, the file system's own where it has one:

- NFS: ``serverreadbytes`` of the mount in ``/proc/self/mountstats`` (the ``bytes:`` line's
  fifth figure, "client read N bytes via NFS READ" in nfs-utils' mountstats,
  jtlayton/nfs-utils tools/mountstats/mountstats.py@17a1fcb26b4f919442a6caa71bb6ca6661af0ce6:
  what the server sent, never page-cache hits);
- Lustre: ``read_bytes`` of ``llite.*.stats`` (the sum, seventh field), summed over the
  client's llite instances. It counts what applications asked of the client's llite layer
  ("count is based on argument to read()", TACC/tacc_stats
  llite.c@b4626bedd138963c53f902ecff7d0fc995024390), page-cache hits included, so on Lustre
  the figure overstates the wire;
- anything else on the network (GlusterFS's FUSE client, CephFS, Weka...): the bytes received
  on the interfaces that route to the mount's server, from ``/proc/net/dev`` (per network
  namespace; sysfs shows the root namespace's), or InfiniBand ports' ``port_rcv_data`` x 4
  (the counter is in 4-byte words) where the route leaves through an IPoIB interface.

A local file system has none: ``counter_for`` says so and the figure is "unknown". The sample
files these parsers are tested on are cited in tests/data/wire/README.md.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dliobench.storage.fsinfo import mount_of

NFS_TYPES = frozenset({"nfs", "nfs4"})
LLITE_DIRS = ("/proc/fs/lustre/llite", "/sys/kernel/debug/lustre/llite")
LOCAL_SOURCES = ("/dev/", "none", "tmpfs", "overlay", "proc", "sysfs")
IB_WORD = 4  # port_rcv_data counts 4-byte words


def parse_mountstats(text: str) -> dict[str, int]:
    """``serverreadbytes`` of every NFS mount in a ``/proc/<pid>/mountstats`` text, by
    mount point."""
    out: dict[str, int] = {}
    mount = None
    for line in text.splitlines():
        words = line.split()
        if line.startswith("device "):
            nfs = "fstype" in words and words[words.index("fstype") + 1] in NFS_TYPES
            mount = words[words.index("on") + 1] if nfs and "on" in words else None
        elif mount is not None and words[:1] == ["bytes:"] and len(words) >= 6:
            out[mount] = int(words[5])
    return out


def parse_llite_stats(text: str) -> int:
    """The ``read_bytes`` sum of one ``llite.*.stats`` text (0 when nothing was read: the
    line is absent then)."""
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["read_bytes"] and len(words) >= 7:
            return int(words[6])
    return 0


def parse_net_dev(text: str) -> dict[str, int]:
    """Bytes received per interface in a ``/proc/net/dev`` text."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, colon, rest = line.partition(":")
        figures = rest.split()
        if colon and figures and figures[0].isdigit():
            out[name.strip()] = int(figures[0])
    return out


def route_device(address: str) -> str | None:
    """The interface this namespace routes ``address`` through (``ip route get``)."""
    try:
        out = subprocess.run(["ip", "-j", "route", "get", address], capture_output=True,
                             text=True, timeout=10).stdout
        routes = json.loads(out or "[]")
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    dev = routes[0].get("dev") if routes else None
    return dev if isinstance(dev, str) else None


def server_of(source: str) -> str | None:
    """The server's address in a mount source (``host:/export``, ``host:/volume``,
    ``ip@tcp:/fs``, SMB's ``//host/share``), or None for a local one."""
    if source.startswith("//"):
        host = source[2:].split("/", 1)[0]
    elif source.startswith(LOCAL_SOURCES) or ":" not in source:
        return None
    else:
        host = source.split(":", 1)[0].split("@", 1)[0].split(",", 1)[0]
    try:
        return socket.gethostbyname(host)
    except OSError:
        return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def ib_rx_bytes(dev: str) -> int | None:
    """Bytes received by the InfiniBand ports under an IPoIB interface ``dev`` (None: not
    one)."""
    ports = sorted(Path(f"/sys/class/net/{dev}/device/infiniband").glob("*/ports/*"))
    values = [_read(str(p / "counters" / "port_rcv_data")).strip() for p in ports]
    known = [int(v) * IB_WORD for v in values if v.isdigit()]
    return sum(known) if known else None


@dataclass(frozen=True)
class WireCounter:
    """How this node counts its wire bytes: the counter's name (said in the result), the
    interface it is on (None for a file system's own counter) and how to read it now."""

    name: str
    interface: str | None
    read: Callable[[], int]


def counter_for(folder: str) -> WireCounter | None:
    """The wire counter for reads of ``folder``, or None where it is not on a network."""
    mount = mount_of(folder)
    fs_type, point = mount["fs_type"], mount["mount"]
    if fs_type in NFS_TYPES:
        return WireCounter(f"NFS /proc/self/mountstats serverreadbytes ({point})", None,
                           lambda: parse_mountstats(_read("/proc/self/mountstats")).get(point, 0))
    if fs_type == "lustre":
        files = [p for d in LLITE_DIRS for p in sorted(Path(d).glob("*/stats"))]
        return WireCounter("Lustre llite.*.stats read_bytes (client reads, cache hits "
                           "included)", None,
                           lambda: sum(parse_llite_stats(_read(str(p))) for p in files))
    server = server_of(mount["device"])
    dev = route_device(server) if server else None
    if dev is None or dev == "lo":
        return None
    if ib_rx_bytes(dev) is not None:
        return WireCounter(f"InfiniBand port_rcv_data x 4 under {dev} (to {server})", dev,
                           lambda: ib_rx_bytes(dev) or 0)
    return WireCounter(f"{dev} rx bytes in /proc/net/dev (the route to {server})", dev,
                       lambda: parse_net_dev(_read("/proc/net/dev")).get(dev, 0))


def tbf_rate(dev: str) -> float | None:
    """The rate, bytes/s, of a tbf qdisc on ``dev`` in this namespace (``tc -j``: bytes/s)."""
    try:
        out = subprocess.run(["tc", "-j", "qdisc", "show", "dev", dev], capture_output=True,
                             text=True, timeout=10).stdout
        qdiscs = json.loads(out or "[]")
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    for q in qdiscs:
        rate = q.get("options", {}).get("rate") if q.get("kind") == "tbf" else None
        if isinstance(rate, int | float):
            return float(rate)
    return None


def link_rate(dev: str) -> tuple[float | None, str]:
    """``dev``'s link rate in bytes/s and where it came from: a tbf cap (an emulated or
    shaped link), else the InfiniBand port's rate, else ``/sys/class/net/DEV/speed``."""
    rate = tbf_rate(dev)
    if rate is not None:
        return rate, f"tc tbf on {dev}"
    for port in sorted(Path(f"/sys/class/net/{dev}/device/infiniband").glob("*/ports/*")):
        words = _read(str(port / "rate")).split()  # "100 Gb/sec (4X EDR)"
        if words and words[0].replace(".", "", 1).isdigit():
            return float(words[0]) * 1e9 / 8, f"InfiniBand rate of {dev}"
    speed = _read(f"/sys/class/net/{dev}/speed").strip()
    if speed.lstrip("-").isdigit() and int(speed) > 0:
        return int(speed) * 1e6 / 8, f"/sys/class/net/{dev}/speed"
    return None, f"no rate known for {dev}"
