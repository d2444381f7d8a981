"""The upstream workload files the rules judge runs against: MLPerf Storage v3.0's CLOSED
training references, kept byte for byte in ``rules/upstream/`` and cited here as
path@commit (the commit is the stored version of the file that was copied).

editions.yaml (mlcommons/storage mlpstorage_py/rules/editions.yaml@0e57fc4) names v3.0's
CLOSED training workloads (unet3d and retinanet, each on b200 and mi355) and, per class, the
reference file: unet3d_b200.yaml, retinanet_b200.yaml, retinanet_mi355.yaml. Upstream has no
unet3d_mi355.yaml, so a unet3d run on mi355 has nothing to be compared with.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from dliobench.report.factors import sections

FOLDER = Path(__file__).with_name("upstream")
REPO = "mlcommons/storage"
WORKLOAD_DIR = "configs/dlio/workload"


@dataclass(frozen=True)
class Reference:
    """One upstream workload file: the workload and accelerator it defines, and its commit."""

    workload: str
    accelerator: str
    commit: str

    @property
    def name(self) -> str:
        """The file's name, as upstream spells it (``unet3d_b200.yaml``)."""
        return f"{self.workload}_{self.accelerator}.yaml"

    @property
    def path(self) -> Path:
        """The kept copy."""
        return FOLDER / self.name

    @property
    def citation(self) -> str:
        """``mlcommons/storage configs/dlio/workload/<name>@<commit>``."""
        return f"{REPO} {WORKLOAD_DIR}/{self.name}@{self.commit}"


REFERENCES = (
    Reference("unet3d", "b200", "0d75b41708cf30b991186aa58c53890cb3b7956e"),
    Reference("retinanet", "b200", "11460d004cc3127ba943a79cdc6fa0d9339eb7f8"),
    Reference("retinanet", "mi355", "76f45459b8a0ea67cffff896ae82af96cfcdab6c"),
)


def find(workload: str, accelerator: str) -> Reference | None:
    """The reference file of ``workload`` on ``accelerator``, or None when upstream has none."""
    return next((r for r in REFERENCES
                 if (r.workload, r.accelerator) == (workload, accelerator)), None)


def of_workload(workload: str) -> list[Reference]:
    """Every reference file of ``workload`` (one per accelerator upstream defines it for)."""
    return [r for r in REFERENCES if r.workload == workload]


@lru_cache(maxsize=32)
def flattened(ref: Reference) -> dict[str, Any]:
    """One upstream file's configuration, loaded as dliobench loads any workload file and
    flattened as a result holds its configuration, so both compare in dliobench's key names."""
    from dliobench.config.load import load
    from dliobench.results.files import config_dict

    config, _ = load(ref.path)
    return sections(json.loads(json.dumps(config_dict(config))))  # as a result holds it


def reference(workload: str, accelerator: str) -> dict[str, Any] | None:
    """The flattened upstream v3.0 file of ``workload`` on ``accelerator`` (None when upstream
    has no such file)."""
    ref = find(workload, accelerator)
    return None if ref is None else flattened(ref)


def by_compute(workload: str, compute: Any) -> Reference | None:
    """The one upstream file of ``workload`` whose compute time per batch is ``compute``
    (upstream's files name no accelerator key: the accelerator is in the file's name and its
    ``train.computation_time``, e.g. 0.162 s is unet3d_b200's), or None."""
    if not isinstance(compute, (int, float)) or isinstance(compute, bool):
        return None
    same = [r for r in of_workload(workload) if math.isclose(
        float(flattened(r)["train.computation_time"]), float(compute), rel_tol=1e-9)]
    return same[0] if len(same) == 1 else None
