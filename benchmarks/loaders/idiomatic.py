"""The pipelines a user would write with PyTorch, DALI or tf.data on the same files (no
dliobench).

Usage: python -m benchmarks.loaders.idiomatic pytorch|pytorch-floor|dali|tensorflow FOLDER
       [--batch 8] [--workers 4] [--prefetch 4] [--epochs 2] [--seed 0]

Run by ``loaders.py`` beside each ``dliobench run``, with the settings dliobench's loaders
derive from the same workload, so the two differ only in what dliobench adds:

- pytorch: a map-style ``Dataset`` whose ``__getitem__`` is ``np.load(path)`` (npz: its
  ``["x"]``, which reads the member through ``zipfile`` and checks its CRC-32), the default
  collate, ``num_workers``, ``prefetch_factor = ceil(prefetch / workers)``, persistent
  workers, fork, ``pin_memory`` where CUDA exists, a seeded shuffle, ``drop_last``.
- pytorch-floor: the same DataLoader whose items are arrays of the same shape that are not
  read (``np.empty``): the cost of PyTorch's worker-to-main hand-over alone, a loader's
  ceiling with that library.
- dali (CPU pipeline, ``device_id=None``, ``num_threads = workers``, ``prefetch_queue_depth
  = prefetch``): npy files through DALI's own ``fn.readers.numpy`` (shuffled, seeded); npz,
  which no DALI reader reads, through the parallel ``fn.external_source`` that DALI's
  documentation shows for Python-decoded files (``py_num_workers = workers``, fork, one
  ``np.load(path)["x"]`` per sample). Each batch is copied out of DALI's buffers to numpy.

- tensorflow (TFRecord files): ``TFRecordDataset(files, num_parallel_reads = workers)``, the
  file list shuffled per epoch, ``shuffle(1024)``, ``map(parse_single_example + decode_raw,
  AUTOTUNE)``, ``batch(drop_remainder)``, ``prefetch(AUTOTUNE)``, default threading options.

Timing follows dliobench's metrics: the first step of each epoch is left out, and the wall
time runs from the end of that step to the last batch's arrival; bytes are the files' sizes
(every file is read whole). Prints ``{"samples_per_s": ..., "bytes_per_s": ..., "cpu_s": ...}``.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np


def load(path: str) -> np.ndarray:
    """What a user's code does with one file: ``np.load`` (npz: the array ``x``)."""
    if path.endswith(".npz"):
        with np.load(path) as archive:
            return archive["x"]
    return np.load(path)


def pytorch_epochs(paths: list[str], args: argparse.Namespace,
                   read: bool = True) -> Iterator[Iterator[int]]:
    """Each epoch: an iterator of batch sizes from a plain DataLoader (``read=False``: its
    items are arrays of the same shape, not read: what PyTorch's hand-over alone costs)."""
    import torch
    from torch.utils.data import DataLoader, Dataset

    shape = load(paths[0]).shape

    class Files(Dataset):
        def __len__(self) -> int:
            return len(paths)

        def __getitem__(self, index: int) -> np.ndarray:
            return load(paths[index]) if read else np.empty(shape, dtype=np.uint8)

    loader = DataLoader(Files(), batch_size=args.batch, shuffle=True, drop_last=True,
                        num_workers=args.workers,
                        prefetch_factor=max(1, math.ceil(args.prefetch / args.workers)),
                        persistent_workers=True, multiprocessing_context="fork",
                        pin_memory=torch.cuda.is_available(),
                        generator=torch.Generator().manual_seed(args.seed))
    for _ in range(args.epochs):
        yield (len(batch) for batch in loader)
    del loader  # its workers end (and are reaped: their CPU time counts)


def dali_epochs(paths: list[str], args: argparse.Namespace) -> Iterator[Iterator[int]]:
    """Each epoch: an iterator of batch sizes from a CPU DALI pipeline."""
    from nvidia.dali import fn, pipeline_def
    from nvidia.dali.types import SampleInfo

    steps = len(paths) // args.batch
    npy = paths[0].endswith(".npy")

    orders: dict[int, np.ndarray] = {}  # each epoch's shuffle, drawn once per worker

    def sample(info: SampleInfo) -> np.ndarray:
        if info.idx_in_epoch >= steps * args.batch:
            raise StopIteration
        if info.epoch_idx not in orders:
            orders[info.epoch_idx] = np.random.default_rng(args.seed + info.epoch_idx
                                                           ).permutation(len(paths))
        return load(paths[orders[info.epoch_idx][info.idx_in_epoch]])

    @pipeline_def(batch_size=args.batch, num_threads=args.workers, device_id=None,
                  prefetch_queue_depth=args.prefetch, py_num_workers=args.workers,
                  py_start_method="fork", seed=args.seed)
    def graph() -> Any:
        if npy:
            return fn.readers.numpy(files=paths, random_shuffle=True, seed=args.seed,
                                    name="reader")
        return fn.external_source(source=sample, parallel=True, batch=False)

    pipes: list[Any] = [graph()]
    pipes[0].build()

    def epoch() -> Iterator[int]:
        pipe = pipes[0]
        for _ in range(steps):
            (data,) = pipe.run()
            yield len(data.as_array())  # copied out of DALI's buffers, as a user's code would
        if not npy:  # the external source ends its epoch with StopIteration
            try:
                pipe.run()
            except StopIteration:
                pipe.reset()

    for _ in range(args.epochs):
        yield epoch()
    pipes.clear()  # its workers end (and are reaped: their CPU time counts)


def tensorflow_epochs(paths: list[str], args: argparse.Namespace) -> Iterator[Iterator[int]]:
    """Each epoch: an iterator of batch sizes from the tf.data pipeline TensorFlow's guide
    shows for TFRecord files: ``TFRecordDataset(num_parallel_reads)``, ``shuffle`` (the
    workload shuffles samples; a buffer of 1024 as dliobench's), ``map(parse, AUTOTUNE)``,
    ``batch``, ``prefetch(AUTOTUNE)``; each batch handed over as numpy."""
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    feature = {"image": tf.io.FixedLenFeature([], tf.string)}

    def parse(record: Any) -> Any:
        return tf.io.decode_raw(tf.io.parse_single_example(record, feature)["image"], tf.uint8)

    for epoch in range(args.epochs):
        files = list(np.random.default_rng(args.seed + epoch).permutation(paths))
        ds = tf.data.TFRecordDataset(files, num_parallel_reads=args.workers)
        ds = ds.shuffle(1024, seed=args.seed + epoch)
        ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.batch(args.batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
        yield (len(batch.numpy()) for batch in ds)


def cpu_seconds() -> float:
    """User + system CPU of this process and its ended children (the workers)."""
    own, children = (resource.getrusage(who) for who in
                     (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(epochs: Iterator[Iterator[int]], file_bytes: int) -> dict[str, float]:
    """samples/s and bytes/s with dliobench's window (each epoch's first step left out), and
    the CPU seconds of the whole pipeline, start-up and shutdown included (as dliobench's
    ``cpu_s``)."""
    samples, wall, cpu = 0, 0.0, cpu_seconds()
    for batches in epochs:
        next(batches)  # the first step: workers starting, queues filling
        start = time.perf_counter()
        samples += sum(batches)
        wall += time.perf_counter() - start
    return {"samples_per_s": samples / wall, "bytes_per_s": samples * file_bytes / wall,
            "cpu_s": cpu_seconds() - cpu}


def pytorch_floor(paths: list[str], args: argparse.Namespace) -> Iterator[Iterator[int]]:
    """The DataLoader of ``pytorch`` handing over batches of unread arrays."""
    return pytorch_epochs(paths, args, read=False)


PIPELINES: dict[str, Callable[[list[str], argparse.Namespace], Iterator[Iterator[int]]]] = {
    "pytorch": pytorch_epochs, "pytorch-floor": pytorch_floor, "dali": dali_epochs,
    "tensorflow": tensorflow_epochs}


def main() -> None:
    """Run one pipeline over the files of FOLDER and print its rates as JSON."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("library", choices=sorted(PIPELINES))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--prefetch", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    files = sorted(p for p in args.folder.rglob("*") if p.suffix in (".npz", ".npy", ".tfrecord"))
    sizes = {p.stat().st_size for p in files}
    if len(sizes) != 1:
        raise SystemExit(f"{args.folder}: the files differ in size; generate equal ones")
    paths = [str(p) for p in files]
    print(json.dumps(measure(PIPELINES[args.library](paths, args), sizes.pop())))


if __name__ == "__main__":
    main()
