"""``train.device=cuda``: where PyTorch sees no GPU, one sentence that says so and what to do,
before any work (the GPU data path itself needs a GPU to be built and checked on)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


def test_cuda_without_a_gpu_is_one_sentence(run_cli: Callable[..., int], workdir: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    code = run_cli("run", "--no-progress", "train.device=cuda",
                   f"dataset.data_folder={workdir / 'data'}", f"output.folder={workdir / 'out'}")
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "train.device" in lines[0], lines
    said = "no GPU was found" if not torch.cuda.is_available() else "does not copy batches"
    assert said in lines[0]
    assert not (workdir / "data").exists() and not (workdir / "out").exists()  # no work done
