"""A real, small PyTorch training job whose I/O the trace tests import (tests/integration/
test_trace_replay.py, benchmarks/trace_replay.py): a ``Dataset`` reading one ``.npy`` file per
sample with ``np.load``, a ``DataLoader`` with worker processes, a small ``nn.Module`` trained
with SGD. Usage: ``python trace_train.py DATA_DIR [--epochs N] [--batch N] [--workers N]
[--shuffle] [--context spawn]``. Nothing here knows dliobench: it is the job a user would trace.
"""

from __future__ import annotations

import argparse
import os

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shuffle", action="store_true")
    ap.add_argument("--context", default=None, help="workers' start method (spawn, fork)")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(NpyFiles(a.data), batch_size=a.batch, shuffle=a.shuffle,
                        num_workers=a.workers, persistent_workers=a.workers > 0,
                        multiprocessing_context=a.context if a.workers else None)
    for _ in range(a.epochs):
        for x in loader:
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
