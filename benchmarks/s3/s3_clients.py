"""S3 clients compared on a compiled server, and dliobench against the best of them.

Usage: python -m benchmarks.s3.s3_clients [--sets 1MiB:400 64KiB:2000] [--threads 4] [--reps 3]
       [--clients boto3 obstore s3torchconnector s3dlio] [--ours obstore boto3]

Needs the ``bench`` extra (s3torchconnector, obstore, s3dlio and SeaweedFS's ``weed``). Starts
SeaweedFS (``seaweed.py``: a Go server, master, volume server, filer and S3 gateway in one
process) on 127.0.0.1; for each set SIZE:COUNT generates COUNT one-sample npy objects of SIZE
with ``dliobench generate``, then, ``--reps`` times in a rotating order, reads every object
whole with each client keeping ``--threads`` requests in flight (threads calling the client;
s3dlio's own ``get_many`` with ``max_in_flight``), and runs ``dliobench run`` over them (native
loader, ``reader.read_threads`` the same, no compute) once per ``storage.s3.read_client`` in
``--ours``. Prints per client GB/s (median and runs), the server's CPU while it read (client
and server share this machine's cores), CPU seconds per GB on each side, and dliobench's
GB/s over the best raw client's (goal: at least 0.9).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.harness import machine
from benchmarks.harness.records import Recorder
from benchmarks.s3.seaweed import Server, boto3_client, cpu_seconds, seaweed
from dliobench.config.values import to_size

Reader = Callable[[list[str]], int]


def own_cpu() -> float:
    """CPU seconds of this process (all its threads) so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child_cpu() -> float:
    """CPU seconds of this process's ended children so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def make_reader(name: str, server: Server, threads: int, pool: ThreadPoolExecutor) -> Reader:
    """A function reading the given keys whole with client ``name``; the bytes it received."""
    bucket, endpoint = server.bucket, server.endpoint
    if name == "boto3":
        s3 = boto3_client(endpoint)
        return lambda keys: sum(pool.map(lambda k: len(  # type: ignore[attr-defined]
            s3.get_object(Bucket=bucket, Key=k)["Body"].read()), keys))
    if name == "obstore":
        import obstore
        from obstore.store import S3Store

        store = S3Store(bucket, endpoint=endpoint, region="us-east-1",
                        client_options={"allow_http": True})
        return lambda keys: sum(pool.map(lambda k: len(obstore.get(store, k).bytes()), keys))
    if name == "s3torchconnector":
        from s3torchconnector import S3ClientConfig
        from s3torchconnector._s3client import S3Client

        client = S3Client("us-east-1", endpoint=endpoint,
                          s3client_config=S3ClientConfig(force_path_style=True))
        return lambda keys: sum(pool.map(lambda k: len(client.get_object(bucket, k).read()),
                                         keys))
    if name == "s3dlio":
        import s3dlio

        s3dlio.configure_s3(endpoint_url=endpoint, region="us-east-1")
        return lambda keys: sum(len(data) for _, data in s3dlio.get_many(
            [f"s3://{bucket}/{k}" for k in keys], max_in_flight=threads))
    raise SystemExit(f"unknown client {name!r}")


@dataclass
class Runs:
    """One reader's repetitions: bytes/s, server CPU share, CPU seconds per GB."""

    rates: list[float] = field(default_factory=list)
    server_share: list[float] = field(default_factory=list)
    server_s_per_gb: list[float] = field(default_factory=list)
    client_s_per_gb: list[float] = field(default_factory=list)

    def add(self, nbytes: int, seconds: float, server_cpu: float, client_cpu: float) -> None:
        self.rates.append(nbytes / seconds)
        self.server_share.append(server_cpu / seconds)
        self.server_s_per_gb.append(server_cpu / (nbytes / 1e9))
        self.client_s_per_gb.append(client_cpu / (nbytes / 1e9))

    def row(self, label: str) -> str:
        med = statistics.median
        return (f"| {label} | {med(self.rates) / 1e9:.3f} | "
                + ", ".join(f"{x / 1e9:.3f}" for x in self.rates)
                + f" | {med(self.server_share):.2f} | {med(self.server_s_per_gb):.2f} | "
                f"{med(self.client_s_per_gb):.2f} |")


def overrides(server: Server, prefix: str, size: str, count: int, threads: int,
              client: str = "") -> list[str]:
    """The dliobench keys of one set's dataset and run."""
    batch = max(1, count // 25)  # about 25 steps per epoch
    return [f"dataset.data_folder=s3://{server.bucket}/{prefix}", "dataset.format=npy",
            f"dataset.num_files_train={count}", f"dataset.record_length_bytes={size}",
            "dataset.record_length_bytes_stdev=0", "dataset.num_samples_per_file=1",
            f"storage.s3.endpoint_url={server.endpoint}", "storage.s3.region=us-east-1",
            "storage.s3.addressing_style=path", "reader.data_loader=native",
            f"reader.read_threads={threads}", f"reader.batch_size={batch}",
            "reader.prefetch_size=2", "train.epochs=1", "train.computation_time=0",
            "metric.exclude_start_steps=1",
            *([f"storage.s3.read_client={client}"] if client else [])]


def ours(server: Server, args: list[str], out: Path) -> tuple[float, float, float, float]:
    """One dliobench run: (bytes/s in its counted window, its counted bytes, server CPU
    seconds and client CPU seconds per byte read in training)."""
    shutil.rmtree(out, ignore_errors=True)
    cpu = cpu_seconds(server.pid)
    machine.run([sys.executable, "-m", "dliobench", "run", "--yes", *args, f"output.folder={out}",
                 "--no-progress"], src=str(machine.REPO))
    server_cpu = cpu_seconds(server.pid) - cpu
    result = json.loads(next(out.glob("*/result.json")).read_text())
    total = sum(r["bytes"] for r in result["ranks"]) or 1
    read = result["honesty"]["dataset_bytes"]  # one epoch reads the whole dataset
    client = sum(r["cpu_s"] for r in result["ranks"])
    return float(result["metrics"]["bytes_per_s"]), total, server_cpu / read, client / read


def measure_set(server: Server, size: str, count: int, a: argparse.Namespace,
                work: Path) -> list[str]:
    """Generate one set, read it with every client and dliobench; its report lines."""
    prefix = f"ds-{size.lower()}-{count}"
    machine.run([sys.executable, "-m", "dliobench", "generate", "--yes",
                 *overrides(server, prefix, size, count, a.threads), "--no-progress"],
                  src=str(machine.REPO))
    s3 = boto3_client(server.endpoint)
    pages = s3.get_paginator("list_objects_v2").paginate(  # type: ignore[attr-defined]
        Bucket=server.bucket, Prefix=f"{prefix}/train/")
    keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
    runs: dict[str, Runs] = {}
    with ThreadPoolExecutor(a.threads) as pool:
        readers = {name: make_reader(name, server, a.threads, pool) for name in a.clients}
        for read in readers.values():
            read(keys[:a.threads])  # connections open, libraries warm
        labels = [*a.clients, *(f"dliobench:{c}" for c in a.ours)]
        for rep in range(a.reps):
            for name in labels[rep % len(labels):] + labels[:rep % len(labels)]:
                if name.startswith("dliobench:"):
                    rate, _, server_per_b, client_per_b = ours(
                        server, overrides(server, prefix, size, count, a.threads,
                                          name.split(":")[1]), work / "out")
                    r = runs.setdefault(name, Runs())
                    r.rates.append(rate)
                    r.server_share.append(server_per_b * rate)
                    r.server_s_per_gb.append(server_per_b * 1e9)
                    r.client_s_per_gb.append(client_per_b * 1e9)
                    continue
                cpu, mine, t0 = cpu_seconds(server.pid), own_cpu(), time.perf_counter()
                nbytes = readers[name](keys)
                seconds = time.perf_counter() - t0
                runs.setdefault(name, Runs()).add(nbytes, seconds,
                                                  cpu_seconds(server.pid) - cpu,
                                                  own_cpu() - mine)
    best = max(a.clients, key=lambda n: statistics.median(runs[n].rates))
    best_rate = statistics.median(runs[best].rates)
    lines = [f"### {len(keys)} objects of {size} ({to_size('size', size) + 128} bytes with the npy "
             f"header), {a.threads} requests in flight", "",
             "| reader | GB/s median | runs (GB/s) | server CPU (cores) | server CPU s/GB | "
             "client CPU s/GB |", "|---|---|---|---|---|---|",
             *(runs[n].row(n) for n in a.clients),
             *(runs[f"dliobench:{c}"].row(f"dliobench native, read_client={c}")
               for c in a.ours), ""]
    lines += [f"- dliobench (read_client={c}) / best raw client ({best}): "
              f"{statistics.median(runs[f'dliobench:{c}'].rates) / best_rate:.2f} (goal >= 0.9)"
              for c in a.ours]
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=["1MiB:400", "64KiB:2000"])
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--clients", nargs="+",
                        default=["boto3", "obstore", "s3torchconnector", "s3dlio"])
    parser.add_argument("--ours", nargs="*", default=["obstore", "boto3"])
    a = parser.parse_args()
    record = Recorder(__file__)
    work = Path(tempfile.mkdtemp(prefix="s3-clients-"))
    load0 = os.getloadavg()
    try:
        with seaweed() as server:
            body = [line for spec in a.sets
                    for line in measure_set(server, *_split(spec), a, work)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join([
        "## S3 clients on a compiled server (SeaweedFS 4.48 on 127.0.0.1)", "",
        *machine.machine_lines(), *machine.code_lines(machine.REPO),
        f"- load average (1, 5, 15 min) at the start: {load0[0]:.2f}, {load0[1]:.2f}, "
        f"{load0[2]:.2f}", machine.load_line(), "", *body]))
    # the per-client rates are in the tables' rows, not yet kept as numbers of their own
    print(f"\n- record: {record.write({'tables': body}, sets=a.sets, threads=a.threads)}")


def _split(spec: str) -> tuple[str, int]:
    size, _, count = spec.partition(":")
    return size, int(count)


if __name__ == "__main__":
    main()
