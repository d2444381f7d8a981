"""The milvus engine against pymilvus's own search loop at the same settings, and the sweep
curves of both engines on the same vectors (issue 53's acceptance). Needs a quiet machine:
its figures are not taken while other work runs (not run for figures yet).

Usage:
  python -m benchmarks.vectordb.milvus_loop [--host H --port P] [--vectors 100000] [--dim 128]
      [--index-type HNSW] [--threads 1 2 4 8] [--runtime 30] [--search-ef 64]
      [--sweep-ef 16 32 64 128] [--trials 2] [--root /tmp/vdb-milvus]

What it does:
1. The server: the one at --host/--port, else a milvus-lite server (`python -m milvus_lite
   server`) started on a free port with its data under ROOT (stopped at the end). milvus-lite
   keeps indexes in memory: its figures are the server's memory and CPU, never storage.
2. `dliobench vectordb datagen --host ...` (clustered vectors, the index type given).
3. For each thread count T, trials alternating: ours (`dliobench vectordb run --host ...
   --query-threads T --runtime S --search-ef L`, one rank) and pymilvus's own loop (T threads
   sharing one MilvusClient, each calling `client.search` on one query at a time with the
   same collection, k, search parameters and `output_fields=["id"]` for S seconds, nothing
   else). Ours over its own should be >= 0.95 (the harness adds nothing).
4. `--benchmark-mode sweep` over --threads x --sweep-ef on the milvus engine and, where the
   vectordb extra (diskannpy-rust) is installed, on the diskann engine with the same vectors
   (same seed and draw); `dliobench report` of both draws QPS/p99 against concurrency and
   recall against QPS (ROOT/report).
One JSON record (benchmarks/records/).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.records import Recorder

# pymilvus's own loop: T threads, one shared client, one query per search call, S seconds
OWN_LOOP = textwrap.dedent("""
    import json, sys, threading, time
    import numpy as np
    from pymilvus import MilvusClient
    uri, name, folder, threads, seconds, k, params = sys.argv[1:8]
    threads, seconds, k = int(threads), float(seconds), int(k)
    client = MilvusClient(uri=uri, timeout=60)
    client.load_collection(name)
    queries = np.load(folder + "/queries.npy")
    search = {"metric_type": "COSINE", "params": json.loads(params)}
    done = [0] * threads
    def loop(t):
        at, until = t, time.perf_counter() + seconds
        while time.perf_counter() < until:
            client.search(name, data=queries[at % len(queries)][None], limit=k,
                          search_params=search, output_fields=["id"])
            done[t] += 1
            at += threads
    workers = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    start = time.perf_counter()
    [w.start() for w in workers]; [w.join() for w in workers]
    print(sum(done) / (time.perf_counter() - start))
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server(root: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    root.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir",
                             str(root / "milvus-data"), "--host", "127.0.0.1", "--port",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, port
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("milvus-lite server did not start")


def _dlio(*argv: str) -> None:
    subprocess.run([sys.executable, "-m", "dliobench", *argv], check=True)


def _last(out: Path) -> dict[str, Any]:
    run = sorted(p for p in out.iterdir() if (p / "result.json").exists())[-1]
    result: dict[str, Any] = json.loads((run / "result.json").read_text())["vectordb"]
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="")
    p.add_argument("--port", type=int, default=19530)
    p.add_argument("--vectors", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--index-type", default="HNSW")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--runtime", type=float, default=30)
    p.add_argument("--search-ef", type=int, default=64)
    p.add_argument("--sweep-ef", type=int, nargs="+", default=[16, 32, 64, 128])
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--root", type=Path, default=Path("/tmp/vdb-milvus"))
    args = p.parse_args(argv)
    recorder = Recorder(__file__)
    proc, port = (None, args.port) if args.host else _server(args.root)
    host = args.host or "127.0.0.1"
    server = ["--host", host, "--port", str(port)]
    keys = ["--num-vectors", str(args.vectors), "--dimension", str(args.dim),
            "--index-dir", str(args.root / "idx")]
    results: dict[str, Any] = {"server": f"{host}:{port}", "points": [], "sweeps": {}}
    try:
        _dlio("vectordb", "datagen", *server, *keys, "--index-type", args.index_type, "--force")
        for threads in args.threads:
            ours, own = [], []
            for trial in range(args.trials):
                out = args.root / f"ours-{threads}-{trial}"
                _dlio("vectordb", "run", *server, *keys, "--runtime", str(args.runtime),
                      "--query-threads", str(threads), "--search-ef", str(args.search_ef),
                      "--results-dir", str(out))
                v = _last(out)
                ours.append(v["qps"])
                params = v["index"]["params"]
                kind = params["built_index_type"]
                search = {"ef": args.search_ef} if kind.startswith("hnsw") else \
                    {"search_list": args.search_ef} if kind in ("diskann", "aisaq") else \
                    {"nprobe": args.search_ef} if kind.startswith("ivf") else {}
                own.append(float(subprocess.run(
                    [sys.executable, "-c", OWN_LOOP, f"http://{host}:{port}",
                     params["collection"], v["index"]["folder"], str(threads),
                     str(args.runtime), str(v["k"]), json.dumps(search)],
                    check=True, capture_output=True, text=True).stdout.strip()))
            point = {"threads": threads, "ours_qps": ours, "own_qps": own,
                     "ours_over_own": sum(ours) / sum(own) if sum(own) else None,
                     "built_index_type": kind}
            results["points"].append(point)
            print(f"T={threads:3d}  ours {sum(ours) / len(ours):9.1f} q/s  pymilvus loop "
                  f"{sum(own) / len(own):9.1f} q/s  ratio {point['ours_over_own'] or 0:.3f}",
                  flush=True)
        sweep = [f"vectordb.sweep_threads={','.join(map(str, args.threads))}",
                 f"vectordb.sweep_search_list={','.join(map(str, args.sweep_ef))}"]
        engines = [("milvus", server)]
        try:
            import diskannpy  # noqa: F401  (the vectordb extra: the diskann engine too)
            engines.append(("diskann", ["--engine", "diskann"]))
            _dlio("vectordb", "datagen", "--engine", "diskann", *keys)
        except ImportError:
            print("diskannpy-rust is not installed: the sweep runs the milvus engine only")
        for name, flags in engines:
            out = args.root / f"sweep-{name}"
            _dlio("vectordb", "run", *sweep, *flags, *keys, "--benchmark-mode", "sweep",
                  "--runtime", str(args.runtime), "--results-dir", str(out))
            results["sweeps"][name] = _last(out)["sweep"]
        _dlio("report", *(str(args.root / f"sweep-{n}") for n, _ in engines), "-o",
              str(args.root / "report"))
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
    print(f"record: {recorder.write(results, pid=os.getpid())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
