"""JPEG decode rate per core of each ``reader.decoder``, and the client cores one B200 needs
for RetinaNet, on our generated 323 KB files.

Usage:
    python -m benchmarks.loaders.jpeg_decoders [--root /tmp/bench-jpegdec] [--files 200] [--reps 3]
        [--seconds 2] [--core 1] [--dali-batch 24]

Generates ``--files`` files of workloads/retinanet.yaml with ``dliobench generate`` (unless
they are there), reads them into memory (warm page cache; decoding is what is measured, not
reading), pins this process to one core (``--core``), and decodes them round-robin with each
decoder for ``--seconds`` per repetition (``dliobench.run.decode_rates``): medians of
``--reps`` of images per CPU-second and per wall second. Each decoder returns what DLIO's
reader gets (``np.asarray(Image.open(f))``: here a 568 x 568 grayscale uint8 array) and is
checked to give Pillow's pixels first. ``dali batch N`` is DALI's decoder as a DALI loader
runs it (``fn.decoders.image`` on a batch of N, one thread), not a ``reader.decoder``.

RetinaNet's demand per B200: 24 images per 0.04755 s of compute = 505 images/s
(mlcommons/storage configs/dlio/workload/retinanet_b200.yaml
@11460d004cc3127ba943a79cdc6fa0d9339eb7f8: reader.batch_size 24, train.computation_time
0.04755).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.records import Recorder
from dliobench.config.names import DECODER_NAMES
from dliobench.formats._decoders import decoder_for
from dliobench.formats.decode_rates import DecodeRate, load_average, measure_all

REPO = Path(__file__).resolve().parents[2]
B200_DEMAND = 24 / 0.04755  # images/s: retinanet_b200.yaml@11460d0 (see the docstring)


def dataset(root: Path, files: int) -> list[bytes]:
    """The generated files' bytes (generated first when missing)."""
    folder = root / "data"
    if len(list(folder.rglob("*.jpg"))) < files:
        subprocess.run([sys.executable, "-m", "dliobench", "generate", "retinanet",
                        f"dataset.data_folder={folder}", f"dataset.num_files_train={files}",
                        "--no-progress", "--yes"], check=True, capture_output=True, cwd=REPO)
    return [p.read_bytes() for p in sorted(folder.rglob("*.jpg"))[:files]]


def same_pixels(blobs: list[bytes]) -> dict[str, str]:
    """Per decoder: 'same' when it decodes the first files to Pillow's pixels, else why not."""
    out = {}
    for name in DECODER_NAMES:
        try:
            decode = decoder_for(name)
            same = all(np.array_equal(decode(b), decoder_for("pil")(b)) for b in blobs[:5])
            out[name] = "same" if same else "DIFFERENT"
        except Exception as exc:  # a missing library: the sentence is the cell
            out[name] = str(exc)
    return out


def dali_batch(blobs: list[bytes], batch: int, seconds: float, reps: int) -> DecodeRate:
    """DALI's CPU decoder on batches of ``batch`` (one thread), as its loader runs it."""
    import nvidia.dali.fn as fn
    from nvidia.dali import pipeline_def
    from nvidia.dali.types import DALIImageType

    @pipeline_def(batch_size=batch, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def graph() -> Any:
        enc = fn.external_source(name="enc")
        return fn.decoders.image(enc, device="cpu", output_type=DALIImageType.GRAY)

    pipe = graph()
    pipe.build()
    arrays = [np.frombuffer(b, np.uint8) for b in blobs]
    cpu_rates, wall_rates = [], []
    for _ in range(reps + 1):  # the first is a warm-up
        done, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
        while time.perf_counter() - wall0 < seconds:
            pipe.feed_input("enc", [arrays[(done + i) % len(arrays)] for i in range(batch)])
            pipe.run()
            done += batch
        cpu_rates.append(done / (time.process_time() - cpu0))
        wall_rates.append(done / (time.perf_counter() - wall0))
    return DecodeRate(f"dali batch {batch}", float(np.median(cpu_rates[1:])),
                      float(np.median(wall_rates[1:])), reps)


def table(rates: list[DecodeRate], checks: dict[str, str]) -> list[str]:
    """Markdown rows: rate per CPU-second and wall second, cores per B200, pixels check."""
    pil = next((r.per_cpu_s for r in rates if r.decoder == "pil"), 0.0)
    rows = ["| decoder | images per CPU-s | images per wall s | vs pil | cores per B200 "
            "(505 images/s) | pixels vs pil |", "|---|---|---|---|---|---|"]
    for r in rates:
        if r.missing:
            rows.append(f"| {r.decoder} | not installed: {r.missing} | | | | |")
            continue
        rows.append(f"| {r.decoder} | {r.per_cpu_s:,.0f} | {r.per_wall_s:,.0f} | "
                    f"{r.per_cpu_s / pil:.2f}x | {r.cores_for(B200_DEMAND):.2f} | "
                    f"{checks.get(r.decoder, 'same (DALI, as above)')} |")
    return rows


def main() -> None:
    """Measure every decoder pinned to one core and print the markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=Path("/tmp/bench-jpegdec"))
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--core", type=int, default=1)
    ap.add_argument("--dali-batch", type=int, default=24)
    args = ap.parse_args()
    record = Recorder(__file__)
    blobs = dataset(args.root, args.files)
    os.sched_setaffinity(0, {args.core})
    load_before = load_average() or 0.0
    checks = same_pixels(blobs)
    rates = measure_all(blobs, DECODER_NAMES, args.seconds, args.reps)
    if args.dali_batch and not next(r for r in rates if r.decoder == "dali").missing:
        rates.append(dali_batch(blobs, args.dali_batch, args.seconds, args.reps))
    print(f"{len(blobs)} files of {np.mean([len(b) for b in blobs]):,.0f} bytes, core "
          f"{args.core}, {args.reps} reps x {args.seconds:g} s (decoders in turn); load "
          f"average {load_before:.2f} before, {load_average() or 0.0:.2f} after; "
          f"{time.strftime('%Y-%m-%d %H:%M %Z')}")
    print("\n".join(table(rates, checks)))
    results = {f"{r.decoder} images per CPU-s (median of {r.reps})": r.per_cpu_s
               for r in rates if not r.missing}
    path = record.write(results, missing={r.decoder: r.missing for r in rates if r.missing})
    print(f"\n- record: {path}")


if __name__ == "__main__":
    main()
