"""tf.data's own cost per batch, with no reading: one batch per element against several.

Usage: python -m benchmarks.loaders.tfdata_elements [--batches 2048] [--sample 65812] [--reps 2]
       [--per-element 1 4 16]

The tf.data loader hands TensorFlow one element per batch: a ``map`` over batch numbers
whose ``tf.numpy_function`` returns the batch (``loaders/tfdata/sources.batch_source``).
This script builds that pipeline over memory already filled (no file is read), with K
batches per ``numpy_function`` call split back into batches by ``unbatch``, 4 parallel
calls, prefetch 4 and a private pool of 4 threads, and consumes it as the loader does
(``np.asarray`` of each batch, a list of its rows). It prints batches/s and the process's
CPU per batch for each K: what TensorFlow's per-element machinery costs, the floor under
the loader at 64 KiB, where reading 8 files costs ~120 us.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.harness.records import Recorder

if TYPE_CHECKING:
    import tensorflow as tf

BATCH = 8


def cpu_seconds() -> float:
    """User + system CPU of this process."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def pipeline(batches: int, per_element: int, memory: np.ndarray) -> tf.data.Dataset:
    """``batches`` batches, ``per_element`` of them per numpy_function call."""
    import tensorflow as tf  # the tensorflow extra: imported when used

    def read(number: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ids = np.arange(per_element * BATCH, dtype=np.int64) + int(number) * BATCH
        if per_element == 1:
            return memory[0], ids
        return memory[:per_element], ids.reshape(per_element, BATCH)

    def one(number: Any) -> tuple[Any, Any]:
        samples, ids = tf.numpy_function(read, [number], (tf.uint8, tf.int64))
        return samples, ids

    ds = tf.data.Dataset.range(batches // per_element).map(one, num_parallel_calls=4,
                                                            deterministic=True)
    if per_element > 1:
        ds = ds.unbatch()
    options = tf.data.Options()
    options.threading.private_threadpool_size = 4
    return ds.prefetch(4).with_options(options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=2048)
    parser.add_argument("--sample", type=int, default=65812, help="bytes per sample")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--per-element", type=int, nargs="+", default=[1, 4, 16])
    args = parser.parse_args()
    record = Recorder(__file__)
    results: dict[str, list[float]] = {}
    memory = np.zeros((max(args.per_element), BATCH, args.sample), np.uint8)
    print("| batches per element | batches/s | CPU us per batch |")
    print("|---|---|---|")
    for _ in range(args.reps):
        for k in args.per_element:
            start, cpu, count = time.perf_counter(), cpu_seconds(), 0
            for samples, _ids in pipeline(args.batches, k, memory):
                rows = list(np.asarray(samples))
                count += 1
                del rows
            wall, used = time.perf_counter() - start, cpu_seconds() - cpu
            print(f"| {k} | {count / wall:,.0f} | {used / count * 1e6:,.0f} |", flush=True)
            results.setdefault(f"{k} per element batches/s", []).append(count / wall)
            results.setdefault(f"{k} per element CPU us per batch", []).append(
                used / count * 1e6)
    print(f"\n- record: {record.write(results, batches=args.batches, sample=args.sample)}")


if __name__ == "__main__":
    main()
