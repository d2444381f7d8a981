"""Emulated nodes on the capped tier: 4 nodes x 2 ranks (`dliobench nodes`) read a scaled-down
UNet3D from one read-capped file system (the "parallel file system"), and each node's AU and
bytes are set against the analytic figures.

Usage (root: namespaces, loop devices and the cgroup-v1 blkio controller, see slowdisk.sh):
    python -m benchmarks.scale.nodes [--nodes 4] [--ranks-per-node 2] [--cap-mbps 40]
        [--files 96] [--sample-mb 1] [--batch 1] [--compute 0.1] [--epochs 2]
        [--tier /tmp/nodes-tier]

Analytic: every rank asks batch x sample bytes per `compute` seconds; the cap C is shared by
all ranks of all nodes (one blkio group), so when the demand D = ranks x batch x sample /
compute exceeds C, AU is about C / D on every node and each node reads C / nodes bytes/s.
Each node reads exactly its ranks' shards: epochs x dataset bytes / nodes (every sample
once). The cache is dropped every epoch (storage.drop_cache), so the reads hit the device.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SLOWDISK = next((p / "shared" / "tools" / "slowdisk.sh" for p in REPO.parents
                 if (p / "shared" / "tools" / "slowdisk.sh").exists()), Path("slowdisk.sh"))
DLIOBENCH = [sys.executable, "-m", "dliobench"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--ranks-per-node", type=int, default=2)
    p.add_argument("--cap-mbps", type=int, default=40, help="read cap C in MB/s (10^6)")
    p.add_argument("--files", type=int, default=96)
    p.add_argument("--sample-mb", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--compute", type=float, default=0.1, help="seconds per batch")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--tier", type=Path, default=Path("/tmp/nodes-tier"))
    p.add_argument("--slowdisk", type=Path, default=SLOWDISK)
    return p.parse_args(argv)


def overrides(a: argparse.Namespace) -> list[str]:
    """The scaled-down UNet3D on the tier."""
    return [f"dataset.data_folder={a.tier}/data", f"dataset.num_files_train={a.files}",
            "dataset.num_samples_per_file=1",
            f"dataset.record_length_bytes={int(a.sample_mb * 1e6)}",
            "dataset.record_length_bytes_stdev=0", "dataset.record_length_bytes_resize=0",
            "dataset.num_subfolders_train=0", f"reader.batch_size={a.batch}",
            "reader.read_threads=1", "reader.prefetch_size=1", "reader.data_loader=native",
            f"train.epochs={a.epochs}", f"train.computation_time={a.compute}",
            "storage.drop_cache=true", f"output.folder={a.tier}-reports"]


def sh(cmd: list[str]) -> None:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, cwd=REPO, stdout=sys.stderr)


def node_bytes(run_dir: Path, hosts: dict[int, str]) -> dict[str, int]:
    """Bytes each node's ranks read over every step (timeline.csv, counted or not)."""
    out: dict[str, int] = {}
    with (run_dir / "timeline.csv").open() as handle:
        for row in csv.DictReader(handle):
            host = hosts[int(row["rank"])]
            out[host] = out.get(host, 0) + int(row["bytes"])
    return out


def table(a: argparse.Namespace, result: dict, run_dir: Path, data_bytes: int) -> str:
    """Markdown: per node, AU and bytes against the analytic figures."""
    ranks = a.nodes * a.ranks_per_node
    demand = ranks * a.batch * a.sample_mb * 1e6 / a.compute
    au_pred = min(1.0, a.cap_mbps * 1e6 / demand)
    hosts = {r["rank"]: r["host"] for r in result["ranks"]}
    read = node_bytes(run_dir, hosts)
    want = a.epochs * data_bytes // a.nodes
    lines = [f"demand {demand / 1e6:.0f} MB/s against a cap of {a.cap_mbps} MB/s: AU about "
             f"{au_pred:.3f}, {a.cap_mbps / a.nodes:.1f} MB/s per node; each node reads "
             f"{want:,} bytes ({a.epochs} epochs x dataset / {a.nodes})", "",
             "| node | ranks | AU | AU analytic | MB/s | MB/s analytic | bytes read | "
             "bytes analytic |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for n in result["nodes"]:
        lines.append(f"| {n['host']} | {len(n['ranks'])} | {n['au']:.3f} | {au_pred:.3f} | "
                     f"{n['bytes_per_s'] / 1e6:.1f} | {a.cap_mbps / a.nodes:.1f} | "
                     f"{read[n['host']]:,} | {want:,} |")
    m = result["metrics"]
    lines += ["", f"run: AU {m['au']:.3f}, {m['bytes_per_s'] / 1e6:.1f} MB/s, exactly once "
              f"{m['exactly_once']}, straggler nodes {m.get('straggler_nodes')}, device read "
              f"share {result['honesty'].get('device_read_share')}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    size_mb = int(a.files * a.sample_mb * 1.2) + 200
    sh(["bash", str(a.slowdisk), "up", str(a.tier), str(size_mb), str(a.cap_mbps)])
    try:
        sh([*DLIOBENCH, "generate", "unet3d", *overrides(a), "--no-progress"])
        data_bytes = sum(p.stat().st_size for p in (a.tier / "data" / "train").iterdir())
        sh(["bash", str(a.slowdisk), "run", str(a.tier), *DLIOBENCH, "nodes", "--nodes",
            str(a.nodes), "--ranks-per-node", str(a.ranks_per_node), "--", "run", "unet3d",
            *overrides(a), "--no-progress"])
        run_dir = max(p for p in Path(f"{a.tier}-reports").iterdir()
                      if (p / "result.json").exists())
        result = json.loads((run_dir / "result.json").read_text())
        print(table(a, result, run_dir, data_bytes))
    finally:
        subprocess.run(["bash", str(a.slowdisk), "down", str(a.tier)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
