"""What the checks need of a run: its result read once as a ``report.runs.Run`` (the one
description of a run the report shares), refused when it lacks what the rules read, and a
benchmark setup in words."""

from __future__ import annotations

from pathlib import Path

from dliobench.base.errors import InputError
from dliobench.report.runs import Run
from dliobench.results.schema import RunResult

# The configuration values the checks read, and the kind each must be.
NEEDED: dict[str, type | tuple[type, ...]] = {
    "dataset.record_length_bytes": int, "dataset.num_samples_per_file": int,
    "dataset.num_files_train": int, "reader.batch_size": int, "metric.au": (int, float),
    "train.accelerator": str,
}


def load(folder: Path, result: RunResult) -> Run:
    """A run, or InputError (exit 2) when its configuration lacks what the checks read (the
    figures' types were checked when ``read_result`` read it)."""
    run = Run(folder, result)
    bad = [k for k, kind in NEEDED.items()
           if not isinstance(run.flat.get(k), kind) or isinstance(run.flat.get(k), bool)]
    if bad:
        raise InputError(f"{folder / 'result.json'} lacks {', '.join(bad)} as a run writes "
                         "them, so the rules cannot be applied to it; leave that folder out")
    return run


def setup_text(setup: tuple[str, str, int, int]) -> str:
    """A benchmark setup in words: ``unet3d, 4 b200 on 1 host``."""
    workload, accelerator, ranks, hosts = setup
    return (f"{workload or '?'}, {ranks} {accelerator or 'unnamed'} accelerator(s) on "
            f"{hosts} host(s)")
