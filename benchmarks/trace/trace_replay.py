"""Trace a real PyTorch training job, import it, replay it, compare (docs/trace.md).

Usage:
    python -m benchmarks.trace.trace_replay [--root /tmp/bench-trace] [--files 4000]
        [--workers 2] [--batch 32] [--epochs 2] [--tracer strace|dftracer|dftracer-preload]
        [--keep]

The job is tests/data/trace_train.py (a ``Dataset`` of ``np.load`` over one .npy image per
file, a ``DataLoader`` with ``--workers`` worker processes and ``shuffle=True``, a small
``nn.Module`` trained with SGD) over ``--files`` 100 x 100 uint8 images. It runs once
untraced and once traced: strace -f -tt -T -y; DFTracer through pydftracer in the job
(``--tracer dftracer``: the job's ``--dftracer``, main process and workers); or DFTracer's
LD_PRELOAD library alone (``--tracer dftracer-preload``, with ``--workers 0``: it writes
no events of forked workers). The trace is imported
(`dliobench workload from-trace`), the workload replayed (`dliobench run ... --trace-io`)
and compared (`dliobench workload compare`). Prints the tracer's cost on the job, the
inferred workload, the comparison table, and the tracing backend's cost per read
(``--trace-io`` on a page-cached 10 KiB file, against the bare backend).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.harness.records import Recorder

HERE = Path(__file__).resolve().parents[2]
TRAIN = HERE / "tests" / "data" / "trace_train.py"
CLI = [sys.executable, "-m", "dliobench"]


def make_files(folder: Path, n: int) -> None:
    """``n`` .npy images (10,128-byte files)."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        np.save(folder / f"img_{i:05d}.npy", rng.integers(0, 255, (100, 100), dtype=np.uint8))


def job(data: Path, a: argparse.Namespace, prefix: list[str], env: dict[str, str],
        extra: tuple[str, ...] = ()) -> float:
    """Run the training job (under ``prefix``); its wall seconds."""
    argv = [*prefix, sys.executable, str(TRAIN), str(data), "--workers", str(a.workers),
            "--batch", str(a.batch), "--epochs", str(a.epochs), "--shuffle", *extra]
    start = time.perf_counter()
    subprocess.run(argv, check=True, env=env, capture_output=True)
    return time.perf_counter() - start


def traced(root: Path, data: Path, a: argparse.Namespace) -> tuple[Path, float]:
    """The traced job: the trace's path and the job's wall seconds."""
    if a.tracer == "strace":
        trace = root / "job.strace"
        prefix = ["strace", "-f", "-tt", "-T", "-y", "-e",
                  "trace=openat,read,pread64,lseek,close,clone,clone3", "-o", str(trace)]
        return trace, job(data, a, prefix, dict(os.environ))
    import dftracer  # type: ignore[import-not-found]

    trace = root / "pfw"
    env = dict(os.environ, DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1",
               DFTRACER_DATA_DIR=str(data), DFTRACER_LOG_FILE=str(trace / "job"))
    if a.tracer == "dftracer":  # pydftracer in the job: main and workers (--dftracer)
        return trace, job(data, a, [], dict(env, DFTRACER_INIT="FUNCTION"), ("--dftracer",))
    trace.mkdir()
    lib = Path(dftracer.__file__).parent / "lib64" / "libdftracer_preload.so"
    return trace, job(data, a, [], dict(env, DFTRACER_INIT="PRELOAD", LD_PRELOAD=str(lib)))


def per_read_cost(root: Path, reads: int = 20000, reps: int = 5) -> list[float]:
    """CPU microseconds per read of a cached 10 KiB file (user + system, this process):
    bare, traced, as a 5-request pattern, both."""
    from dliobench.config.read_requests import Requests
    from dliobench.storage.posix import PosixBackend
    from dliobench.storage.trace_writer import TraceWriter
    from dliobench.storage.traced import TracedBackend

    folder = root / "micro"
    folder.mkdir()
    np.save(folder / "a.npy", np.zeros((100, 100), np.uint8))
    bare = PosixBackend(str(folder))
    on = TracedBackend(bare, TraceWriter(str(root / "micro-trace")), None)
    pattern = Requests.parse("0+4096,0+128,0+4096,4096+4096,8192+1936@10128")
    only = TracedBackend(bare, None, pattern)
    both = TracedBackend(bare, TraceWriter(str(root / "micro-trace2")), pattern)
    runs: list[list[float]] = [[], [], [], []]
    for _ in range(reps):  # interleaved, the median of each: this VM's load varies
        for i, backend in enumerate((bare, on, only, both)):
            start = time.process_time()  # CPU time: what a read costs, whatever the load
            for _ in range(reads):
                backend.read_range("a.npy", 0, 10128)
            runs[i].append((time.process_time() - start) / reads * 1e6)
    on.writer.flush()  # type: ignore[union-attr]
    both.writer.flush()  # type: ignore[union-attr]
    return [statistics.median(r) for r in runs]


def cli(*args: str) -> str:
    """A dliobench command's output (it must succeed or say why)."""
    done = subprocess.run([*CLI, *args], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"dliobench {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path("/tmp/bench-trace"))
    ap.add_argument("--files", type=int, default=4000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--tracer", choices=("strace", "dftracer", "dftracer-preload"),
                    default="strace")
    ap.add_argument("--keep", action="store_true", help="keep the root folder")
    a = ap.parse_args()
    record = Recorder(__file__)
    shutil.rmtree(a.root, ignore_errors=True)
    data = a.root / "data"
    make_files(data, a.files)
    plain = job(data, a, [], dict(os.environ))
    trace, under = traced(a.root, data, a)
    extra = ["--batch-size", str(a.batch)] if a.tracer == "dftracer-preload" else []
    said = cli("workload", "from-trace", str(trace), "-o", str(a.root / "job.yaml"), *extra)
    out = a.root / "out"
    cli("run", str(a.root / "job.yaml"), f"dataset.data_folder={a.root / 'replay'}",
        f"output.folder={out}", "metric.client_ceiling=off", "--no-progress", "--trace-io")
    (run_dir,) = out.iterdir()
    table = cli("workload", "compare", str(trace), str(run_dir))
    bare, on, only, both = per_read_cost(a.root)
    print(f"job: {a.files} files, {a.workers} workers, batch {a.batch}, {a.epochs} epochs, "
          f"shuffled; wall {plain:.1f} s untraced, {under:.1f} s under {a.tracer}; load "
          f"{os.getloadavg()[0]:.1f}\n\nfrom-trace:\n{said}\ncompare:\n{table}\n"
          f"CPU per read of a cached 10,128-byte file: bare {bare:.1f} us, --trace-io {on:.1f} us "
          f"(+{on - bare:.1f}), read as the 5-request pattern {only:.1f} us, both {both:.1f} us")
    results = {"job wall s untraced": plain, f"job wall s under {a.tracer}": under,
               "read us bare": bare, "read us --trace-io": on, "read us 5-request pattern": only,
               "read us both": both}
    print(f"\n- record: {record.write(results, compare=table, from_trace=said)}")
    if not a.keep:
        shutil.rmtree(a.root, ignore_errors=True)


if __name__ == "__main__":
    main()
