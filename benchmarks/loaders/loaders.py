"""Each loader against a compiled ceiling on the same page-cached dataset (compute 0).

Usage: python -m benchmarks.loaders.loaders [--reps 3] [--threads 4] [--root /work/bench-loaders]
       [--epochs 2] [--shapes "64 KiB" "16 MiB"] [--fresh] [--vm-state as-is|fresh]
       [--format npz|npy|tfrecord] [--loaders native pytorch idiomatic-pytorch dali ...]

For small (64 KiB) and large (16 MiB) samples, one per file (npz by default; tfrecord shows
tf.data's own TFRecordDataset), each repetition measures the ceilings of ``ceilings.py``: the
C extension's ``read_files`` loop over the same files with the same threads and the prefetch
depth's bytes in flight, in memory made once and touched (``--fresh``: also into fresh
memory), for npz the same loop checking each file's headers and CRC-32 as the native loader
does (a row: what a compiled npz reader costs), fio one file per request, and the Python
``readinto`` pool of earlier rounds (a row, no longer the ceiling); then ``dliobench run``
with each loader (native, pytorch, dali, dali-reader = dali with
``reader.dali_native_reader=true``, tensorflow) and ``train.computation_time=0``, reading
samples/s and bytes/s from result.json (and the CPU seconds of the rank and its workers per
sample, which machine load disturbs less than rates, and the minor page faults of its process
tree per sample), and the pipelines a user would write with the same library and settings
(``idiomatic.py``: idiomatic-pytorch, idiomatic-dali on npz and npy; idiomatic-tensorflow on
tfrecord), and floor-pytorch: that DataLoader handing over unread arrays (PyTorch's own
limit). ``--vm-state fresh`` starts every contender in a freshly booted VM's memory
(``vmstate.py``: each page it touches first is a fault in the host too) and says under the
table what a page's first touch cost. Prints medians, the ratio to the faster compiled
ceiling and each dliobench loader's ratio to its library's idiomatic pipeline as a markdown
table. Data is deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the tree this script belongs to
sys.path.insert(0, str(ROOT))  # its dliobench, not the one an editable install points at

from benchmarks.harness.records import Recorder  # noqa: E402
from benchmarks.loaders import ceilings, vmstate  # noqa: E402

SHAPES = {"64 KiB": (65536, 8192), "16 MiB": (16 << 20, 160)}
ONLY: list[str] = []
LOADERS = ["native", "pytorch", "idiomatic-pytorch", "floor-pytorch", "dali", "dali-reader",
           "idiomatic-dali", "tensorflow", "idiomatic-tensorflow"]
DEFAULT_LOADERS = [name for name in LOADERS if name not in (
    "dali-reader", "idiomatic-tensorflow")]  # npz: dali-reader as dali; tensorflow's: TFRecord
FORMAT = ["npz"]
FRESH = [False]  # --fresh: the compiled ceiling into fresh memory too
EPOCHS = [2]  # --epochs: passes over the files by every contender, the raw read too
VM_FRESH = [False]  # --vm-state fresh: each contender starts in a freshly booted VM's memory
NOTES: list[str] = []  # said under the table
RAW: dict[str, list[float]] = {}  # every repetition's figure, for the JSON record
IDIOMATIC = Path(__file__).resolve().parent / "idiomatic.py"


def dliobench(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the dliobench CLI of this script's tree (``-m`` looks in the working folder
    first: run elsewhere, another tree's dliobench was measured)."""
    return subprocess.run([sys.executable, "-m", "dliobench", *args], capture_output=True,
                          text=True, check=True, cwd=ROOT)


def common(folder: Path, size: int, files: int, threads: int) -> list[str]:
    """Overrides shared by every run of one shape."""
    return [f"dataset.data_folder={folder}", f"dataset.num_files_train={files}",
            f"dataset.record_length_bytes={size}", "dataset.record_length_bytes_stdev=0",
            f"dataset.format={FORMAT[0]}", "reader.batch_size=8",
            f"reader.read_threads={threads}", "reader.prefetch_size=4",
            "train.computation_time=0", f"train.epochs={EPOCHS[0]}", "--no-progress",
            "reader.odirect=false"]  # page-cached against the raw read (default.yaml: O_DIRECT)


def warm(train: Path) -> list[Path]:
    """Read every file once so all runs start from the page cache (``--vm-state fresh``:
    first give the host back every page the guest can free, ``vmstate.make_fresh``)."""
    if VM_FRESH[0]:
        vmstate.make_fresh()
    paths = sorted(p for p in train.rglob(f"*.{FORMAT[0]}"))
    for path in paths:
        path.read_bytes()
    return paths


Rates = tuple[float, float, float]  # samples/s, bytes/s, CPU seconds per sample


def python_pool(paths: list[Path], threads: int) -> Rates:
    """(samples/s, bytes/s, CPU s/sample) of ``readinto`` in a Python thread pool into reused
    buffers (the ceiling of earlier rounds, now a row: the GIL, not the hardware, sets it)."""
    size = max(p.stat().st_size for p in paths)
    local = threading.local()

    def read(path: Path) -> int:
        if not hasattr(local, "buf"):
            local.buf = bytearray(size)  # one reused buffer per thread
        with open(path, "rb", buffering=0) as handle:
            return handle.readinto(local.buf) or 0

    start, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(read, paths * EPOCHS[0]))
    seconds, reads = time.perf_counter() - start, len(paths) * EPOCHS[0]
    return reads / seconds, total / seconds, (time.process_time() - cpu) / reads


CEILING = "compiled ceiling"
NPZ_READER = "compiled npz reader (read + CRC-32, as np.load)"


def child_faults() -> int:
    """Minor page faults of this script's ended children (a run's whole process tree, its
    start-up included: the loaders' figure is an upper bound of the faults per sample)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt


def ceiling_rows(train: Path, paths: list[Path], threads: int
                 ) -> list[tuple[str, Rates, float]]:
    """The ceilings of one repetition: (name, rates, minor faults per sample or nan); with
    ``--vm-state fresh`` each starts in a fresh VM's memory."""
    batch, prefetch = 8, 4  # as ``common``
    contenders: list[tuple[str, Callable[[], tuple[Rates, float]]]] = [
        (CEILING, lambda: ceilings.compiled(paths, threads, batch, prefetch, EPOCHS[0]))]
    if FORMAT[0] == "npz":  # the reader's own work besides: headers and the member's CRC-32
        contenders.append((NPZ_READER, lambda: ceilings.compiled(
            paths, threads, batch, prefetch, EPOCHS[0], checked=True)))
    if FRESH[0]:
        contenders.append(("compiled, fresh memory", lambda: ceilings.compiled(
            paths, threads, batch, prefetch, EPOCHS[0], True)))
    contenders.append(("python pool", lambda: (python_pool(paths, threads), math.nan)))
    if shutil.which("fio"):
        contenders.append(("fio", lambda: (ceilings.fio(paths, threads, EPOCHS[0], False),
                                           math.nan)))
    rows = []
    for name, measure_one in contenders:
        if VM_FRESH[0]:
            warm(train)
        rows.append((name, *measure_one()))
    return rows


def delivered(train: Path) -> int:
    """Samples a run of ``common``'s settings delivers: ``EPOCHS`` epochs of whole batches
    of 8."""
    files = sum(1 for _ in train.rglob(f"*.{FORMAT[0]}"))
    return files // 8 * 8 * EPOCHS[0]


def idiomatic_run(library: str, train: Path, threads: int) -> Rates:
    """(samples/s, bytes/s) of the user's own pipeline with the settings of ``common``."""
    proc = subprocess.run([sys.executable, str(IDIOMATIC), library, str(train), "--batch", "8",
                           "--workers", str(threads), "--prefetch", "4",
                           "--epochs", str(EPOCHS[0])],
                          capture_output=True, text=True, check=True)
    rates = json.loads(proc.stdout.splitlines()[-1])
    return rates["samples_per_s"], rates["bytes_per_s"], rates["cpu_s"] / delivered(train)


def loader_run(loader: str, overrides: list[str], out: Path, train: Path) -> Rates:
    """(samples/s, bytes/s, CPU s/sample) of one dliobench run (dali-reader: DALI's own
    reader); the CPU of the run's training (its loader's start and close included)."""
    extra = ["reader.dali_native_reader=true"] if loader == "dali-reader" else []
    dliobench("run", "-y", "workloads/default.yaml", f"reader.data_loader={loader.split('-')[0]}",
              "dataset.record_length_bytes_resize=0", "--output", str(out), *overrides, *extra)
    newest = max(out.iterdir(), key=lambda p: p.stat().st_mtime)
    result = json.loads((newest / "result.json").read_text())
    metrics, cpu = result["metrics"], result["ranks"][0]["cpu_s"]
    return metrics["samples_per_s"], metrics["bytes_per_s"], cpu / delivered(train)


def measure(shape: str, root: Path, reps: int, threads: int) -> list[str]:
    """The table rows of one sample size."""
    size, files = SHAPES[shape]
    folder = root / shape.replace(" ", "")
    overrides = common(folder, size, files, threads)
    dliobench("generate", "--yes", "workloads/default.yaml", *overrides)
    if VM_FRESH[0]:
        vmstate.make_fresh()
    first, recycled = vmstate.touch_costs()
    NOTES.append(f"{shape}: new memory {first:.2f} us per page on first touch, {recycled:.2f} "
                 "us recycled (MADV_DONTNEED), before the runs")
    paths = warm(folder / "train")
    results: dict[str, list[Rates]] = {}
    faults: dict[str, list[float]] = {}
    for _ in range(reps):  # alternate, so drifts in machine load hit every contender
        for name, got, per in ceiling_rows(folder / "train", paths, threads):
            results.setdefault(name, []).append(got)
            if not math.isnan(per):
                faults.setdefault(name, []).append(per)
        for loader in LOADERS:
            warm(folder / "train")  # again: other jobs on the machine may drop the cache
            before = child_faults()
            if loader.startswith("idiomatic-"):
                got = idiomatic_run(loader.split("-")[1], folder / "train", threads)
            elif loader == "floor-pytorch":
                got = idiomatic_run("pytorch-floor", folder / "train", threads)
            else:
                got = loader_run(loader, overrides, root / "runs", folder / "train")
            results.setdefault(loader, []).append(got)
            faults.setdefault(loader, []).append(
                (child_faults() - before) / delivered(folder / "train"))
    for name, values in results.items():
        RAW[f"{shape} {name} samples/s"] = [v[0] for v in values]
        RAW[f"{shape} {name} CPU s/sample"] = [v[2] for v in values]
    medians = {name: tuple(statistics.median(v[k] for v in values) for k in range(3))
               for name, values in results.items()}
    top = max(medians[CEILING][0], medians.get("fio", (0.0,))[0])  # the faster compiled one
    rows = []
    for name, (samples, nbytes, cpu) in medians.items():
        user = medians.get(f"idiomatic-{name.split('-')[0]}")
        mine = "" if user is None or name.startswith("idiomatic") else f"{samples / user[0]:.2f}"
        flt = f"{statistics.median(faults[name]):,.0f}" if name in faults else ""
        rows.append(f"| {shape} | {name} | {samples:,.0f} | {nbytes / 1e6:,.0f} | "
                    f"{samples / top:.2f} | {mine} | {cpu * 1e3:,.3f} | {flt} |")
    shutil.rmtree(folder)
    return rows


def main() -> None:
    """Measure every shape and print the table."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3, help="repetitions (median reported)")
    parser.add_argument("--threads", type=int, default=4, help="read threads / workers")
    parser.add_argument("--root", type=Path, default=Path("/work/bench-loaders"))
    parser.add_argument("--format", default="npz", choices=("npz", "npy", "tfrecord"))
    parser.add_argument("--epochs", type=int, default=2,
                        help="passes over the files (default 2: 160 files of 16 MiB are then "
                             "about half a second of reading, where start-up weighs)")
    parser.add_argument("--fresh", action="store_true",
                        help="also the compiled ceiling reading into fresh memory per item")
    parser.add_argument("--vm-state", choices=("as-is", "fresh"), default="as-is",
                        help="fresh: before each contender, give the host back every page the "
                        "guest can free and wait for it (vmstate.py), so the run "
                        "touches memory as on a freshly booted VM (root only)")
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--loaders", nargs="+", choices=LOADERS,
                        help=f"default: {' '.join(DEFAULT_LOADERS)} (npy, tfrecord: and "
                        "dali-reader; tfrecord: idiomatic-tensorflow, no other idiomatic)")
    args = parser.parse_args()
    args.root = args.root.resolve()  # the runs start in the tree's folder
    FORMAT[0], FRESH[0], VM_FRESH[0] = args.format, args.fresh, args.vm_state == "fresh"
    EPOCHS[0] = args.epochs
    LOADERS[:] = args.loaders or [name for name in LOADERS if (
        name != "dali-reader" or args.format != "npz") and (
        not name.startswith(("idiomatic", "floor")) or args.format != "tfrecord"
        or name == "idiomatic-tensorflow") and (
        name != "idiomatic-tensorflow" or args.format == "tfrecord")]
    args.root.mkdir(parents=True, exist_ok=True)
    record = Recorder(__file__, src=ROOT)
    load = os.getloadavg()[0]
    print(f"# loaders vs the compiled ceiling, {time.strftime('%Y-%m-%d %H:%M')}, "
          f"{platform.node()}, tree {ROOT}, "
          f"{os.cpu_count()} CPUs, load {load:.1f}, {args.reps} reps, {args.threads} threads, "
          f"{args.format}, {args.epochs} epochs, memory {args.vm_state}\n")
    print("| sample | reader | samples/s | MB/s | ratio to compiled ceiling (faster of "
          "read_files loop, fio) | "
          "ratio to idiomatic | CPU ms/sample | minor faults/sample |")
    print("|---|---|---|---|---|---|---|---|")
    try:
        for shape in args.shapes:
            for row in measure(shape, args.root, args.reps, args.threads):
                print(row, flush=True)
        print("", *NOTES, sep="\n")
        path = record.write(RAW, format=args.format, epochs=args.epochs, threads=args.threads,
                            vm_state=args.vm_state, notes=NOTES)
        print(f"- record: {path}")
    finally:
        shutil.rmtree(args.root, ignore_errors=True)


if __name__ == "__main__":
    main()
