"""Issue 51's acceptance on the emulated cluster: 4 compute hosts x 1 rank and 1 storage host
serving GlusterFS, launched from compute-0 over ssh (comm/hosts_launch.py), per node against
the analytic figures and `tc -s`.

Usage (root; openssh-server, glusterfs-server; fio for its row):
    python -m benchmarks.cluster.links [--compute 4] [--files 64] [--sample-mb 8]
        [--step-s 0.1] [--epochs 2] [--cases a b c] [--launch-reps 5]

Cases (each on a fresh `dliobench nodes up`):
  (a) compute links capped at --link (40 MB/s), the server uncapped, caches dropped every
      epoch: every rank needs a sample (batch 1) per step-s, 80 MB/s at the defaults, so AU
      analytic = min(1, link x step-s / bytes per step) = 0.5; every node "client network".
      The link's rate counts frames: at MTU 1500 a full frame carries 0.956 of payload (its
      IP, TCP and Ethernet headers), so the payload's analytic AU is 0.478, printed beside;
  (b) compute links at --fast-link (400 MB/s), the storage link at --storage-link (80 MB/s)
      shared by the K nodes: AU analytic = min(1, storage-link / K x step-s / bytes per
      step) = 0.25 at the defaults; every node "storage";
  (c) (a) without eviction (storage.drop_cache=false), the second epoch from the page cache:
      "page cache" where under 5 % crossed the wire, else "client network".
In all three, the counter a node's ranks read (eth0's rx bytes in its namespace), read around
the whole run, against the bytes `tc -s` saw the bridge send to that node meanwhile (within
2 %); the result's per-node wire bytes are that counter over the counted windows only.
Then: dliobench's read rate through the mount (compute 0, one host) against fio on the same
mount and link, and the time `--hosts` launching of 4 hosts adds over a local start
(`dliobench --version` both ways, --launch-reps times, medians). Writes the harness's record
(benchmarks/records/) and prints a markdown table. Do not take figures on a loaded machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.records import Recorder

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
MOUNT = "/mnt/dliobench"
LAUNCH = """
import sys
from dliobench.comm.hosts_launch import launch_over_ssh, place, preflight, ssh_probe
hosts = sys.argv[2].split(",")
placement = place(hosts, len(hosts), None)
problems = preflight(placement, ssh_probe(None, sys.argv[3], "manifest"), sys.argv[3], None, 0)
sys.exit(launch_over_ssh(sys.argv[1], placement, sys.argv[4:], problems))
"""
ENV = {"PYTHONPATH": str(REPO), "MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--compute", type=int, default=4)
    p.add_argument("--link", type=float, default=40.0, help="case a/c compute links, MB/s")
    p.add_argument("--fast-link", type=float, default=400.0, help="case b compute links")
    p.add_argument("--storage-link", type=float, default=80.0, help="case b storage link")
    p.add_argument("--files", type=int, default=64)
    p.add_argument("--sample-mb", type=float, default=8.0)
    p.add_argument("--step-s", type=float, default=0.1, help="compute seconds per step")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--cases", nargs="+", default=["a", "b", "c"], choices=["a", "b", "c"])
    p.add_argument("--launch-reps", type=int, default=5)
    return p.parse_args(argv)


def dliobench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "dliobench", *args], cwd=REPO, text=True,
                          capture_output=True, check=True, env=_env())


def _env() -> dict[str, str]:
    return {**os.environ, **ENV}


def in_host(state: dict[str, Any], host: str, *cmd: str) -> subprocess.CompletedProcess[str]:
    pid = next(h["pid"] for h in state["hosts"] if h["name"] == host)
    return subprocess.run(["nsenter", "-t", str(pid), "-n", "-u", "-m", "--", *cmd], text=True,
                          capture_output=True, env=_env(), check=False)


def tc_sent(host: str) -> int:
    out = subprocess.run(["ip", "netns", "exec", "dlb-bridge", "tc", "-s", "-j", "qdisc",
                          "show", "dev", host], capture_output=True, text=True).stdout
    return sum(int(q.get("bytes", 0)) for q in json.loads(out or "[]") if q.get("root"))


def rx_bytes(state: dict[str, Any], host: str) -> int:
    """eth0's received bytes inside ``host`` (/proc/net/dev of its namespace)."""
    text = in_host(state, host, "cat", "/proc/net/dev").stdout
    line = next(x for x in text.splitlines() if x.strip().startswith("eth0:"))
    return int(line.split(":", 1)[1].split()[0])


def payload_share(state: dict[str, Any], host: str) -> float:
    """The share of a full frame on ``host``'s eth0 that is TCP payload: MTU less the IP and
    TCP headers with timestamps (52 bytes), over MTU plus the Ethernet header (14), which a
    tbf cap and the interface's counter both count (0.956 at 1500)."""
    out = in_host(state, host, "ip", "-j", "link", "show", "eth0").stdout
    mtu = int(json.loads(out or "[{}]")[0].get("mtu", 1500))
    return (mtu - 52) / (mtu + 14)


def overrides(a: argparse.Namespace, evict: bool) -> list[str]:
    return [f"dataset.data_folder={MOUNT}/data", f"dataset.num_files_train={a.files}",
            "dataset.num_samples_per_file=1",
            f"dataset.record_length_bytes={int(a.sample_mb * 1e6)}",
            "dataset.record_length_bytes_stdev=0", "dataset.record_length_bytes_resize=0",
            "dataset.num_subfolders_train=0", "reader.batch_size=1", "reader.read_threads=1",
            "reader.prefetch_size=1", "reader.data_loader=native", f"train.epochs={a.epochs}",
            f"train.computation_time={a.step_s}", f"storage.drop_cache={str(evict).lower()}",
            "output.folder=/tmp/cluster-bench-reports"]


def up(compute: int, link: float | None, storage_link: float | None) -> dict[str, Any]:
    subprocess.run([PY, "-m", "dliobench", "nodes", "down"], cwd=REPO, env=_env(),
                   capture_output=True)
    args = ["nodes", "up", "--compute", str(compute)]
    args += ["--link", str(link)] if link else []
    args += ["--storage-link", str(storage_link)] if storage_link else []
    dliobench(*args)
    state: dict[str, Any] = json.loads(Path("/var/tmp/dliobench-cluster/cluster.json").read_text())
    return state


def case(a: argparse.Namespace, name: str) -> dict[str, Any]:
    """One case: its cluster, dataset, run over ssh, and per-node figures."""
    link = a.fast_link if name == "b" else a.link
    state = up(a.compute, link, a.storage_link if name == "b" else None)
    ov = overrides(a, evict=name != "c")
    hosts = [f"compute-{k}" for k in range(a.compute)]
    gen = in_host(state, "compute-0", PY, "-m", "dliobench", "generate", "unet3d", *ov,
                  "--no-progress")
    if gen.returncode:
        raise SystemExit(f"generate failed: {gen.stderr[-2000:]}")
    before = {h: tc_sent(h) for h in hosts}
    rx_before = {h: rx_bytes(state, h) for h in hosts}
    started = time.perf_counter()
    done = in_host(state, "compute-0", PY, "-c", LAUNCH, str(Path(PY).parent / "mpiexec"),
                   ",".join(hosts), f"{MOUNT}/data", "run", "unet3d", *ov, "--no-progress")
    wall = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"case {name}: the run failed: {done.stderr[-2000:]}")
    sent = {h: tc_sent(h) - before[h] for h in hosts}
    rx = {h: rx_bytes(state, h) - rx_before[h] for h in hosts}
    run_dir = max(p for p in Path("/tmp/cluster-bench-reports").iterdir()
                  if (p / "result.json").exists())
    result = json.loads((run_dir / "result.json").read_text())
    bytes_per_step = a.sample_mb * 1e6
    per_node_link = link * 1e6 if name != "b" else a.storage_link * 1e6 / a.compute
    au_analytic = min(1.0, per_node_link * a.step_s / bytes_per_step)
    payload = payload_share(state, "compute-0")
    au_payload = min(1.0, per_node_link * payload * a.step_s / bytes_per_step)
    nodes = [{"host": n["host"], "au": n["au"], "wire_bytes": n.get("wire_bytes"),
              "tc_bytes": sent[n["host"]], "rx_bytes": rx[n["host"]],
              "link_use": n.get("link_use"), "link_use_waiting": n.get("link_use_waiting"),
              "wire_share": n.get("wire_share"),
              "limit": (n.get("verdict") or {}).get("limit"),
              "counter": n.get("wire_counter")} for n in result["nodes"]]
    return {"case": name, "link_mb_s": link, "au": result["metrics"]["au"],
            "au_analytic": au_analytic, "payload_share": payload,
            "au_analytic_payload": au_payload, "wall_s": wall, "nodes": nodes,
            "au_spread": max(n["au"] for n in nodes) - min(n["au"] for n in nodes),
            "run_dir": str(run_dir)}


def fio_against_us(a: argparse.Namespace) -> dict[str, Any]:
    """dliobench's read rate through the mount (1 host, compute 0) against fio on the same
    mount and link (compute-0, the case-a link, caches dropped before each)."""
    state = up(1, a.link, None)
    ov = overrides(a, evict=True)
    in_host(state, "compute-0", PY, "-m", "dliobench", "generate", "unet3d", *ov, "--no-progress")
    done = in_host(state, "compute-0", PY, "-m", "dliobench", "run", "unet3d", *ov,
                   "train.computation_time=0", "train.epochs=1", "--no-progress")
    run_dir = max(p for p in Path("/tmp/cluster-bench-reports").iterdir()
                  if (p / "result.json").exists())
    ours = json.loads((run_dir / "result.json").read_text())["metrics"]["bytes_per_s"] \
        if done.returncode == 0 else None
    if shutil.which("fio") is None:
        return {"dliobench_bytes_per_s": ours, "fio_bytes_per_s": None,
                "note": "fio is not installed (apt-get install fio)"}
    Path("/proc/sys/vm/drop_caches").write_text("3")
    # the volume is mounted in the hosts' mount namespaces: list it from inside compute-0
    listed = in_host(state, "compute-0", "find", f"{MOUNT}/data/train", "-type", "f",
                     "-name", "*.npz")
    files = sorted(listed.stdout.split())
    if not files:
        return {"dliobench_bytes_per_s": ours, "fio_bytes_per_s": None,
                "note": f"no files to read in {MOUNT}/data/train: {listed.stderr.strip()}"}
    out = in_host(state, "compute-0", "fio", "--name=seq", "--rw=read", "--bs=1M",
                  "--ioengine=psync", "--output-format=json", f"--filename={':'.join(files)}")
    fio = json.loads(out.stdout)["jobs"][0]["read"]["bw_bytes"] if out.returncode == 0 else None
    return {"dliobench_bytes_per_s": ours, "fio_bytes_per_s": fio,
            "ratio": ours / fio if ours and fio else None}


def launch_overhead(a: argparse.Namespace) -> dict[str, Any]:
    """`dliobench --version` on 4 hosts over ssh against one local start, medians."""
    state = up(a.compute, None, None)
    hosts = ",".join(f"compute-{k}" for k in range(a.compute))
    local, remote = [], []
    for _ in range(a.launch_reps):
        t = time.perf_counter()
        in_host(state, "compute-0", PY, "-m", "dliobench", "--version")
        local.append(time.perf_counter() - t)
        t = time.perf_counter()
        in_host(state, "compute-0", PY, "-c", LAUNCH, str(Path(PY).parent / "mpiexec"), hosts,
                MOUNT, "--version")
        remote.append(time.perf_counter() - t)
    return {"local_s": statistics.median(local), "hosts_s": statistics.median(remote),
            "added_s": statistics.median(remote) - statistics.median(local)}


def _f(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def table(cases: list[dict[str, Any]]) -> list[str]:
    lines = ["| case | node | AU | AU analytic (payload) | wire bytes (windows) | rx bytes (run) "
             "| tc -s bytes (run) | rx/tc | link use (waiting) | wire share | verdict |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for c in cases:
        for n in c["nodes"]:
            ratio = n["rx_bytes"] / n["tc_bytes"] if n["tc_bytes"] else None
            lines.append(
                f"| {c['case']} | {n['host']} | {n['au']:.3f} | {c['au_analytic']:.3f} "
                f"({c['au_analytic_payload']:.3f}) | "
                f"{n['wire_bytes'] or 0:,} | {n['rx_bytes']:,} | {n['tc_bytes']:,} | "
                f"{_f(ratio, '.3f')} | {_f(n['link_use'], '.2f')} "
                f"({_f(n.get('link_use_waiting'), '.2f')}) | "
                f"{_f(n['wire_share'], '.3f')} | {n['limit']} |")
        lines.append(f"| {c['case']} | all | {c['au']:.3f} | {c['au_analytic']:.3f} "
                     f"({c['au_analytic_payload']:.3f}) | | | | | | | "
                     f"spread {c['au_spread']:.3f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    recorder = Recorder(__file__)
    cases: list[dict[str, Any]] = []
    try:
        for name in a.cases:  # each case's rows as it ends: a later failure keeps them
            cases.append(case(a, name))
            print("\n".join(table(cases[-1:])), flush=True)
        fio = fio_against_us(a)
        launch = launch_overhead(a)
    finally:
        subprocess.run([PY, "-m", "dliobench", "nodes", "down"], cwd=REPO, env=_env(),
                       capture_output=True)
    print("\n".join(table(cases)))
    print(f"\nreads through the mount: {json.dumps(fio)}")
    print(f"launching {a.compute} hosts over ssh: {json.dumps(launch)}")
    path = recorder.write({"cases": cases, "fio": fio, "launch": launch}, options=vars(a))
    print(f"record: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
