"""Compute per batch measured by training a real small model, instead of copied from a
table or a trace: a small residual CNN (PyTorch) trained on random 3 x 64 x 64 images for a
few steps of the workload's batch size, on the GPU when one is present, else on the CPU.
``workload from-trace --measure-compute`` writes the figure into the workload with
``train.computation_source`` saying which was used, and every result carries that key in
its ``config``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from dliobench.base.errors import MissingExtraError

MODEL = "a small residual CNN (2 blocks, 16 channels, 3x64x64 input)"


@dataclass(frozen=True)
class Measured:
    """Seconds per training step (mean, stdev) and where it was measured, in words."""

    mean: float
    stdev: float
    where: str


def _model(torch: Any) -> Any:
    """The model: conv stem, two residual blocks, pooled, a linear head."""
    nn = torch.nn

    class Block(nn.Module):  # type: ignore[name-defined]
        def __init__(self, c: int) -> None:
            super().__init__()
            self.a, self.b = nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)

        def forward(self, x: Any) -> Any:
            return torch.relu(x + self.b(torch.relu(self.a(x))))

    return nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(), Block(16),
                         Block(16), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def measure(batch_size: int, steps: int = 10, warmup: int = 2) -> Measured:
    """Time ``steps`` training steps (forward, backward, SGD) after ``warmup`` ones."""
    try:
        import torch
    except ImportError:
        raise MissingExtraError("PyTorch (to measure compute with a real model)",
                                "torch") from None
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = _model(torch).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch_size, 3, 64, 64, device=device)
    y = torch.randint(0, 10, (batch_size,), device=device)
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    name = torch.cuda.get_device_name() if device == "cuda" else \
        f"cpu, {torch.get_num_threads()} threads"
    where = (f"measured: {steps} training steps of {MODEL}, batch {batch_size}, on {name} "
             f"(torch {torch.__version__})")
    return Measured(statistics.fmean(times), statistics.pstdev(times), where)
