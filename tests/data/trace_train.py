"""A real, small PyTorch training job whose I/O the trace tests import (tests/integration/
test_trace_replay.py, benchmarks/trace/trace_replay.py): a ``Dataset`` reading one ``.npy`` file per
sample with ``np.load``, a ``DataLoader`` with worker processes, a small ``nn.Module`` trained
with SGD. Usage: ``python trace_train.py DATA_DIR [--epochs N] [--batch N] [--workers N]
[--shuffle] [--context spawn] [--dftracer]``. Nothing here knows dliobench: it is the job a
user would trace.

``--dftracer`` instruments the job as a DFTracer user does (pydftracer 2.0.6, with
``DFTRACER_ENABLE=1 DFTRACER_INIT=FUNCTION``, ``DFTRACER_LOG_FILE``, ``DFTRACER_DATA_DIR``):
``initialize_log`` in the main process and in each DataLoader worker (``worker_init_fn``,
as DLIO does), the worker's ``finalize`` registered with multiprocessing's finalizers
(a forked worker ends in ``os._exit``, which skips DFTracer's own exit hook), and each
training step in a region named ``compute``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from multiprocessing import util
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class NpyFiles(Dataset):
    """One sample per ``.npy`` file, read with ``np.load`` when asked for."""

    def __init__(self, folder: str) -> None:
        self.paths = sorted(os.path.join(folder, n) for n in os.listdir(folder)
                            if n.endswith(".npy"))

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> torch.Tensor:
        x = np.load(self.paths[i]).astype(np.float32).reshape(-1)[:256]
        return torch.from_numpy(np.pad(x, (0, 256 - x.size)))


def dftracer_init(process_id: int = -1) -> Any:
    """Start DFTracer in this process; its trace is written when the process ends."""
    from dftracer.python import dftracer

    log = dftracer.initialize_log(logfile=os.environ["DFTRACER_LOG_FILE"],
                                  data_dir=os.environ["DFTRACER_DATA_DIR"],
                                  process_id=process_id)
    util.Finalize(log, log.finalize, exitpriority=100)
    return log


def step_region(on: bool) -> Any:
    """The training step as a DFTracer region named ``compute`` (or nothing)."""
    if not on:
        return contextlib.nullcontext()
    from dftracer.python import dft_fn

    return dft_fn(cat="compute", name="compute")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shuffle", action="store_true")
    ap.add_argument("--context", default=None, help="workers' start method (spawn, fork)")
    ap.add_argument("--dftracer", action="store_true", help="instrument with pydftracer")
    a = ap.parse_args()
    log = dftracer_init() if a.dftracer else None
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(NpyFiles(a.data), batch_size=a.batch, shuffle=a.shuffle,
                        num_workers=a.workers, persistent_workers=a.workers > 0,
                        multiprocessing_context=a.context if a.workers else None,
                        worker_init_fn=dftracer_init if a.dftracer else None)
    for _ in range(a.epochs):
        for x in loader:
            with step_region(a.dftracer):
                opt.zero_grad()
                loss = model(x).pow(2).mean()
                loss.backward()
                opt.step()
    del loader  # workers end (and write their traces) before the main process's trace
    if log is not None:
        log.finalize()


if __name__ == "__main__":
    main()
