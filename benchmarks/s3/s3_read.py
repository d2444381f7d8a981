"""dliobench reading an S3 dataset against the raw client reading the same objects.

Usage: python -m benchmarks.s3.s3_read [--files 300] [--size 1MiB] [--threads 4] [--reps 3]

Starts the tests' S3 server (moto's, ``tests/s3server.py``) on 127.0.0.1 in its own process,
generates one dataset of one-sample npy objects with ``dliobench generate``, then alternates,
``--reps`` times: boto3 alone GETting every object whole from ``--threads`` threads, and a
``dliobench run`` (native loader, ``reader.read_threads`` the same, compute 0) reading them.
Prints GB/s medians, the ratio (goal: at least 0.9 of the raw client) and the server's CPU
share (client and server share this machine's cores: moto is Python, so it is the bottleneck
here; a compiled server is the next step). Everything lives in the server's memory and goes
with it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.harness import machine
from benchmarks.harness.records import Recorder

SERVER = machine.REPO / "tests" / "s3server.py"
BUCKET = "bench"


def start_server(cap: float | None = None) -> tuple[subprocess.Popen[str], str]:
    """The S3 server in its own process (no credential check; its answers' bodies capped
    at ``cap`` bytes/s together) and its endpoint."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(SERVER), str(port),
                               *([str(cap)] if cap else [])], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert server.stdout is not None and server.stdout.readline().strip() == "ready"
    return server, f"http://127.0.0.1:{port}"


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client(endpoint: str) -> object:
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, max_pool_connections=64))


def raw_read(endpoint: str, keys: list[str], threads: int) -> tuple[float, int]:
    """Seconds and bytes for boto3 to GET every object whole from ``threads`` threads."""
    s3 = client(endpoint)

    def get(key: str) -> int:
        return len(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())  # type: ignore

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        nbytes = sum(pool.map(get, keys))
    return time.perf_counter() - start, nbytes


def overrides(args: argparse.Namespace, endpoint: str) -> list[str]:
    return [f"dataset.data_folder=s3://{BUCKET}/ds", "dataset.format=npy",
            f"dataset.num_files_train={args.files}", f"dataset.record_length_bytes={args.size}",
            "dataset.record_length_bytes_stdev=0", "dataset.num_samples_per_file=1",
            f"storage.s3.endpoint_url={endpoint}", "storage.s3.region=us-east-1",
            "storage.s3.addressing_style=path", "reader.data_loader=native",
            f"reader.read_threads={args.threads}", "reader.batch_size=8",
            "reader.prefetch_size=2", "train.epochs=1", "train.computation_time=0",
            "metric.exclude_start_steps=1"]


def dliobench_read(args: argparse.Namespace, endpoint: str, out: Path) -> float:
    """bytes/s of one dliobench run over the dataset (its counted window)."""
    shutil.rmtree(out, ignore_errors=True)
    machine.run([sys.executable, "-m", "dliobench", "run", "--yes", *overrides(args, endpoint),
                 f"output.folder={out}", "--no-progress"], src=str(machine.REPO))
    result = json.loads(next(out.glob("*/result.json")).read_text())
    return float(result["metrics"]["bytes_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--size", default="1MiB")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    record = Recorder(__file__)
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_EC2_METADATA_DISABLED": "true"})
    server, endpoint = start_server()
    work = Path(tempfile.mkdtemp(prefix="s3-read-"))
    try:
        s3 = client(endpoint)
        s3.create_bucket(Bucket=BUCKET)  # type: ignore[attr-defined]
        machine.run([sys.executable, "-m", "dliobench", "generate", "--yes",
                     *overrides(args, endpoint), "--no-progress"], src=str(machine.REPO))
        pages = s3.get_paginator("list_objects_v2").paginate(  # type: ignore[attr-defined]
            Bucket=BUCKET, Prefix="ds/train/")
        keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
        raw, ours, shares = [], [], []
        for _ in range(args.reps):
            cpu, wall = cpu_seconds(server.pid), time.perf_counter()
            seconds, nbytes = raw_read(endpoint, keys, args.threads)
            shares.append((cpu_seconds(server.pid) - cpu) / (time.perf_counter() - wall))
            raw.append(nbytes / seconds)
            ours.append(dliobench_read(args, endpoint, work / "out"))
        r, o = statistics.median(raw), statistics.median(ours)
        lines = [f"## S3 reads: dliobench against boto3 ({len(keys)} objects of {args.size}, "
                 f"{args.threads} threads, moto's server on 127.0.0.1)", "",
                 *machine.machine_lines(), *machine.code_lines(machine.REPO), "",
                 "| reader | GB/s median | runs |", "|---|---|---|",
                 f"| boto3 GETs, {args.threads} threads | {r / 1e9:.3f} | "
                 + ", ".join(f"{x / 1e9:.3f}" for x in raw) + " |",
                 f"| dliobench native, read_threads={args.threads} | {o / 1e9:.3f} | "
                 + ", ".join(f"{x / 1e9:.3f}" for x in ours) + " |", "",
                 f"- ratio dliobench / boto3: {o / r:.2f} (goal >= 0.9)",
                 f"- server CPU while boto3 read: {statistics.median(shares):.2f} cores "
                 f"of {os.cpu_count()} (median)", machine.load_line()]
        print("\n".join(lines))
        results = {"boto3 GB/s": [x / 1e9 for x in raw], "dliobench GB/s": [x / 1e9 for x in ours],
                   "server cores while boto3 read": shares}
        print(f"- record: {record.write(results, objects=len(keys), size=args.size)}")
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
