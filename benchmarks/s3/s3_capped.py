"""A capped S3 endpoint: AU against ranks when the object store is the bottleneck.

Usage: python -m benchmarks.s3.s3_capped [--cap-mbps 40] [--files 480] [--sample-mib 1]
       [--batch 4] [--headroom 1.3] [--ranks 1 2]

Starts the tests' S3 server (``tests/s3server.py``) with the bodies of its answers capped
together at --cap-mbps MB/s, generates --files one-sample npy objects of --sample-mib MiB
(writes are not capped), and runs one epoch with 1 and 2 ranks (``mpiexec``) at a compute
time c per batch chosen so one rank has --headroom times the bandwidth it needs and two
ranks saturate the cap. Prints measured AU against the model AU = min(1, c x B / (n x s))
(B the cap in bytes/s, n ranks, s bytes per batch; see benchmarks/scale/TIERS.md); the goal is
agreement within 0.02.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import machine
from benchmarks.harness.records import Recorder
from benchmarks.s3.s3_read import BUCKET, client, start_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cap-mbps", type=float, default=40.0)
    parser.add_argument("--files", type=int, default=480)
    parser.add_argument("--sample-mib", type=float, default=1.0)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--headroom", type=float, default=1.3)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    a = parser.parse_args()
    record = Recorder(__file__)
    results: dict[str, float] = {}
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_EC2_METADATA_DISABLED": "true"})
    cap = a.cap_mbps * 1e6
    sample = int(a.sample_mib * (1 << 20))
    batch_bytes = a.batch * sample
    compute = a.headroom * batch_bytes / cap  # one rank: headroom x the bandwidth it needs
    server, endpoint = start_server(cap)
    work = Path(tempfile.mkdtemp(prefix="s3-capped-"))
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
    try:
        client(endpoint).create_bucket(Bucket=BUCKET)  # type: ignore[attr-defined]
        common = [f"dataset.data_folder=s3://{BUCKET}/capped", "dataset.format=npy",
                  f"dataset.num_files_train={a.files}", f"dataset.record_length_bytes={sample}",
                  "dataset.record_length_bytes_stdev=0", f"storage.s3.endpoint_url={endpoint}",
                  "storage.s3.region=us-east-1", "storage.s3.addressing_style=path",
                  f"reader.batch_size={a.batch}", "reader.read_threads=4",
                  "train.epochs=1", f"train.computation_time={compute:.6f}"]
        machine.run([sys.executable, "-m", "dliobench", "generate", "--yes", *common,
                     "--no-progress"], src=str(machine.REPO))
        rows = []
        for n in a.ranks:
            out = work / f"ranks-{n}"
            launch = [mpiexec, "-n", str(n)] if n > 1 else []
            machine.run([*launch, sys.executable, "-m", "dliobench", "run", "--yes", *common,
                         f"output.folder={out}", "--no-progress"], src=str(machine.REPO))
            result = json.loads(next(out.glob("*/result.json")).read_text())
            m = result["metrics"]
            model = min(1.0, compute * cap / (n * batch_bytes))
            results.update({f"{n} rank(s) AU": m["au"], f"{n} rank(s) AU model": model})
            rows.append(f"| {n} | {m['au']:.3f} | {model:.3f} | {m['au'] - model:+.3f} | "
                        f"{m['bytes_per_s'] / 1e6:.1f} | {m['steps']} |")
        print("\n".join([
            f"## Capped S3 endpoint: AU against ranks ({a.cap_mbps:g} MB/s cap, {a.files} "
            f"objects of {a.sample_mib:g} MiB, batch {a.batch}, c = {compute:.3f} s)", "",
            *machine.machine_lines(), *machine.code_lines(machine.REPO), "",
            "| ranks | AU measured | AU model min(1, c·B/(n·s)) | difference | MB/s read | "
            "counted steps |", "|---|---|---|---|---|---|", *rows, "", machine.load_line()]))
        print(f"\n- record: {record.write(results, cap_mbps=a.cap_mbps, files=a.files)}")
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
