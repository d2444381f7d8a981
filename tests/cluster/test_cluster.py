"""`dliobench nodes up` / `down` for real (root, iproute2, openssh-server, glusterfs-server:
`make test` installs the last two as root): hosts that reach each other over ssh, the
GlusterFS mount on every compute host, a node's wire bytes and verdict over a capped link,
2 ranks launched over ssh from compute-0 and ended by Ctrl-C on the launcher, and `down`
after a killed `up`."""

from __future__ import annotations

import contextlib
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

from dliobench.base.errors import InputError
from dliobench.comm import cluster
from dliobench.comm.cluster_net import BRIDGE_NS, in_host, leftover_namespaces, sh
from dliobench.results.node_verdict import NodeFacts, node_verdicts

REPO = Path(__file__).resolve().parents[2]
LINK_MBPS = 10.0  # low, so the FUSE client's CPU never sets the pace on a loaded machine
FILE_BYTES = 4_000_000

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/usr/sbin/sshd").exists() or shutil.which("glusterd") is None
    or shutil.which("tc") is None,
    reason="the emulated cluster needs root, iproute2, openssh-server and glusterfs-server "
    "(`make test` installs the last two as root)")]

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


def test_a_root_folder_with_files_of_its_own_is_refused_and_kept(tmp_path: Path) -> None:
    if leftover_namespaces():
        pytest.skip("an emulated cluster is up on this machine already; the tests leave it be")
    (tmp_path / "mine").write_text("keep me")
    with pytest.raises(InputError, match="holds files of its own"):
        cluster.up(1, 1, root=str(tmp_path))
    cluster.down(str(tmp_path))
    assert (tmp_path / "mine").read_text() == "keep me"


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


HOOK = """
import sys
from dliobench.comm.hosts_launch import run_on_hosts
sys.exit(run_on_hosts(["compute-0", "compute-1"], sys.argv[2:], total=2, per_host=None,
                      ssh_user=None, data_folder="/mnt/dliobench/data",
                      manifest="dliobench-manifest/manifest.json", bytes_per_rank=1 << 20,
                      mpiexec=sys.argv[1]))
"""


def small_run(out: Path) -> list[str]:
    return ["dataset.data_folder=/mnt/dliobench/data", "dataset.num_files_train=8",
            "dataset.num_samples_per_file=1", "dataset.record_length_bytes=100000",
            "dataset.record_length_bytes_stdev=0", "dataset.num_subfolders_train=0",
            "reader.batch_size=1", "reader.read_threads=1", "reader.data_loader=native",
            "train.epochs=1000", "train.computation_time=0.05", f"output.folder={out}",
            "--no-progress"]


def ranks_left(up: dict[str, Any]) -> list[str]:
    """The dliobench ranks still running in the compute hosts."""
    left = []
    for host in ("compute-0", "compute-1"):
        for pid in sh("ip", "netns", "pids", f"dlb-{host}", check=False).split():
            with contextlib.suppress(OSError):
                if "-m\0dliobench" in Path(f"/proc/{pid}/cmdline").read_text():
                    left.append(f"{host}: {pid}")
    return left


def test_two_hosts_over_ssh_and_ctrl_c_on_the_launcher_ends_them_keeping_the_result(
        up: dict[str, Any], tmp_path: Path) -> None:
    """The hook places 2 ranks, asks both hosts over ssh (the real probe), starts them with
    Hydra's ssh launcher from compute-0; SIGINT to the launcher alone ends both."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "MPIR_CVAR_CH4_NETMOD": "ofi",
           "FI_PROVIDER": "tcp"}
    c0 = str(pid_of(up, "compute-0"))
    run = small_run(tmp_path)
    in_host(int(c0), sys.executable, "-m", "dliobench", "generate", "unet3d", *run,
            env={"PYTHONPATH": str(REPO)})
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    launcher = subprocess.Popen(["nsenter", "-t", c0, "-n", "-u", "-m", sys.executable, "-c",
                                 HOOK, mpiexec, "run", "unet3d", *run], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("*/journal/rank-*"))) < 2:
        assert launcher.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)  # some steps in
    os.kill(launcher.pid, signal.SIGINT)  # the launcher alone, as a terminal's Ctrl-C
    out, _ = launcher.communicate(timeout=120)
    result = json.loads(next(tmp_path.glob("*/result.json")).read_text())
    assert result["status"] == "partial", out
    assert result["ranks_count"] == 2 and {r["host"] for r in result["ranks"]} == \
        {"compute-0", "compute-1"}
    assert ranks_left(up) == []


def test_mlpstorage_hosts_flag_starts_the_ranks_over_ssh_from_one_host(
        up: dict[str, Any], tmp_path: Path) -> None:
    """mlpstorage's `training run --hosts h1 h2 --num-accelerators 2`, typed on compute-0 with
    no launcher around: dliobench asks both hosts over ssh, starts a rank on each with Hydra's
    ssh launcher, and the job writes one result holding both hosts (cli.hosts)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "MPIR_CVAR_CH4_NETMOD": "ofi",
           "FI_PROVIDER": "tcp"}
    c0 = pid_of(up, "compute-0")
    run = [*small_run(tmp_path)[:-3], "train.epochs=1", "train.computation_time=0.001"]
    in_host(c0, sys.executable, "-m", "dliobench", "generate", "unet3d", *run[:-2],
            "--no-progress", env={"PYTHONPATH": str(REPO)})
    params = [p for p in run if "=" in p]
    done = subprocess.run(["nsenter", "-t", str(c0), "-n", "-u", "-m", sys.executable, "-m",
                           "dliobench", "training", "run", "--model", "unet3d",
                           "--hosts", "compute-0", "compute-1", "--num-accelerators", "2",
                           "--results-dir", str(tmp_path / "results"), "--param", *params],
                          env=env, capture_output=True, text=True,
                          timeout=180, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next((tmp_path / "results").rglob("result.json")).read_text())
    assert result["status"] == "complete" and result["ranks_count"] == 2
    assert {r["host"] for r in result["ranks"]} == {"compute-0", "compute-1"}
    assert ranks_left(up) == []


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
    out = subprocess.run([sys.executable, "-m", "dliobench", "nodes", "down"], env=env,
                         capture_output=True, text=True, timeout=60)  # finds --root itself
    assert out.returncode == 0 and out.stdout.startswith("removed ")
    assert leftover_namespaces() == [] and not root.exists()
    alive = [p for p in pids if Path(f"/proc/{p}").exists()
             and Path(f"/proc/{p}/stat").read_text().split(")")[-1].split()[0] != "Z"]
    assert alive == []
