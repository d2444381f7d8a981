"""`dliobench vectordb run` on a tier whose reads the kernel caps in reads/s: QPS x reads per
query against the cap, and our loop against the binding's own search loop (issue 52's
acceptance). Needs a quiet machine: its figures are not taken while other work runs.

Usage (root; loop devices and the cgroup-v1 blkio controller, see slowdisk.sh):
  python -m benchmarks.vectordb.iops_cap [--iops 2000] [--vectors 200000] [--dim 128]
      [--threads 1 2 4 8 16] [--runtime 30] [--search-ef 64] [--root /tmp/vdb-iops]
      [--slowdisk ../shared/tools/slowdisk.sh]

What it does:
1. `slowdisk.sh up ROOT/tier SIZE 1000 IOPS`: ext4 on a loop device, reads capped at IOPS
   reads/s (and 1000 MB/s, far above what 4 KiB reads at that rate move); writes are not capped.
2. `dliobench vectordb datagen` there (clustered vectors, the default index parameters but the
   vector count and dimension given).
3. For each thread count T (query clients, `--query-threads T` in one rank): `slowdisk.sh run
   ROOT/tier dliobench vectordb run --runtime S --query-threads T`; its QPS, DiskANN's reads
   per query and the device's (`reads_per_query.index`, `.device`); QPS x device reads per
   query over the cap. Enough threads saturate the cap: the product is then within 5 % of it.
   It reads a little above the cap, as every counter does on this throttle: the read-IOPS
   cap grants a 100 ms slice's reads at once (Linux block/blk-throttle.c,
   tg_within_iops_limit: the elapsed time rounded up to the slice, HZ/10; printed as "one
   slice: 1 + 0.1 / S") and lets the reads queued on an idle device through besides, so
   30 s runs read 1.002-1.006 of it here. fio on the same tier, for S seconds at the same
   queue depth (T threads x beam width 4), and DiskANN's own loop are printed beside it.
4. The binding's own loop at the same settings (the same index, T threads each calling
   `StaticDiskIndex.batch_search` on one query at a time for S seconds, nothing else), under
   the same cap; our QPS over its, which should be >= 0.95 (the harness adds nothing).
Trials alternate the two. One JSON record (benchmarks/records/).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from benchmarks.harness.machine import REPO
from benchmarks.harness.records import Recorder

BEAM = 4  # DiskANN's beam width, ours and the own loop's: the reads a query keeps in flight
SLICE_S = 0.1  # the kernel throttle's slice (HZ/10), whose reads it grants at once
SLOWDISK = REPO.parent / "shared" / "tools" / "slowdisk.sh"
# the binding's own loop: T threads, one query per batch_search call, for S seconds
OWN_LOOP = textwrap.dedent("""
    import os, sys, threading, time
    os.environ.setdefault("RUST_LOG", "warn")
    import numpy as np, diskannpy
    folder, threads, seconds, k, search_list, beam = sys.argv[1:7]
    threads, seconds, k, search_list = int(threads), float(seconds), int(k), int(search_list)
    index = diskannpy.StaticDiskIndex(os.path.join(folder, "index"), num_threads=1,
                                      beam_width=int(beam), index_prefix="ann")
    queries = np.load(os.path.join(folder, "queries.npy"))
    done = [0] * threads
    def client(t):
        at, until = t, time.perf_counter() + seconds
        while time.perf_counter() < until:
            index.batch_search(queries[at % len(queries)][None], k, search_list, 1)
            done[t] += 1
            at += threads
    workers = [threading.Thread(target=client, args=(t,)) for t in range(threads)]
    start = time.perf_counter()
    [w.start() for w in workers]; [w.join() for w in workers]
    print(sum(done) / (time.perf_counter() - start))
""")


def _sh(*argv: str) -> str:
    return subprocess.run(list(argv), check=True, capture_output=True, text=True).stdout


def _ours(args: argparse.Namespace, tier: Path, threads: int, keys: list[str]) -> dict[str, Any]:
    out = tier.parent / f"results-{threads}"
    _sh(str(args.slowdisk), "run", str(tier), sys.executable, "-m", "dliobench", "vectordb",
        "run", *keys, "--runtime", str(args.runtime), "--query-threads", str(threads),
        "--search-ef", str(args.search_ef), "--results-dir", str(out))
    run = sorted(p for p in out.iterdir() if (p / "result.json").exists())[-1]
    v = json.loads((run / "result.json").read_text())["vectordb"]
    reads = v["reads_per_query"]
    return {"qps": v["qps"], "index_reads_per_query": reads["index"],
            "device_reads_per_query": reads["device"], "recall": v["recall"],
            "p99_ms": v["latency_ms"].get("p99"), "verdict": v["verdict"]["limiter"],
            "reads_per_s": v["device_reads_per_s"] or v["qps"] * (reads["index"] or 0),
            "folder": v["index"]["folder"]}


def _fio(args: argparse.Namespace, tier: Path, threads: int, folder: str) -> float:
    """fio's IOPS on the index's disk file, 4 KiB O_DIRECT random reads at the queue depth
    our clients keep (threads x beam width), for the same seconds, under the same cap."""
    disk = next(Path(folder, "index").glob("*disk.index"))
    out = _sh(str(args.slowdisk), "run", str(tier), "fio", "--name=cap", f"--filename={disk}",
              "--rw=randread", "--bs=4k", "--direct=1", "--ioengine=libaio",
              f"--iodepth={threads * BEAM}", f"--runtime={args.runtime:g}", "--time_based",
              "--readonly", "--output-format=json")
    return float(json.loads(out)["jobs"][0]["read"]["iops"])


def _own(args: argparse.Namespace, tier: Path, threads: int, folder: str) -> float:
    return float(_sh(str(args.slowdisk), "run", str(tier), sys.executable, "-c", OWN_LOOP,
                     folder, str(threads), str(args.runtime), "10", str(args.search_ef),
                     str(BEAM)).strip())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iops", type=int, default=2000)
    p.add_argument("--vectors", type=int, default=200_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    p.add_argument("--runtime", type=float, default=30)
    p.add_argument("--search-ef", type=int, default=64)
    p.add_argument("--root", type=Path, default=Path("/tmp/vdb-iops"))
    p.add_argument("--slowdisk", type=Path, default=SLOWDISK)
    args = p.parse_args(argv)
    recorder = Recorder(__file__)
    tier = args.root / "tier"
    size_mb = max(512, 4 * args.vectors * args.dim * 4 // 1_000_000)
    subprocess.run([str(args.slowdisk), "down", str(tier)], check=False,
                   capture_output=True)  # what a killed run left there
    _sh(str(args.slowdisk), "up", str(tier), str(size_mb), "1000", str(args.iops))
    keys = ["--num-vectors", str(args.vectors), "--dimension", str(args.dim),
            "--index-dir", str(tier)]
    results: dict[str, Any] = {"cap_reads_per_s": args.iops, "points": []}
    try:
        _sh(sys.executable, "-m", "dliobench", "vectordb", "datagen", *keys)
        for threads in args.threads:
            ours = _ours(args, tier, threads, keys)
            own = _own(args, tier, threads, ours["folder"])
            fio = _fio(args, tier, threads, ours["folder"])
            point = {"threads": threads, **ours, "own_loop_qps": own,
                     "ours_over_own": ours["qps"] / own if own else None,
                     "reads_over_cap": ours["reads_per_s"] / args.iops,
                     "one_slice_over_cap": 1 + SLICE_S / args.runtime,
                     "own_loop_reads_over_cap": own * (ours["index_reads_per_query"] or 0)
                     / args.iops,
                     "fio_iops_over_cap": fio / args.iops}
            results["points"].append(point)
            print(f"T={threads:3d}  ours {ours['qps']:9.1f} q/s  own loop {own:9.1f} q/s  "
                  f"ratio {point['ours_over_own'] or 0:.3f}  reads/s {ours['reads_per_s']:9.1f} "
                  f"({point['reads_over_cap']:.3f} of the cap; one slice: "
                  f"{point['one_slice_over_cap']:.3f}, fio read "
                  f"{point['fio_iops_over_cap']:.3f}, "
                  f"its own loop {point['own_loop_reads_over_cap']:.3f})"
                  f"  recall {ours['recall']:.4f}  "
                  f"{ours['verdict']}", flush=True)
    finally:
        subprocess.run([str(args.slowdisk), "down", str(tier)], check=False)
    print(f"record: {recorder.write(results, pid=os.getpid())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
