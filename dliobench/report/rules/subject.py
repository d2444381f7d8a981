"""What the checks look at: one run's result, read once, with the figures the rules name."""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from dliobench.base.errors import InputError
from dliobench.report.rules import references
from dliobench.results.schema import RunResult


@dataclass(frozen=True)
class Run:
    """A run folder and its result."""

    folder: Path
    result: RunResult
    flat: dict[str, Any] = field(init=False, repr=False, compare=False)
    accelerator: str = field(init=False, compare=False)
    accelerator_how: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "flat", flatten(self.result["config"]))
        name, how = infer_accelerator(self.workload, self.flat)
        object.__setattr__(self, "accelerator", name)
        object.__setattr__(self, "accelerator_how", how)

    @property
    def run_id(self) -> str:
        """The run's id (its folder's name when the result lacks one)."""
        return str(self.result.get("run_id") or self.folder.name)

    @property
    def workload(self) -> str:
        """The workload's name (``model.name`` or the workload file's name)."""
        return str(self.result.get("workload") or self.flat.get("model.name") or "")

    @property
    def ranks(self) -> int:
        """Emulated accelerators: one per rank."""
        return int(self.result.get("ranks_count") or len(self.result.get("ranks", [])) or 1)

    @property
    def hosts(self) -> int:
        """Hosts the ranks ran on."""
        return max(1, len(self.result.get("machine", {}).get("hosts") or [None]))

    def setup(self) -> tuple[str, str, int, int]:
        """What makes runs repeats of one benchmark setup: workload, accelerator, ranks,
        hosts."""
        return self.workload, self.accelerator, self.ranks, self.hosts

    def times(self) -> tuple[dt.datetime, dt.datetime] | None:
        """(start, end) of the run, or None when the result does not say."""
        try:
            start = dt.datetime.fromisoformat(str(self.result["started_at"]))
            end = dt.datetime.fromisoformat(str(self.result["finished_at"]))
        except (KeyError, ValueError):
            return None
        return start, end


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


def flatten(config: dict[str, Any]) -> dict[str, Any]:
    """``{"section.key": value}`` of a result's configuration (``accelerators`` left out: the
    chosen profile's figures are in ``train`` and ``metric``)."""
    out: dict[str, Any] = {}
    for section, values in config.items():
        if section == "accelerators" or not isinstance(values, dict):
            continue
        for key, value in values.items():
            out[f"{section}.{key}"] = value
    return out


def setup_text(setup: tuple[str, str, int, int]) -> str:
    """A benchmark setup in words: ``unet3d, 4 b200 on 1 host``."""
    workload, accelerator, ranks, hosts = setup
    return (f"{workload or '?'}, {ranks} {accelerator or 'unnamed'} accelerator(s) on "
            f"{hosts} host(s)")


@lru_cache(maxsize=32)
def reference(workload: str, accelerator: str) -> dict[str, Any] | None:
    """The upstream v3.0 workload file of ``workload`` on ``accelerator`` (a byte-for-byte
    copy, ``rules/references.py``), loaded as dliobench loads any workload file and
    flattened as a result holds its configuration, so both compare in dliobench's key names
    (None when upstream has no such file)."""
    ref = references.find(workload, accelerator)
    return None if ref is None else load_reference(ref)


@lru_cache(maxsize=32)
def load_reference(ref: references.Reference) -> dict[str, Any]:
    """One upstream file's configuration, flattened."""
    from dliobench.config.load import load
    from dliobench.results.files import config_dict

    config, _ = load(ref.path)
    return flatten(json.loads(json.dumps(config_dict(config))))  # as a result holds it


def infer_accelerator(workload: str, flat: dict[str, Any]) -> tuple[str, str]:
    """The accelerator a run emulated and how that is known: the profile it named
    (``train.accelerator``), else the one upstream v3.0 file of its workload whose compute
    time per batch the run used (upstream's files name no accelerator key: the accelerator is
    in the file's name and its ``train.computation_time``, e.g. 0.162 s is unet3d_b200's).
    ('', why) when neither tells."""
    named = str(flat.get("train.accelerator") or "")
    if named:
        return named, "named by train.accelerator"
    compute = flat.get("train.computation_time")
    refs = references.of_workload(workload)
    same = [r for r in refs if isinstance(compute, (int, float)) and math.isclose(
        float(load_reference(r)["train.computation_time"]), float(compute), rel_tol=1e-9)]
    if len(same) == 1:
        return same[0].accelerator, (f"inferred: train.computation_time = {compute} s is "
                                     f"{same[0].name}'s")
    known = ", ".join(f"{r.accelerator} {load_reference(r)['train.computation_time']} s"
                      for r in refs) or "none"
    return "", (f"not named (train.accelerator is empty) and train.computation_time = "
                f"{compute} s is no v3.0 {workload or 'workload'} file's ({known})")
