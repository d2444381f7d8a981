"""`dliobench nodes up` / `down` for real (root, iproute2, openssh-server, glusterfs-server:
`make test` installs the last two as root): hosts that reach each other over ssh, the
GlusterFS mount on every compute host, a node's wire bytes and verdict over a capped link,
and `down` after a killed `up`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dliobench import __version__
from dliobench.comm import cluster
from dliobench.comm.cluster_net import BRIDGE_NS, in_host, leftover_namespaces, sh
from dliobench.results.node_verdict import NodeFacts, node_verdicts

REPO = Path(__file__).resolve().parents[2]
LINK_MBPS = 10.0  # low, so the FUSE client's CPU never sets the pace on a loaded machine
FILE_BYTES = 4_000_000

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/usr/sbin/sshd").exists() or shutil.which("glusterd") is None
    or shutil.which("tc") is None,
    reason="the emulated cluster needs root, iproute2, openssh-server and glusterfs-server "
    "(`make test` installs the last two as root)")

READ = """
import json, os, sys, time
from dliobench.storage.devreads import DeviceMeter
path = sys.argv[1]
meter = DeviceMeter(os.path.dirname(path))
fd = os.open(path, os.O_RDONLY)
if sys.argv[2] == "evict":
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
meter.open()
n = 0
while chunk := os.read(fd, 1 << 20):
    n += len(chunk)
meter.close()
r = meter.result()
print(json.dumps({"n": n, "wire": r.wire_bytes, "counter": r.wire_counter,
                  "window": r.wire_window_s, "link": r.link_bytes_per_s,
                  "source": r.link_source}))
"""


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if leftover_namespaces():
        pytest.skip("an emulated cluster is up on this machine already; the tests leave it be")
    root = str(tmp_path_factory.mktemp("cluster") / "root")
    state = cluster.up(2, 1, link=LINK_MBPS, root=root)
    try:
        yield state
    finally:
        cluster.down(root)


def pid_of(state: dict[str, Any], name: str) -> int:
    return int(next(h["pid"] for h in state["hosts"] if h["name"] == name))


def test_hosts_reach_each_other_over_ssh_and_share_the_volume(up: dict[str, Any]) -> None:
    c0 = pid_of(up, "compute-0")
    in_host(c0, "sh", "-c", "echo mine > /dev/shm/own && echo shared > /mnt/dliobench/hello")
    out = in_host(c0, "ssh", "compute-1", "hostname; cat /mnt/dliobench/hello; "
                  "ls /dev/shm/own 2>&1 || true").stdout.split("\n")
    assert out[:2] == ["compute-1", "shared"]
    assert "No such file" in out[2]  # each host its own /dev/shm
    assert in_host(c0, "hostname").stdout.strip() == "compute-0"


def tc_sent(host: str) -> int:
    """Bytes the bridge sent to ``host`` (tc -s on its port: what crossed its link in)."""
    stats = json.loads(sh("tc", "-s", "-j", "qdisc", "show", "dev", host, netns=BRIDGE_NS))
    return int(next(q["bytes"] for q in stats if q["kind"] == "tbf"))


def read_in(up: dict[str, Any], how: str) -> tuple[dict[str, Any], int]:
    before = tc_sent("compute-0")
    done = in_host(pid_of(up, "compute-0"), sys.executable, "-c", READ,
                   "/mnt/dliobench/data.bin", how, env={"PYTHONPATH": str(REPO)})
    return json.loads(done.stdout), tc_sent("compute-0") - before


def test_a_capped_link_is_the_node_s_limit_and_a_cached_read_the_page_cache(
        up: dict[str, Any]) -> None:
    in_host(pid_of(up, "compute-1"), "dd", "if=/dev/zero", "of=/mnt/dliobench/data.bin",
            f"bs={FILE_BYTES}", "count=1")
    cold, on_tc = read_in(up, "evict")
    assert cold["n"] == FILE_BYTES and cold["link"] == LINK_MBPS * 1e6
    assert "eth0 rx bytes" in cold["counter"] and cold["source"] == "tc tbf on eth0"
    assert cold["wire"] == pytest.approx(on_tc, rel=0.02)  # what tc -s saw cross the link
    node = NodeFacts("compute-0", True, cold["n"], cold["wire"], cold["window"],
                     cold["link"], False, cold["counter"])
    assert node_verdicts([node])["compute-0"]["limit"] == "client network"
    warm, _ = read_in(up, "keep")
    node = NodeFacts("compute-0", True, warm["n"], warm["wire"], warm["window"],
                     warm["link"], False, warm["counter"])
    assert node_verdicts([node])["compute-0"]["limit"] == "page cache"


LAUNCH = """
import sys
from pathlib import Path
from dliobench.comm.hosts_launch import launch_over_ssh, place, preflight, ssh_probe
from dliobench.comm.nodes import find_mpiexec
placement = place(["compute-0", "compute-1"], 2, None)
problems = preflight(placement, ssh_probe(None, "/mnt/dliobench", "manifest"), "/mnt/dliobench",
                     None, 1 << 20)
sys.exit(launch_over_ssh(find_mpiexec(), placement, ["--version"], problems))
"""


def test_two_hosts_launched_over_ssh(up: dict[str, Any]) -> None:
    done = in_host(pid_of(up, "compute-0"), sys.executable, "-c", LAUNCH, check=False,
                   env={"PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n").count(f"dliobench {__version__}") == 2


def test_down_removes_what_a_killed_up_left(up: dict[str, Any], tmp_path: Path) -> None:
    cluster.down(up["root"])  # the module's cluster first: one cluster at a time
    assert leftover_namespaces() == []
    root = tmp_path / "root"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "dliobench", "nodes", "up", "--compute",
                             "2", "--root", str(root)], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while "dlb-compute-0" not in leftover_namespaces() and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.3)  # into its daemons
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert leftover_namespaces()
    pids = [int(p) for ns in leftover_namespaces()
            for p in sh("ip", "netns", "pids", ns, check=False).split()]
    out = subprocess.run([sys.executable, "-m", "dliobench", "nodes", "down", "--root",
                          str(root)], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("removed ")
    assert leftover_namespaces() == [] and not root.exists()
    alive = [p for p in pids if Path(f"/proc/{p}").exists()
             and Path(f"/proc/{p}/stat").read_text().split(")")[-1].split()[0] != "Z"]
    assert alive == []
