"""A 100 M-file dataset on 1,024 ranks: a rank plans its shard from the columnar manifest in
O(files / ranks) memory (64 MB at most), never holding the whole namespace.

The manifest is synthetic: sparse column files of 100 M entries with the entries of the
ranks under test written; each rank plans in a fresh process, measured with tracemalloc and
its peak RSS. Load times for real 100 M-entry columns are in ``benchmarks/scale/manifest_scale.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from dliobench.comm.world import LocalComm, World
from dliobench.config.load import load
from dliobench.dataset.columns import npy_header
from dliobench.dataset.manifest import Manifest
from dliobench.run.planning import resolve
from dliobench.storage.posix import PosixBackend

FILES = 100_000_000
RANKS = 1024
LIMIT = 64 << 20
OVERRIDES = ["dataset.num_files_train=100000000", "dataset.num_samples_per_file=1",
             "dataset.record_length_bytes=1000", "reader.batch_size=4", "train.epochs=2",
             "reader.sample_shuffle=seed", "reader.file_shuffle=seed"]

PLAN_ONE_RANK = """
import json, sys, time, tracemalloc
def status(field):  # VmRSS now, VmHWM the peak (ru_maxrss survives exec: the parent's)
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
from dliobench.comm.world import LocalComm, World
from dliobench.config.load import load
from dliobench.dataset.manifest import Manifest
from dliobench.dataset.plan import FileSizes
from dliobench.run.planning import resolve
from dliobench.storage.posix import PosixBackend
folder, rank, ranks, overrides = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
cfg, _ = load(None, [f"dataset.data_folder={folder}", *overrides])
before = status("VmRSS")
tracemalloc.start()
start = time.perf_counter()
plan = resolve(cfg, World(rank=rank, size=ranks), LocalComm())
manifest = Manifest.load(PosixBackend(folder))
ids = plan.files_read()
sizes = FileSizes(ids, manifest.sizes(ids), len(plan.keys))
seconds = time.perf_counter() - start
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
hwm = status("VmHWM")
sample = ids[:: max(1, ids.size // 500)]
print(json.dumps({"files": int(ids.size), "steps": plan.steps, "traced": peak,
                  "seconds": seconds, "bytes": sizes.total(),
                  "rss_growth": hwm - before, "ids": sample.tolist(),
                  "sizes": [sizes[int(i)] for i in sample]}))
"""


def synthetic(folder: Path, ranks_under_test: list[int]) -> None:
    """Sparse 100 M-entry columns; the entries the ranks under test read are written."""
    cfg, _ = load(None, [f"dataset.data_folder={folder}", *OVERRIDES])
    manifest = Manifest.new(PosixBackend(str(folder)), cfg.dataset, ())
    manifest.num_files, manifest.generation = FILES, 1
    (folder / "dliobench-manifest").mkdir(parents=True)
    for name, dtype in (("size", "<i8"), ("crc", "<u4")):
        path = folder / manifest.column_key(name)
        header = npy_header(dtype, (FILES,))
        with open(path, "wb") as handle:
            handle.write(header)
            handle.truncate(len(header) + FILES * np.dtype(dtype).itemsize)  # zeros, sparse
    column = np.memmap(folder / manifest.column_key("size"), "<i8", "r+",
                       offset=len(npy_header("<i8", (FILES,))), shape=(FILES,))
    for rank in ranks_under_test:
        ids = resolve(cfg, World(rank=rank, size=RANKS), LocalComm()).files_read()
        column[ids] = ids % 997 + 1000
    column.flush()
    del column
    manifest.save_header()


def test_a_rank_of_1024_plans_100m_files_in_under_64_mb(tmp_path: Path) -> None:
    ranks = [0, 517, RANKS - 1]
    synthetic(tmp_path, ranks)
    for rank in ranks:
        done = subprocess.run([sys.executable, "-c", PLAN_ONE_RANK, str(tmp_path), str(rank),
                               str(RANKS), *OVERRIDES], capture_output=True, text=True,
                              timeout=300, check=True)
        got = json.loads(done.stdout)
        per_rank = FILES // RANKS
        assert per_rank <= got["files"] <= 2 * (per_rank + 1)  # 2 epochs, files reshuffled
        assert got["steps"] == [per_rank // 4] * 2
        assert got["traced"] < LIMIT, got["traced"]
        assert got["rss_growth"] < LIMIT, got["rss_growth"]
        assert got["sizes"] == [i % 997 + 1000 for i in got["ids"]]  # read from the columns
